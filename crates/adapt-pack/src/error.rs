//! The pack crate's error type: damage names the shard and frame.

use std::path::PathBuf;

/// Errors of the pack writer, reader and verifier. Each names the pack,
/// shard file and frame at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackError {
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A manifest that is missing, unreadable or inconsistent.
    #[error("{path}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file the format keeps small (the manifest) is larger than its
    /// bound.
    #[error("{path}: larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound.
        limit: u64,
    },
    /// The storage holding the pack (object storage) failed to read or
    /// reach a file; `source` is its own error.
    #[error("{path}: {source}")]
    Storage {
        /// The file or URL.
        path: PathBuf,
        /// The storage's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A shard whose header, footer or index is not what the format says.
    #[error("{path}: {message}")]
    BadShard {
        /// The shard file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A frame whose bytes do not match their checksum, or do not decode.
    #[error("{path}: frame {frame}: {message}")]
    BadFrame {
        /// The shard file.
        path: PathBuf,
        /// The frame number in that shard.
        frame: usize,
        /// What is wrong.
        message: String,
    },
    /// Damage found by [`verify`](crate::verify): every problem, each naming
    /// its shard and frame.
    #[error("{dir}: damaged pack:\n  {}", problems.join("\n  "))]
    Damaged {
        /// The pack.
        dir: PathBuf,
        /// One line per problem.
        problems: Vec<String>,
    },
    /// The output folder holds a different pack.
    #[error("{dir}: {message} (pass overwrite to replace it)")]
    Exists {
        /// The pack folder.
        dir: PathBuf,
        /// What is there.
        message: String,
    },
    /// A pack whose source's content differs from what it was made from.
    #[error("{dir}: stale: {message}")]
    Stale {
        /// The pack.
        dir: PathBuf,
        /// What differs.
        message: String,
    },
    /// A source sample could not be read while packing.
    #[error("source sample {index}: {source}")]
    Source {
        /// Index in the source dataset.
        index: usize,
        /// The dataset's error.
        source: adapt_dataset::Error,
    },
    /// A source sample whose encoded bytes do not decode: checked before
    /// it is packed, so a pack never holds what `load` cannot read.
    #[error("source sample {index} not packed: {source}")]
    Undecodable {
        /// Index in the source dataset.
        index: usize,
        /// The decoder's error, naming the source file.
        #[source]
        source: adapt_formats::FormatError,
    },
    /// A source sample has no encoded form (the encoded store needs one).
    #[error("source sample {index} has no encoded form (use --store raw)")]
    NotEncoded {
        /// Index in the source dataset.
        index: usize,
    },
    /// zstd refused the level or failed to compress a frame.
    #[error("zstd level {level}: {source}")]
    Compress {
        /// The level asked for.
        level: i32,
        /// zstd's error.
        source: std::io::Error,
    },
    /// The thread appending a shard's frames panicked; the shard's
    /// temporary file is removed.
    #[error("{shard}: the pack writer's thread panicked")]
    WriterPanicked {
        /// The shard being written.
        shard: PathBuf,
    },
    /// Impossible options (shard size 0, zstd level out of range, a codec
    /// name that does not exist …).
    #[error("{0}")]
    InvalidOption(String),
}

impl PackError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| PackError::Io { path, source }
    }
}

impl From<PackError> for adapt_dataset::Error {
    fn from(e: PackError) -> Self {
        adapt_dataset::Error::reader(e)
    }
}
