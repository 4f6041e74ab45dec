//! The tuning run: per batch size, search, compare, report.

use crate::monitor::time_loader;
use crate::report::{Noise, Searches, StrategyRecord, TraceEntry};
use crate::space::Budgeted;
use crate::{
    Budget, CommandObjective, ConfigTime, KnobSpace, Knobs, LoaderObjective, Machine, Profile,
    ProfileEntry, ProfileKey, Report, RunReport, SearchCost, TrialSpec, TuneError,
};
use adapt_dataset::Dataset;
use adapt_loader::{LoaderConfig, OutputFormat};
use adapt_pipeline::{DatasetSpec, Pipeline, TransformSpec};
use adapt_search::{
    AvlOptions, Config, NoisePolicy, Objective, Outcome, Trial, avl_search, grid_search,
};
use std::path::PathBuf;
use std::sync::Arc;

/// Which searches to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The AVL search only.
    Avl,
    /// The grid only (its best is the pick).
    Grid,
    /// Both, with the paper's Table 1 comparison.
    Both,
}

/// Which dataset to tune on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetChoice {
    /// Full-size CIFAR-10 in this folder, generated in the real binary
    /// layout when absent.
    DefaultCifar10(PathBuf),
    /// A dataset by format name (`cifar10`, `celeba`, `digiface`,
    /// `imagefolder`, `celeba+digiface`) at a path.
    Named {
        /// The format name.
        kind: String,
        /// The folder (for `celeba+digiface`, a folder holding `celeba/` and `digiface/`).
        path: PathBuf,
    },
}

/// Everything a tuning run needs.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The dataset.
    pub dataset: DatasetChoice,
    /// Batch sizes, each tuned separately.
    pub batch_sizes: Vec<usize>,
    /// Searches to run.
    pub strategy: Strategy,
    /// Memory budget in bytes; `None` = half the available memory.
    pub budget_bytes: Option<u64>,
    /// Trial length.
    pub trial: TrialSpec,
    /// AVL search options.
    pub avl: AvlOptions,
    /// Repeats of the final comparison.
    pub final_repeats: usize,
    /// Samples per epoch of the final comparison; `None` = the whole
    /// dataset up to 60,000.
    pub final_samples: Option<usize>,
    /// Profile file to reuse and update.
    pub profile: Option<PathBuf>,
    /// Search again even when the profile has an entry.
    pub retune: bool,
    /// Resize every sample to (width, height) after the format's fixed
    /// steps (needed for image folders of mixed sizes).
    pub resize: Option<(u32, u32)>,
    /// The pipeline's steps; `None` for the dataset's default (its usual
    /// normalisation).
    pub transforms: Option<Vec<TransformSpec>>,
    /// The batches' type and layout.
    pub output: OutputFormat,
    /// Decode JPEGs at full size (no reduced-scale decoding).
    pub exact_decode: bool,
    /// `--command` tuning: longest a trial may run before its process
    /// group is killed and the trial fails.
    pub trial_timeout: std::time::Duration,
    /// Lengthen trials (more samples, then more epochs) until one lasts at
    /// least this many seconds; `None` keeps `trial` as given.
    pub trial_seconds: Option<f64>,
    /// Trials of one configuration measured before the search to find the
    /// trial-to-trial noise (at least 2 to measure it; 0 or 1: not
    /// measured, the noise policy keeps its fixed threshold).
    pub noise_repeats: usize,
    /// The consumer's time per batch in every trial (a training step's
    /// stand-in): the loader only has to keep ahead of it.
    pub step: Option<std::time::Duration>,
    /// `--command` tuning: the cost is the number this regular expression's
    /// first group (or whole match) finds in the program's output, its
    /// last match; `None`: the process's wall time.
    pub metric: Option<String>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            dataset: DatasetChoice::DefaultCifar10(PathBuf::from("datasets/cifar10")),
            batch_sizes: vec![128],
            strategy: Strategy::Avl,
            budget_bytes: None,
            trial: TrialSpec::default(),
            avl: AvlOptions {
                refine: true,
                noise: NoisePolicy {
                    threshold: 0.05,
                    max_repeats: 3,
                    candidates: 3,
                },
            },
            final_repeats: 5,
            final_samples: None,
            profile: None,
            retune: false,
            resize: None,
            transforms: None,
            output: OutputFormat::F32Nchw,
            exact_decode: false,
            trial_timeout: crate::command::DEFAULT_TRIAL_TIMEOUT,
            trial_seconds: Some(1.0),
            noise_repeats: 5,
            step: None,
            metric: None,
        }
    }
}

