//! Datasets read one after the other, as PyTorch's `ConcatDataset`.

use super::Format;
use crate::{DatasetSpec, OpenedDataset, PipelineError};
use adapt_dataset::{Concat, Dataset};
use std::sync::Arc;

/// The datasets in a spec's `parts`, labels unchanged; normalised as the
/// first part.
pub struct ConcatFormat;

impl Format for ConcatFormat {
    fn name(&self) -> &'static str {
        "concat"
    }

    fn describe(&self) -> &'static str {
        "the datasets given as parts, one after the other (adapt.datasets.Concat; not a path)"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        ([0.5; 3], [0.5; 3])
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        let opened: Vec<OpenedDataset> = spec
            .parts
            .iter()
            .map(DatasetSpec::open)
            .collect::<Result<_, _>>()?;
        let first = opened
            .first()
            .ok_or_else(|| PipelineError::Option("a concatenation of no dataset".into()))?;
        let normalize = first.normalize.clone();
        let parts: Vec<Arc<dyn Dataset>> = opened.iter().map(|o| Arc::clone(&o.dataset)).collect();
        Ok(OpenedDataset::plain(
            Arc::new(Concat::new(parts)),
            normalize,
        ))
    }
}
