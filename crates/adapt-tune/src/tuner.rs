//! The tuning run: per batch size, size the trials, measure the noise,
//! search, compare, report; and the same over an external command.

use crate::compare::{Contenders, cheapest_within};
use crate::monitor::time_loader;
use crate::noise::{measure_noise, measured_avl, noise_probes_for, noisiest};
use crate::options::{Progress, TuneOptions};
use crate::report::{Noise, TraceEntry};
use crate::search::{SearchPlan, run_searches};
use crate::space::Budgeted;
use crate::{
    Budget, CommandObjective, KnobSpace, LoaderKnobs, LoaderObjective, Machine, Profile,
    ProfileEntry, ProfileKey, Report, RunReport, TrialSpec, TuneError,
};
use adapt_dataset::Dataset;
use adapt_loader::LoaderConfig;
use adapt_pipeline::Built;
use adapt_search::Objective;
use adapt_transfer::TransferEngine;
use std::sync::Arc;

/// What every batch size's tuning shares.
pub(crate) struct TuneContext<'a> {
    pub(crate) options: &'a TuneOptions,
    pub(crate) machine: Machine,
    pub(crate) space: KnobSpace,
    pub(crate) progress: Progress<'a>,
}

impl<'a> TuneContext<'a> {
    pub(crate) fn new(options: &'a TuneOptions, progress: Progress<'a>) -> Self {
        let machine = Machine::detect();
        let space = KnobSpace::of_kind(options.space, &machine);
        Self {
            options,
            machine,
            space,
            progress,
        }
    }

    /// The accelerator is the one the caller's loader sees (torch's), not
    /// the transfer engine's probe: the space follows it.
    pub(crate) fn set_gpu(&mut self, gpu: Option<String>) {
        self.machine.gpu = gpu;
        self.space = KnobSpace::of_kind(self.options.space, &self.machine);
    }

    /// The report's notes: knobs fixed for lack of hardware.
    pub(crate) fn notes(&self) -> Vec<String> {
        self.space.notes.clone()
    }
}

/// One batch size, measured before its search: the saved pick, the noise
/// probes and the trial as sized.
pub(crate) struct Prepared {
    pub(crate) batch_size: usize,
    pub(crate) saved: Option<LoaderKnobs>,
    pub(crate) noise_probes: Vec<Noise>,
    pub(crate) trial: Option<TrialSpec>,
}

/// The data a loader tuning run times.
struct TunedData<'a> {
    built: &'a Built,
    final_set: Arc<dyn Dataset>,
    engine: Option<Arc<TransferEngine>>,
    budget_bytes: u64,
}

/// Tunes the loader on `options.pipeline` and returns the report.
pub fn run(options: &TuneOptions, progress: Progress<'_>) -> Result<Report, TuneError> {
    options.check()?;
    let pipeline = &options.pipeline;
    let built = pipeline.build()?;
    let ctx = TuneContext::new(options, progress);
    // With a GPU, trials include the copy to device 0 (pin_memory then matters).
    let engine = match ctx.machine.gpu {
        Some(_) => Some(Arc::new(TransferEngine::new(
            adapt_transfer::Device::Cuda(0),
        )?)),
        None => None,
    };
    // A profile entry belongs to the data, the steps and the output type.
    let identity = built.identity();
    let mut profile = match &options.profile {
        Some(p) => Some(Profile::load(p)?),
        None => None,
    };
    let dataset = built.dataset();
    let final_samples = options.final_samples.unwrap_or(60_000).min(dataset.len());
    let data = TunedData {
        built: &built,
        final_set: Arc::new(crate::Subset::random(
            Arc::clone(&dataset),
            final_samples,
            options.trial.seed,
        )),
        engine,
        budget_bytes: options
            .budget_bytes
            .unwrap_or(ctx.machine.available_bytes / 2),
    };
    let mut runs = Vec::new();
    let mut final_epochs = 2;
    for &batch_size in &options.batch_sizes {
        let saved = match (&profile, options.retune) {
            (Some(p), false) => p
                .lookup(&identity, batch_size, &ctx.machine)
                .map(|e| e.knobs),
            _ => None,
        };
        let (run, epochs) = tune_batch(&ctx, &data, batch_size, saved)?;
        final_epochs = final_epochs.max(epochs);
        if let Some(p) = &mut profile {
            p.insert(profile_entry(&ctx, &identity, &run));
        }
        runs.push(run);
    }
    if let (Some(p), Some(path)) = (&profile, &options.profile) {
        p.save(path)?;
    }
    let shape = built.sample_shape;
    let mut notes = ctx.notes();
    if cfg!(debug_assertions) {
        notes.push("built without optimisations: timings do not represent a release build".into());
    }
    Ok(Report {
        dataset: serde_json::json!({
            "kind": pipeline.dataset.kind,
            "path": pipeline.dataset.path.display().to_string(),
            "samples": dataset.len(),
            "shape": [shape.height, shape.width, shape.channels],
            "fingerprint": built.fingerprint,
            "pipeline": built.describe(pipeline),
        }),
        machine: ctx.machine,
        trial: options.trial,
        budget_bytes: data.budget_bytes,
        final_repeats: options.final_repeats,
        final_samples,
        final_epochs,
        notes,
        strategy: options.record(),
        runs,
    })
}

