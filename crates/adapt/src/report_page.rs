//! The tuning report as one self-contained HTML page (`tune --report`):
//! the paper's Table 1 on this machine, the search's trace plot, the noise
//! the race measured, and where an epoch's time goes under the picked
//! configuration against the default's — a page to read why the pick is
//! what it is. Styles and drawings are inline; the page loads nothing.

use crate::{AdaptError, LoaderKnobs, Pipeline, Progress, Report, Run, RunOptions, StageReport};
use std::fmt::Write as _;
use std::path::Path;

/// Where the time of one batch size's default and picked configurations
/// went, or why it was not measured.
#[derive(Clone, Debug)]
pub struct StagePair {
    /// The batch size of the report's run.
    pub batch_size: usize,
    /// (configuration, its stages) for the default, then the pick.
    pub measured: Vec<(LoaderKnobs, StageReport)>,
    /// Why nothing was measured (a `--command` or PyTorch tuning: the
    /// loader timed is not adapt's).
    pub missing: Option<String>,
}

impl StagePair {
    /// No stages for `batch_size`, for the reason `why`.
    pub fn missing(batch_size: usize, why: &str) -> Self {
        Self {
            batch_size,
            measured: Vec::new(),
            missing: Some(why.to_owned()),
        }
    }
}

/// Measures, for each of the report's batch sizes, the stages of the
/// default configuration and of the pick: one epoch each over the first
/// `report.final_samples` samples of `pipeline` (the final comparison's
/// length), with stage timing on.
pub fn measure_stage_pairs(
    pipeline: &Pipeline,
    report: &Report,
    progress: Progress<'_>,
) -> Result<Vec<StagePair>, AdaptError> {
    let mut pairs = Vec::new();
    for run in &report.runs {
        let mut measured = Vec::new();
        for knobs in [run.default.config, run.adapt.config] {
            progress(&format!(
                "stages of {knobs} at batch size {}",
                run.batch_size
            ));
            let stages = epoch_stages(pipeline, &knobs, run.batch_size, report.final_samples)?;
            measured.push((knobs, stages));
        }
        pairs.push(StagePair {
            batch_size: run.batch_size,
            measured,
            missing: None,
        });
    }
    Ok(pairs)
}

/// One shuffled epoch of `pipeline` under `knobs`, stopped after `samples`
/// samples, and where its time went.
fn epoch_stages(
    pipeline: &Pipeline,
    knobs: &LoaderKnobs,
    batch_size: usize,
    samples: usize,
) -> Result<StageReport, AdaptError> {
    let options = RunOptions {
        batch_size,
        shuffle: true,
        knobs: knobs.canonical(),
        stage_timing: true,
        ..RunOptions::default()
    };
    let mut run = Run::open(pipeline, &options)?;
    let batches = run
        .start(0)?
        .min(samples.div_ceil(batch_size.max(1)).max(1));
    for _ in 0..batches {
        match run.next(&mut || false) {
            Some(batch) => drop(batch?),
            None => break,
        }
    }
    run.stages().ok_or_else(|| {
        AdaptError::Option("the loader recorded no stages (stage timing is off)".into())
    })
}

/// Writes the page of `report` with `stages` to `path`.
pub fn write_report_html(
    report: &Report,
    stages: &[StagePair],
    path: &Path,
) -> Result<(), AdaptError> {
    let io = |source| AdaptError::Io {
        path: path.to_owned(),
        source,
    };
    let page = report_html(report, stages).map_err(|e| io(std::io::Error::other(e)))?;
    std::fs::write(path, page).map_err(io)
}

/// The page of `report` with `stages` (one entry per batch size, or none).
pub fn report_html(report: &Report, stages: &[StagePair]) -> Result<String, String> {
    let plot = adapt_tune::plot_svg(report).map_err(|e| format!("drawing the trace: {e}"))?;
    let mut s = String::from(HEAD);
    s += "<h1>adapt: tuning report</h1>\n";
    let _ = writeln!(s, "<pre class=\"head\">{}</pre>", esc(&report.table()));
    for run in &report.runs {
        s += &comparison_table(run);
    }
    s += "<h2>Where the time goes: the default against the pick</h2>\n";
    if stages.is_empty() {
        s += "<p>No stages were measured for this report.</p>\n";
    }
    for pair in stages {
        s += &stage_section(pair);
    }
    s += "<h2>The noise</h2>\n";
    s += &noise_table(report);
    s += "<h2>The search</h2>\n<p>Every trial over the knob space (num_workers across, \
          prefetch_factor up; fast to slow in colour) and the path the AVL search took.</p>\n";
    let _ = writeln!(s, "<div class=\"plot\">{}</div>", strip_xml_header(&plot));
    s += "</body>\n</html>\n";
    Ok(s)
}

