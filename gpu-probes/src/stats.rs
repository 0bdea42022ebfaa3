//! Summary statistics of timed samples: min, median, nearest-rank p99, max, mean, coefficient of variation.
//!
//! Pure arithmetic on microsecond samples; no timing happens here.

use afd_traces::calibration::SampleStats;

/// Summarises `samples_us`; `None` when there are no samples or one is not finite.
pub fn summarize(samples_us: &[f64]) -> Option<SampleStats> {
    if samples_us.is_empty() || samples_us.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sorted = samples_us.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mean_us = sorted.iter().sum::<f64>() / n as f64;
    Some(SampleStats {
        n: u32::try_from(n).unwrap_or(u32::MAX),
        min_us: sorted[0],
        median_us: median_of_sorted(&sorted),
        p99_us: nearest_rank(&sorted, 99.0),
        max_us: sorted[n - 1],
        // Rounding can put the mean a hair outside [min, max] for equal samples; clamp it back.
        mean_us: mean_us.clamp(sorted[0], sorted[n - 1]),
    })
}

/// Median of the samples (mean of the two middle ones for an even count); `None` when empty.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(median_of_sorted(&sorted))
}

/// Coefficient of variation (standard deviation over mean), percent; 0 for fewer than two samples.
pub fn cv_percent(samples: &[f64]) -> f64 {
    if samples.len() < 2 {
        return 0.0;
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    100.0 * var.sqrt() / mean
}

/// Element-wise maximum of per-rank samples: the time of iteration `i` is the slowest rank's
/// (nccl-tests `-I`). Ranks with fewer samples are ignored past their end.
pub fn max_over_ranks(per_rank: &[Vec<f64>]) -> Vec<f64> {
    let len = per_rank.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            per_rank
                .iter()
                .filter_map(|samples| samples.get(i).copied())
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect()
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}

/// Nearest-rank percentile of sorted samples (the value at rank ⌈p/100 · n⌉).
fn nearest_rank(sorted: &[f64], percent: f64) -> f64 {
    let n = sorted.len();
    let rank = ((percent / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests;
