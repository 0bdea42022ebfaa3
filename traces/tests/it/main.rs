//! Integration tests of `afd-traces` against the data files shipped under `traces/data/`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers panic on failure, like the tests that call them"
)]

mod models;
mod p2p_data;
mod schemas;
mod workloads;

/// Asserts `computed` equals a documented figure to the precision it is written with: "2,047.8"
/// allows ±0.05, "671" ±0.5.
#[track_caller]
fn assert_figure(what: &str, computed: f64, documented: &str) {
    let plain = documented.replace(',', "");
    let value: f64 = plain.parse().unwrap();
    let decimals = plain.split_once('.').map_or(0, |(_, d)| d.len());
    let half_unit = 0.5 * 10f64.powi(-(decimals as i32));
    assert!(
        (computed - value).abs() <= half_unit + 1e-9,
        "{what}: computed {computed}, documented {documented}"
    );
}
