//! Tuning through the front: the main job's default dataset, the loader
//! tuner and the `--command` tuner, profiles looked up by pipeline.

use crate::AdaptError;
use adapt_pipeline::{DatasetSpec, Pipeline};
use adapt_tune::{
    GivenOptions, GivenReport, GivenSpace, GivenTrials, KnobSpace, LoaderKnobs, Machine, Profile,
    Progress, Report, SpaceKind, TrialData, TrialRunner, TuneOptions,
};
use std::path::Path;

/// The main job's dataset: full-size CIFAR-10 in `dir`, generated in the
/// real binary layout when absent (or incomplete). Returns its default
/// pipeline.
pub fn default_cifar10(dir: &Path, progress: Progress<'_>) -> Result<Pipeline, AdaptError> {
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
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    Ok(Pipeline::new(DatasetSpec::new(
        &adapt_pipeline::Cifar10Format,
        dir,
    )))
}

/// The consumer's time per batch from milliseconds (`--step-ms`,
/// `step_ms=`): a non-negative number, or none.
pub fn step_from_ms(ms: Option<f64>) -> Result<Option<std::time::Duration>, AdaptError> {
    match ms {
        Some(ms) if ms.is_finite() && ms >= 0.0 => {
            Ok(Some(std::time::Duration::from_secs_f64(ms / 1e3)))
        }
        Some(ms) => Err(AdaptError::Option(format!(
            "step_ms {ms} must be a non-negative number of milliseconds"
        ))),
        None => Ok(None),
    }
}

/// Tunes the loader on `options.pipeline` (its split and parts as given:
/// the profile entry is keyed by what a run of that pipeline opens).
pub fn tune(options: &TuneOptions, progress: Progress<'_>) -> Result<Report, AdaptError> {
    Ok(adapt_tune::run(options, progress)?)
}

/// Tunes a loader the caller runs (PyTorch's DataLoader in the caller's
/// process): `runner` runs each trial it is asked for, the tuner sizes,
/// searches, races and compares as [`tune`] does; `data` says what the
/// profile entry is keyed by.
pub fn tune_trials(
    runner: &mut dyn TrialRunner,
    data: &TrialData,
    options: &TuneOptions,
    progress: Progress<'_>,
) -> Result<Report, AdaptError> {
    Ok(adapt_tune::tune_trials(runner, data, options, progress)?)
}

/// Tunes a knob space the caller names (Ray Data's `concurrency`, rows per
/// read block and `prefetch_batches`, say) over trials the caller runs:
/// the warm-up, noise, AVL descent with its race and pruning, and final
/// comparison with the default that [`tune_trials`] runs for the loader's
/// four knobs.
pub fn tune_given(
    space: &GivenSpace,
    trials: &mut dyn GivenTrials,
    options: &GivenOptions,
    progress: Progress<'_>,
) -> Result<GivenReport, AdaptError> {
    Ok(adapt_tune::tune_given(space, trials, options, progress)?)
}

/// The configurations of the knob space `kind` on this machine (`gpu`:
/// the accelerator the caller's loader sees; `None` fixes pin_memory
/// off), canonical, in the search's order.
pub fn space_configurations(kind: SpaceKind, gpu: Option<String>) -> Vec<LoaderKnobs> {
    let machine = Machine {
        gpu,
        ..Machine::detect()
    };
    KnobSpace::of_kind(kind, &machine)
        .space()
        .configurations()
        .iter()
        .map(KnobSpace::knobs)
        .collect()
}

/// The knobs the profile at `path` holds for the dataset `identity` (a
/// caller's loader, [`TrialData::identity`]) at `batch_size` on this
/// machine with accelerator `gpu`, if any.
pub fn profile_knobs_of(
    path: &Path,
    identity: &str,
    batch_size: usize,
    gpu: Option<String>,
) -> Result<Option<LoaderKnobs>, AdaptError> {
    let machine = Machine {
        gpu,
        ..Machine::detect()
    };
    Ok(Profile::load(path)?
        .lookup(identity, batch_size, &machine)
        .map(|e| e.knobs))
}

/// Tunes an external command by its wall time or a printed metric.
pub fn tune_command(
    template: &str,
    options: &TuneOptions,
    progress: Progress<'_>,
) -> Result<Report, AdaptError> {
    Ok(adapt_tune::tune_command(template, options, progress)?)
}

/// The knobs the profile at `path` holds for `pipeline` at `batch_size` on
/// this machine, if any.
pub fn profile_knobs(
    path: &Path,
    pipeline: &Pipeline,
    batch_size: usize,
) -> Result<Option<LoaderKnobs>, AdaptError> {
    let identity = pipeline.build()?.identity();
    let profile = Profile::load(path)?;
    Ok(profile
        .lookup(&identity, batch_size, &Machine::detect())
        .map(|e| e.knobs))
}

/// Replays the search strategies on the grids recorded in the report
/// file `path`, over `seeds` seeds with ±`noise` (no trials run).
pub fn replay(
    path: &Path,
    seeds: usize,
    noise: f64,
) -> Result<Vec<adapt_tune::ReplayStats>, AdaptError> {
    let io = |source| AdaptError::Io {
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let report: Report = serde_json::from_str(&text).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not a tune report: {e}"),
        ))
    })?;
    let strategies = adapt_tune::replay_strategies(noise);
    adapt_tune::replay(&report, &strategies, seeds, noise).map_err(|e| match e {
        // What is wrong with the report is said with the report's name.
        adapt_tune::TuneError::Replay(message) => io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            message,
        )),
        other => other.into(),
    })
}