/// Progress messages (one per trial and per phase).
pub type Progress<'a> = &'a (dyn Fn(&str) + Send + Sync);

fn check_options(options: &TuneOptions) -> Result<(), TuneError> {
    if options.batch_sizes.is_empty() || options.batch_sizes.contains(&0) {
        return Err(TuneError::InvalidOption(
            "batch sizes must be at least 1".into(),
        ));
    }
    if options.final_repeats == 0 {
        return Err(TuneError::InvalidOption(
            "the final comparison needs at least one repeat".into(),
        ));
    }
    if let Some(t) = options.trial_seconds
        && !(t.is_finite() && t > 0.0)
    {
        return Err(TuneError::InvalidOption(format!(
            "trial length {t} s must be a positive number of seconds"
        )));
    }
    Ok(())
}

/// What the report and profile say about the search that ran.
fn strategy_record(options: &TuneOptions) -> StrategyRecord {
    StrategyRecord {
        search: match options.strategy {
            Strategy::Avl => "avl",
            Strategy::Grid => "grid",
            Strategy::Both => "both",
        }
        .into(),
        avl: if options.avl.refine {
            "refined"
        } else {
            "plain"
        }
        .into(),
        noise_threshold: options.avl.noise.threshold,
        threshold_source: if options.noise_repeats >= 2 && options.avl.noise.threshold > 0.0 {
            "measured"
        } else {
            "fixed"
        }
        .into(),
        noise_max_repeats: options.avl.noise.max_repeats,
        noise_candidates: options.avl.noise.candidates,
        step_ms: options.step.map_or(0.0, |d| d.as_secs_f64() * 1e3),
    }
}

/// The configurations the noise is measured on: the recommended one (where
/// most runs start) and, when it differs, the busiest worker count of the
/// space at PyTorch's default prefetch. On a machine with few cores the
/// configurations near the optimum run more threads than there are cores,
/// and those trials scatter more than a one-worker trial does: a threshold
/// measured on the recommended configuration alone was 3.5–8.5% at batch
/// 128 on 2 cores while 3–4-worker configurations differed by 20% from one
/// measurement to the next.
fn noise_probes_for(machine: &Machine, space: &KnobSpace, budget: &Budget) -> Vec<Knobs> {
    let recommended = Knobs::recommended(machine);
    let busiest = Knobs {
        num_workers: space.max_workers(),
        ..recommended
    };
    let mut probes = vec![recommended];
    if busiest != recommended && budget.check(&busiest).is_ok() {
        probes.push(busiest);
    }
    probes
}

/// Measures each probe `repeats` times, round by round (a slow drift of
/// the machine touches every probe alike): the spread of identical trials
/// is the noise any comparison must beat. Returns one `Noise` per probe
/// that ran; a probe that fails is left out.
fn measure_noise(
    measure: &mut dyn FnMut(&Knobs) -> Result<f64, TuneError>,
    probes: &[Knobs],
    repeats: usize,
    progress: Progress<'_>,
    label: &str,
) -> Vec<Noise> {
    if repeats < 2 {
        return Vec::new();
    }
    let mut seconds: Vec<Option<Vec<f64>>> = vec![Some(Vec::with_capacity(repeats)); probes.len()];
    for i in 0..repeats {
        for (k, times) in probes.iter().zip(seconds.iter_mut()) {
            let Some(v) = times else { continue };
            progress(&format!(
                "{label}: measuring the noise, {k}, trial {}/{repeats}",
                i + 1
            ));
            match measure(k) {
                Ok(s) => v.push(s),
                // A probe may not run at all (a command that fails with
                // workers): it is left out; with none left the noise stays
                // unmeasured and the policy keeps its fixed threshold. The
                // search reports failures.
                Err(e) => {
                    progress(&format!("{label}: noise not measured on {k}: {e}"));
                    *times = None;
                }
            }
        }
    }
    probes
        .iter()
        .zip(seconds)
        .filter_map(|(k, v)| v.map(|v| spread_of(*k, v)))
        .collect()
}

