//! `--plot FILE.svg`: throughput and latency over time (and the broker's resident memory when
//! it was sampled), drawn with plotters' SVG backend only (no font or bitmap dependencies).

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use super::report::{Report, TimelinePoint};

/// A latency line: label, colour, and the value it reads from each second.
type Series = (&'static str, &'static RGBColor, fn(&TimelinePoint) -> u64);

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

/// Draws `report` into `path`.
pub fn draw(report: &Report, path: &Path) -> anyhow::Result<()> {
    let rss: Vec<(f64, f64)> = report
        .broker_metrics
        .as_ref()
        .map(|m| {
            m.rss_samples
                .iter()
                .map(|s| (s.t_s, s.bytes / (1024.0 * 1024.0)))
                .collect()
        })
        .unwrap_or_default();
    let panels = if rss.is_empty() { 2 } else { 3 };
    let root = SVGBackend::new(path, (1000, 320 * panels)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((panels as usize, 1));
    let t_max = (report.timeline.len().max(1)) as f64;

    // Throughput: mutations and metadata reads per second.
    let tp_max = report
        .timeline
        .iter()
        .map(|p| p.mutations.max(p.metadata))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.1;
    let mut chart = ChartBuilder::on(&areas[0])
        .caption("throughput (requests/s)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, 0f64..tp_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            report
                .timeline
                .iter()
                .map(|p| (p.t_s as f64, p.mutations as f64)),
            &BLUE,
        ))
        .map_err(err)?
        .label("mutations/s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    if report.timeline.iter().any(|p| p.metadata > 0) {
        chart
            .draw_series(LineSeries::new(
                report
                    .timeline
                    .iter()
                    .map(|p| (p.t_s as f64, p.metadata as f64)),
                &GREEN,
            ))
            .map_err(err)?
            .label("metadata/s")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(err)?;

    // Latency: mutation p50 / p99 and metadata p99 per second, in ms.
    let lat_max = report
        .timeline
        .iter()
        .map(|p| p.mutation_p99_us.max(p.metadata_p99_us))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1000.0
        * 1.1;
    let mut chart = ChartBuilder::on(&areas[1])
        .caption("latency per second (ms)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_max, 0f64..lat_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .draw()
        .map_err(err)?;
    let series: [Series; 3] = [
        ("mutation p50", &BLUE, |p| p.mutation_p50_us),
        ("mutation p99", &RED, |p| p.mutation_p99_us),
        ("metadata p99", &GREEN, |p| p.metadata_p99_us),
    ];
    for (label, color, get) in series {
        let points: Vec<(f64, f64)> = report
            .timeline
            .iter()
            .filter(|p| get(p) > 0)
            .map(|p| (p.t_s as f64, get(p) as f64 / 1000.0))
            .collect();
        if points.is_empty() {
            continue;
        }
        let color = *color;
        chart
            .draw_series(LineSeries::new(points, color))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(err)?;

    if !rss.is_empty() {
        let hi = rss.iter().map(|(_, b)| *b).fold(1.0, f64::max) * 1.1;
        let t_hi = rss.iter().map(|(t, _)| *t).fold(t_max, f64::max);
        let mut chart = ChartBuilder::on(&areas[2])
            .caption("broker resident memory (MiB)", ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t_hi, 0f64..hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(rss, &MAGENTA))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
