//! The tuner: ADaPT end to end. It binds the loader (`adapt-loader`) to the
//! search (`adapt-search`): a monitor that runs one loader configuration and
//! times it, the machine-aware space of the four knobs with a memory budget,
//! the comparison the paper's Table 1 makes (default, recommended, grid
//! optimum, ADaPT's pick), profiles that save a tuned configuration for
//! reuse, tuning of an external command by its wall time, and offline replay
//! of recorded grids.
//!
//! It is not a loader and not a search algorithm; it only decides what to
//! measure and how to report it. The key choice is that a trial is short but
//! still contains what each knob changes: worker start-up and two epoch
//! boundaries over a fixed random subset (so `persistent_workers` matters),
//! after an explicit warm-up pass; `docs/tuning.md` records how the trial
//! length was chosen.

mod command;
mod compare;
mod error;
mod given;
mod machine;
mod monitor;
mod noise;
mod online;
mod options;
mod plot;
mod profile;
mod replay;
mod report;
mod search;
mod space;
mod trials;
mod tuner;

pub use adapt_dataset::Subset;
pub use adapt_loader::LoaderKnobs;
pub use command::{CommandObjective, TrialLimit, placeholders};
pub use error::TuneError;
pub use given::{
    GivenConfig, GivenKnob, GivenNoise, GivenOptions, GivenReport, GivenSpace, GivenTime,
    GivenTrial, GivenTrials, tune_given,
};
pub use machine::Machine;
pub use monitor::{LoaderObjective, MIN_TRIAL_BATCHES, TrialSpec};
pub use noise::threshold_from_spread;
pub use online::{AutotunedFeed, MaybeTuned, OnlineTuner};
pub use options::{Progress, Strategy, TuneOptions};
pub use plot::{DrawError, svg as plot_svg, write_svg};
pub use profile::{Profile, ProfileEntry, ProfileKey};
pub use replay::{ReplayStats, replay, replay_strategies};
pub use report::{ConfigTime, Noise, Report, RunReport, SearchCost, StrategyRecord};
pub use space::{Budget, Dim, KnobSpace, SpaceKind, recommended_knobs};
pub use trials::{TrialData, TrialFailure, TrialPurpose, TrialRequest, TrialRunner, tune_trials};
pub use tuner::{run, tune_command};
