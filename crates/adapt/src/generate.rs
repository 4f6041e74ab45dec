//! Synthetic datasets in the real on-disk layouts, sized by a sample count
//! (what `gen` and the benches ask for).

use crate::AdaptError;
use adapt_formats::DatasetKind;
use adapt_synth::{CelebASpec, Cifar10Spec, DigiFaceSpec, ImageFolderSpec};
use std::path::Path;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Request {
    /// The layout.
    pub kind: DatasetKind,
    /// Images; `None` for the layout's default size. CIFAR-10: training
    /// records (the test split gets a fifth); CelebA: images, one identity
    /// per 20; DigiFace1M and image folders: rounded up to whole classes.
    pub count: Option<usize>,
    /// Seed of every image and label.
    pub seed: u64,
    /// Image folders (and WebDataset shards or Parquet of the same
    /// images): typical (width, height).
    pub size: Option<(u32, u32)>,
    /// Image folders: class folders.
    pub classes: Option<usize>,
}

impl Request {
    /// The layout's default size with `seed`.
    pub fn new(kind: DatasetKind, seed: u64) -> Self {
        Self {
            kind,
            count: None,
            seed,
            size: None,
            classes: None,
        }
    }

    /// Images this request writes.
    pub fn total(&self) -> usize {
        match self.kind {
            DatasetKind::Cifar10 => {
                let s = self.cifar10();
                s.train + s.test
            }
            DatasetKind::CelebA => self.celeba().count,
            DatasetKind::DigiFace => {
                let s = self.digiface();
                s.classes * s.per_class
            }
            DatasetKind::ImageFolder | DatasetKind::WebDataset | DatasetKind::Parquet => {
                let s = self.imagefolder();
                s.classes * s.per_class
            }
        }
    }

    /// What the images are, for a summary line.
    pub fn what(&self) -> &'static str {
        match self.kind {
            DatasetKind::Cifar10 => "CIFAR-10 records",
            DatasetKind::CelebA => "CelebA images",
            DatasetKind::DigiFace => "DigiFace1M images",
            DatasetKind::ImageFolder => "JPEGs in class folders",
            DatasetKind::WebDataset => "JPEGs in WebDataset shards",
            DatasetKind::Parquet => "JPEGs in Hugging Face Parquet",
        }
    }

    fn cifar10(&self) -> Cifar10Spec {
        match self.count {
            Some(n) => Cifar10Spec {
                train: n,
                test: (n / 5).max(1),
                seed: self.seed,
            },
            None => Cifar10Spec {
                seed: self.seed,
                ..Cifar10Spec::default()
            },
        }
    }

    /// CelebA's spec: `count` images of one identity per 20.
    pub fn celeba(&self) -> CelebASpec {
        let mut spec = CelebASpec {
            seed: self.seed,
            ..CelebASpec::default()
        };
        if let Some(n) = self.count {
            spec.count = n;
            spec.identities = (n / 20).max(1);
        }
        spec
    }

    fn digiface(&self) -> DigiFaceSpec {
        let mut spec = DigiFaceSpec {
            seed: self.seed,
            ..DigiFaceSpec::default()
        };
        if let Some(n) = self.count {
            spec.classes = n.div_ceil(spec.per_class).max(1);
        }
        spec
    }

    fn imagefolder(&self) -> ImageFolderSpec {
        let mut spec = ImageFolderSpec {
            seed: self.seed,
            ..ImageFolderSpec::default()
        };
        if let Some(c) = self.classes {
            spec.classes = c;
        }
        if let Some((w, h)) = self.size {
            (spec.width, spec.height) = (w, h);
        }
        if let Some(n) = self.count {
            spec.per_class = n.div_ceil(spec.classes.max(1)).max(1);
        }
        spec
    }
}

/// Writes the dataset `request` describes into `out`; `progress` counts
/// images written. Returns the number written.
pub fn generate(
    request: &Request,
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<usize, AdaptError> {
    refuse_non_empty(out)?;
    match request.kind {
        DatasetKind::Cifar10 => adapt_synth::cifar10(out, request.cifar10(), progress)?,
        DatasetKind::CelebA => adapt_synth::celeba(out, request.celeba(), progress)?,
        DatasetKind::DigiFace => adapt_synth::digiface(out, request.digiface(), progress)?,
        DatasetKind::ImageFolder => adapt_synth::imagefolder(out, request.imagefolder(), progress)?,
        DatasetKind::WebDataset => adapt_synth::webdataset(out, request.imagefolder(), progress)?,
        DatasetKind::Parquet => adapt_synth::parquet(out, request.imagefolder(), progress)?,
    }
    Ok(request.total())
}

/// Generation writes a new or empty folder: over an existing dataset with
/// more samples, the old extra files would stay and the result would have
/// the old count; and a folder that is not a dataset is not ours to clear.
fn refuse_non_empty(out: &Path) -> Result<(), AdaptError> {
    let entries = match std::fs::read_dir(out) {
        Ok(rd) => rd.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(AdaptError::Io {
                path: out.to_owned(),
                source,
            });
        }
    };
    if entries == 0 {
        return Ok(());
    }
    Err(AdaptError::Io {
        path: out.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "holds {entries} entries: gen writes a new or empty folder (remove this one, or \
                 choose another --out)"
            ),
        ),
    })
}
