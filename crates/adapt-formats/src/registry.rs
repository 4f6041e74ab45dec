//! Opening a dataset by format name, as the command line and the tuner do.

use crate::{
    CelebA, CelebAOptions, Cifar10, DigiFace, DigiFaceOptions, FormatError, ImageFolder,
    ParquetOptions, Split, WebDataset, WebDatasetOptions,
};
use adapt_dataset::Dataset;
use adapt_transform::Normalize;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

/// The formats this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DatasetKind {
    /// CIFAR-10 binary batches.
    Cifar10,
    /// CelebA (aligned) with its identity file.
    CelebA,
    /// DigiFace1M class folders.
    DigiFace,
    /// A class-per-folder image tree.
    ImageFolder,
    /// WebDataset `.tar` shards (a folder, a `::` list, brace patterns).
    WebDataset,
    /// Parquet files in the Hugging Face layout (a folder, a `::` list,
    /// brace patterns).
    Parquet,
}

impl DatasetKind {
    /// Every kind, in the order the command line lists them.
    pub const ALL: [DatasetKind; 6] = [
        DatasetKind::Cifar10,
        DatasetKind::CelebA,
        DatasetKind::DigiFace,
        DatasetKind::ImageFolder,
        DatasetKind::WebDataset,
        DatasetKind::Parquet,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::Cifar10 => "cifar10",
            DatasetKind::CelebA => "celeba",
            DatasetKind::DigiFace => "digiface",
            DatasetKind::ImageFolder => "imagefolder",
            DatasetKind::WebDataset => "webdataset",
            DatasetKind::Parquet => "parquet",
        }
    }

    /// The mean and standard deviation usually used with this dataset
    /// (what its default pipeline normalises with): CIFAR-10's own
    /// statistics, 0.5 for the face sets (as the face-recognition source's
    /// training code), ImageNet's for a generic folder, shards or files.
    pub fn statistics(self) -> ([f32; 3], [f32; 3]) {
        let preset = |name| Normalize::preset_values(name).unwrap_or(([0.5; 3], [0.5; 3]));
        match self {
            DatasetKind::Cifar10 => preset("cifar10"),
            DatasetKind::CelebA | DatasetKind::DigiFace => ([0.5; 3], [0.5; 3]),
            DatasetKind::ImageFolder | DatasetKind::WebDataset | DatasetKind::Parquet => {
                preset("imagenet")
            }
        }
    }

    /// Every kind's name, as an error lists them: "a, b, … or z".
    pub fn listed() -> String {
        or_list(&DatasetKind::ALL.map(DatasetKind::name))
    }
}

/// `names` as a sentence lists them: "a, b or c".
pub fn or_list(names: &[&str]) -> String {
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

impl fmt::Display for DatasetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown format name.
#[derive(Debug, thiserror::Error)]
#[error("unknown dataset {0:?}; expected {kinds}", kinds = DatasetKind::listed())]
pub struct UnknownDataset(pub String);

impl FromStr for DatasetKind {
    type Err = UnknownDataset;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DatasetKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownDataset(s.to_owned()))
    }
}

/// Options that apply to some formats only.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// CIFAR-10 split.
    pub split: Split,
    /// CelebA options (crop).
    pub celeba: CelebAOptions,
    /// DigiFace1M options (class offset).
    pub digiface: DigiFaceOptions,
    /// WebDataset options (which members are the image and the label).
    pub webdataset: WebDatasetOptions,
    /// Parquet options (which columns are the image and the label).
    pub parquet: ParquetOptions,
}

/// Opens the dataset of format `kind` at `path` (the folder holding the
/// format's files; for WebDataset and Parquet, the file list as their users
/// write it).
pub fn open(
    kind: DatasetKind,
    path: &Path,
    options: &OpenOptions,
) -> Result<Arc<dyn Dataset>, FormatError> {
    Ok(match kind {
        DatasetKind::Cifar10 => Arc::new(Cifar10::open(path, options.split)?),
        DatasetKind::CelebA => Arc::new(CelebA::open(path, options.celeba)?),
        DatasetKind::DigiFace => Arc::new(DigiFace::open(path, options.digiface)?),
        DatasetKind::ImageFolder => Arc::new(ImageFolder::open(path)?),
        DatasetKind::WebDataset => Arc::new(WebDataset::open(
            &path.to_string_lossy(),
            &options.webdataset,
        )?),
        DatasetKind::Parquet => open_parquet(path, &options.parquet)?,
    })
}

/// Parquet files at `path` with `options`' columns.
#[cfg(feature = "parquet")]
fn open_parquet(path: &Path, options: &ParquetOptions) -> Result<Arc<dyn Dataset>, FormatError> {
    let spec = path.to_string_lossy();
    Ok(Arc::new(crate::Parquet::open(&spec, options)?))
}

/// A build without the `parquet` feature: refused, naming the feature.
#[cfg(not(feature = "parquet"))]
fn open_parquet(path: &Path, _: &ParquetOptions) -> Result<Arc<dyn Dataset>, FormatError> {
    Err(FormatError::not_built_parquet(path))
}
