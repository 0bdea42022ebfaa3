//! Fits and interpolation over measured tables: least-squares lines, latency–bandwidth (α–β) fits of
//! transfers, and piecewise-linear interpolation in one and two coordinates.
//!
//! Used to summarise measurements in the probe's tables and notes and to cross-check a whole MoE layer
//! against the sum of its measured parts; the simulator does its own interpolation of the profile.

/// A line `y = intercept + slope · x`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
}

/// Least-squares line through the points; `None` with fewer than two distinct `x`.
pub fn least_squares(points: &[(f64, f64)]) -> Option<Line> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx <= f64::EPSILON * mean_x.abs().max(1.0) {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    Some(Line {
        intercept: mean_y - slope * mean_x,
        slope,
    })
}

/// Latency and bandwidth of a transfer, `t(bytes) = latency_us + bytes / (gbps · 1e3)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlphaBeta {
    pub latency_us: f64,
    pub gbps: f64,
}

/// α–β fit of `(bytes, µs)` points: latency from the smallest sizes, bandwidth from the largest.
///
/// A single least-squares line over a geometric sweep is dominated by the largest sizes and gives a
/// meaningless intercept, so latency is the median time of points at or below `small_bytes` and
/// bandwidth the slope of a line through the points at or above `large_bytes`.
pub fn alpha_beta(points: &[(f64, f64)], small_bytes: f64, large_bytes: f64) -> Option<AlphaBeta> {
    let small: Vec<f64> = points
        .iter()
        .filter(|p| p.0 <= small_bytes)
        .map(|p| p.1)
        .collect();
    let latency_us = crate::stats::median(&small)?;
    let large: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0 >= large_bytes)
        .collect();
    let line = least_squares(&large)?;
    if line.slope <= 0.0 {
        return None;
    }
    Some(AlphaBeta {
        latency_us,
        // slope is µs per byte; bytes per µs = 1e-3 GB/s.
        gbps: 1e-3 / line.slope,
    })
}

/// Piecewise-linear interpolation of `y(x)` through points sorted by `x`; clamps outside the range.
/// `None` when there are no points or `x` is not finite.
pub fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    if !x.is_finite() {
        return None;
    }
    let first = points.first()?;
    let last = points.last()?;
    if x <= first.0 {
        return Some(first.1);
    }
    if x >= last.0 {
        return Some(last.1);
    }
    let i = points.partition_point(|p| p.0 <= x);
    let (x0, y0) = points[i - 1];
    let (x1, y1) = points[i];
    if x1 == x0 {
        return Some(y1);
    }
    Some(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
}

/// Bilinear interpolation on a full grid: `values[i][j]` at `(xs[i], ys[j])`, both sorted ascending.
/// Clamps outside the grid; `None` when the shapes disagree or the grid is empty.
pub fn bilinear(xs: &[f64], ys: &[f64], values: &[Vec<f64>], x: f64, y: f64) -> Option<f64> {
    if xs.is_empty() || ys.is_empty() || values.len() != xs.len() {
        return None;
    }
    if values.iter().any(|row| row.len() != ys.len()) {
        return None;
    }
    let along_y: Vec<(f64, f64)> = xs
        .iter()
        .zip(values)
        .map(|(&xi, row)| {
            let column: Vec<(f64, f64)> = ys.iter().copied().zip(row.iter().copied()).collect();
            interpolate(&column, y).map(|v| (xi, v))
        })
        .collect::<Option<_>>()?;
    interpolate(&along_y, x)
}

/// Bilinear interpolation of a two-axis cost table's medians at `(x, y)`; `None` unless the table's
/// points form a full grid.
pub fn grid_lookup(table: &afd_traces::calibration::CostTable, x: f64, y: f64) -> Option<f64> {
    if table.axes.len() != 2 {
        return None;
    }
    let mut xs: Vec<f64> = table.points.iter().map(|p| p.at[0]).collect();
    let mut ys: Vec<f64> = table.points.iter().map(|p| p.at[1]).collect();
    for axis in [&mut xs, &mut ys] {
        axis.sort_by(f64::total_cmp);
        axis.dedup();
    }
    let values: Vec<Vec<f64>> = xs
        .iter()
        .map(|&xi| {
            ys.iter()
                .map(|&yj| {
                    table
                        .points
                        .iter()
                        .find(|p| p.at[0] == xi && p.at[1] == yj)
                        .map(|p| p.stats.median_us)
                })
                .collect::<Option<Vec<f64>>>()
        })
        .collect::<Option<_>>()?;
    bilinear(&xs, &ys, &values, x, y)
}

#[cfg(test)]
mod tests;
