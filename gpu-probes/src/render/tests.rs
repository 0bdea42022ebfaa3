//! Table layout on recorded points.

use std::collections::BTreeMap;

use afd_traces::calibration::{CostPoint, SampleStats};
use expect_test::expect;

use super::*;

fn stats(median: f64) -> SampleStats {
    SampleStats {
        n: 3,
        min_us: median - 1.0,
        median_us: median,
        p99_us: median + 1.0,
        max_us: median + 2.0,
        mean_us: median,
    }
}

#[test]
fn p2p_rows_show_sizes_and_bandwidth() {
    let table = CostTable {
        op: "p2p.one_way".to_owned(),
        variant: BTreeMap::from([("graph".to_owned(), "true".to_owned())]),
        axes: vec!["bytes".to_owned()],
        points: vec![
            CostPoint {
                at: vec![8.0],
                stats: stats(6.1),
                samples_us: vec![],
                derived: BTreeMap::from([
                    ("algbw_gbps".to_owned(), 0.0013),
                    ("busbw_gbps".to_owned(), 0.0013),
                ]),
            },
            CostPoint {
                at: vec![1073741824.0],
                stats: stats(2902.5),
                samples_us: vec![],
                derived: BTreeMap::from([
                    ("algbw_gbps".to_owned(), 369.9),
                    ("busbw_gbps".to_owned(), 369.9),
                ]),
            },
        ],
    };
    expect![[r#"
        p2p.one_way graph=true
        bytes  median µs  min µs  p99 µs  max µs  algbw GB/s  busbw GB/s
          8 B       6.10    5.10    7.10    8.10      0.0013      0.0013
        1 GiB     2902.5  2901.5  2903.5  2904.5       369.9       369.9

    "#]]
    .assert_eq(&tables(&[table]));
}

#[test]
fn pipeline_rows_and_gains() {
    let record = |dbo: bool, graph: bool, median: f64| PipelineRecord {
        tokens: 32,
        context: 1024,
        dbo,
        graph,
        ubatch_tokens: if dbo { vec![16, 16] } else { vec![32] },
        layers: 27,
        steps: 50,
        control_payload_bytes: 111,
        step_us: stats(median),
        samples_us: vec![],
        attention_busy_us: None,
        ffn_busy_us: None,
        routing: vec![],
    };
    let records = vec![
        record(false, false, 8000.0),
        record(false, true, 6000.0),
        record(true, false, 7000.0),
        record(true, true, 5000.0),
    ];
    expect![[r#"
        tokens  context    dbo  graph  steps  median µs  min µs  p99 µs  max µs
            32     1024  false  false     50     8000.0  7999.0  8001.0  8002.0
            32     1024  false   true     50     6000.0  5999.0  6001.0  6002.0
            32     1024   true  false     50     7000.0  6999.0  7001.0  7002.0
            32     1024   true   true     50     5000.0  4999.0  5001.0  5002.0

        gains (ratio of medians: off / on)
        tokens  context  graph  DBO gain    dbo  graph gain
            32     1024  false     1.143  false       1.333
            32     1024   true     1.200   true       1.400
    "#]]
    .assert_eq(&pipeline(&records));
}