/// The profile entry a batch size's run leaves: its pick, keyed by the
/// pipeline's identity, the batch size and the machine.
pub(crate) fn profile_entry(
    ctx: &TuneContext<'_>,
    identity: &str,
    run: &RunReport,
) -> ProfileEntry {
    ProfileEntry {
        key: ProfileKey {
            dataset: identity.to_owned(),
            batch_size: run.batch_size,
            machine: ctx.machine.clone(),
        },
        knobs: run.adapt.config,
        seconds: run.adapt.seconds,
        cheapest: run.cheapest.as_ref().map(|c| c.config),
        strategy: Some(ctx.options.record()),
    }
}

/// One batch size of a loader run: warm up, size the trials, measure the
/// noise, search and compare. Returns the run's report and the epochs of
/// its final comparison.
fn tune_batch(
    ctx: &TuneContext<'_>,
    data: &TunedData<'_>,
    batch_size: usize,
    saved: Option<LoaderKnobs>,
) -> Result<(RunReport, u64), TuneError> {
    let (options, progress) = (ctx.options, ctx.progress);
    let base = data.built.loader_config(LoaderConfig {
        batch_size,
        shuffle: true,
        seed: options.trial.seed,
        ..LoaderConfig::default()
    });
    let budget = Budget {
        bytes: data.budget_bytes,
        batch_bytes: (batch_size
            * data.built.sample_shape.len()
            * data.built.output.bytes_per_value()) as u64,
    };
    progress(&format!("batch {batch_size}: warming up"));
    let mut objective = LoaderObjective::new(data.built.dataset(), base.clone(), options.trial)?
        .with_engine(data.engine.clone())
        .with_train_step(options.train_step);
    objective.warm_up()?;
    // Trials are sized on the configuration most runs would start from
    // (the recommended one); the noise is measured on it and on the
    // busiest one.
    let probe = crate::recommended_knobs(&ctx.machine);
    let mut noise_probes = Vec::new();
    if saved.is_none() {
        if let Some(t) = options.trial_seconds {
            progress(&format!("batch {batch_size}: sizing trials to {t} s"));
            objective.size_by_time(&probe, t)?;
        }
        noise_probes = measure_noise(
            &mut |k| objective.time(k),
            &noise_probes_for(&ctx.machine, &ctx.space, &budget),
            options.noise_repeats,
            progress,
            &format!("batch {batch_size}"),
        );
    }
    let trial = Some(objective.spec());
    let mut objective = Budgeted {
        inner: objective,
        budget,
    };
    let (engine, step) = (data.engine.as_deref(), options.train_step);
    // The final comparison is sized by time too: two epochs of a fast
    // pipeline last a fraction of a second, below the noise.
    let final_epochs = match options.trial_seconds {
        Some(t) => {
            let once = time_loader(&data.final_set, &base, &probe, 2, engine, step)?;
            let target = (2.0 * t).max(1.0);
            ((2.0 * target / once.max(1e-6)).ceil() as u64).clamp(2, 200)
        }
        None => 2,
    };
    let mut final_time = |_: &mut _, k: &LoaderKnobs| -> Result<f64, TuneError> {
        time_loader(&data.final_set, &base, k, final_epochs, engine, step)
    };
    let prepared = Prepared {
        batch_size,
        saved,
        noise_probes,
        trial,
    };
    let run = tune_one(ctx, &mut objective, prepared, &mut final_time)?;
    Ok((run, final_epochs))
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
    let placeholders = crate::command::placeholders();
    if !placeholders.iter().any(|p| template.contains(p.as_str())) {
        return Err(TuneError::InvalidOption(format!(
            "the command uses none of {}",
            placeholders.join(" ")
        )));
    }
    let ctx = TuneContext::new(options, progress);
    // No batch bytes are known for an external program: the budget cannot prune.
    let budget = Budget {
        bytes: u64::MAX,
        batch_bytes: 0,
    };
    let command = CommandObjective::new(template).with_limit(options.trial_limit);
    let command = match &options.metric {
        Some(m) => command.with_metric(m)?,
        None => command,
    };
    // The search's and the final comparison's trials share one record of
    // the slowest finished trial, which a measured limit follows.
    let mut finals = command.clone();
    let mut objective = Budgeted {
        inner: command,
        budget,
    };
    let space = ctx.space.clone();
    let mut measure = |k: &LoaderKnobs| -> Result<f64, TuneError> {
        finals
            .measure(&space.config(k))
            .map_err(|e| TuneError::Trial(e.to_string()))
    };
    let noise_probes = measure_noise(
        &mut measure,
        &noise_probes_for(&ctx.machine, &ctx.space, &budget),
        options.noise_repeats,
        progress,
        "command",
    );
    let prepared = Prepared {
        batch_size: 0,
        saved: None,
        noise_probes,
        trial: None,
    };
    let run = tune_one(&ctx, &mut objective, prepared, &mut |_, k| measure(k))?;
    let mut notes = ctx.space.notes.clone();
    notes.push(objective.inner.describe_limit());
    Ok(Report {
        dataset: serde_json::json!({
            "command": template,
            "metric": options.metric,
            "trial_limit_seconds": objective.inner.limit_now().as_secs_f64(),
        }),
        trial: options.trial,
        budget_bytes: budget.bytes,
        final_repeats: options.final_repeats,
        final_samples: 0,
        final_epochs: 1,
        notes,
        strategy: options.record(),
        runs: vec![run],
        machine: ctx.machine,
    })
}