fn spread_of(config: Knobs, seconds: Vec<f64>) -> Noise {
    let mut sorted = seconds.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    // From five trials on, the fastest and slowest are left out: one trial
    // disturbed by something else on the machine should not set the
    // threshold for the whole search.
    let (lo, hi) = if sorted.len() >= 5 {
        (sorted[1], sorted[sorted.len() - 2])
    } else {
        (sorted[0], sorted[sorted.len() - 1])
    };
    Noise {
        config,
        seconds,
        median,
        relative_spread: (hi - lo) / median.max(1e-12),
    }
}

/// The noisiest probe's measurement: the one that sets the threshold.
fn noisiest(probes: &[Noise]) -> Option<Noise> {
    probes
        .iter()
        .max_by(|a, b| a.relative_spread.total_cmp(&b.relative_spread))
        .cloned()
}

/// The noise policy's threshold from a measured spread (at least 1%: two
/// trials never tell apart less; at most 50%).
fn measured_avl(options: &TuneOptions, noise: Option<&Noise>) -> AvlOptions {
    let mut avl = options.avl;
    if let Some(n) = noise
        && avl.noise.threshold > 0.0
    {
        avl.noise.threshold = n.relative_spread.clamp(0.01, 0.5);
    }
    avl
}

/// Tunes the loader on a dataset and returns the report.
pub fn run(options: &TuneOptions, progress: Progress<'_>) -> Result<Report, TuneError> {
    check_options(options)?;
    let (kind, path) = match &options.dataset {
        DatasetChoice::DefaultCifar10(dir) => {
            progress(&format!(
                "checking the default CIFAR-10 under {}",
                dir.display()
            ));
            if adapt_synth::ensure_cifar10(
                dir,
                adapt_synth::Cifar10Spec::default(),
                &adapt_synth::no_progress,
            )? {
                progress("generated full-size synthetic CIFAR-10 in the real binary layout");
            }
            (
                "cifar10".to_owned(),
                dir.canonicalize().unwrap_or_else(|_| dir.clone()),
            )
        }
        DatasetChoice::Named { kind, path } => (kind.clone(), path.clone()),
    };
    let pipeline = Pipeline {
        dataset: DatasetSpec {
            resize: options.resize,
            ..DatasetSpec::new(kind.clone(), path.clone())
        },
        transforms: options.transforms.clone(),
        output: options.output,
        exact_decode: options.exact_decode,
    };
    let built = pipeline.build()?;
    let dataset = built.dataset();
    let shape = built.sample_shape;
    let machine = Machine::detect();
    let space = KnobSpace::for_machine(&machine);
    // With a GPU, trials include the copy to device 0 (pin_memory then matters).
    let engine = match machine.gpu {
        Some(_) => Some(Arc::new(
            adapt_transfer::TransferEngine::new(adapt_transfer::Device::Cuda(0))
                .map_err(|e| TuneError::InvalidOption(format!("GPU found but unusable: {e}")))?,
        )),
        None => None,
    };
    // A profile entry belongs to the data, the steps and the output type.
    let fingerprint = built.identity();
    let mut profile = match &options.profile {
        Some(p) => Some(Profile::load(p)?),
        None => None,
    };
    let budget_bytes = options.budget_bytes.unwrap_or(machine.available_bytes / 2);
    let final_samples = options.final_samples.unwrap_or(60_000).min(dataset.len());
    let final_set: Arc<dyn Dataset> = Arc::new(crate::Subset::random(
        Arc::clone(&dataset),
        final_samples,
        options.trial.seed,
    ));
    let mut notes = space.notes.clone();
    if cfg!(debug_assertions) {
        notes.push("built without optimisations: timings do not represent a release build".into());
    }
    let mut runs = Vec::new();
    let mut final_epochs_used = 2;
    for &batch_size in &options.batch_sizes {
        let base = built.loader_config(LoaderConfig {
            batch_size,
            shuffle: true,
            seed: options.trial.seed,
            ..LoaderConfig::default()
        });
        let budget = Budget {
            bytes: budget_bytes,
            batch_bytes: (batch_size * shape.len() * options.output.bytes_per_value()) as u64,
        };
        let saved = match (&profile, options.retune) {
            (Some(p), false) => p
                .lookup(&fingerprint, batch_size, &machine)
                .map(|e| e.knobs),
            _ => None,
        };
        progress(&format!("batch {batch_size}: warming up"));
        let mut objective =
            LoaderObjective::new(Arc::clone(&dataset), base.clone(), options.trial)?
                .with_engine(engine.clone())
                .with_step(options.step);
        objective.warm_up()?;
        // Trials are sized on the configuration most runs would start from
        // (the recommended one); the noise is measured on it and on the
        // busiest one.
        let probe = Knobs::recommended(&machine);
        let mut noise_probes = Vec::new();
        if saved.is_none() {
            if let Some(t) = options.trial_seconds {
                progress(&format!("batch {batch_size}: sizing trials to {t} s"));
                objective.size_by_time(&probe, t)?;
            }
            noise_probes = measure_noise(
                &mut |k| objective.time(k),
                &noise_probes_for(&machine, &space, &budget),
                options.noise_repeats,
                progress,
                &format!("batch {batch_size}"),
            );
        }
        let trial = objective.spec();
        let mut objective = Budgeted {
            inner: objective,
            budget,
        };
        let step = options.step;
        // The final comparison is sized by time too: two epochs of a fast
        // pipeline last a fraction of a second, below the noise.
        let final_epochs = match options.trial_seconds {
            Some(t) => {
                let once = time_loader(&final_set, &base, &probe, 2, engine.as_deref(), step)?;
                let target = (2.0 * t).max(1.0);
                ((2.0 * target / once.max(1e-6)).ceil() as u64).clamp(2, 200)
            }
            None => 2,
        };
        final_epochs_used = final_epochs_used.max(final_epochs);
        let mut final_time = |k: &Knobs| -> Result<f64, TuneError> {
            time_loader(&final_set, &base, k, final_epochs, engine.as_deref(), step)
        };
        let run = tune_one(
            &space,
            &mut objective,
            options,
            batch_size,
            saved,
            &mut final_time,
            &machine,
            progress,
            noise_probes,
            Some(trial),
        )?;
        if let Some(p) = &mut profile {
            p.insert(ProfileEntry {
                key: ProfileKey {
                    dataset: fingerprint.clone(),
                    batch_size,
                    machine: machine.clone(),
                },
                knobs: run.adapt.config,
                seconds: run.adapt.seconds,
                cheapest: run.cheapest.as_ref().map(|c| c.config),
                strategy: Some(strategy_record(options)),
            });
        }
        runs.push(run);
    }
    if let (Some(p), Some(path)) = (&profile, &options.profile) {
        p.save(path)?;
    }
    let dataset_json = serde_json::json!({
        "kind": kind,
        "path": path.display().to_string(),
        "samples": dataset.len(),
        "shape": [shape.height, shape.width, shape.channels],
        "fingerprint": built.fingerprint,
        "pipeline": built.describe(&pipeline),
    });
    Ok(Report {
        machine,
        dataset: dataset_json,
        trial: options.trial,
        budget_bytes,
        final_repeats: options.final_repeats,
        final_samples,
        final_epochs: final_epochs_used,
        notes,
        strategy: strategy_record(options),
        runs,
    })
}

