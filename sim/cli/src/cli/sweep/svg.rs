//! The frontier figure: output tokens/s per GPU against the TPOT statistic (left) and the TTFT
//! statistic (right), every completed candidate as a point (AFD and the colocated baseline in two
//! colours, SLO misses faded), the Pareto frontier as a line, and the chosen points (best overall,
//! best AFD, best baseline) marked and labelled. Drawn with plotters' SVG backend.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

use afd_sim::planner::frontier::{Latency, frontier, is_complete, latency_ms};
use afd_traces::sweep::SweepRow;

const AFD: RGBColor = RGBColor(31, 119, 180);
const BASELINE: RGBColor = RGBColor(255, 127, 14);
const CHOSEN: RGBColor = RGBColor(214, 39, 40);
const SLO_LINE: RGBColor = RGBColor(150, 150, 150);

/// The SVG text of the figure. `complete`: the rows are a whole sweep (a shard's frontier is only
/// the shard's, and the title says so).
pub(super) fn draw(rows: &[SweepRow], complete: bool, title: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (1400, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let sweep = rows.first().map_or("", |r| r.sweep.as_str());
        let heading = format!(
            "{}{} candidates of sweep {sweep}{}",
            if title.is_empty() {
                String::new()
            } else {
                format!("{title}: ")
            },
            rows.len(),
            if complete { "" } else { " (one shard)" }
        );
        let root = root
            .titled(&heading, ("sans-serif", 22))
            .map_err(plot_error)?;
        let (left, right) = root.split_horizontally(700);
        panel(&left, rows, Latency::Tpot)?;
        panel(&right, rows, Latency::Ttft)?;
        root.present().map_err(plot_error)?;
    }
    Ok(text)
}

fn plot_error<E: std::fmt::Display>(err: E) -> anyhow::Error {
    anyhow!("drawing the frontier SVG: {err}")
}

/// A short name of a candidate for labels: `12A4F DP12xTP1/DP4xTP1 EP` or `DP16xTP1 colocated`.
fn label(row: &SweepRow) -> String {
    match (row.ffn_dp, row.ffn_tp) {
        (Some(dp), Some(tp)) => format!(
            "#{} {}A{}F DP{}xTP{}/DP{dp}xTP{tp}{}",
            row.candidate,
            row.attention_ranks,
            row.ffn_ranks,
            row.attention_dp,
            row.attention_tp,
            if row.expert_parallel { " EP" } else { "" }
        ),
        _ => format!(
            "#{} DP{}xTP{} colocated",
            row.candidate, row.attention_dp, row.attention_tp
        ),
    }
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    rows: &[SweepRow],
    latency: Latency,
) -> anyhow::Result<()> {
    let stat = rows.first().map_or("mean", |r| r.slo_stat.as_str());
    let points: Vec<(&SweepRow, f64, f64)> = rows
        .iter()
        .filter(|r| is_complete(r))
        .filter_map(|r| {
            let x = latency_ms(r, latency)?;
            let y = r.output_tokens_per_s_per_gpu?;
            (x.is_finite() && y.is_finite() && x > 0.0).then_some((r, x, y))
        })
        .collect();
    let slo = rows.first().and_then(|r| match latency {
        Latency::Tpot => r.tpot_slo_ms,
        Latency::Ttft => r.ttft_slo_ms,
    });
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for &(_, x, y) in &points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if let Some(limit) = slo {
        x_min = x_min.min(limit);
        x_max = x_max.max(limit);
    }
    if !x_min.is_finite() {
        (x_min, x_max, y_min, y_max) = (1.0, 10.0, 0.0, 1.0);
    }
    let y_pad = ((y_max - y_min) * 0.08).max(y_max.abs() * 0.02).max(1e-3);
    let y_range = (y_min - y_pad).max(0.0)..(y_max + y_pad);
    // A log axis only when latencies span more than a decade.
    let log = x_max / x_min > 10.0;
    let x_range = if log {
        x_min * 0.85..x_max * 1.15
    } else {
        let pad = (x_max - x_min).max(x_max * 0.05) * 0.08;
        (x_min - pad).max(0.0)..x_max + pad
    };
    let digits = if x_range.end < 10.0 {
        2
    } else if x_range.end < 100.0 {
        1
    } else {
        0
    };
    let x_label = format!(
        "{stat} {} (ms{})",
        latency.as_str(),
        if log { ", log scale" } else { "" }
    );
    let caption = format!("output tokens/s per GPU vs {stat} {}", latency.as_str());
    let x_format = move |v: &f64| format!("{v:.digits$}");
    // Enough decimals that neighbouring ticks differ (a narrow throughput band needs them).
    let y_span = y_range.end - y_range.start;
    let y_digits: usize = if y_span < 0.5 {
        3
    } else if y_span < 5.0 {
        2
    } else if y_span < 50.0 {
        1
    } else {
        0
    };
    let y_format = move |v: &f64| format!("{v:.y_digits$}");
    if log {
        let chart = ChartBuilder::on(area)
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .caption(caption, ("sans-serif", 18))
            .build_cartesian_2d(
                x_range
                    .clone()
                    .log_scale()
                    .with_key_points(log_ticks(&x_range)),
                y_range,
            )
            .map_err(plot_error)?;
        plot(
            chart,
            &points,
            rows,
            slo,
            latency,
            &x_label,
            (&x_format, &y_format),
        )
    } else {
        let chart = ChartBuilder::on(area)
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .caption(caption, ("sans-serif", 18))
            .build_cartesian_2d(x_range, y_range)
            .map_err(plot_error)?;
        plot(
            chart,
            &points,
            rows,
            slo,
            latency,
            &x_label,
            (&x_format, &y_format),
        )
    }
}

