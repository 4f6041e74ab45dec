use std::path::PathBuf;

/// Errors of the tuner; each says what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// A dataset could not be opened (the error names the file).
    #[error(transparent)]
    Format(#[from] adapt_formats::FormatError),
    /// A pipeline description or its data is unusable (names the step or file).
    #[error(transparent)]
    Pipeline(#[from] adapt_pipeline::PipelineError),
    /// A pack could not be read or written (the error names shard and frame).
    #[error(transparent)]
    Pack(#[from] adapt_pack::PackError),
    /// The default dataset could not be generated.
    #[error(transparent)]
    Synth(#[from] adapt_synth::SynthError),
    /// The loader refused a configuration or failed outside a trial.
    #[error(transparent)]
    Loader(#[from] adapt_loader::LoaderError),
    /// An unusable option (batch size 0, unknown dataset, …).
    #[error("{0}")]
    InvalidOption(String),
    /// No configuration of the space fits the memory budget.
    #[error(
        "no configuration fits the memory budget of {budget} bytes (one batch is {batch_bytes} bytes)"
    )]
    BudgetTooSmall {
        /// The budget.
        budget: u64,
        /// Bytes of one batch.
        batch_bytes: u64,
    },
    /// Every configuration failed or was infeasible.
    #[error("no configuration could be measured: {0}")]
    NothingMeasured(String),
    /// A profile or report file could not be read or written.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
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
}
