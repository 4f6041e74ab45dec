//! The vocabulary every other adapt crate speaks: the map-style [`Dataset`]
//! trait and how a sample is read ([`Read`]: lent or filled), the decoded
//! [`Sample`] with its [`Shape`] and [`Layout`], the encoded form of a sample
//! with its format's fixed steps ([`Encoded`], [`FixedSteps`], [`CropBox`]),
//! the reduced-decode seam ([`ScaledDecode`]), [`Concat`] of datasets, the
//! epoch permutation, the shard-streaming order ([`ShardOrder`]), how far
//! an order is from a shuffle ([`ShuffleQuality`]) and the shared
//! [`Error`].
//!
//! This crate is not for reading files or processing images: it does no I/O
//! and has no policy on where data lives (readers are in `adapt-formats`),
//! and the image steps, collation and per-sample random numbers are in
//! `adapt-transform`.
//!
//! The key design choice is that reading is *allocation-aware*: a worker
//! keeps one [`Sample`] alive and reuses it for every sample it touches
//! ([`Dataset::read`] fills it, or lends a view of where the sample already
//! lives). At tens of thousands of samples per second, a per-sample
//! allocation is visible.
//!
//! ```
//! use adapt_dataset::{Dataset, Sample};
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
//! assert_eq!(sample.pixels, vec![255; 12]);
//! ```

mod concat;
mod decode;
mod encoded;
mod error;
mod permutation;
mod sample;
mod sampler;
mod shaped;
mod shard_order;
mod shuffle_quality;
pub mod stage;
mod subset;

pub use concat::Concat;
pub use decode::ScaledDecode;
pub use encoded::{CropBox, Encoded, FixedSteps};
pub use error::Error;
pub use permutation::{fnv1a, permutation};
pub use sample::{Layout, Sample, SampleView, Shape};
pub use sampler::Sampler;
pub use shaped::Shaped;
pub use shard_order::ShardOrder;
pub use shuffle_quality::ShuffleQuality;
pub use subset::Subset;

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

    /// Sample `index`'s label without reading its pixels, where the format
    /// keeps labels apart (CIFAR-10's label byte, an image folder's class);
    /// `None` when only reading the sample tells (or the index is out of
    /// range).
    fn label(&self, _index: usize) -> Option<i64> {
        None
    }

    /// Sample `index`'s text (a caption: a WebDataset `txt` or `json`
    /// member, a Parquet string column) where the dataset was opened with a
    /// text field;
    /// `None` (the default) when it has none.
    fn text(&self, _index: usize) -> Option<Result<String, Error>> {
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
            fn label(&self, index: usize) -> Option<i64> { (**self).label(index) }
            fn text(&self, index: usize) -> Option<Result<String, Error>> { (**self).text(index) }
        }
    )*};
}
forward_dataset!(&D, Box<D>, Arc<D>);