/// Searches one batch size (or the command), compares the contenders and
/// writes its report. `final_time` measures a contender of the final
/// comparison; it may go through the search's objective.
pub(crate) fn tune_one<O: Objective>(
    ctx: &TuneContext<'_>,
    objective: &mut O,
    prepared: Prepared,
    final_time: &mut dyn FnMut(&mut O, &LoaderKnobs) -> Result<f64, TuneError>,
) -> Result<RunReport, TuneError> {
    let Prepared {
        batch_size,
        saved,
        noise_probes,
        trial,
    } = prepared;
    let noise = noisiest(&noise_probes);
    let avl = measured_avl(ctx.options.avl, noise.as_ref().map(|n| n.relative_spread));
    let all = ctx.space.space().configurations();
    let infeasible = infeasible_count(objective, &all)?;
    let plan = SearchPlan {
        strategy: ctx.options.strategy,
        avl,
        saved,
        before: crate::noise::priors(&ctx.space, &noise_probes),
        label: format!("batch {batch_size}"),
        progress: ctx.progress,
    };
    let found = run_searches(&ctx.space, objective, &plan)?;
    let avl = plan.avl;
    let margin = avl
        .noise
        .threshold
        .max(noise.as_ref().map_or(0.0, |n| n.relative_spread));
    let contenders = Contenders {
        default: LoaderKnobs::DEFAULT,
        recommended: crate::recommended_knobs(&ctx.machine),
        adapt: found.pick,
        optimal: found.optimal,
        other: found.other,
        cheapest: cheapest_within(&found.trace, margin),
    };
    let c = contenders.compare(
        ctx.options.final_repeats,
        &mut |k| final_time(objective, k),
        &plan.label,
        ctx.progress,
    );
    let mut trace = noise_trace(&noise_probes);
    trace.extend(found.trace.iter().cloned());
    Ok(RunReport {
        batch_size,
        adapt_over_optimal: c.optimal.as_ref().map(|o| c.adapt.seconds / o.seconds),
        speedup_vs_default: crate::report::speedup(c.default.seconds, c.adapt.seconds),
        speedup_vs_recommended: crate::report::speedup(c.recommended.seconds, c.adapt.seconds),
        adapt_picked_by: found.picked_by.name().into(),
        adapt_rank: found.grid_rank(&ctx.space, Some(found.pick)),
        other_rank: found.grid_rank(&ctx.space, found.other),
        other_avl: found
            .other
            .map(|_| crate::options::descent_name(&crate::search::other_avl(&avl)).to_string()),
        grid_size: all.len(),
        pruned: infeasible,
        grid: found.grid_ranked(),
        search: found.costs,
        avl_path: found.avl_path,
        default: c.default,
        recommended: c.recommended,
        adapt: c.adapt,
        optimal: c.optimal,
        cheapest: c.cheapest,
        other: c.other,
        failures: c.failures,
        trace,
        trial,
        noise,
        noise_probes,
    })
}

/// How many of `all` the objective rules out before running; an error
/// when it rules out every one.
fn infeasible_count<O: Objective>(
    objective: &O,
    all: &[adapt_search::Config],
) -> Result<usize, TuneError> {
    let reasons: Vec<String> = all
        .iter()
        .filter_map(|c| objective.feasible(c).err())
        .collect();
    if reasons.len() == all.len() {
        let reason = reasons.first().cloned().unwrap_or_default();
        return Err(TuneError::NothingMeasured(format!(
            "every configuration is infeasible ({reason})"
        )));
    }
    Ok(reasons.len())
}

/// The noise trials as trace entries (they open the trace).
fn noise_trace(probes: &[Noise]) -> Vec<TraceEntry> {
    probes
        .iter()
        .flat_map(|n| {
            n.seconds.iter().map(|&s| TraceEntry {
                strategy: "noise".into(),
                config: n.config,
                seconds: Some(s),
                note: None,
                repeat: 1,
            })
        })
        .collect()
}
