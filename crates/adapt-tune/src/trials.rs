//! Tuning a loader the tuner does not build — PyTorch's own DataLoader in
//! the caller's process, say: the caller runs each trial it is asked for,
//! the tuner sizes the trials, measures the noise, searches, races and
//! compares exactly as it does for its own loader.

use crate::monitor::size_trial;
use crate::options::{Progress, TuneOptions};
use crate::space::Budgeted;
use crate::tuner::{Prepared, TuneContext, tune_one};
use crate::{Budget, LoaderKnobs, Profile, Report, TrialSpec, TuneError};
use adapt_search::{Config, Measured, Objective, TrialError};

/// Why a trial is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrialPurpose {
    /// One pass without workers before anything is timed (page cache,
    /// allocator, imports); its time is thrown away.
    WarmUp,
    /// Finding the trial length that lasts about the asked seconds.
    Sizing,
    /// Repeats of one configuration that measure the noise.
    Noise,
    /// A trial of the search (AVL, plain AVL or grid).
    Search,
    /// A measurement of the final comparison.
    Final,
}

impl TrialPurpose {
    /// The name a caller sees (`warm-up`, `sizing`, `noise`, `search`, `final`).
    pub fn name(self) -> &'static str {
        match self {
            TrialPurpose::WarmUp => "warm-up",
            TrialPurpose::Sizing => "sizing",
            TrialPurpose::Noise => "noise",
            TrialPurpose::Search => "search",
            TrialPurpose::Final => "final",
        }
    }
}

/// One trial the runner is asked to run: build a loader with `knobs` over
/// a fixed random subset of `samples` samples (drawn with `seed`), iterate
/// it for `epochs` epochs, and say how long that took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrialRequest {
    /// The configuration.
    pub knobs: LoaderKnobs,
    /// Samples per batch.
    pub batch_size: usize,
    /// Samples in the subset (at most the dataset's length).
    pub samples: usize,
    /// Epochs over it (at least 2: worker start-up and an epoch boundary
    /// are inside every trial).
    pub epochs: u64,
    /// The subset's and the shuffle's seed; the same for every trial of a
    /// run, so every configuration reads the same samples.
    pub seed: u64,
    /// Why it is asked for.
    pub purpose: TrialPurpose,
}

/// How a trial did not give a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrialFailure {
    /// The configuration failed (an exception in a worker, say): a failed
    /// trial, recorded and never picked; the search goes on.
    Failed(String),
    /// The caller wants the whole run to end (Ctrl-C): no further trial is
    /// asked for and the run returns [`TuneError::Stopped`].
    Stop(String),
}

/// Runs trials on the caller's loader.
pub trait TrialRunner {
    /// Runs one trial; its cost in seconds (wall time, start-up included).
    fn run(&mut self, request: &TrialRequest) -> Result<f64, TrialFailure>;

    /// Runs one trial the search needs only to know loses past `bound`
    /// seconds (pruning): a runner that can stops once it passes `bound` and
    /// returns [`Measured::CutShort`] with the whole trial's time estimated
    /// (the time so far scaled by the batches left). The default runs it
    /// whole.
    fn run_until(&mut self, request: &TrialRequest, bound: f64) -> Result<Measured, TrialFailure> {
        let _ = bound;
        self.run(request).map(Measured::Whole)
    }
}

/// What the tuner knows of data it does not open (as JSON from the Python
/// package: these names, unknown ones refused).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialData {
    /// Samples in the dataset.
    pub len: usize,
    /// What a profile entry is keyed by (the dataset's identity: its class,
    /// length and a key the user gives).
    pub identity: String,
    /// What the report says of the data.
    pub description: serde_json::Value,
    /// The accelerator the caller's loader copies to (torch's name for
    /// it), or `None`: without one pin_memory is fixed off.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Bytes of one batch, when known: the memory budget prunes with it.
    #[serde(default)]
    pub batch_bytes: Option<u64>,
}

/// The runner as the search's objective: each configuration is one trial
/// of the current length. After a [`TrialFailure::Stop`] nothing more
/// runs.
struct RunnerObjective<'r> {
    runner: &'r mut dyn TrialRunner,
    spec: TrialSpec,
    batch_size: usize,
    stopped: Option<String>,
}

