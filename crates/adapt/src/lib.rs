//! adapt, the front: the one API every entry point calls — the command line
//! (`cargo xtask`), the Python module, the benches and the examples — so
//! that they build "pipeline → loader → pinned pool → device → autotune"
//! the same way. A [`Run`] is a pipeline's loader with its knobs, its
//! page-locked pool (sized by one rule, [`pinned_pool_size`], that the
//! tuner's trials use too), ranks and online autotuning; [`tune`] and
//! [`tune_command`] run the ADaPT search; [`pack::write`] and
//! [`pack::verify`] handle packs in a folder or an object store;
//! [`generate()`] writes synthetic data; [`parse_bytes`] is the one size
//! grammar; [`AdaptError`] the one error, whose [`ErrorKind`] the Python
//! module turns into an exception class.
//!
//! It is not where the work is done: the engines (readers, packs, the
//! worker pool, the search, the transfer engine) are the crates below,
//! re-exported here under short names for the types a caller needs. The
//! key rule is that nothing above this crate composes those engines itself.
//!
//! ```no_run
//! use adapt::{DatasetSpec, LoaderKnobs, Pipeline, Run, RunOptions};
//! let pipeline = Pipeline::new(DatasetSpec::new(&adapt::Cifar10Format, "datasets/cifar10"))
//!     .with_transforms("random_crop(32,padding=4),hflip,normalize(cifar10)")?;
//! let knobs = LoaderKnobs { num_workers: 2, ..LoaderKnobs::DEFAULT };
//! let mut run = Run::open(&pipeline, &RunOptions { batch_size: 128, knobs, ..Default::default() })?;
//! run.start(0)?;
//! while let Some(batch) = run.next(&mut || false) {
//!     let batch = batch?;
//!     # let _ = batch;
//! }
//! # Ok::<(), adapt::AdaptError>(())
//! ```

#[cfg(feature = "cli")]
pub mod cli;
mod data;
mod error;
pub mod generate;
mod inspect;
pub mod pack;
mod report_page;
mod run;
mod stages;
mod steps;
mod tune;

pub use data::Data;
pub use error::{AdaptError, ErrorKind};
pub use generate::generate;
pub use inspect::{Inspected, inspect};
pub use report_page::{StagePair, measure_stage_pairs, report_html, write_report_html};
pub use run::{Autotune, Run, RunInfo, RunOptions, parse_distributed};
pub use stages::StageReport;
pub use steps::{SampleSteps, StepScratch};
pub use tune::{
    default_cifar10, profile_knobs, profile_knobs_of, replay, space_configurations, step_from_ms,
    tune, tune_command, tune_given, tune_trials,
};

pub use adapt_dataset::{Layout, Sample, SampleView, Shape};
pub use adapt_formats::{PARQUET_ENABLED, Split};
pub use adapt_loader::{
    Batch, Distributed, EpochPlan, Launch, LoaderConfig, LoaderKnobs, LoaderState, OutputFormat,
    Plan,
};
pub use adapt_pack::{Codec, PackOptions, Payload, VerifyReport};
pub use adapt_pipeline::{
    ArrowFormat, CelebADigiFaceFormat, CelebAFormat, Cifar10Format, Cifar100Format, ConcatFormat,
    DatasetSpec, DigiFaceFormat, FORMATS, Format, FormatName, ImageFolderFormat, PackFormat,
    ParquetFormat, Pipeline, SampleFields, TransformSpec, WebDatasetFormat, parse_transforms,
    transforms_text,
};
pub use adapt_remote::{
    RemoteOptions, S3_ENABLED, UploadReport, is_remote, parse_bytes, set_default_options,
    swap_default_options,
};
pub use adapt_search::{AvlOptions, Measured};
pub use adapt_transfer::{COPY_DEPTH, Device, PinnedPool, TransferEngine, pinned_pool_size};
pub use adapt_tune::{
    GivenConfig, GivenKnob, GivenOptions, GivenReport, GivenSpace, GivenTrials, Machine, Progress,
    ReplayStats, Report, SpaceKind, Strategy, TrialData, TrialFailure, TrialLimit, TrialPurpose,
    TrialRequest, TrialRunner, TrialSpec, TuneOptions, write_svg,
};

/// The engines, for what the front does not wrap (the benches time them
/// one by one; the GPU check reads the transfer engine's counters).
pub mod engines {
    pub use adapt_dataset as dataset;
    pub use adapt_formats as formats;
    pub use adapt_loader as loader;
    pub use adapt_pack as pack;
    pub use adapt_pipeline as pipeline;
    pub use adapt_remote as remote;
    pub use adapt_search as search;
    pub use adapt_synth as synth;
    pub use adapt_transfer as transfer;
    pub use adapt_transform as transform;
    pub use adapt_tune as tune;
}
