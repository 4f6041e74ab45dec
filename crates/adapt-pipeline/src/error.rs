//! The pipeline crate's error type.

/// Errors of pipeline descriptions and of opening their data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// A step of the text form that does not parse or cannot apply; names
    /// the token as written.
    #[error("transform {token:?}: {reason}")]
    Transform {
        /// The step as written (`random_crop(64)`).
        token: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An unknown output name.
    #[error("output {0:?}: expected f32, u8 or u8-nhwc")]
    Output(String),
    /// An unknown format name.
    #[error("unknown dataset {0:?}: expected {kinds}", kinds = crate::formats::listed())]
    UnknownDataset(String),
    /// The dataset path does not exist.
    #[error("dataset path {0} does not exist")]
    MissingPath(std::path::PathBuf),
    /// A dataset could not be opened (the error names the file).
    #[error(transparent)]
    Format(#[from] adapt_formats::FormatError),
    /// A pack could not be opened (the error names shard and frame).
    #[error(transparent)]
    Pack(#[from] adapt_pack::PackError),
    /// Files in a store could not be fetched (the error names the URL).
    #[error(transparent)]
    Remote(#[from] adapt_remote::RemoteError),
    /// An option that does not apply to this dataset (`--stream` on loose files).
    #[error("{0}")]
    Option(String),
    /// A sample that could not be read or transformed (`inspect`).
    #[error("sample {index} ({origin}): {source}")]
    Sample {
        /// The sample's index.
        index: usize,
        /// Where it lives (the reader's provenance: file and record).
        origin: String,
        /// The reader's or the step's error (downcastable).
        source: adapt_dataset::Error,
    },
    /// An `s3://` or `https://` path in a build without the client.
    #[error(
        "{0}: this build of adapt has no object-store client (the `s3` feature, for s3:// and https://; `cargo xtask` turns it on by itself for such a path)"
    )]
    NoS3(String),
    /// A serialised pipeline that cannot be read.
    #[error("pipeline description: {0}")]
    Description(String),
}
