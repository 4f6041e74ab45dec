//! The loader's error type: each variant names the batch, sample or option.

use std::time::Duration;

/// Errors of the loader. Each names the batch (and sample) at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoaderError {
    /// An impossible configuration, refused at construction.
    #[error("invalid loader configuration: {0}")]
    InvalidConfig(String),
    /// A sample could not be read or transformed.
    #[error("epoch {epoch}, batch {batch}: sample {index} ({origin}): {source}")]
    SampleFailed {
        /// Epoch.
        epoch: u64,
        /// Batch number within the epoch.
        batch: usize,
        /// Dataset index of the sample.
        index: usize,
        /// Where the sample comes from (file, record).
        origin: String,
        /// The dataset's error.
        source: adapt_dataset::Error,
    },
    /// A worker panicked while building a batch.
    #[error("epoch {epoch}, batch {batch}: worker {worker} panicked: {message}")]
    WorkerPanicked {
        /// Epoch.
        epoch: u64,
        /// Batch being built.
        batch: usize,
        /// Worker number (0 for the calling thread without workers).
        worker: usize,
        /// The panic message.
        message: String,
    },
    /// A batch did not arrive within the timeout.
    #[error("epoch {epoch}, batch {batch} did not arrive within {waited:?}")]
    Timeout {
        /// Epoch.
        epoch: u64,
        /// The batch waited for.
        batch: usize,
        /// How long.
        waited: Duration,
    },
    /// Every worker is gone while batches were still expected.
    #[error("epoch {epoch}, batch {batch}: the workers exited before delivering it")]
    WorkersGone {
        /// Epoch.
        epoch: u64,
        /// The batch waited for.
        batch: usize,
    },
    /// A batch buffer could not be allocated (pinned memory exhausted …).
    #[error("cannot allocate a batch buffer of {bytes} bytes: {message}")]
    Buffer {
        /// Size asked for.
        bytes: usize,
        /// The provider's message.
        message: String,
    },
    /// The consumer's interrupt check asked to stop (Ctrl-C in Python).
    #[error("epoch {epoch}, batch {batch}: interrupted")]
    Interrupted {
        /// Epoch.
        epoch: u64,
        /// The batch waited for.
        batch: usize,
    },
    /// An epoch whose loader has started another one since.
    #[error("epoch {epoch} was superseded by a newer epoch of its loader")]
    Superseded {
        /// Epoch.
        epoch: u64,
    },
    /// A checkpoint that cannot be read (truncated, damaged, another format).
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A checkpoint of another pipeline, dataset, seed or batching.
    #[error("checkpoint of another {what}: the loader has {loader}, the checkpoint {checkpoint}")]
    CheckpointMismatch {
        /// What differs.
        what: String,
        /// The loader's value.
        loader: String,
        /// The checkpoint's value.
        checkpoint: String,
    },
    /// A worker thread could not be started.
    #[error("cannot start worker thread: {0}")]
    Spawn(std::io::Error),
}
