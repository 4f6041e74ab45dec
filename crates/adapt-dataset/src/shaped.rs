//! A dataset whose samples are declared to have one shape: an image folder
//! whose first image set the size no step fixes. Reads are the inner
//! dataset's; a sample of another size is refused where it is batched.

use crate::{Dataset, Encoded, Error, Read, Sample, Shape};
use std::sync::Arc;

/// `inner`, reporting `shape` as its samples' shape.
pub struct Shaped {
    inner: Arc<dyn Dataset>,
    shape: Shape,
}

impl Shaped {
    /// `inner` with its samples declared to be `shape`.
    pub fn new(inner: Arc<dyn Dataset>, shape: Shape) -> Self {
        Self { inner, shape }
    }
}

impl Dataset for Shaped {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
        self.inner.read(index, buf)
    }
    fn prefetch(&self, index: usize) {
        self.inner.prefetch(index);
    }
    fn draw_key(&self, index: usize) -> u64 {
        self.inner.draw_key(index)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        self.inner.encoded(index)
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
        Some(self.shape)
    }
    fn num_classes(&self) -> Option<usize> {
        self.inner.num_classes()
    }
}
