//! `cargo xtask tune`: the main job. With no argument it tunes the loader on
//! full-size CIFAR-10 under `datasets/cifar10` (generated if absent) at
//! batch size 128 with the AVL search.

use adapt_search::{AvlOptions, NoisePolicy};
use adapt_tune::{DatasetChoice, Report, Strategy, TrialSpec, TuneOptions};
use anyhow::{Context, bail};
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// cifar10, celeba, digiface, celeba+digiface or imagefolder (default:
    /// the embedded CIFAR-10).
    #[arg(long)]
    dataset: Option<String>,
    /// The folder holding the dataset's files.
    #[arg(long)]
    path: Option<PathBuf>,
    /// Resize every sample to WIDTHxHEIGHT (image folders of mixed sizes).
    #[arg(long, value_parser = crate::inspect::parse_size)]
    resize: Option<(u32, u32)>,
    #[command(flatten)]
    pipeline: crate::inspect::PipelineArgs,
    #[command(flatten)]
    remote: crate::remote_args::RemoteArgs,
    /// Batch sizes, comma-separated, each tuned separately.
    #[arg(long, value_delimiter = ',', default_value = "128")]
    batch_size: Vec<usize>,
    /// avl, grid or both (both reproduces the paper's Table 1).
    #[arg(long, value_enum, default_value = "avl")]
    strategy: StrategyArg,
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
    /// The paper's plain algorithm: no refinement, no re-measuring.
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
    /// group) is ended and counted as failed.
    #[arg(long, default_value_t = 3600.0)]
    trial_timeout: f64,
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

#[derive(Clone, Copy, clap::ValueEnum)]
enum StrategyArg {
    Avl,
    Grid,
    Both,
}

fn parse_bytes(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => bail!("unknown unit in {s:?} (use K, M, G or T)"),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: f64 = num
        .parse()
        .with_context(|| format!("memory budget {s:?}"))?;
    if !(n.is_finite() && n > 0.0) {
        bail!("memory budget {s:?} must be positive");
    }
    Ok((n * mult as f64) as u64)
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    args.remote.install()?;
    if let Some(file) = &args.replay {
        return replay(file, args.replay_seeds, args.replay_noise);
    }
    let dataset = match (&args.dataset, &args.path) {
        (None, None) => DatasetChoice::DefaultCifar10(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../datasets/cifar10"
        ))),
        (Some(kind), Some(path)) => DatasetChoice::Named {
            kind: kind.clone(),
            path: path.clone(),
        },
        (Some(_), None) => bail!("--dataset needs --path (the folder holding the dataset's files)"),
        (None, Some(_)) => bail!("--path needs --dataset"),
    };
    let options = TuneOptions {
        dataset,
        batch_sizes: args.batch_size.clone(),
        strategy: match args.strategy {
            StrategyArg::Avl => Strategy::Avl,
            StrategyArg::Grid => Strategy::Grid,
            StrategyArg::Both => Strategy::Both,
        },
        budget_bytes: args.budget_mem.as_deref().map(parse_bytes).transpose()?,
        trial: TrialSpec {
            samples: args.trial_samples,
            epochs: args.trial_epochs,
            seed: args.seed,
        },
        avl: if args.plain {
            AvlOptions::plain()
        } else {
            TuneOptions::default().avl
        },
        final_repeats: args.final_repeats,
        final_samples: args.final_samples,
        profile: args.profile.clone(),
        retune: args.retune,
        resize: args.resize,
        transforms: args
            .pipeline
            .transform
            .as_deref()
            .map(adapt_pipeline::parse_transforms)
            .transpose()?,
        output: args
            .pipeline
            .output
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?,
        exact_decode: args.pipeline.exact_decode,
        trial_seconds: (args.trial_seconds > 0.0).then_some(args.trial_seconds),
        noise_repeats: args.noise_repeats,
        step: match args.step_ms {
            Some(ms) if ms.is_finite() && ms >= 0.0 => {
                Some(std::time::Duration::from_secs_f64(ms / 1e3))
            }
            Some(ms) => bail!("--step-ms {ms} must be a non-negative number"),
            None => None,
        },
        metric: args.metric.clone(),
        trial_timeout: if args.trial_timeout.is_finite() && args.trial_timeout > 0.0 {
            std::time::Duration::from_secs_f64(args.trial_timeout)
        } else {
            bail!(
                "--trial-timeout {} must be a positive number of seconds",
                args.trial_timeout
            )
        },
    };
    // Outputs are checked before the run, not after it.
    for out in [args.json.as_ref(), args.plot.as_ref()]
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
    let report = match &args.command {
        Some(cmd) => adapt_tune::tune_command(cmd, &options, &progress)?,
        None => adapt_tune::run(&options, &progress)?,
    };
    bar.finish_and_clear();
    print!("{}", report.table());
    write_outputs(&report, args.json.as_ref(), args.plot.as_ref())
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
        adapt_tune::write_svg(report, path)?;
        println!("plot: {}", path.display());
    }
    Ok(())
}

fn replay(file: &PathBuf, seeds: usize, noise: f64) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a tune report", file.display()))?;
    let strategies = [
        ("plain", AvlOptions::plain()),
        (
            "refined",
            AvlOptions {
                refine: true,
                noise: NoisePolicy::OFF,
            },
        ),
        ("refined+race", {
            // The threshold the live tuner would measure on this noise:
            // the trimmed range of 5 trials of a uniform ±noise is 2/3 of
            // it on average (the default 5% without noise).
            let mut avl = TuneOptions::default().avl;
            if noise > 0.0 {
                avl.noise.threshold = (noise * 2.0 / 3.0).clamp(0.01, 0.5);
            }
            avl
        }),
    ];
    let stats = adapt_tune::replay(&report, &strategies, seeds, noise)?;
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
