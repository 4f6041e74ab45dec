//! The formats a [`DatasetSpec`] opens, as one table: a [`Format`] per
//! layout and [`FORMATS`], which the opener, the command line's help and
//! parser, every unknown-format error and the Python package read.
//!
//! A new layout is its reader in `adapt-formats`, one file here with its
//! `impl Format`, one line in [`FORMATS`], its synthetic writer (for `gen`)
//! and its Python class.

mod arrow;
mod cifar10;
mod concat;
mod faces;
mod files;
mod imagefolder;
mod pack;
mod parquet;
mod webdataset;

use crate::{DatasetSpec, OpenedDataset, PipelineError, SampleFields};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

pub use arrow::{ARROW_STREAM_INTERLEAVE, ArrowFormat};
pub use cifar10::{Cifar10Format, Cifar100Format};
pub use concat::ConcatFormat;
pub use faces::{CelebADigiFaceFormat, CelebAFormat, DigiFaceFormat};
pub use imagefolder::ImageFolderFormat;
pub use pack::PackFormat;
pub use parquet::{PARQUET_STREAM_INTERLEAVE, ParquetFormat};
pub use webdataset::{WEBDATASET_STREAM_INTERLEAVE, WebDatasetFormat};

/// One on-disk layout as a [`DatasetSpec`] names and opens it.
pub trait Format: Sync {
    /// The name on the command line, in pipelines and in profiles
    /// (`webdataset`).
    fn name(&self) -> &'static str;
    /// One line for help texts and errors: what the path holds.
    fn describe(&self) -> &'static str;
    /// The mean and standard deviation the format's default pipeline
    /// normalises with (the one copy of each dataset's constants).
    fn statistics(&self) -> ([f32; 3], [f32; 3]);
    /// Which parts of a record are the image, label and text by default
    /// (WebDataset members, Parquet columns); `None` for layouts whose
    /// records have fixed parts.
    fn fields(&self) -> Option<SampleFields> {
        None
    }
    /// Whether its files may be in a store (`s3://`, `https://`).
    fn remote(&self) -> bool {
        false
    }
    /// Opens `spec` (whose `kind` is this format): the samples, class
    /// names and shards where the layout has them.
    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError>;
}

/// Every format a [`DatasetSpec`] opens, in the order help texts list them.
pub static FORMATS: &[&dyn Format] = &[
    &Cifar10Format,
    &Cifar100Format,
    &CelebAFormat,
    &DigiFaceFormat,
    &CelebADigiFaceFormat,
    &ImageFolderFormat,
    &WebDatasetFormat,
    &ParquetFormat,
    &ArrowFormat,
    &PackFormat,
    &ConcatFormat,
];

/// The format called `name` (case-insensitive), or an error listing them
/// all.
pub fn lookup(name: &str) -> Result<&'static dyn Format, PipelineError> {
    FORMATS
        .iter()
        .copied()
        .find(|f| f.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| PipelineError::UnknownDataset(name.to_owned()))
}

/// Every format's name, as a sentence lists them: "a, b, … or z".
pub fn listed() -> String {
    or_list(&FORMATS.iter().map(|f| f.name()).collect::<Vec<_>>())
}

/// One line per format, `name: description`, for `--dataset`'s help.
pub fn help_lines() -> String {
    FORMATS
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.describe()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `names` as a sentence lists them: "a, b or c".
pub fn or_list(names: &[&str]) -> String {
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// A format's name, checked against [`FORMATS`] when it is made: what a
/// [`DatasetSpec`] holds. It prints and (de)serialises as the name, so
/// profiles, reports and checkpoints read as before.
#[derive(Clone, Copy)]
pub struct FormatName(&'static dyn Format);

impl FormatName {
    /// The format itself.
    pub fn format(self) -> &'static dyn Format {
        self.0
    }

    /// The name (`webdataset`).
    pub fn as_str(self) -> &'static str {
        self.0.name()
    }
}

impl<F: Format> From<&'static F> for FormatName {
    fn from(format: &'static F) -> Self {
        Self(format)
    }
}

impl FromStr for FormatName {
    type Err = PipelineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        lookup(s).map(Self)
    }
}

impl PartialEq for FormatName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FormatName {}

impl PartialEq<&str> for FormatName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str().eq_ignore_ascii_case(other)
    }
}

impl fmt::Debug for FormatName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for FormatName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FormatName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FormatName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// `(mean, std)` as the opened dataset keeps them.
fn normalize_of(format: &dyn Format) -> (Vec<f32>, Vec<f32>) {
    let (mean, std) = format.statistics();
    (mean.to_vec(), std.to_vec())
}

/// ImageNet's statistics: what a generic folder, shards or files are
/// normalised with.
fn imagenet() -> ([f32; 3], [f32; 3]) {
    adapt_transform::Normalize::preset_values("imagenet").unwrap_or(([0.5; 3], [0.5; 3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_and_prints_back_and_is_in_the_error_and_the_help() {
        let error = PipelineError::UnknownDataset("nosuch".into()).to_string();
        let help = help_lines();
        for format in FORMATS {
            let name: FormatName = format.name().parse().unwrap();
            assert_eq!(name.to_string(), format.name());
            let upper: FormatName = format.name().to_uppercase().parse().unwrap();
            assert_eq!(upper, name);
            let json = serde_json::to_string(&name).unwrap();
            assert_eq!(json, format!("{:?}", format.name()));
            assert_eq!(serde_json::from_str::<FormatName>(&json).unwrap(), name);
            assert!(
                error.contains(format.name()),
                "{} not in {error}",
                format.name()
            );
            assert!(help.contains(format.describe()), "{}", format.name());
        }
        let e = serde_json::from_str::<FormatName>("\"mnist\"").unwrap_err();
        assert!(e.to_string().contains("webdataset"), "{e}");
    }

    #[test]
    fn a_local_layout_in_a_store_is_refused_naming_the_formats_read_from_stores() {
        let path = std::path::Path::new("s3://bucket/cifar");
        let e = files::local_folder(path, "cifar10")
            .unwrap_err()
            .to_string();
        for format in FORMATS {
            assert_eq!(
                e.contains(format.name()),
                format.remote() || format.name() == "cifar10",
                "{e}"
            );
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = FORMATS.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FORMATS.len());
    }
}
