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
fn routed_expert_rows_name_their_gemm_paths() {
    let point = |tokens: f64, median: f64, gate_up: f64, fused: f64| CostPoint {
        at: vec![64.0, tokens],
        stats: stats(median),
        samples_us: vec![],
        derived: BTreeMap::from([
            ("gbps".to_owned(), 3700.0),
            ("hbm_fraction".to_owned(), 0.876),
            ("all_gbps".to_owned(), 4010.0),
            ("gate_up_path".to_owned(), gate_up),
            ("fused_silu".to_owned(), fused),
            ("down_path".to_owned(), 1.0),
            ("kernels".to_owned(), 3.0 - fused),
        ]),
    };
    let table = CostTable {
        op: "moe.routed_experts".to_owned(),
        variant: BTreeMap::new(),
        axes: vec!["active_experts".to_owned(), "tokens_per_expert".to_owned()],
        points: vec![point(1.0, 257.0, 0.0, 0.0), point(64.0, 299.0, 2.0, 1.0)],
    };
    expect![[r#"
        moe.routed_experts 
        active_experts  tokens_per_expert  median µs  min µs  p99 µs  max µs    GB/s  of HBM  all GB/s  gate/up  SiLU fused      down  kernels
                    64                  1      257.0   256.0   258.0   259.0  3700.0    88 %    4010.0   cuBLAS          no  cuBLASLt     3.00
                    64                 64      299.0   298.0   300.0   301.0  3700.0    88 %    4010.0      own         yes  cuBLASLt     2.00

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
