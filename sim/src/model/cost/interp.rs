//! Interpolation of measured cost tables: piecewise-linear in log space over one axis, bilinear in
//! log space over a full two-axis grid, clamped to the measured range with a flag.
//!
//! Log-space interpolation makes the `α + s/β` shape of transfers and the power laws of GEMMs
//! between measured sizes close to exact. Coordinates of 0 are moved to 1 before taking logs (a
//! table of sizes never needs 0; a context of 0 is priced as 1).

/// What a query returned and whether it had to be clamped into the measured range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lookup {
    /// Microseconds.
    pub value_us: f64,
    pub out_of_range: bool,
}

/// A 1-D table: strictly increasing coordinates, non-negative values.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    log_x: Vec<f64>,
    values_us: Vec<f64>,
}

/// A full rectangular 2-D grid: `values_us[i * ys.len() + j]` is the time at `(xs[i], ys[j])`.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    log_x: Vec<f64>,
    log_y: Vec<f64>,
    values_us: Vec<f64>,
}

/// Why a table cannot be interpolated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("has no points")]
    Empty,
    #[error("has two points at coordinate {0}")]
    DuplicateCoordinate(String),
    #[error("is not a full grid: {points} points for {nx} x {ny} distinct coordinates")]
    NotAGrid { points: usize, nx: usize, ny: usize },
}

fn log_coordinate(x: f64) -> f64 {
    x.max(1.0).ln()
}

impl Curve {
    /// Builds a curve from `(coordinate, microseconds)` pairs in any order.
    pub fn new(mut points: Vec<(f64, f64)>) -> Result<Curve, InterpError> {
        if points.is_empty() {
            return Err(InterpError::Empty);
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in points.windows(2) {
            if log_coordinate(pair[0].0) == log_coordinate(pair[1].0) {
                return Err(InterpError::DuplicateCoordinate(pair[1].0.to_string()));
            }
        }
        Ok(Curve {
            log_x: points.iter().map(|p| log_coordinate(p.0)).collect(),
            values_us: points.iter().map(|p| p.1).collect(),
        })
    }

    /// The interpolated time at `x`, clamped to the first/last point outside the range.
    pub fn at(&self, x: f64) -> Lookup {
        let lx = log_coordinate(x);
        let (value_us, out_of_range) = interpolate(&self.log_x, lx, |i| self.values_us[i]);
        Lookup {
            value_us,
            out_of_range,
        }
    }

    /// Mean increase per unit of coordinate between the first and last points (linear, not log),
    /// `None` for a single point; never negative.
    pub fn slope_per_unit(&self) -> Option<f64> {
        let last = self.log_x.len() - 1;
        if last == 0 {
            return None;
        }
        let span = self.log_x[last].exp() - self.log_x[0].exp();
        Some(((self.values_us[last] - self.values_us[0]) / span).max(0.0))
    }

    /// The smallest measured time (used as the latency part of a transfer).
    pub fn first_value_us(&self) -> f64 {
        self.values_us[0]
    }
}

impl Grid {
    /// Builds a grid from `(x, y, microseconds)` triples; every `(x, y)` combination must be present once.
    pub fn new(points: &[(f64, f64, f64)]) -> Result<Grid, InterpError> {
        if points.is_empty() {
            return Err(InterpError::Empty);
        }
        let mut xs: Vec<f64> = points.iter().map(|p| log_coordinate(p.0)).collect();
        let mut ys: Vec<f64> = points.iter().map(|p| log_coordinate(p.1)).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        ys.sort_by(f64::total_cmp);
        ys.dedup();
        if xs.len() * ys.len() != points.len() {
            return Err(InterpError::NotAGrid {
                points: points.len(),
                nx: xs.len(),
                ny: ys.len(),
            });
        }
        let mut values = vec![f64::NAN; points.len()];
        for &(x, y, v) in points {
            let i = xs
                .binary_search_by(|p| p.total_cmp(&log_coordinate(x)))
                .expect("x was collected from the points");
            let j = ys
                .binary_search_by(|p| p.total_cmp(&log_coordinate(y)))
                .expect("y was collected from the points");
            let slot = &mut values[i * ys.len() + j];
            if !slot.is_nan() {
                return Err(InterpError::DuplicateCoordinate(format!("({x}, {y})")));
            }
            *slot = v;
        }
        Ok(Grid {
            log_x: xs,
            log_y: ys,
            values_us: values,
        })
    }

    /// Bilinear interpolation in log space, clamped on each axis.
    pub fn at(&self, x: f64, y: f64) -> Lookup {
        let ny = self.log_y.len();
        let lx = log_coordinate(x);
        let ly = log_coordinate(y);
        let mut y_clamped = false;
        let (value_us, x_clamped) = interpolate(&self.log_x, lx, |i| {
            let (v, clamped) = interpolate(&self.log_y, ly, |j| self.values_us[i * ny + j]);
            y_clamped |= clamped;
            v
        });
        Lookup {
            value_us,
            out_of_range: x_clamped || y_clamped,
        }
    }
}

/// Linear interpolation of `value(i)` over sorted `axis` at `at`; clamps outside and says so.
fn interpolate(axis: &[f64], at: f64, mut value: impl FnMut(usize) -> f64) -> (f64, bool) {
    let last = axis.len() - 1;
    if at <= axis[0] {
        return (value(0), at < axis[0]);
    }
    if at >= axis[last] {
        return (value(last), at > axis[last]);
    }
    let hi = axis.partition_point(|&p| p <= at);
    let lo = hi - 1;
    let t = (at - axis[lo]) / (axis[hi] - axis[lo]);
    let (a, b) = (value(lo), value(hi));
    (a + (b - a) * t, false)
}

#[cfg(test)]
mod tests;