/// Ticks of a log axis over `range`: 1, 2, 5 times each power of ten inside it.
pub(super) fn log_ticks(range: &std::ops::Range<f64>) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 10f64.powf(range.start.max(1e-9).log10().floor());
    while decade <= range.end {
        for m in [1.0, 2.0, 5.0] {
            let t = m * decade;
            if range.contains(&t) {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    ticks
}

/// Formats an axis tick.
type TickFormat = dyn Fn(&f64) -> String;

/// Draws the mesh, the SLO line, the points, the frontier and the chosen points on `chart`.
fn plot<'a, X>(
    mut chart: ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    points: &[(&SweepRow, f64, f64)],
    rows: &[SweepRow],
    slo: Option<f64>,
    latency: Latency,
    x_label: &str,
    (x_format, y_format): (&TickFormat, &TickFormat),
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc("output tokens/s per GPU")
        .x_labels(8)
        .x_label_formatter(x_format)
        .y_label_formatter(y_format)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(plot_error)?;
    if let Some(limit) = slo {
        let (lo, hi) = (chart.y_range().start, chart.y_range().end);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(limit, lo), (limit, hi)],
                6,
                4,
                SLO_LINE.stroke_width(2),
            ))
            .map_err(plot_error)?
            .label(format!("SLO {limit} ms"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], SLO_LINE.stroke_width(2)));
    }
    for (kind, color, name) in [
        ("afd", AFD, "AFD"),
        ("colocated", BASELINE, "colocated baseline"),
    ] {
        let passing: Vec<(f64, f64)> = points
            .iter()
            .filter(|(r, _, _)| r.kind == kind && r.slo == "pass")
            .map(|&(_, x, y)| (x, y))
            .collect();
        let missing: Vec<(f64, f64)> = points
            .iter()
            .filter(|(r, _, _)| r.kind == kind && r.slo != "pass")
            .map(|&(_, x, y)| (x, y))
            .collect();
        chart
            .draw_series(
                missing
                    .iter()
                    .map(|&p| Circle::new(p, 2, color.mix(0.15).filled())),
            )
            .map_err(plot_error)?;
        chart
            .draw_series(
                passing
                    .iter()
                    .map(|&p| Circle::new(p, 3, color.mix(0.55).filled())),
            )
            .map_err(plot_error)?
            .label(format!(
                "{name} ({} meet the SLO, {} miss)",
                passing.len(),
                missing.len()
            ))
            .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
    }
    let front: Vec<(f64, f64)> = frontier(rows, latency)
        .into_iter()
        .filter_map(|i| {
            Some((
                latency_ms(&rows[i], latency)?,
                rows[i].output_tokens_per_s_per_gpu?,
            ))
        })
        .collect();
    chart
        .draw_series(LineSeries::new(
            front.iter().copied(),
            BLACK.stroke_width(2),
        ))
        .map_err(plot_error)?
        .label(format!("Pareto frontier ({} points)", front.len()))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(front.iter().map(|&p| Circle::new(p, 4, BLACK.filled())))
        .map_err(plot_error)?;
    // The chosen points: the best candidate meeting the SLO overall and of each kind.
    let best = |kind: Option<&str>| {
        points
            .iter()
            .filter(|(r, _, _)| r.rank.is_some() && kind.is_none_or(|k| r.kind == k))
            .min_by_key(|(r, _, _)| r.rank)
            .copied()
    };
    let mut chosen: Vec<(&SweepRow, f64, f64, &str)> = Vec::new();
    for (kind, what) in [
        (None, "best"),
        (Some("afd"), "best AFD"),
        (Some("colocated"), "best baseline"),
    ] {
        if let Some((row, x, y)) = best(kind)
            && !chosen.iter().any(|(r, ..)| r.candidate == row.candidate)
        {
            chosen.push((row, x, y, what));
        }
    }
    chart
        .draw_series(chosen.iter().map(|&(_, x, y, _)| {
            EmptyElement::at((x, y))
                + Circle::new((0, 0), 8, CHOSEN.stroke_width(3))
                + Cross::new((0, 0), 4, CHOSEN.stroke_width(2))
        }))
        .map_err(plot_error)?
        .label("chosen (best meeting the SLO)")
        .legend(|(x, y)| Circle::new((x + 9, y), 6, CHOSEN.stroke_width(2)));
    for (i, &(row, x, y, what)) in chosen.iter().enumerate() {
        let offset = 14 + 18 * i as i32;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((x, y))
                    + Text::new(
                        format!("{what}: {}", label(row)),
                        (10, -offset),
                        ("sans-serif", 13).into_font().color(&CHOSEN),
                    ),
            ))
            .map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(plot_error)?;
    Ok(())
}