/// Tunes an external command by its wall time (`CommandObjective`); the
/// batch size in the report is 0.
pub fn tune_command(
    template: &str,
    options: &TuneOptions,
    progress: Progress<'_>,
) -> Result<Report, TuneError> {
    if options.final_repeats == 0 {
        return Err(TuneError::InvalidOption(
            "the final comparison needs at least one repeat".into(),
        ));
    }
    if ![
        "{num_workers}",
        "{prefetch_factor}",
        "{pin_memory}",
        "{persistent_workers}",
    ]
    .iter()
    .any(|p| template.contains(p))
    {
        return Err(TuneError::InvalidOption(
            "the command uses none of {num_workers} {prefetch_factor} {pin_memory} {persistent_workers}".into(),
        ));
    }
    let machine = Machine::detect();
    let space = KnobSpace::for_machine(&machine);
    // No batch bytes are known for an external program: the budget cannot prune.
    let budget = Budget {
        bytes: u64::MAX,
        batch_bytes: 0,
    };
    let command = |t: &str| -> Result<CommandObjective, TuneError> {
        let c = CommandObjective::new(t).with_timeout(options.trial_timeout);
        match &options.metric {
            Some(m) => c.with_metric(m),
            None => Ok(c),
        }
    };
    let mut objective = Budgeted {
        inner: command(template)?,
        budget,
    };
    let mut finals = command(template)?;
    let mut final_time = |k: &Knobs| -> Result<f64, TuneError> {
        finals
            .measure(&space.config(k))
            .map_err(|e| TuneError::NothingMeasured(e.to_string()))
    };
    let noise = measure_noise(
        &mut |k| final_time(k),
        &noise_probes_for(&machine, &space, &budget),
        options.noise_repeats,
        progress,
        "command",
    );
    let run = tune_one(
        &space,
        &mut objective,
        options,
        0,
        None,
        &mut final_time,
        &machine,
        progress,
        noise,
        None,
    )?;
    Ok(Report {
        machine,
        dataset: serde_json::json!({ "command": template }),
        trial: options.trial,
        budget_bytes: budget.bytes,
        final_repeats: options.final_repeats,
        final_samples: 0,
        final_epochs: 1,
        notes: space.notes.clone(),
        strategy: strategy_record(options),
        runs: vec![run],
    })
}

