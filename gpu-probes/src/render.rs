//! The short human tables `afd-probe` prints on stdout (the JSON files carry everything).

use std::fmt::Write;

use afd_traces::calibration::CostTable;
use afd_traces::pipeline::PipelineRecord;

use crate::sweep::format_bytes;

/// Derived figures shown as columns, in this order, when a table has them.
const DERIVED_COLUMNS: [(&str, &str); 13] = [
    ("algbw_gbps", "algbw GB/s"),
    ("busbw_gbps", "busbw GB/s"),
    ("gbps", "GB/s"),
    ("hbm_fraction", "of HBM"),
    ("all_gbps", "all GB/s"),
    ("tflops", "TFLOP/s"),
    ("gate_up_path", "gate/up"),
    ("fused_silu", "SiLU fused"),
    ("down_path", "down"),
    ("eager_us", "eager µs"),
    ("host_us", "host µs"),
    ("parts_sum_us", "parts µs"),
    ("kernels", "kernels"),
];

/// One block per table: a title line, then one row per point.
pub fn tables(tables: &[CostTable]) -> String {
    let mut out = String::new();
    for table in tables {
        let variant: Vec<String> = table
            .variant
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "{} {}", table.op, variant.join(" "));
        let columns: Vec<(&str, &str)> = DERIVED_COLUMNS
            .iter()
            .copied()
            .filter(|(key, _)| table.points.iter().any(|p| p.derived.contains_key(*key)))
            .collect();
        let mut header: Vec<String> = table.axes.clone();
        header.extend(["median µs", "min µs", "p99 µs", "max µs"].map(str::to_owned));
        header.extend(columns.iter().map(|(_, title)| (*title).to_owned()));
        let mut rows = vec![header];
        for p in &table.points {
            let mut row: Vec<String> = table
                .axes
                .iter()
                .zip(&p.at)
                .map(|(axis, v)| {
                    if axis == "bytes" {
                        format_bytes(*v as u64)
                    } else {
                        format!("{v}")
                    }
                })
                .collect();
            row.extend(
                [
                    p.stats.median_us,
                    p.stats.min_us,
                    p.stats.p99_us,
                    p.stats.max_us,
                ]
                .map(number),
            );
            row.extend(
                columns
                    .iter()
                    .map(|(key, _)| match (*key, p.derived.get(*key)) {
                        ("hbm_fraction", Some(v)) => format!("{:.0} %", v * 100.0),
                        ("gate_up_path" | "down_path", Some(v)) => path_family(*v).to_owned(),
                        ("fused_silu", Some(v)) => (if *v > 0.5 { "yes" } else { "no" }).to_owned(),
                        (_, Some(v)) => number(*v),
                        (_, None) => "-".to_owned(),
                    }),
            );
            rows.push(row);
        }
        out.push_str(&align(&rows));
        out.push('\n');
    }
    out
}

/// One row per pipeline configuration, then the DBO and graph gains.
pub fn pipeline(records: &[PipelineRecord]) -> String {
    let mut rows = vec![
        [
            "tokens",
            "context",
            "dbo",
            "graph",
            "steps",
            "median µs",
            "min µs",
            "p99 µs",
            "max µs",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for r in records {
        rows.push(vec![
            r.tokens.to_string(),
            r.context.to_string(),
            r.dbo.to_string(),
            r.graph.to_string(),
            r.steps.to_string(),
            number(r.step_us.median_us),
            number(r.step_us.min_us),
            number(r.step_us.p99_us),
            number(r.step_us.max_us),
        ]);
    }
    let mut out = align(&rows);
    let mut gains = vec![
        [
            "tokens",
            "context",
            "graph",
            "DBO gain",
            "dbo",
            "graph gain",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for r in records.iter().filter(|r| !r.dbo && !r.graph) {
        let find = |dbo: bool, graph: bool| {
            records
                .iter()
                .find(|o| {
                    o.tokens == r.tokens
                        && o.context == r.context
                        && o.dbo == dbo
                        && o.graph == graph
                })
                .map(|o| o.step_us.median_us)
        };
        for graph in [false, true] {
            let dbo_gain = match (find(false, graph), find(true, graph)) {
                (Some(off), Some(on)) => format!("{:.3}", off / on),
                _ => "-".to_owned(),
            };
            let graph_gain = match (find(graph, false), find(graph, true)) {
                (Some(eager), Some(g)) => format!("{:.3}", eager / g),
                _ => "-".to_owned(),
            };
            gains.push(vec![
                r.tokens.to_string(),
                r.context.to_string(),
                graph.to_string(),
                dbo_gain,
                graph.to_string(),
                graph_gain,
            ]);
        }
    }
    if gains.len() > 1 {
        out.push_str("\ngains (ratio of medians: off / on)\n");
        out.push_str(&align(&gains));
    }
    out
}

/// The GEMM path family of a `derived` code (`gemm_choice::Family::code`).
fn path_family(code: f64) -> &'static str {
    match code.round() as i64 {
        0 => "cuBLAS",
        1 => "cuBLASLt",
        2 => "own",
        _ => "?",
    }
}

fn number(v: f64) -> String {
    if !v.is_finite() {
        "-".to_owned()
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn align(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows.iter().map(Vec::len).max().unwrap_or(0))
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:>w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
