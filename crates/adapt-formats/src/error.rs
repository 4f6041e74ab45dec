//! The readers' error type: every variant names the file, and the record or
//! line where there is one.

use adapt_dataset::Shape;
use std::path::PathBuf;

/// Errors of the format readers and writers. Every variant names the file at
/// fault, and the record or line where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file or folder the layout requires is absent.
    #[error("missing {what}: {path}")]
    Missing {
        /// The expected path.
        path: PathBuf,
        /// What it should have held.
        what: &'static str,
    },
    /// A CIFAR-10 batch file whose size is not a whole number of records.
    #[error(
        "{path}: {len} bytes is not a whole number of 3073-byte CIFAR-10 records (last record truncated to {tail} bytes)"
    )]
    CifarSize {
        /// The batch file.
        path: PathBuf,
        /// Its size in bytes.
        len: u64,
        /// Bytes in the incomplete last record.
        tail: u64,
    },
    /// A CIFAR-10 record whose label byte is not a class.
    #[error("{path}: record {record}: label {label} is not a CIFAR-10 class (0..=9)")]
    CifarLabel {
        /// The batch file.
        path: PathBuf,
        /// The record number in that file, from 0.
        record: usize,
        /// The label byte found.
        label: u8,
    },
    /// A malformed line in a text index (CelebA's identity file).
    #[error("{path}: line {line}: {reason}: {content:?}")]
    BadLine {
        /// The text file.
        path: PathBuf,
        /// Line number, from 1.
        line: usize,
        /// What is wrong.
        reason: &'static str,
        /// The line as found.
        content: String,
    },
    /// A line of an index names an image that is not on disk.
    #[error("{path}: line {line}: image {image} does not exist")]
    MissingImage {
        /// The index file.
        path: PathBuf,
        /// Line number, from 1.
        line: usize,
        /// The image path it names.
        image: PathBuf,
    },
    /// An image that cannot be decoded (corrupt, truncated, unsupported).
    #[error("{path}: cannot decode image: {message}")]
    Decode {
        /// The image file.
        path: PathBuf,
        /// The decoder's message.
        message: String,
    },
    /// An image whose size differs from the one the format fixes.
    #[error("{path}: image is {got}, the format expects {expected}")]
    UnexpectedShape {
        /// The image file.
        path: PathBuf,
        /// Shape the format fixes.
        expected: Shape,
        /// Shape decoded.
        got: Shape,
    },
    /// A folder or file name that the layout requires to be a number.
    #[error("{path}: {reason}")]
    BadName {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong with its name.
        reason: &'static str,
    },
    /// A class folder whose number plus the label offset (the classes of a
    /// dataset before it) does not fit a 64-bit label.
    #[error("{path}: class {class} plus the label offset {offset} does not fit a 64-bit label")]
    LabelOverflow {
        /// The class folder.
        path: PathBuf,
        /// Its class number.
        class: u64,
        /// The offset added to it.
        offset: i64,
    },
    /// A path that is not a regular file where one is read (a FIFO would
    /// block forever).
    #[error("{path} is {kind}, not a regular file")]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// An image that declares a size past the decode limits.
    #[error("{path}: image of {width}x{height} is past the decode limits ({} pixels a side, {} bytes)", limits.max_side, limits.max_bytes)]
    TooLarge {
        /// The image file.
        path: PathBuf,
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// The limits in force.
        limits: crate::DecodeLimits,
    },
    /// A folder walk that meets a folder twice (a symbolic-link loop).
    #[error("{path}: folder reached again through a symbolic link (a loop)")]
    LinkLoop {
        /// The folder met again.
        path: PathBuf,
    },
    /// A folder or file that holds nothing to read.
    #[error("{path}: {what}")]
    Empty {
        /// The folder or file.
        path: PathBuf,
        /// What is missing.
        what: &'static str,
    },
    /// An image that could not be encoded by a writer.
    #[error("{path}: cannot encode image: {message}")]
    Encode {
        /// The target file.
        path: PathBuf,
        /// The encoder's message.
        message: String,
    },
    /// A torchvision CIFAR pickle that holds something other than the
    /// layout's own values (or is damaged): refused, nothing in it run.
    #[error("{path}: {reason}")]
    Pickle {
        /// The pickle file.
        path: PathBuf,
        /// What was found, and where.
        reason: String,
    },
    /// A writer given data that does not fit the format.
    #[error("{path}: {reason}")]
    InvalidInput {
        /// The file being written.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A WebDataset shard whose member (or the sample it belongs to) cannot
    /// be read as WebDataset defines it.
    #[error("{shard}: member {member}: {reason}")]
    TarMember {
        /// The shard (`.tar` file).
        shard: PathBuf,
        /// The member's name in the shard (or the sample's key).
        member: String,
        /// What is wrong.
        reason: String,
    },
    /// A gzip-compressed WebDataset shard (`.tar.gz`, `.tgz`) that could not
    /// be decompressed whole.
    #[error("{shard}: cannot decompress the gzip-compressed shard: {reason}")]
    Gunzip {
        /// The compressed shard.
        shard: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A WebDataset key whose members are split across two shards.
    #[error(
        "key {key:?} has members at the end of {first} and at the start of {second}: a sample \
         must lie in one shard"
    )]
    SplitKey {
        /// The key (`__key__`).
        key: String,
        /// The shard its first members are in.
        first: PathBuf,
        /// The next shard, which holds more of its members.
        second: PathBuf,
    },
    /// A Parquet file (or one of its row groups or rows, named in `path`)
    /// that cannot be read as the layout requires: not Parquet, a damaged
    /// footer or page, a missing or mistyped column, a null image.
    #[error("{path}: {reason}")]
    Parquet {
        /// The file, with the row group and row where there is one.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A Hugging Face Arrow file (or one of its record batches or rows,
    /// named in `path`) that cannot be read as `datasets` writes it: not an
    /// Arrow IPC stream, a damaged message, a missing or mistyped column, a
    /// null image.
    #[error("{path}: {reason}")]
    Arrow {
        /// The file, with the record batch and row where there is one.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A format this build was compiled without (a cargo feature).
    #[error(
        "{path}: this build reads no {format} (build with the `{feature}` feature; `cargo \
         xtask` and the Python package turn it on by themselves)"
    )]
    NotBuilt {
        /// The file or list that was to be read.
        path: PathBuf,
        /// The format.
        format: &'static str,
        /// The cargo feature that builds its reader.
        feature: &'static str,
    },
    /// A fixed step (crop, conversion) failed on a decoded image.
    #[error("{path}: {source}")]
    Transform {
        /// The image file.
        path: PathBuf,
        /// The transform's error.
        source: adapt_dataset::Error,
    },
}

impl FormatError {
    /// A decoding error (`Decode`, `TooLarge`, `Transform`) renamed to name
    /// `path` — where the image lives inside its file (a tar member, a
    /// Parquet row) —, built only when decoding failed; others unchanged.
    pub(crate) fn naming(self, path: impl FnOnce() -> PathBuf) -> Self {
        match self {
            FormatError::Decode { message, .. } => FormatError::Decode {
                path: path(),
                message,
            },
            FormatError::TooLarge {
                width,
                height,
                limits,
                ..
            } => FormatError::TooLarge {
                path: path(),
                width,
                height,
                limits,
            },
            FormatError::Transform { source, .. } => FormatError::Transform {
                path: path(),
                source,
            },
            other => other,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                FormatError::Missing { path, what: "file" }
            } else {
                FormatError::Io { path, source }
            }
        }
    }
}

impl From<FormatError> for adapt_dataset::Error {
    fn from(e: FormatError) -> Self {
        adapt_dataset::Error::reader(e)
    }
}