fn trace_entries(strategy: &str, trace: &[Trial]) -> Vec<TraceEntry> {
    trace
        .iter()
        .map(|t| {
            let (seconds, note) = match &t.outcome {
                Outcome::Cost { cost } => (Some(*cost), None),
                Outcome::Infeasible { reason } => (None, Some(format!("infeasible: {reason}"))),
                Outcome::Failed { message } => (None, Some(format!("failed: {message}"))),
            };
            TraceEntry {
                strategy: strategy.into(),
                config: KnobSpace::knobs(&t.config),
                seconds,
                note,
                repeat: t.repeat,
            }
        })
        .collect()
}

/// A progress-reporting wrapper around an objective.
struct Reporting<'a, O> {
    inner: &'a mut O,
    label: String,
    count: usize,
    progress: Progress<'a>,
}

impl<O: Objective> Objective for Reporting<'_, O> {
    fn feasible(&self, config: &Config) -> Result<(), String> {
        self.inner.feasible(config)
    }
    fn measure(&mut self, config: &Config) -> Result<f64, adapt_search::TrialError> {
        self.count += 1;
        let r = self.inner.measure(config);
        let shown = match &r {
            Ok(s) => format!("{s:.4} s"),
            Err(e) => format!("failed: {e}"),
        };
        (self.progress)(&format!(
            "{} trial {}: {} → {shown}",
            self.label,
            self.count,
            KnobSpace::knobs(config)
        ));
        r
    }
}