impl RunnerObjective<'_> {
    fn time(&mut self, knobs: &LoaderKnobs, purpose: TrialPurpose) -> Result<f64, TuneError> {
        self.time_spec(knobs, self.spec, purpose)
    }

    fn time_spec(
        &mut self,
        knobs: &LoaderKnobs,
        spec: TrialSpec,
        purpose: TrialPurpose,
    ) -> Result<f64, TuneError> {
        Ok(self.time_until(knobs, spec, purpose, None)?.value())
    }

    /// One trial, stopped past `bound` seconds when given and the runner
    /// can.
    fn time_until(
        &mut self,
        knobs: &LoaderKnobs,
        spec: TrialSpec,
        purpose: TrialPurpose,
        bound: Option<f64>,
    ) -> Result<Measured, TuneError> {
        if let Some(why) = &self.stopped {
            return Err(TuneError::Stopped(why.clone()));
        }
        let request = TrialRequest {
            knobs: *knobs,
            batch_size: self.batch_size,
            samples: spec.samples,
            epochs: spec.epochs,
            seed: spec.seed,
            purpose,
        };
        let r = match bound {
            Some(b) => self.runner.run_until(&request, b),
            None => self.runner.run(&request).map(Measured::Whole),
        };
        checked(r, &knobs.to_string(), &mut self.stopped)
    }

    /// The run ends here when the caller asked it to.
    fn check_stopped(&self) -> Result<(), TuneError> {
        match &self.stopped {
            Some(why) => Err(TuneError::Stopped(why.clone())),
            None => Ok(()),
        }
    }
}

/// What a caller's trial of `shown` gave, as the search counts it: a
/// positive time, a failed trial, or a stop (kept in `stopped`, after
/// which nothing more runs).
pub(crate) fn checked(
    r: Result<Measured, TrialFailure>,
    shown: &str,
    stopped: &mut Option<String>,
) -> Result<Measured, TuneError> {
    match r {
        Ok(m) if m.value().is_finite() && m.value() > 0.0 => Ok(m),
        Ok(m) => Err(TuneError::Trial(format!(
            "{shown}: the trial gave {} s, not a positive time",
            m.value()
        ))),
        Err(TrialFailure::Failed(why)) => Err(TuneError::Trial(why)),
        Err(TrialFailure::Stop(why)) => {
            *stopped = Some(why.clone());
            Err(TuneError::Stopped(why))
        }
    }
}

impl Objective for RunnerObjective<'_> {
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        Ok(self.time(&crate::KnobSpace::knobs(config), TrialPurpose::Search)?)
    }
    fn measure_until(&mut self, config: &Config, bound: f64) -> Result<Measured, TrialError> {
        let knobs = crate::KnobSpace::knobs(config);
        Ok(self.time_until(&knobs, self.spec, TrialPurpose::Search, Some(bound))?)
    }
}

/// Tunes the caller's loader over `data`: for each of `options.batch_sizes`
/// a warm-up, trials sized by time, the noise, the searches of
/// `options.strategy` over `options.space`, the race and the final
/// comparison (each contender measured on the sized trial,
/// `options.final_repeats` times, interleaved), as [`crate::run`] does for
/// adapt's loader. `options.pipeline` is not used; the profile entry is
/// keyed by `data.identity`. A failed trial is recorded in the report;
/// a [`TrialFailure::Stop`] ends the run with [`TuneError::Stopped`].
pub fn tune_trials(
    runner: &mut dyn TrialRunner,
    data: &TrialData,
    options: &TuneOptions,
    progress: Progress<'_>,
) -> Result<Report, TuneError> {
    options.check()?;
    if data.len == 0 {
        return Err(TuneError::InvalidOption(
            "the dataset is empty: nothing to time".into(),
        ));
    }
    let mut ctx = TuneContext::new(options, progress);
    ctx.set_gpu(data.gpu.clone());
    let mut profile = match &options.profile {
        Some(p) => Some(Profile::load(p)?),
        None => None,
    };
    let budget = Budget {
        bytes: options
            .budget_bytes
            .unwrap_or(ctx.machine.available_bytes / 2),
        batch_bytes: data.batch_bytes.unwrap_or(0),
    };
    let mut runs = Vec::new();
    let mut last_spec = options.trial;
    for &batch_size in &options.batch_sizes {
        let saved = match (&profile, options.retune) {
            (Some(p), false) => p
                .lookup(&data.identity, batch_size, &ctx.machine)
                .map(|e| e.knobs),
            _ => None,
        };
        let mut objective = RunnerObjective {
            runner: &mut *runner,
            spec: TrialSpec {
                samples: options.trial.samples.min(data.len),
                ..options.trial
            },
            batch_size,
            stopped: None,
        };
        let run = tune_trial_batch(&ctx, &mut objective, data.len, budget, saved)?;
        last_spec = run.trial.unwrap_or(last_spec);
        if let Some(p) = &mut profile {
            p.insert(crate::tuner::profile_entry(&ctx, &data.identity, &run));
        }
        runs.push(run);
    }
    if let (Some(p), Some(path)) = (&profile, &options.profile) {
        p.save(path)?;
    }
    Ok(Report {
        dataset: data.description.clone(),
        trial: options.trial,
        budget_bytes: budget.bytes,
        final_repeats: options.final_repeats,
        final_samples: last_spec.samples,
        final_epochs: last_spec.epochs,
        notes: ctx.notes(),
        strategy: options.record(),
        runs,
        machine: ctx.machine,
    })
}

