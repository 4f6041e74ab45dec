//! A class-per-folder image tree, as torchvision's `ImageFolder`.

use super::{Format, files::local_folder, imagenet, normalize_of};
use crate::{DatasetSpec, OpenedDataset, PipelineError};
use adapt_formats::ImageFolder;
use std::sync::Arc;

/// A class-per-folder image tree (JPEG, PNG, WebP…), classes sorted by name.
pub struct ImageFolderFormat;

impl Format for ImageFolderFormat {
    fn name(&self) -> &'static str {
        "imagefolder"
    }

    fn describe(&self) -> &'static str {
        "a folder of class folders of images, as torchvision's ImageFolder"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        imagenet()
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        local_folder(&spec.path, self.name())?;
        let f = ImageFolder::open(&spec.path)?;
        let class_names = Some(f.classes().to_vec());
        Ok(OpenedDataset {
            class_names,
            ..OpenedDataset::plain(Arc::new(f), normalize_of(self))
        })
    }
}