#[allow(clippy::too_many_arguments)]
fn tune_one<O: Objective>(
    space: &KnobSpace,
    objective: &mut O,
    options: &TuneOptions,
    batch_size: usize,
    saved: Option<Knobs>,
    final_time: &mut dyn FnMut(&Knobs) -> Result<f64, TuneError>,
    machine: &Machine,
    progress: Progress<'_>,
    noise_probes: Vec<Noise>,
    trial: Option<TrialSpec>,
) -> Result<RunReport, TuneError> {
    let noise = noisiest(&noise_probes);
    let avl_options = measured_avl(options, noise.as_ref());
    let all = space.space().configurations();
    let infeasible: Vec<String> = all
        .iter()
        .filter_map(|c| objective.feasible(c).err())
        .collect();
    if infeasible.len() == all.len() {
        let reason = infeasible.first().cloned().unwrap_or_default();
        return Err(TuneError::NothingMeasured(format!(
            "every configuration is infeasible ({reason})"
        )));
    }
    let pruned = infeasible.len();
    let mut trace = Vec::new();
    let mut searches = Searches::default();
    let mut avl_path = Vec::new();
    let (mut pick, mut source) = (saved, "profile");
    if pick.is_none() && options.strategy != Strategy::Grid {
        let mut rep = Reporting {
            inner: &mut *objective,
            label: format!("batch {batch_size} avl"),
            count: 0,
            progress,
        };
        let r = avl_search(space.space(), &mut rep, &avl_options);
        trace.extend(trace_entries("avl", &r.trace));
        avl_path = r.path.iter().map(|s| KnobSpace::knobs(&s.config)).collect();
        searches.avl = Some(SearchCost {
            trials: r.trials,
            seconds: r.wall.as_secs_f64(),
        });
        let best = r
            .best
            .ok_or_else(|| TuneError::NothingMeasured(failure_summary(&r.trace)))?;
        pick = Some(KnobSpace::knobs(&best));
        source = "avl";
    }
    // `both`: the paper's algorithm as published, beside the refined one.
    let mut plain_pick = None;
    if options.strategy == Strategy::Both && saved.is_none() {
        let mut rep = Reporting {
            inner: &mut *objective,
            label: format!("batch {batch_size} plain avl"),
            count: 0,
            progress,
        };
        let r = avl_search(space.space(), &mut rep, &AvlOptions::plain());
        trace.extend(trace_entries("avl-plain", &r.trace));
        searches.avl_plain = Some(SearchCost {
            trials: r.trials,
            seconds: r.wall.as_secs_f64(),
        });
        plain_pick = r.best.as_ref().map(KnobSpace::knobs);
    }
    let mut grid_ranked = Vec::new();
    let mut optimal = None;
    let mut grid = None;
    if options.strategy != Strategy::Avl {
        let mut rep = Reporting {
            inner: &mut *objective,
            label: format!("batch {batch_size} grid"),
            count: 0,
            progress,
        };
        let g = grid_search(space.space(), &mut rep);
        trace.extend(trace_entries("grid", &g.trace));
        searches.grid = Some(SearchCost {
            trials: g.trials,
            seconds: g.wall.as_secs_f64(),
        });
        let (best, _) = g
            .best()
            .ok_or_else(|| TuneError::NothingMeasured(failure_summary(&g.trace)))?;
        optimal = Some(KnobSpace::knobs(best));
        if pick.is_none() {
            pick = optimal;
            source = "grid";
        }
        grid_ranked = g
            .ranked
            .iter()
            .map(|(c, s)| ConfigTime {
                config: KnobSpace::knobs(c),
                seconds: *s,
            })
            .collect();
        grid = Some(g);
    }
    if let (Some(a), Some(g)) = (&searches.avl, &searches.grid) {
        searches.grid_over_avl = Some(g.seconds / a.seconds.max(1e-9));
    }
    let pick = pick.ok_or_else(|| TuneError::NothingMeasured("no search ran".into()))?;
    let recommended = Knobs::recommended(machine);
    let cheapest = cheapest_within(
        &trace,
        avl_options
            .noise
            .threshold
            .max(noise.as_ref().map_or(0.0, |n| n.relative_spread)),
    );
    // The final comparison: every contender measured again, interleaved, medians.
    let mut contenders = vec![Knobs::DEFAULT, recommended, pick];
    let slot = |contenders: &mut Vec<Knobs>, k: Option<Knobs>| {
        k.map(|k| {
            contenders.push(k);
            contenders.len() - 1
        })
    };
    let optimal_at = slot(&mut contenders, optimal);
    let plain_at = slot(&mut contenders, plain_pick);
    let cheapest_at = slot(&mut contenders, cheapest);
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut failures = Vec::new();
    for rep in 0..options.final_repeats {
        for (i, k) in contenders.iter().enumerate() {
            progress(&format!(
                "batch {batch_size} final comparison {}/{}: {k}",
                rep + 1,
                options.final_repeats
            ));
            // A contender that fails here (the recommended values may not
            // run at all) is reported with an infinite time, not fatal.
            times[i].push(final_time(k).unwrap_or_else(|e| {
                failures.push(format!("{k} failed in the final comparison: {e}"));
                f64::INFINITY
            }));
        }
    }
    failures.dedup();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let secs: Vec<f64> = times.iter_mut().map(median).collect();
    let ct = |i: usize| ConfigTime {
        config: contenders[i],
        seconds: secs[i],
    };
    let adapt = ct(2);
    let rank = grid.as_ref().and_then(|g| g.rank_of(&space.config(&pick)));
    let optimal_ct = optimal_at.map(ct);
    let plain_rank =
        plain_pick.and_then(|p| grid.as_ref().and_then(|g| g.rank_of(&space.config(&p))));
    trace.splice(
        0..0,
        noise_probes.iter().flat_map(|n| {
            n.seconds.iter().map(|&s| TraceEntry {
                strategy: "noise".into(),
                config: n.config,
                seconds: Some(s),
                note: None,
                repeat: 1,
            })
        }),
    );
    Ok(RunReport {
        batch_size,
        default: ct(0),
        recommended: ct(1),
        adapt_over_optimal: optimal_ct.as_ref().map(|o| adapt.seconds / o.seconds),
        optimal: optimal_ct,
        speedup_vs_default: secs[0] / adapt.seconds,
        speedup_vs_recommended: secs[1] / adapt.seconds,
        adapt,
        adapt_source: source.into(),
        adapt_rank: rank,
        grid_size: all.len(),
        pruned,
        search: searches,
        grid: grid_ranked,
        avl_path,
        trace,
        failures,
        trial,
        noise,
        noise_probes,
        cheapest: cheapest_at.map(ct),
        plain: plain_at.map(ct),
        plain_rank,
    })
}

