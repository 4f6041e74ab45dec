//! The vocabulary every other adapt crate speaks: the map-style [`Dataset`]
//! trait, the decoded [`Sample`], composable [`Transform`]s, the final
//! [`Normalize`] step that writes f32 CHW straight into a caller's buffer, and
//! [`Concat`] of datasets.
//!
//! This crate is not for reading files: it does no I/O and has no policy on
//! where data lives; readers of real on-disk layouts are in `adapt-formats`,
//! batching and workers in `adapt-loader`.
//!
//! The key design choice is that every step is *allocation-aware*: a worker
//! keeps one [`Sample`] and one [`Scratch`] alive and reuses them for every
//! sample it touches ([`Dataset::read`], [`Transform::apply`]), and
//! normalisation writes into a slice the loader owns (a pooled or pinned batch
//! buffer). At tens of thousands of samples per second, a per-sample
//! allocation is visible.
//!
//! ```
//! use adapt_dataset::{Dataset, Normalize, Sample};
//!
//! struct Ones;
//! impl Dataset for Ones {
//!     fn len(&self) -> usize { 4 }
//!     fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<adapt_dataset::Read<'a>, adapt_dataset::Error> {
//!         adapt_dataset::check_index(index, self.len())?;
//!         *buf = Sample::hwc(vec![255; 2 * 2 * 3], 2, 2, 3, index as i64)?;
//!         Ok(adapt_dataset::Read::Filled)
//!     }
//! }
//! let sample = Ones.get(3).unwrap();
//! let mut out = vec![0.0f32; 12];
//! Normalize::new(&[0.5; 3], &[0.5; 3]).unwrap().write_chw(sample.view(), &mut out).unwrap();
//! assert!(out.iter().all(|&v| v == 1.0));
//! ```

mod augment;
mod concat;
mod decode;
mod encoded;
mod error;
mod geometry;
mod normalize;
mod permutation;
mod rng;
mod sample;
mod transform;

pub use augment::{
    CenterCrop, ColorJitter, PaddingMode, RandomCrop, RandomFlip, RandomResizedCrop, Region,
    ResizeShorter, flip_horizontal, flip_vertical, resize_region,
};
pub use concat::Concat;
pub use decode::{ScaledDecode, apply_encoded_deferring, decode_exact};
pub use encoded::{Encoded, FixedSteps};
pub use error::Error;
pub use geometry::{Geometry, apply_deferring};
pub use normalize::{Normalize, write_u8};
pub use permutation::{fnv1a, permutation};
pub use rng::SampleRng;
pub use sample::{Layout, Sample, SampleView, Shape};
pub use transform::{Compose, Crop, CropBox, Resize, ResizeFilter, Scratch, ToRgb, Transform};

use std::sync::Arc;

/// How [`Dataset::read`] delivered a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read<'a> {
    /// Borrowed from where it lives (CIFAR-10's records in memory): the caller
    /// collates straight from it, one copy per byte, into the batch.
    Lent(SampleView<'a>),
    /// Written into the caller's buffer, reusing its allocation.
    Filled,
}

impl<'a> Read<'a> {
    /// The sample as a view: the lent one, or `buf` when filled.
    pub fn view(self, buf: &'a Sample) -> SampleView<'a> {
        match self {
            Read::Lent(v) => v,
            Read::Filled => buf.view(),
        }
    }
}

/// A map-style dataset: a known number of samples, each readable by index.
///
/// Contract (as burn and PyTorch state theirs): `read` with an index below
/// [`len`](Dataset::len) returns the sample or an `Err` that means the read
/// really failed (a missing file, a corrupt image). An index out of range is a
/// caller bug; implementations return [`Error::IndexOutOfRange`] rather than
/// panic. The same index always yields the same sample.
///
/// There is one read method, [`read`](Dataset::read), which either lends the
/// sample or fills the caller's buffer: a wrapper (a subset, a
/// concatenation, a map) implements it by calling its inner dataset's
/// `read`, so it cannot drop the zero-copy path by forgetting to forward an
/// optional method.
///
/// A dataset is shared across worker threads by reference (`Send + Sync`); a
/// worker never gets its own copy of the data.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// `true` when the dataset holds no sample.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads sample `index`: lends it ([`Read::Lent`]) when the format keeps
    /// decoded pixels in memory, or writes it into `buf` ([`Read::Filled`]),
    /// reusing `buf`'s pixel buffer.
    fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error>;

    /// Reads sample `index` into a new [`Sample`].
    fn get(&self, index: usize) -> Result<Sample, Error> {
        let mut sample = Sample::default();
        read_into(self, index, &mut sample)?;
        Ok(sample)
    }

    /// The sample's identity for random draws: augmentation of sample
    /// `index` draws from (seed, epoch, `draw_key(index)`). The index itself
    /// by default; a pack answers the sample's index in its source dataset,
    /// so a pack and the loose files it was made from augment alike, and a
    /// subset answers its parent's key.
    fn draw_key(&self, index: usize) -> u64 {
        index as u64
    }

