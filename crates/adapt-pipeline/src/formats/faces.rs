//! The face sets of the face-recognition source: CelebA (aligned) with its
//! identity file, DigiFace1M's class folders, and the two concatenated.

use super::{Format, files::local_folder, normalize_of};
use crate::{DatasetSpec, OpenedDataset, PipelineError};
use adapt_dataset::{Concat, Dataset};
use adapt_formats::{
    CelebA, CelebAOptions, DIGIFACE_IMAGE_SIZE, DigiFace, DigiFaceOptions, FormatError,
};
use adapt_transform::{Mapped, Resize};
use std::path::Path;
use std::sync::Arc;

/// The face sets' statistics: 0.5 per channel, as the source's training
/// code normalises them.
const FACES: ([f32; 3], [f32; 3]) = ([0.5; 3], [0.5; 3]);

/// CelebA (aligned) with `identity_CelebA.txt`, cropped to 128×128.
pub struct CelebAFormat;

impl Format for CelebAFormat {
    fn name(&self) -> &'static str {
        "celeba"
    }

    fn describe(&self) -> &'static str {
        "CelebA aligned (img_align_celeba/ and identity_CelebA.txt)"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        FACES
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        local_folder(&spec.path, self.name())?;
        let ds = CelebA::open(&spec.path, CelebAOptions::default())?;
        Ok(OpenedDataset::plain(Arc::new(ds), normalize_of(self)))
    }
}

/// DigiFace1M's class folders of RGBA PNGs, read as RGB.
pub struct DigiFaceFormat;

impl Format for DigiFaceFormat {
    fn name(&self) -> &'static str {
        "digiface"
    }

    fn describe(&self) -> &'static str {
        "DigiFace1M's class folders of 112x112 PNGs"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        FACES
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        local_folder(&spec.path, self.name())?;
        let ds = DigiFace::open(&spec.path, DigiFaceOptions::default())?;
        Ok(OpenedDataset::plain(Arc::new(ds), normalize_of(self)))
    }
}

/// `celeba/` and `digiface/` in one folder, concatenated.
pub struct CelebADigiFaceFormat;

impl Format for CelebADigiFaceFormat {
    fn name(&self) -> &'static str {
        "celeba+digiface"
    }

    fn describe(&self) -> &'static str {
        "a folder holding celeba/ and digiface/, read as one set (DigiFace labels after CelebA's)"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        FACES
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        local_folder(&spec.path, self.name())?;
        let ds = celeba_digiface(&spec.path)?;
        Ok(OpenedDataset::plain(ds, normalize_of(self)))
    }
}

/// `celeba/` and `digiface/` in `path`, concatenated: DigiFace1M's labels
/// offset past CelebA's identities, CelebA's 128×128 crop resized to
/// DigiFace's 112×112 (bilinear) so the two batch together.
fn celeba_digiface(path: &Path) -> Result<Arc<dyn Dataset>, PipelineError> {
    let celeba = CelebA::open(&path.join("celeba"), CelebAOptions::default())?;
    let identities = path
        .join("celeba")
        .join(adapt_formats::CELEBA_IDENTITY_FILE);
    let classes = celeba.num_classes().unwrap_or(0);
    let too_large = || {
        PipelineError::Option(format!(
            "{}: CelebA identities up to {} leave no room for DigiFace1M's labels after them \
             (labels are 64-bit integers)",
            identities.display(),
            classes.saturating_sub(1)
        ))
    };
    let offset = i64::try_from(classes).map_err(|_| too_large())?;
    let digi = DigiFace::open(
        &path.join("digiface"),
        DigiFaceOptions {
            class_offset: offset,
        },
    )
    .map_err(|e| match e {
        FormatError::LabelOverflow { .. } => too_large(),
        other => other.into(),
    })?;
    let resize = Resize::new(DIGIFACE_IMAGE_SIZE, DIGIFACE_IMAGE_SIZE)
        .map_err(|e| PipelineError::Option(e.to_string()))?;
    let parts: Vec<Arc<dyn Dataset>> = vec![Arc::new(Mapped::new(celeba, resize)), Arc::new(digi)];
    Ok(Arc::new(Concat::new(parts)))
}