/// The cheapest configuration among the search's measurements whose time
/// (median over its repeats) is within `noise` (relative) of the best:
/// fewest worker threads, then fewest batches in memory, then without
/// pinned memory, then without persistent workers.
fn cheapest_within(trace: &[TraceEntry], noise: f64) -> Option<Knobs> {
    let mut by_config: Vec<(Knobs, Vec<f64>)> = Vec::new();
    for t in trace {
        let Some(s) = t.seconds else { continue };
        match by_config.iter_mut().find(|(k, _)| *k == t.config) {
            Some((_, v)) => v.push(s),
            None => by_config.push((t.config, vec![s])),
        }
    }
    let medians: Vec<(Knobs, f64)> = by_config
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            (k, v[v.len() / 2])
        })
        .collect();
    let best = medians.iter().map(|m| m.1).min_by(f64::total_cmp)?;
    medians
        .into_iter()
        .filter(|(_, s)| *s <= best * (1.0 + noise))
        .map(|(k, _)| k)
        .min_by_key(|k| {
            (
                k.num_workers,
                k.batches_in_memory(),
                k.pin_memory,
                k.persistent_workers,
            )
        })
}

fn failure_summary(trace: &[Trial]) -> String {
    trace
        .iter()
        .find_map(|t| match &t.outcome {
            Outcome::Failed { message } => Some(format!("e.g. {message}")),
            Outcome::Infeasible { reason } => Some(format!("e.g. infeasible: {reason}")),
            Outcome::Cost { .. } => None,
        })
        .unwrap_or_else(|| "no trial ran".into())
}

#[cfg(test)]
mod tests {
    use super::{cheapest_within, measure_noise, noise_probes_for, noisiest};
    use crate::report::TraceEntry;
    use crate::{Budget, KnobSpace, Knobs, Machine, TuneError};

