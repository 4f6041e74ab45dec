//! A dataset as data, not as a loader: its length, one sample as the
//! format's reader yields it, labels and class names — what a Python user's
//! `len(ds)`, `ds[i]`, `ds.targets` and `ds.classes` answer.

use crate::AdaptError;
use adapt_dataset::Sample;
use adapt_pipeline::{DatasetSpec, OpenedDataset, PipelineError};

/// An opened dataset.
pub struct Data {
    opened: OpenedDataset,
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Data").field("len", &self.len()).finish()
    }
}

impl Data {
    /// Opens the dataset `spec` names (its fixed steps, `resize` included).
    pub fn open(spec: &DatasetSpec) -> Result<Self, AdaptError> {
        Ok(Self {
            opened: spec.open()?,
        })
    }

    /// Samples in the dataset.
    pub fn len(&self) -> usize {
        self.opened.dataset.len()
    }

    /// Whether it holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `index` as the reader yields it (u8 pixels, layout, label).
    pub fn sample(&self, index: usize) -> Result<Sample, AdaptError> {
        let ds = &self.opened.dataset;
        ds.get(index).map_err(|source| {
            PipelineError::Sample {
                index,
                origin: ds.source(index),
                source,
            }
            .into()
        })
    }

    /// Sample `index`'s label: from the format's labels where it keeps them
    /// apart, else by reading the sample.
    pub fn label(&self, index: usize) -> Result<i64, AdaptError> {
        match self.opened.dataset.label(index) {
            Some(l) => Ok(l),
            None => self.sample(index).map(|s| s.label),
        }
    }

    /// Every sample's label, in order.
    pub fn labels(&self) -> Result<Vec<i64>, AdaptError> {
        (0..self.len()).map(|i| self.label(i)).collect()
    }

    /// Class names in label order, where the format has them.
    pub fn classes(&self) -> Option<&[String]> {
        self.opened.class_names.as_deref()
    }

    /// Where sample `index` comes from (file and record).
    pub fn source(&self, index: usize) -> String {
        self.opened.dataset.source(index)
    }

    /// The texts (captions) of samples `indices`, in order, where the
    /// dataset was opened with a text field; `None` when it has none.
    pub fn texts(&self, indices: &[usize]) -> Result<Option<Vec<String>>, AdaptError> {
        texts_of(&*self.opened.dataset, indices)
    }
}

/// The texts of `ds`'s samples `indices`, in order; `None` when it was
/// opened without a text field; a sample's failure names it.
pub(crate) fn texts_of(
    ds: &dyn adapt_dataset::Dataset,
    indices: &[usize],
) -> Result<Option<Vec<String>>, AdaptError> {
    // Sized at the first text: a batch of data without texts allocates
    // nothing (`load` asks every batch).
    let mut out = Vec::new();
    for &index in indices {
        match ds.text(index) {
            None => return Ok(None),
            Some(Ok(t)) => {
                if out.is_empty() {
                    out.reserve_exact(indices.len());
                }
                out.push(t);
            }
            Some(Err(source)) => {
                return Err(PipelineError::Sample {
                    index,
                    origin: ds.source(index),
                    source,
                }
                .into());
            }
        }
    }
    Ok(Some(out))
}
