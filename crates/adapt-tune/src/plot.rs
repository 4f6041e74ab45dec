//! An SVG of the trials over the space and the path the AVL search took.

use crate::{Report, RunReport, TuneError};
use plotters::prelude::*;
use std::path::Path;

/// Draws, per batch size, every measured configuration (num_workers on x,
/// log2 prefetch_factor on y, colour from fast to slow; persistent workers
/// drawn as circles, others as crosses) and the AVL search's path as a line.
pub fn write_svg(report: &Report, path: &Path) -> Result<(), TuneError> {
    let text = svg(report).map_err(|e| TuneError::file(path, e))?;
    std::fs::write(path, text).map_err(|e| TuneError::file(path, e))
}

/// The drawing of [`write_svg`] as SVG text (what the HTML report inlines).
pub fn svg(report: &Report) -> Result<String, DrawError> {
    let n = report.runs.len().max(1) as u32;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (900, 420 * n)).into_drawing_area();
        root.fill(&WHITE)?;
        let panels = root.split_evenly((report.runs.len().max(1), 1));
        for (run, area) in report.runs.iter().zip(panels) {
            panel(run, &area)?;
        }
        root.present()?;
    }
    Ok(text)
}

/// A measured trial: (num_workers, log2 prefetch, seconds, persistent).
type Point = (f64, f64, f64, bool);

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
/// A failed drawing.
pub type DrawError = DrawingAreaErrorKind<std::io::Error>;

/// One batch size's panel: the trials, the AVL path and the pick.
fn panel(run: &RunReport, area: &Area<'_>) -> Result<(), DrawError> {
    let points: Vec<Point> = run
        .trace
        .iter()
        .filter_map(|t| {
            let s = t.seconds?;
            Some((
                t.config.num_workers as f64,
                log2_prefetch(&t.config),
                s,
                t.config.persistent_workers,
            ))
        })
        .collect();
    let max_w = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let (lo, hi) = points.iter().fold((f64::INFINITY, 0.0f64), |(l, h), p| {
        (l.min(p.2), h.max(p.2))
    });
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "batch size {}: trials (green fast, red slow), AVL path in blue",
                run.batch_size
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(-0.5..max_w + 0.5, -0.5..11.5f64)?;
    chart
        .configure_mesh()
        .x_desc("num_workers")
        .y_desc("log2(prefetch_factor)")
        .draw()?;
    let colour = |s: f64| {
        let t = if hi > lo {
            ((s - lo) / (hi - lo)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        RGBColor((255.0 * t) as u8, (200.0 * (1.0 - t)) as u8, 40)
    };
    chart.draw_series(
        points
            .iter()
            .filter(|p| p.3)
            .map(|p| Circle::new((p.0 + 0.12, p.1), 5, colour(p.2).filled())),
    )?;
    chart.draw_series(
        points
            .iter()
            .filter(|p| !p.3)
            .map(|p| Cross::new((p.0 - 0.12, p.1), 5, colour(p.2).stroke_width(2))),
    )?;
    let path_pts: Vec<(f64, f64)> = run
        .avl_path
        .iter()
        .map(|k| (k.num_workers as f64, log2_prefetch(k)))
        .collect();
    if !path_pts.is_empty() {
        chart.draw_series(LineSeries::new(path_pts, BLUE.stroke_width(2)))?;
    }
    let a = &run.adapt.config;
    chart.draw_series(std::iter::once(TriangleMarker::new(
        (a.num_workers as f64, log2_prefetch(a)),
        9,
        BLUE.filled(),
    )))?;
    Ok(())
}

/// The y position of some knobs: log2 of the prefetch factor (PyTorch's
/// default where there are no workers).
fn log2_prefetch(k: &crate::LoaderKnobs) -> f64 {
    (k.prefetch_factor.unwrap_or(adapt_loader::DEFAULT_PREFETCH) as f64).log2()
}
