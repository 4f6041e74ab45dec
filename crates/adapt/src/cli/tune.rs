//! `tune`: the main job. With no argument it tunes the loader on full-size
//! CIFAR-10 in the default folder (generated if absent) at batch size 128
//! with the AVL search.

use crate::{AvlOptions, DatasetSpec, Pipeline, Report, TrialSpec, TuneOptions};
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// The verb's flags.
#[derive(clap::Args)]
pub struct Args {
    /// The format (default: the embedded CIFAR-10).
    #[arg(long, value_parser = super::args::parse_format, long_help = super::args::dataset_long_help())]
    dataset: Option<crate::FormatName>,
    /// The folder holding the dataset's files (WebDataset, Parquet: the
    /// file list, as for `load`).
    #[arg(long)]
    path: Option<PathBuf>,
    #[command(flatten)]
    members: super::args::FieldArgs,
    /// Resize every sample to WIDTHxHEIGHT (image folders of mixed sizes).
    #[arg(long, value_parser = super::args::parse_size)]
    resize: Option<(u32, u32)>,
    #[command(flatten)]
    pipeline: super::args::PipelineArgs,
    #[command(flatten)]
    remote: super::remote_args::RemoteArgs,
    /// Batch sizes, comma-separated, each tuned separately.
    #[arg(long, value_delimiter = ',', default_value = "128")]
    batch_size: Vec<usize>,
    /// avl, grid or both (both reproduces the paper's Table 1).
    #[arg(long, default_value = "avl")]
    strategy: String,
    /// The knob space: machine (num_workers 0 … 2 × cores) or paper (the
    /// paper's: num_workers 1, 2, 4 … 64, 1,584 configurations with a GPU).
    #[arg(long, default_value = "machine")]
    space: String,
    /// Memory budget for batches in flight, e.g. 4G or 512M (default: half
    /// of the available memory).
    #[arg(long)]
    budget_mem: Option<String>,
    /// Samples per trial epoch (a fixed random subset); the starting length
    /// when --trial-seconds sizes trials.
    #[arg(long, default_value_t = 16_384)]
    trial_samples: usize,
    /// Size trials to last about this many seconds: lengthened when
    /// shorter, shortened when over twice as long, never below 8 batches
    /// per epoch (0: keep --trial-samples as given).
    #[arg(long, default_value_t = 1.0)]
    trial_seconds: f64,
    /// Trials of one configuration run before the search to measure the
    /// noise (which sets the noise policy's threshold); 0 or 1: not measured.
    #[arg(long, default_value_t = 5)]
    noise_repeats: usize,
    /// A consumer that spends this many milliseconds per batch in every
    /// trial (a training step's stand-in): the report then also names the
    /// cheapest configuration that keeps up.
    #[arg(long)]
    step_ms: Option<f64>,
    /// With --command: time what the program prints, the last match of this
    /// regular expression (its first group), e.g. 'adapt-seconds: ([0-9.]+)',
    /// instead of the process's wall time.
    #[arg(long)]
    metric: Option<String>,
    /// Epochs per trial (at least 2).
    #[arg(long, default_value_t = 2)]
    trial_epochs: u64,
    /// Repeats of the final comparison, interleaved (medians reported).
    #[arg(long, default_value_t = 5)]
    final_repeats: usize,
    /// Samples per epoch of the final comparison (default: all, up to 60,000).
    #[arg(long)]
    final_samples: Option<usize>,
    /// The AVL descent: plain (the paper's) or refined (sorted-order
    /// neighbours tried after it); both end with the noise race. Default:
    /// the one measured better (docs/tuning.md, "Which descent").
    #[arg(long)]
    avl: Option<String>,
    /// No race at the end of the AVL search (single measurements decide;
    /// no pruning either, which needs the race's measured noise).
    #[arg(long)]
    no_race: bool,
    /// No pruning: every trial of the AVL search runs whole, and no value
    /// is skipped for having clearly lost under two other contexts.
    #[arg(long)]
    no_prune: bool,
    /// The paper's algorithm as published: --avl plain --no-race.
    #[arg(long)]
    plain: bool,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the full report (with the trace) as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the trials and the AVL path as SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Write one self-contained HTML page: the comparison, the search's
    /// trace, the noise, and where an epoch's time goes under the pick
    /// against the default (measured after the tuning, one epoch each).
    #[arg(long)]
    report: Option<PathBuf>,
    /// Reuse and update a profile of tuned configurations.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Search again even when the profile has a matching entry.
    #[arg(long)]
    retune: bool,
    /// Tune an external command by its wall time; it may use {num_workers}
    /// {prefetch_factor} {pin_memory} {persistent_workers}.
    #[arg(long)]
    command: Option<String>,
    /// With --command: seconds a trial may run before it (and its process
    /// group) is ended and counted as failed. Default: 5x the slowest
    /// finished trial, at least 60 s (600 s before the first finishes).
    #[arg(long)]
    trial_timeout: Option<f64>,
    /// Replay the search strategies on the grids recorded in a JSON report
    /// (no trials run).
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Seeds for --replay.
    #[arg(long, default_value_t = 200)]
    replay_seeds: usize,
    /// Multiplicative noise (±fraction) added to replayed costs.
    #[arg(long, default_value_t = 0.0)]
    replay_noise: f64,
}

