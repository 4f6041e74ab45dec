//! A dataset with a transform applied to each sample after it is read.

use crate::{Dataset, Error, Read, Sample, Scratch, Shape, Transform};
use adapt_dataset::read_into;

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
    fn label(&self, index: usize) -> Option<i64> {
        self.inner.label(index)
    }
    fn text(&self, index: usize) -> Option<Result<String, Error>> {
        self.inner.text(index)
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