const HEAD: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<title>adapt: tuning report</title>\n<style>\n\
body { font-family: sans-serif; margin: 2em; max-width: 1000px; color: #222; }\n\
pre.head { background: #f4f4f4; padding: 1em; overflow-x: auto; font-size: 12px; }\n\
table { border-collapse: collapse; margin: 1em 0; }\n\
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }\n\
th:first-child, td:first-child, td:nth-child(2) { text-align: left; }\n\
.verdict { font-style: italic; margin: 0.3em 0 1em 0; }\n\
.legend span { display: inline-block; margin-right: 1em; }\n\
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; }\n\
</style>\n</head>\n<body>\n";

/// The paper's Table 1 for one batch size: default, recommended, optimal
/// (when the grid ran) and adapt's pick, with the speed-ups.
fn comparison_table(run: &adapt_tune::RunReport) -> String {
    let mut s = format!(
        "<h2>Batch size {}</h2>\n<table>\n<tr><th>configuration</th><th>knobs</th>\
         <th>seconds (median)</th><th>speed-up of adapt's pick</th></tr>\n",
        run.batch_size
    );
    let rows = [
        ("default", Some(&run.default)),
        ("recommended", Some(&run.recommended)),
        ("optimal (grid)", run.optimal.as_ref()),
        ("adapt's pick", Some(&run.adapt)),
    ];
    for (name, row) in rows {
        let Some(c) = row else { continue };
        let speedup = c.seconds / run.adapt.seconds;
        let _ = writeln!(
            s,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.config.to_string()),
            seconds(c.seconds),
            if speedup.is_finite() {
                format!("{speedup:.2}×")
            } else {
                "–".into()
            }
        );
    }
    s += "</table>\n";
    let _ = writeln!(
        s,
        "<p>Picked by {}; {} configurations in the space, {} pruned.</p>",
        esc(&run.adapt_picked_by),
        run.grid_size,
        run.pruned
    );
    s
}

fn seconds(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "failed".into()
    }
}

/// The noise probes: each configuration's repeats, median and spread.
fn noise_table(report: &Report) -> String {
    let mut s = String::new();
    let mut any = false;
    for run in &report.runs {
        for probe in &run.noise_probes {
            if !any {
                s += "<table>\n<tr><th>batch size</th><th>configuration</th><th>repeats</th>\
                      <th>median s</th><th>relative spread</th></tr>\n";
                any = true;
            }
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
                run.batch_size,
                esc(&probe.config.to_string()),
                probe.seconds.len(),
                seconds(probe.median),
                probe.relative_spread * 100.0
            );
        }
    }
    if any {
        s += "</table>\n";
        let _ = writeln!(
            s,
            "<p>The race's threshold: {:.1}% ({}).</p>",
            report.strategy.noise_threshold * 100.0,
            esc(&report.strategy.threshold_from)
        );
    } else {
        s += "<p>The noise was not measured (noise_repeats below 2).</p>\n";
    }
    s
}

/// Stage colours, in pipeline order (read, decode, steps…, collate), then
/// the consumer's wait.
const COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759",
];
const WAIT: &str = "#bab0ac";

/// One batch size's bars: per configuration, its stages' seconds summed
/// over the workers, stacked, and its epoch with the consumer's wait.
fn stage_section(pair: &StagePair) -> String {
    let mut s = format!("<h3>Batch size {}</h3>\n", pair.batch_size);
    if let Some(why) = &pair.missing {
        let _ = writeln!(s, "<p>{}</p>", esc(why));
        return s;
    }
    let names = stage_names(&pair.measured);
    s += "<div class=\"legend\">";
    for (k, name) in names.iter().enumerate() {
        let _ = write!(
            s,
            "<span><i style=\"background:{}\"></i>{}</span>",
            COLOURS[k % COLOURS.len()],
            esc(name)
        );
    }
    let _ = writeln!(
        s,
        "<span><i style=\"background:{WAIT}\"></i>consumer's wait</span></div>"
    );
    let widest = pair
        .measured
        .iter()
        .map(|(_, r)| r.stages.iter().map(|x| x.1).sum::<f64>().max(r.seconds))
        .fold(0.0, f64::max);
    s += &bars_svg(&pair.measured, &names, widest);
    for (knobs, r) in &pair.measured {
        let _ = writeln!(
            s,
            "<p><b>{}</b>: epoch {:.3} s, workers busy {:.0}%, the consumer waited {:.0}%.</p>\
             <p class=\"verdict\">{}</p>",
            esc(&knobs.to_string()),
            r.seconds,
            r.busy_share * 100.0,
            r.wait_share * 100.0,
            esc(&r.verdict)
        );
    }
    s
}

