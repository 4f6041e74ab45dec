//! A fixed subset of a dataset, in a given order, sharing the data: what a
//! tuning trial reads, and `torch.utils.data.Subset`'s counterpart.

use crate::{Dataset, Encoded, Error, Read, Sample, Shape, check_index};
use std::sync::Arc;

/// A fixed subset of a dataset, in a given order (shares the data).
pub struct Subset {
    inner: Arc<dyn Dataset>,
    indices: Vec<usize>,
}

impl Subset {
    /// The samples of `inner` at `indices`, in that order (as
    /// `torch.utils.data.Subset`); an index past `inner` is refused here,
    /// not when it is read.
    pub fn new(inner: Arc<dyn Dataset>, indices: Vec<usize>) -> Result<Self, Error> {
        let len = inner.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
            return Err(Error::IndexOutOfRange { index: bad, len });
        }
        Ok(Self { inner, indices })
    }

    /// `n` indices of `inner` drawn without replacement from `seed` (all of
    /// them, in order, when `n` ≥ its length).
    pub fn random(inner: Arc<dyn Dataset>, n: usize, seed: u64) -> Self {
        // A fixed random subset, read in index order (the loader shuffles).
        let mut indices = crate::permutation(inner.len(), seed, u64::MAX);
        indices.truncate(n);
        indices.sort_unstable();
        Self { inner, indices }
    }
}

impl Dataset for Subset {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
        check_index(index, self.indices.len())?;
        // The parent's read: a lent sample stays lent, so trials time the
        // same path as a full run.
        self.inner.read(self.indices[index], buf)
    }
    fn prefetch(&self, index: usize) {
        if let Some(&i) = self.indices.get(index) {
            self.inner.prefetch(i);
        }
    }
    fn draw_key(&self, index: usize) -> u64 {
        self.indices
            .get(index)
            .map_or(index as u64, |&i| self.inner.draw_key(i))
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        self.inner.encoded(*self.indices.get(index)?)
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.inner.label(*self.indices.get(index)?)
    }
    fn text(&self, index: usize) -> Option<Result<String, Error>> {
        match self.indices.get(index) {
            Some(&i) => self.inner.text(i),
            None => Some(Err(Error::IndexOutOfRange {
                index,
                len: self.indices.len(),
            })),
        }
    }
    fn source(&self, index: usize) -> String {
        self.indices.get(index).map_or_else(
            || format!("subset index {index}"),
            |&i| self.inner.source(i),
        )
    }
    fn sample_shape(&self) -> Option<Shape> {
        self.inner.sample_shape()
    }
    fn num_classes(&self) -> Option<usize> {
        self.inner.num_classes()
    }
}

#[cfg(test)]
mod tests {
    use super::Subset;
    use crate::{Dataset, Error, Read, Sample, check_index};
    use std::sync::Arc;

    struct Labels(usize);
    impl Dataset for Labels {
        fn len(&self) -> usize {
            self.0
        }
        fn read<'a>(&'a self, i: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
            check_index(i, self.0)?;
            *buf = Sample::hwc(vec![0; 3], 1, 1, 3, i as i64)?;
            Ok(Read::Filled)
        }
    }

    #[test]
    fn a_subset_reads_its_parents_samples_in_its_order_and_refuses_bad_indices() {
        let parent: Arc<dyn Dataset> = Arc::new(Labels(10));
        let s = Subset::new(Arc::clone(&parent), vec![7, 2, 7]).expect("valid indices");
        let labels: Vec<i64> = (0..s.len())
            .map(|i| s.get(i).map_or(-1, |x| x.label))
            .collect();
        assert_eq!(labels, [7, 2, 7]);
        assert!(s.get(3).is_err());
        assert!(Subset::new(Arc::clone(&parent), vec![10]).is_err());
        let r = Subset::random(parent, 4, 1);
        assert_eq!(r.len(), 4);
    }
}