    /// A hint that sample `index` is read next: a format that lends from
    /// memory (CIFAR-10's map) starts fetching it into the cache, so the
    /// read of a shuffled record does not wait on memory. Does nothing by
    /// default; never fails.
    fn prefetch(&self, _index: usize) {}

    /// The sample's original encoded bytes (a JPEG or PNG file's contents)
    /// and the fixed steps a reader must still apply, for formats that store
    /// encoded images; `None` (the default) for formats that store pixels.
    /// A pack stores these when asked to keep images encoded.
    fn encoded(&self, _index: usize) -> Option<Result<Encoded, Error>> {
        None
    }

    /// Where sample `index` comes from (a file path, a file and record), for
    /// error messages and `inspect`.
    fn source(&self, index: usize) -> String {
        format!("sample {index}")
    }

    /// The shape every sample has after the format's fixed steps, when it is
    /// fixed (CIFAR-10: 32×32×3). `None` when samples may differ.
    fn sample_shape(&self) -> Option<Shape> {
        None
    }

    /// The number of classes labels are drawn from, when known.
    fn num_classes(&self) -> Option<usize> {
        None
    }
}

/// Reads sample `index` into `out` (owned), copying a lent sample: for
/// callers that keep or modify the sample.
pub fn read_into<D: Dataset + ?Sized>(
    dataset: &D,
    index: usize,
    out: &mut Sample,
) -> Result<(), Error> {
    if let Read::Lent(view) = dataset.read(index, out)? {
        out.copy_from(view);
    }
    Ok(())
}

/// Returns [`Error::IndexOutOfRange`] unless `index < len`.
pub fn check_index(index: usize, len: usize) -> Result<(), Error> {
    if index < len {
        Ok(())
    } else {
        Err(Error::IndexOutOfRange { index, len })
    }
}

macro_rules! forward_dataset {
    ($($ty:ty),*) => {$(
        impl<D: Dataset + ?Sized> Dataset for $ty {
            fn len(&self) -> usize { (**self).len() }
            fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
                (**self).read(index, buf)
            }
            fn get(&self, index: usize) -> Result<Sample, Error> { (**self).get(index) }
            fn draw_key(&self, index: usize) -> u64 { (**self).draw_key(index) }
            fn prefetch(&self, index: usize) { (**self).prefetch(index) }
            fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> { (**self).encoded(index) }
            fn source(&self, index: usize) -> String { (**self).source(index) }
            fn sample_shape(&self) -> Option<Shape> { (**self).sample_shape() }
            fn num_classes(&self) -> Option<usize> { (**self).num_classes() }
        }
    )*};
}
forward_dataset!(&D, Box<D>, Arc<D>);

/// A dataset with a transform applied to each sample after it is read.
///
/// The transform runs on the caller's thread (a loader worker), reusing the
/// caller's [`Scratch`] through [`Mapped::get_with`].
pub struct Mapped<D, T> {
    inner: D,
    transform: T,
    shape: Option<Shape>,
}

impl<D: Dataset, T: Transform> Mapped<D, T> {
    /// Wraps `inner` so that every sample goes through `transform`.
    pub fn new(inner: D, transform: T) -> Self {
        Self {
            inner,
            transform,
            shape: None,
        }
    }

    /// Declares the shape every transformed sample has, for an inner dataset
    /// whose samples differ (an image folder, then resized). A sample that
    /// does not match is still an error where it is batched.
    #[must_use]
    pub fn with_shape(mut self, shape: Shape) -> Self {
        self.shape = Some(shape);
        self
    }

    /// Reads and transforms sample `index` with the caller's scratch space.
    pub fn get_with(
        &self,
        index: usize,
        out: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<(), Error> {
        read_into(&self.inner, index, out)?;
        self.transform.apply(out, scratch)
    }
}

impl<D: Dataset, T: Transform> Dataset for Mapped<D, T> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        thread_local! {
            // One scratch per thread (a loader worker), reused sample after
            // sample; a nested `Mapped` falls back to a fresh one.
            static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
        }
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => self.get_with(index, out, &mut scratch),
            Err(_) => self.get_with(index, out, &mut Scratch::default()),
        })?;
        Ok(Read::Filled)
    }
    fn draw_key(&self, index: usize) -> u64 {
        self.inner.draw_key(index)
    }
    fn prefetch(&self, index: usize) {
        self.inner.prefetch(index);
    }
    fn source(&self, index: usize) -> String {
        self.inner.source(index)
    }
    fn sample_shape(&self) -> Option<Shape> {
        self.shape.or_else(|| {
            self.inner
                .sample_shape()
                .and_then(|s| self.transform.output_shape(s).ok())
        })
    }
    fn num_classes(&self) -> Option<usize> {
        self.inner.num_classes()
    }
}
