//! Concatenation of datasets: one index space over several, each sample read
//! from the dataset that holds it.

use crate::{Dataset, Encoded, Error, Read, Sample, Shape};
use std::sync::Arc;

/// Several datasets read as one, in order: index `i` of the concatenation is
/// index `i - start(k)` of part `k` (as PyTorch's `ConcatDataset`).
///
/// Labels are passed through unchanged; a part that must not collide with
/// another's classes offsets its own labels (DigiFace1M's class offset).
#[derive(Clone)]
pub struct Concat {
    parts: Vec<Arc<dyn Dataset>>,
    /// `ends[k]` is one past the last global index of part `k`.
    ends: Vec<usize>,
}

impl Concat {
    /// Concatenates `parts` in order.
    pub fn new(parts: Vec<Arc<dyn Dataset>>) -> Self {
        let ends = parts
            .iter()
            .scan(0usize, |acc, p| {
                *acc += p.len();
                Some(*acc)
            })
            .collect();
        Self { parts, ends }
    }

    /// Which part holds global `index`, and the index within it.
    pub fn locate(&self, index: usize) -> Result<(usize, usize), Error> {
        let part = self.ends.partition_point(|&end| end <= index);
        if part == self.parts.len() {
            return Err(Error::IndexOutOfRange {
                index,
                len: self.len(),
            });
        }
        let start = if part == 0 { 0 } else { self.ends[part - 1] };
        Ok((part, index - start))
    }
}

impl Dataset for Concat {
    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }
    fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
        let (p, i) = self.locate(index)?;
        self.parts[p].read(i, buf)
    }
    fn prefetch(&self, index: usize) {
        if let Ok((p, i)) = self.locate(index) {
            self.parts[p].prefetch(i);
        }
    }
    fn draw_key(&self, index: usize) -> u64 {
        // The part's own key, offset past the keys of the parts before it.
        match self.locate(index) {
            Ok((p, i)) => {
                let start = if p == 0 { 0 } else { self.ends[p - 1] };
                start as u64 + self.parts[p].draw_key(i)
            }
            Err(_) => index as u64,
        }
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        match self.locate(index) {
            Ok((p, i)) => self.parts[p].encoded(i),
            Err(e) => Some(Err(e)),
        }
    }
    fn label(&self, index: usize) -> Option<i64> {
        let (p, i) = self.locate(index).ok()?;
        self.parts[p].label(i)
    }
    fn text(&self, index: usize) -> Option<Result<String, Error>> {
        match self.locate(index) {
            Ok((p, i)) => self.parts[p].text(i),
            Err(e) => Some(Err(e)),
        }
    }
    fn source(&self, index: usize) -> String {
        match self.locate(index) {
            Ok((p, i)) => self.parts[p].source(i),
            Err(e) => e.to_string(),
        }
    }
    fn sample_shape(&self) -> Option<Shape> {
        let first = self.parts.first()?.sample_shape()?;
        self.parts
            .iter()
            .all(|p| p.sample_shape() == Some(first))
            .then_some(first)
    }
    fn num_classes(&self) -> Option<usize> {
        self.parts
            .iter()
            .map(|p| p.num_classes())
            .try_fold(0, |m, n| n.map(|n| m.max(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Range(usize, i64);
    impl Dataset for Range {
        fn len(&self) -> usize {
            self.0
        }
        fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
            crate::check_index(index, self.0)?;
            *buf = Sample::hwc(vec![index as u8], 1, 1, 1, self.1)?;
            Ok(Read::Filled)
        }
    }

    #[test]
    fn maps_indices_at_every_edge() {
        let c = Concat::new(vec![
            Arc::new(Range(3, 0)),
            Arc::new(Range(0, 9)),
            Arc::new(Range(2, 1)),
        ]);
        assert_eq!(c.len(), 5);
        assert_eq!(c.locate(0).unwrap(), (0, 0));
        assert_eq!(c.locate(2).unwrap(), (0, 2));
        // The empty middle part is skipped.
        assert_eq!(c.locate(3).unwrap(), (2, 0));
        assert_eq!(c.locate(4).unwrap(), (2, 1));
        assert!(matches!(
            c.locate(5),
            Err(Error::IndexOutOfRange { index: 5, len: 5 })
        ));
        let s = c.get(4).unwrap();
        assert_eq!((s.pixels[0], s.label), (1, 1));
        assert!(Concat::new(vec![]).get(0).is_err());
    }
}
