//! The front's one error type: a variant per layer it came from, and the
//! kind of failure (what the Python module turns into an exception class).

use std::path::PathBuf;

/// Anything an entry point can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdaptError {
    /// A pipeline description or its data (names the step or file).
    #[error(transparent)]
    Pipeline(#[from] adapt_pipeline::PipelineError),
    /// The loader: a configuration, a sample, a worker, a checkpoint.
    #[error(transparent)]
    Loader(#[from] adapt_loader::LoaderError),
    /// The tuner.
    #[error(transparent)]
    Tune(#[from] adapt_tune::TuneError),
    /// Writing, reading or verifying a pack (names shard and frame).
    #[error(transparent)]
    Pack(#[from] adapt_pack::PackError),
    /// An object store (names the object's URL).
    #[error(transparent)]
    Remote(#[from] adapt_remote::RemoteError),
    /// The GPU: driver, device or a copy.
    #[error(transparent)]
    Transfer(#[from] adapt_transfer::TransferError),
    /// Generating a synthetic dataset.
    #[error(transparent)]
    Synth(#[from] adapt_synth::SynthError),
    /// A file the front reads or writes itself (a checkpoint).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// An option that cannot be honoured, named as the caller wrote it.
    #[error("{0}")]
    Option(String),
}

/// What kind of failure an error is, whatever layer it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// An impossible configuration or pipeline: fix the arguments.
    Config,
    /// Data that cannot be opened: a missing or damaged file or pack.
    Data,
    /// One sample that cannot be read or transformed.
    Sample,
    /// A worker panicked or exited.
    Worker,
    /// A batch did not arrive within the timeout.
    Timeout,
    /// A damaged checkpoint, or one of another pipeline or seed.
    Checkpoint,
    /// A buffer could not be allocated.
    Memory,
    /// The wait was interrupted (Ctrl-C).
    Interrupted,
    /// The GPU failed.
    Device,
    /// A file of the front's own (profile, report, checkpoint) failed.
    File,
}

impl AdaptError {
    /// The kind of failure, looking through the layers (a tuning run that
    /// failed to open its data is `Data`, not `Config`).
    pub fn kind(&self) -> ErrorKind {
        match self {
            AdaptError::Pipeline(e) => pipeline_kind(e),
            AdaptError::Loader(e) => loader_kind(e),
            AdaptError::Tune(e) => tune_kind(e),
            AdaptError::Pack(e) => pack_kind(e),
            AdaptError::Remote(adapt_remote::RemoteError::Pack(e)) => pack_kind(e),
            AdaptError::Remote(adapt_remote::RemoteError::Config { .. }) => ErrorKind::Config,
            AdaptError::Remote(_) | AdaptError::Synth(_) => ErrorKind::Data,
            AdaptError::Transfer(adapt_transfer::TransferError::Loader(e)) => loader_kind(e),
            AdaptError::Transfer(_) => ErrorKind::Device,
            AdaptError::Io { .. } => ErrorKind::File,
            AdaptError::Option(_) => ErrorKind::Config,
        }
    }
}

fn pipeline_kind(e: &adapt_pipeline::PipelineError) -> ErrorKind {
    use adapt_pipeline::PipelineError as P;
    match e {
        P::Format(_) | P::MissingPath(_) | P::NoS3(_) => ErrorKind::Data,
        P::Pack(p) => pack_kind(p),
        P::Remote(adapt_remote::RemoteError::Config { .. }) => ErrorKind::Config,
        P::Remote(_) => ErrorKind::Data,
        P::Sample { .. } => ErrorKind::Sample,
        _ => ErrorKind::Config,
    }
}

fn pack_kind(e: &adapt_pack::PackError) -> ErrorKind {
    match e {
        adapt_pack::PackError::InvalidOption(_) => ErrorKind::Config,
        _ => ErrorKind::Data,
    }
}

fn loader_kind(e: &adapt_loader::LoaderError) -> ErrorKind {
    use adapt_loader::LoaderError as L;
    match e {
        L::InvalidConfig(_) => ErrorKind::Config,
        L::SampleFailed { .. } => ErrorKind::Sample,
        L::WorkerPanicked { .. } | L::WorkersGone { .. } | L::Spawn(_) => ErrorKind::Worker,
        L::Timeout { .. } => ErrorKind::Timeout,
        L::Checkpoint(_) | L::CheckpointMismatch { .. } => ErrorKind::Checkpoint,
        L::Buffer { .. } => ErrorKind::Memory,
        L::Interrupted { .. } => ErrorKind::Interrupted,
        _ => ErrorKind::Config,
    }
}

fn tune_kind(e: &adapt_tune::TuneError) -> ErrorKind {
    use adapt_tune::TuneError as T;
    match e {
        T::Pipeline(p) => pipeline_kind(p),
        T::Loader(l) => loader_kind(l),
        T::Transfer(_) => ErrorKind::Device,
        T::Io { .. } | T::File { .. } => ErrorKind::File,
        T::Stopped(_) => ErrorKind::Interrupted,
        _ => ErrorKind::Config,
    }
}
