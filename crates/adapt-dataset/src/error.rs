//! The dataset vocabulary's error type.

use crate::Shape;

/// Errors of the dataset vocabulary. Readers in other crates wrap their own
/// typed errors (which name the file and record) in [`Error::Reader`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An index at or past the end of the dataset.
    #[error("index {index} out of range for a dataset of {len} samples")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// The dataset's length.
        len: usize,
    },
    /// A pixel buffer whose length does not match its stated shape.
    #[error("pixel buffer of {got} bytes does not match shape {shape} ({expected} bytes)")]
    ShapeMismatch {
        /// The stated shape.
        shape: Shape,
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes present.
        got: usize,
    },
    /// A sample whose shape after the steps is not the batch's (collation
    /// stacks samples of one shape, as torch's `default_collate` does).
    #[error(
        "the sample comes out {got}, the batch's samples {expected}: samples batch together \
         only at one size (end the steps with a fixed size, e.g. resize(N),center_crop(N))"
    )]
    SizeDiffers {
        /// The sample's shape after the steps.
        got: Shape,
        /// The batch's sample shape.
        expected: Shape,
    },
    /// A crop box that does not lie inside the image.
    #[error(
        "crop box (left {left}, top {top}, right {right}, bottom {bottom}) does not fit a {width}x{height} image"
    )]
    CropOutOfBounds {
        /// Box left edge (inclusive).
        left: u32,
        /// Box top edge (inclusive).
        top: u32,
        /// Box right edge (exclusive).
        right: u32,
        /// Box bottom edge (exclusive).
        bottom: u32,
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
    },
    /// A transform given a sample with a channel count it cannot handle.
    #[error("{transform} cannot take a sample with {channels} channels")]
    Channels {
        /// The transform's name.
        transform: &'static str,
        /// The sample's channel count.
        channels: u32,
    },
    /// An output slice of the wrong length.
    #[error("output slice holds {got} values, the sample needs {expected}")]
    OutputSize {
        /// Values the sample needs.
        expected: usize,
        /// Values the slice holds.
        got: usize,
    },
    /// An impossible transform or normalisation parameter.
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// The SIMD resizer refused the images.
    #[error("resize from {from} to {to}: {message}")]
    Resize {
        /// Source shape.
        from: Shape,
        /// Target shape.
        to: Shape,
        /// The resizer's message.
        message: String,
    },
    /// A reader's own error (it names the file, record or line at fault).
    #[error(transparent)]
    Reader(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// Wraps a reader's typed error.
    pub fn reader(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Reader(Box::new(err))
    }

    /// The reader's error, if this is one of type `E`.
    pub fn reader_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Error::Reader(inner) => inner.downcast_ref::<E>(),
            _ => None,
        }
    }
}