/// Every stage any of `measured` has, in the order first seen.
fn stage_names(measured: &[(LoaderKnobs, StageReport)]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (_, r) in measured {
        for (name, _) in &r.stages {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Two rows per configuration: the stages stacked (seconds of work) and
/// the epoch (seconds of wall time) with the consumer's wait in it.
fn bars_svg(measured: &[(LoaderKnobs, StageReport)], names: &[String], widest: f64) -> String {
    const LEFT: f64 = 260.0;
    const WIDTH: f64 = 640.0;
    let scale = if widest > 0.0 { WIDTH / widest } else { 0.0 };
    let height = 70 * measured.len() + 10;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n",
        LEFT + WIDTH + 80.0
    );
    for (row, (knobs, r)) in measured.iter().enumerate() {
        let y = 10.0 + 70.0 * row as f64;
        let _ = writeln!(
            s,
            "<text x=\"0\" y=\"{:.0}\">{}</text><text x=\"0\" y=\"{:.0}\">work (s)</text>\
             <text x=\"0\" y=\"{:.0}\">epoch (s)</text>",
            y + 10.0,
            esc(&knobs.to_string()),
            y + 26.0,
            y + 50.0
        );
        let mut x = LEFT;
        for (name, secs) in &r.stages {
            let k = names.iter().position(|n| n == name).unwrap_or(0);
            let w = secs * scale;
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.0}\" width=\"{w:.1}\" height=\"18\" fill=\"{}\">\
                 <title>{}: {secs:.3} s</title></rect>",
                y + 14.0,
                COLOURS[k % COLOURS.len()],
                esc(name)
            );
            x += w;
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.0}\">{:.3}</text>",
            x + 4.0,
            y + 27.0,
            r.stages.iter().map(|x| x.1).sum::<f64>()
        );
        let (epoch, wait) = (r.seconds * scale, r.wait_seconds.min(r.seconds) * scale);
        let _ = writeln!(
            s,
            "<rect x=\"{LEFT}\" y=\"{:.0}\" width=\"{epoch:.1}\" height=\"18\" fill=\"none\" \
             stroke=\"#444\"/><rect x=\"{LEFT}\" y=\"{:.0}\" width=\"{wait:.1}\" height=\"18\" \
             fill=\"{WAIT}\"><title>the consumer's wait: {:.3} s</title></rect>\
             <text x=\"{:.1}\" y=\"{:.0}\">{:.3}</text>",
            y + 38.0,
            y + 38.0,
            r.wait_seconds,
            LEFT + epoch + 4.0,
            y + 51.0,
            r.seconds
        );
    }
    s += "</svg>\n";
    s
}

/// The SVG drawing without its `<?xml …?>` line, to sit inside the page.
fn strip_xml_header(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(at) => &svg[at..],
        None => svg,
    }
}

/// Text made safe for HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report the tuner wrote (CelebA at batch size 2,048, with the grid).
    fn report() -> Report {
        let text = include_str!(
            "../../../docs/reports/tune-prune-2026-12-05/tune-honest-celeba-prune-b2048-run3.json"
        );
        serde_json::from_str(text).expect("a report of this version")
    }

    fn stages(wait: f64) -> StageReport {
        StageReport::from_parts(
            vec![
                ("read".into(), 0.5),
                ("decode".into(), 2.0),
                ("collate".into(), 0.25),
            ],
            2.0,
            2,
            vec![(1.4, 600), (1.35, 600)],
            wait,
            2,
        )
    }

    #[test]
    fn the_page_holds_the_comparison_the_noise_the_plot_and_the_bars() {
        let report = report();
        let run = &report.runs[0];
        let pair = StagePair {
            batch_size: run.batch_size,
            measured: vec![
                (run.default.config, stages(1.5)),
                (run.adapt.config, stages(0.01)),
            ],
            missing: None,
        };
        let page = report_html(&report, &[pair]).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        // Nothing is fetched: no script or style source, no link.
        for outside in ["src=", "href=", "<link", "@import", "url("] {
            assert!(!page.contains(outside), "{outside}");
        }
        assert_eq!(
            page.matches("<svg").count(),
            2,
            "the trace plot and the bars"
        );
        assert!(!page.contains("<?xml"));
        for figure in [
            format!("{:.3}", run.adapt.seconds),
            format!("{:.3}", run.default.seconds),
            format!("{:.2}×", run.default.seconds / run.adapt.seconds),
            format!("{:.1}%", run.noise_probes[0].relative_spread * 100.0),
            esc(&run.adapt.config.to_string()),
        ] {
            assert!(page.contains(&figure), "{figure} missing");
        }
        assert!(page.contains("decode-bound: workers busy 69%, consumer waited 75%"));
        assert!(page.contains("consumer-bound"));
        assert!(page.contains(">decode</span>") && page.contains("consumer's wait"));
    }

    #[test]
    fn a_missing_measurement_says_why_and_text_is_escaped() {
        let report = report();
        let why = "The command <loads> its own data & stages";
        let page = report_html(&report, &[StagePair::missing(8, why)]).unwrap();
        assert!(page.contains("The command &lt;loads&gt; its own data &amp; stages"));
        assert_eq!(page.matches("<svg").count(), 1);
    }
}