/// One batch size of a caller's loader: warm up, size, measure the noise,
/// search, compare.
fn tune_trial_batch(
    ctx: &TuneContext<'_>,
    objective: &mut RunnerObjective<'_>,
    len: usize,
    budget: Budget,
    saved: Option<LoaderKnobs>,
) -> Result<crate::RunReport, TuneError> {
    let (options, progress) = (ctx.options, ctx.progress);
    let batch_size = objective.batch_size;
    let label = format!("batch {batch_size}");
    progress(&format!("{label}: warming up"));
    let warm = TrialSpec {
        epochs: 1,
        ..objective.spec
    };
    objective.time_spec(&LoaderKnobs::DEFAULT, warm, TrialPurpose::WarmUp)?;
    let probe = crate::recommended_knobs(&ctx.machine);
    let mut noise_probes = Vec::new();
    if saved.is_none() {
        if let Some(t) = options.trial_seconds {
            progress(&format!("{label}: sizing trials to {t} s"));
            let (spec, _) = size_trial(objective.spec, len, batch_size, t, &mut |spec| {
                objective.time_spec(&probe, spec, TrialPurpose::Sizing)
            })?;
            objective.spec = spec;
        }
        noise_probes = crate::noise::measure_noise(
            &mut |k| objective.time(k, TrialPurpose::Noise),
            &crate::noise::noise_probes_for(&ctx.machine, &ctx.space, &budget),
            options.noise_repeats,
            progress,
            &label,
        );
        objective.check_stopped()?;
    }
    let trial = Some(objective.spec);
    let mut budgeted = Budgeted {
        inner: objective,
        budget,
    };
    let prepared = Prepared {
        batch_size,
        saved,
        noise_probes,
        trial,
    };
    // The final comparison measures the contenders on the search's trial.
    let run = tune_one(ctx, &mut budgeted, prepared, &mut |o, k| {
        o.inner.time(k, TrialPurpose::Final)
    });
    // A stop during the search reads as "nothing measured" there.
    budgeted.inner.check_stopped()?;
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Strategy, TuneOptions};

    /// A loader whose trial time is known: proportional to the samples
    /// read, least at 3 workers (or the most the space has), prefetch 4,
    /// persistent workers; 1 worker at prefetch 1 fails.
    struct Known {
        requests: Vec<TrialRequest>,
        stop_after: Option<usize>,
        cost: fn(&LoaderKnobs) -> f64,
    }

    fn cost(k: &LoaderKnobs) -> f64 {
        let w = (k.num_workers as f64 - 3.0).abs() + 1.0;
        let p = 1.0 + ((k.prefetch_factor.unwrap_or(2) as f64).log2() - 2.0).abs() * 0.1;
        let persistent = if k.persistent_workers { 0.9 } else { 1.0 };
        w * p * persistent
    }

    impl TrialRunner for Known {
        fn run(&mut self, r: &TrialRequest) -> Result<f64, TrialFailure> {
            self.requests.push(*r);
            if self.stop_after == Some(self.requests.len()) {
                return Err(TrialFailure::Stop("KeyboardInterrupt".into()));
            }
            if r.knobs.num_workers == 1 && r.knobs.prefetch_factor == Some(1) {
                return Err(TrialFailure::Failed("RuntimeError: worker 0 died".into()));
            }
            Ok((self.cost)(&r.knobs) * (r.samples as f64 * r.epochs as f64) / 20_000.0)
        }
    }

    fn data() -> TrialData {
        TrialData {
            len: 50_000,
            identity: "Known(len=50000)".into(),
            description: serde_json::json!({"dataset": "Known"}),
            gpu: None,
            batch_bytes: Some(1 << 20),
        }
    }

    fn options() -> TuneOptions {
        TuneOptions {
            strategy: Strategy::Both,
            trial: TrialSpec {
                samples: 512,
                ..TrialSpec::default()
            },
            trial_seconds: Some(1.0),
            noise_repeats: 3,
            final_repeats: 1,
            ..TuneOptions::default()
        }
    }

    #[test]
    fn the_search_finds_the_known_optimum_on_trials_sized_by_time_and_records_failures() {
        let mut runner = Known {
            requests: Vec::new(),
            stop_after: None,
            cost,
        };
        let report = tune_trials(&mut runner, &data(), &options(), &|_| {}).expect("tuned");
        let run = &report.runs[0];
        // The optimum of the space, by the known cost.
        let space = crate::KnobSpace::for_machine(&report.machine);
        let best = space
            .space()
            .configurations()
            .iter()
            .map(crate::KnobSpace::knobs)
            .filter(|k| !(k.num_workers == 1 && k.prefetch_factor == Some(1)))
            .min_by(|a, b| cost(a).total_cmp(&cost(b)))
            .expect("a configuration");
        assert_eq!(run.optimal.as_ref().map(|o| o.config), Some(best));
        assert_eq!(run.adapt.config, best, "the AVL search finds it too");
        // Sized: a trial of the recommended configuration lasts >= 1 s.
        let spec = run.trial.expect("sized");
        let probe = crate::recommended_knobs(&report.machine);
        assert!(cost(&probe) * (spec.samples as f64 * spec.epochs as f64) / 20_000.0 >= 1.0);
        assert!(spec.samples > 512 && spec.samples <= 50_000);
        // Every trial after sizing has that length; the first is the warm-up.
        assert_eq!(runner.requests[0].purpose, TrialPurpose::WarmUp);
        assert_eq!(runner.requests[0].knobs, LoaderKnobs::DEFAULT);
        let timed: Vec<_> = runner
            .requests
            .iter()
            .filter(|r| matches!(r.purpose, TrialPurpose::Search | TrialPurpose::Final))
            .collect();
        assert!(
            timed
                .iter()
                .all(|r| r.samples == spec.samples && r.epochs == spec.epochs)
        );
        assert!(timed.iter().all(|r| r.seed == 0 && r.batch_size == 128));
        // The failing configuration is a failed trial named in the trace.
        assert!(run.trace.iter().any(|t| {
            t.config.num_workers == 1
                && t.config.prefetch_factor == Some(1)
                && t.note
                    .as_deref()
                    .is_some_and(|n| n.contains("worker 0 died"))
        }));
        assert!(run.speedup_vs_default > 1.0);
        assert_eq!(report.final_samples, spec.samples);
        // The searches start from the noise probes' trials: where they
        // visit a probe's configuration, no first trial is run for it.
        let probes: Vec<LoaderKnobs> = run.noise_probes.iter().map(|p| p.config).collect();
        let visits: Vec<usize> = run
            .trace
            .iter()
            .filter(|t| t.strategy.starts_with("avl") && probes.contains(&t.config))
            .map(|t| t.repeat)
            .collect();
        assert!(visits.iter().all(|&k| k > 3), "{visits:?}");
    }

    #[test]
    fn the_searches_start_from_the_noise_probes_trials() {
        // The optimum is the busiest probe (every worker, prefetch 2, not
        // persistent): every search reaches it, and none runs its first
        // trial again; the grid measures it itself.
        fn at_busiest(k: &LoaderKnobs) -> f64 {
            let w = 1.0 + 10.0 / (1.0 + k.num_workers as f64);
            let p = 1.0 + ((k.prefetch_factor.unwrap_or(2) as f64).log2() - 1.0).abs() * 0.1;
            w * p * if k.persistent_workers { 1.1 } else { 1.0 }
        }
        let mut runner = Known {
            requests: Vec::new(),
            stop_after: None,
            cost: at_busiest,
        };
        let report = tune_trials(&mut runner, &data(), &options(), &|_| {}).expect("tuned");
        let run = &report.runs[0];
        let busiest = run.noise_probes[1].config;
        assert_eq!(busiest.num_workers, 2 * report.machine.cores);
        assert_eq!(run.optimal.as_ref().map(|o| o.config), Some(busiest));
        assert_eq!(run.adapt.config, busiest);
        let repeats = |strategy: &str| -> Vec<usize> {
            run.trace
                .iter()
                .filter(|t| t.strategy == strategy && t.config == busiest)
                .map(|t| t.repeat)
                .collect()
        };
        assert!(
            repeats("avl").iter().all(|&k| k > 3),
            "{:?}",
            repeats("avl")
        );
        assert!(repeats("avl-plain").iter().all(|&k| k > 3));
        assert_eq!(repeats("grid"), [1]);
    }

    #[test]
    fn a_stop_ends_the_run_and_no_trial_is_asked_for_after_it() {
        let mut runner = Known {
            requests: Vec::new(),
            stop_after: Some(12),
            cost,
        };
        let e = tune_trials(&mut runner, &data(), &options(), &|_| {}).expect_err("stopped");
        assert!(
            matches!(e, TuneError::Stopped(ref m) if m == "KeyboardInterrupt"),
            "{e}"
        );
        assert_eq!(runner.requests.len(), 12);
    }

    #[test]
    fn an_empty_dataset_is_refused_before_any_trial() {
        let mut runner = Known {
            requests: Vec::new(),
            stop_after: None,
            cost,
        };
        let empty = TrialData { len: 0, ..data() };
        assert!(tune_trials(&mut runner, &empty, &options(), &|_| {}).is_err());
        assert!(runner.requests.is_empty());
    }
}
