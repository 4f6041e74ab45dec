//! The tuner's error type: one variant per thing that went wrong.

use std::path::PathBuf;

/// Errors of the tuner; each says what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// A pipeline description or its data is unusable (names the step or file).
    #[error(transparent)]
    Pipeline(#[from] adapt_pipeline::PipelineError),
    /// The loader refused a configuration or failed outside a trial.
    #[error(transparent)]
    Loader(#[from] adapt_loader::LoaderError),
    /// The GPU was found but a copy to it, or the engine itself, failed.
    #[error("GPU transfer: {0}")]
    Transfer(#[from] adapt_transfer::TransferError),
    /// An unusable option (batch size 0, no repeats, a bad trial length…).
    #[error("{0}")]
    InvalidOption(String),
    /// A `--metric` regular expression that does not compile.
    #[error("metric {pattern:?}: {reason}")]
    Metric {
        /// The expression as given.
        pattern: String,
        /// Why it does not compile.
        reason: String,
    },
    /// A recorded report that cannot be replayed (no grid, no batch size…).
    #[error("replay: {0}")]
    Replay(String),
    /// One trial failed (its configuration is never picked).
    #[error("{0}")]
    Trial(String),
    /// The caller ended the run (Ctrl-C during a trial of its loader).
    #[error("tuning stopped: {0}")]
    Stopped(String),
    /// Every configuration failed or was infeasible.
    #[error("no configuration could be measured: {0}")]
    NothingMeasured(String),
    /// A profile or report file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A profile or report file that is not what it should be.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with its content.
        message: String,
    },
}

impl TuneError {
    pub(crate) fn file(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        TuneError::File {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        TuneError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