    #[test]
    fn noise_is_measured_round_by_round_and_a_failing_probe_is_left_out() {
        let one = Knobs {
            num_workers: 1,
            ..Knobs::DEFAULT
        };
        let four = Knobs {
            num_workers: 4,
            ..Knobs::DEFAULT
        };
        let mut order = Vec::new();
        let mut measure = |k: &Knobs| -> Result<f64, TuneError> {
            order.push(k.num_workers);
            Ok(if k.num_workers == 1 {
                1.0
            } else {
                [1.0, 1.5, 1.2][order.len() / 2 - 1]
            })
        };
        let probes = measure_noise(&mut measure, &[one, four], 3, &|_| {}, "t");
        assert_eq!(order, [1, 4, 1, 4, 1, 4], "interleaved");
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[0].relative_spread, 0.0);
        assert!((probes[1].relative_spread - 0.5 / 1.2).abs() < 1e-12);
        assert_eq!(noisiest(&probes).map(|n| n.config), Some(four));
        // A probe that fails is dropped from then on; the others stay.
        let mut calls = 0;
        let mut failing = |k: &Knobs| -> Result<f64, TuneError> {
            calls += 1;
            if k.num_workers == 4 {
                Err(TuneError::InvalidOption("no workers here".into()))
            } else {
                Ok(1.0)
            }
        };
        let probes = measure_noise(&mut failing, &[one, four], 3, &|_| {}, "t");
        assert!(measure_noise(&mut failing, &[one], 1, &|_| {}, "t").is_empty());
        assert_eq!(
            calls, 4,
            "the failed probe ran once, one repeat is no measurement"
        );
        assert_eq!(probes.len(), 1);
        assert_eq!(probes[0].config, one);
    }

    #[test]
    fn the_busiest_probe_uses_every_worker_the_space_allows_within_the_budget() {
        let machine = Machine {
            cores: 2,
            ..Machine::detect()
        };
        let space = KnobSpace::for_machine(&machine);
        let roomy = Budget {
            bytes: u64::MAX,
            batch_bytes: 1,
        };
        let probes = noise_probes_for(&machine, &space, &roomy);
        assert_eq!(probes[0], Knobs::recommended(&machine));
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[1].num_workers, 4);
        assert_eq!(probes[1].prefetch_factor, 2);
        // 4 workers x 2 batches + 1 do not fit in 4 batches' bytes.
        let tight = Budget {
            bytes: 4,
            batch_bytes: 1,
        };
        assert_eq!(noise_probes_for(&machine, &space, &tight).len(), 1);
    }

    fn entry(w: usize, p: usize, s: f64) -> TraceEntry {
        TraceEntry {
            strategy: "avl".into(),
            config: Knobs {
                num_workers: w,
                prefetch_factor: p,
                pin_memory: false,
                persistent_workers: w > 0,
            },
            seconds: Some(s),
            note: None,
            repeat: 1,
        }
    }

    #[test]
    fn the_cheapest_within_the_noise_wins() {
        let trace = [
            entry(4, 8, 1.00),
            entry(2, 2, 1.03),
            entry(1, 2, 1.30),
            entry(2, 8, 1.02),
        ];
        // Within 5%: 4/8, 2/2, 2/8 → two workers, fewer batches in memory.
        let c = cheapest_within(&trace, 0.05).unwrap_or(Knobs::DEFAULT);
        assert_eq!((c.num_workers, c.prefetch_factor), (2, 2));
        // Within 1%: only the fastest.
        let c = cheapest_within(&trace, 0.01).unwrap_or(Knobs::DEFAULT);
        assert_eq!(c.num_workers, 4);
        // Repeats count by their median; failed trials not at all.
        let mut t = trace.to_vec();
        t.push(entry(1, 2, 0.99));
        t.push(entry(1, 2, 2.0));
        t.push(TraceEntry {
            seconds: None,
            ..entry(0, 2, 0.0)
        });
        let c = cheapest_within(&t, 0.05).unwrap_or(Knobs::DEFAULT);
        assert_eq!(c.num_workers, 2);
        assert!(cheapest_within(&[], 0.05).is_none());
    }
}