impl Args {
    /// The pipeline tuned: `--dataset`/`--path` with the steps and output,
    /// or the main job's default CIFAR-10 (generated when absent).
    fn pipeline(
        &self,
        default_cifar10: &Path,
        progress: crate::Progress<'_>,
    ) -> anyhow::Result<Pipeline> {
        self.members.refuse_text(
            "tune",
            "the tuner's trials time image batches (texts are read on the consumer's thread, \
             whatever the knobs)",
        )?;
        let base = match (&self.dataset, &self.path) {
            (None, None) => crate::default_cifar10(default_cifar10, progress)?,
            (Some(kind), Some(path)) => Pipeline::new(self.members.apply(DatasetSpec {
                resize: self.resize,
                ..DatasetSpec::new(*kind, path.clone())
            })?),
            (Some(_), None) => {
                bail!("--dataset needs --path (the folder holding the dataset's files)")
            }
            (None, Some(_)) => bail!("--path needs --dataset"),
        };
        self.pipeline.apply(base)
    }

    /// The AVL search `--avl`, `--no-race` and `--plain` ask for.
    fn avl_options(&self) -> anyhow::Result<AvlOptions> {
        if self.plain && self.avl.is_some() {
            bail!("--plain is --avl plain --no-race: pass one or the other");
        }
        if self.plain && self.no_prune {
            bail!("--plain prunes nothing already (the paper's algorithm as published)");
        }
        if self.plain {
            return Ok(AvlOptions::plain());
        }
        Ok(TuneOptions::avl_named(
            self.avl.as_deref(),
            !self.no_race,
            !self.no_prune,
        )?)
    }

    fn options(&self, pipeline: Pipeline) -> anyhow::Result<TuneOptions> {
        let positive = |what: &str, v: f64| -> anyhow::Result<std::time::Duration> {
            if v.is_finite() && v > 0.0 {
                Ok(std::time::Duration::from_secs_f64(v))
            } else {
                bail!("{what} {v} must be a positive number of seconds")
            }
        };
        let budget_bytes = match self.budget_mem.as_deref() {
            Some(b) => Some(
                crate::parse_bytes(b)
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--budget-mem {b:?}: expected e.g. 4G or 512M"))?,
            ),
            None => None,
        };
        Ok(TuneOptions {
            pipeline,
            batch_sizes: self.batch_size.clone(),
            strategy: self.strategy.parse()?,
            budget_bytes,
            trial: TrialSpec {
                samples: self.trial_samples,
                epochs: self.trial_epochs,
                seed: self.seed,
            },
            avl: self.avl_options()?,
            final_repeats: self.final_repeats,
            final_samples: self.final_samples,
            profile: self.profile.clone(),
            retune: self.retune,
            trial_seconds: (self.trial_seconds > 0.0).then_some(self.trial_seconds),
            noise_repeats: self.noise_repeats,
            train_step: crate::step_from_ms(self.step_ms)?,
            metric: self.metric.clone(),
            trial_limit: match self.trial_timeout {
                Some(s) => crate::TrialLimit::Fixed(positive("--trial-timeout", s)?),
                None => crate::TrialLimit::DEFAULT,
            },
            space: self.space.parse()?,
        })
    }
}

pub(crate) fn run(args: Args, defaults: &super::Defaults) -> anyhow::Result<()> {
    args.remote.install()?;
    if let Some(file) = &args.replay {
        return replay(file, args.replay_seeds, args.replay_noise);
    }
    // Outputs are checked before the run, not after it.
    for out in [args.json.as_ref(), args.plot.as_ref(), args.report.as_ref()]
        .into_iter()
        .flatten()
    {
        if out.is_dir() {
            bail!("{} is a folder, not a file to write", out.display());
        }
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(p) = parent
            && !p.is_dir()
        {
            bail!("{}: folder {} does not exist", out.display(), p.display());
        }
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let progress = |m: &str| bar.set_message(m.to_owned());
    let (report, stages) = match &args.command {
        Some(cmd) => {
            // The program opens its own data: the options' pipeline is unused.
            let options = args.options(TuneOptions::default().pipeline)?;
            let report = crate::tune_command(cmd, &options, &progress)?;
            let why = "The command loads its own data: its stages are not adapt's to record.";
            let stages = report
                .runs
                .iter()
                .map(|r| crate::StagePair::missing(r.batch_size, why))
                .collect();
            (report, stages)
        }
        None => {
            let options = args.options(args.pipeline(&defaults.cifar10, &progress)?)?;
            let report = crate::tune(&options, &progress)?;
            let stages = match &args.report {
                Some(_) => crate::measure_stage_pairs(&options.pipeline, &report, &progress)?,
                None => Vec::new(),
            };
            (report, stages)
        }
    };
    bar.finish_and_clear();
    print!("{}", report.table());
    write_outputs(&report, args.json.as_ref(), args.plot.as_ref())?;
    if let Some(path) = &args.report {
        crate::write_report_html(&report, &stages, path)?;
        println!("report page: {}", path.display());
    }
    Ok(())
}

fn write_outputs(
    report: &Report,
    json: Option<&PathBuf>,
    plot: Option<&PathBuf>,
) -> anyhow::Result<()> {
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(report)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("report: {}", path.display());
    }
    if let Some(path) = plot {
        crate::write_svg(report, path)?;
        println!("plot: {}", path.display());
    }
    Ok(())
}

fn replay(file: &Path, seeds: usize, noise: f64) -> anyhow::Result<()> {
    let stats = crate::replay(file, seeds, noise)?;
    println!(
        "replay of {} over {seeds} seeds, noise ±{:.0}%",
        file.display(),
        noise * 100.0
    );
    println!(
        "{:>6} {:<14} {:>10} {:>8} {:>8} {:>6}",
        "batch", "strategy", "within 5%", "optimum", "trials", "grid"
    );
    for s in &stats {
        println!(
            "{:>6} {:<14} {:>9.0}% {:>7.0}% {:>8.1} {:>6}",
            s.batch_size,
            s.strategy,
            s.within_5_percent * 100.0,
            s.exact * 100.0,
            s.mean_trials,
            s.grid_size
        );
    }
    Ok(())
}
