//! The CIFAR formats: CIFAR-10's binary batches or torchvision's download
//! of them, and torchvision's CIFAR-100 download.

use super::{Format, files::local_folder, normalize_of};
use crate::{DatasetSpec, OpenedDataset, PipelineError};
use adapt_formats::{Cifar10, Split};
use std::sync::Arc;

/// CIFAR-10's binary batches; `test_split` picks `test_batch.bin`.
pub struct Cifar10Format;

impl Format for Cifar10Format {
    fn name(&self) -> &'static str {
        "cifar10"
    }

    fn describe(&self) -> &'static str {
        "CIFAR-10's binary batches (data_batch_N.bin, test_batch.bin) or torchvision's cifar-10-batches-py/, read without running its pickles"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        adapt_transform::Normalize::preset_values("cifar10").unwrap_or(([0.5; 3], [0.5; 3]))
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        local_folder(&spec.path, self.name())?;
        let c = Cifar10::open(&spec.path, split(spec))?;
        let class_names = Some(c.classes().to_vec());
        Ok(OpenedDataset {
            class_names,
            ..OpenedDataset::plain(Arc::new(c), normalize_of(self))
        })
    }
}

/// CIFAR-100 as torchvision downloads it (`cifar-100-python/`), fine labels.
pub struct Cifar100Format;

impl Format for Cifar100Format {
    fn name(&self) -> &'static str {
        "cifar100"
    }

    fn describe(&self) -> &'static str {
        "CIFAR-100 as torchvision downloads it (cifar-100-python/: train, test, meta), fine labels"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        ([0.5071, 0.4865, 0.4409], [0.2673, 0.2564, 0.2762])
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        local_folder(&spec.path, self.name())?;
        let c = adapt_formats::Cifar100::open(&spec.path, split(spec))?;
        let class_names = Some(c.classes().to_vec());
        Ok(OpenedDataset {
            class_names,
            ..OpenedDataset::plain(Arc::new(c), normalize_of(self))
        })
    }
}

/// The split `spec` names: the test split or the training one.
fn split(spec: &DatasetSpec) -> Split {
    if spec.test_split {
        Split::Test
    } else {
        Split::Train
    }
}
