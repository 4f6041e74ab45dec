//! Parquet files in the Hugging Face layout as a format: row groups are
//! its shards; a build without the `parquet` feature refuses them by name.

use super::files::{FileList, file_list};
use super::{Format, imagenet};
use crate::{DatasetSpec, OpenedDataset, PipelineError, SampleFields};
use adapt_formats::{FormatError, ParquetOptions};
use std::path::Path;

/// Parquet row groups a stream reads at once: each open group stays
/// decoded in the row-group cache, so fewer than for tar shards (16 of
/// ImageNet-sized groups of 100 images, about 11 MB each, and those the
/// buffer spans fit the 512 MiB cache).
pub const PARQUET_STREAM_INTERLEAVE: usize = 16;

/// The reader's columns: the spec's fields, else the Hugging Face defaults
/// (shared with the Arrow format, whose files have the same columns).
pub(super) fn column_options(spec: &DatasetSpec) -> ParquetOptions {
    let columns = spec.fields.clone().unwrap_or_else(default_columns);
    ParquetOptions {
        image: columns.image,
        label: columns.label,
        text: columns.text,
    }
}

/// Hugging Face Parquet: an image column (`{bytes, path}` or binary), an
/// integer label column.
pub struct ParquetFormat;

impl Format for ParquetFormat {
    fn name(&self) -> &'static str {
        "parquet"
    }

    fn describe(&self) -> &'static str {
        "Parquet files in the Hugging Face layout: a folder of one split, '::'-separated files or brace patterns, local, s3:// or https://"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        imagenet()
    }

    fn fields(&self) -> Option<SampleFields> {
        Some(default_columns())
    }

    fn remote(&self) -> bool {
        true
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        parquet_built(&spec.path)?;
        read_parquet(
            file_list(&spec.path, "Parquet files")?,
            &column_options(spec),
        )
    }
}

/// The Hugging Face columns: `image` and `label` (Arrow's too).
pub(super) fn default_columns() -> SampleFields {
    let o = ParquetOptions::default();
    SampleFields {
        image: o.image,
        label: o.label,
        text: None,
    }
}

#[cfg(feature = "parquet")]
fn read_parquet(
    files: FileList<'_>,
    options: &ParquetOptions,
) -> Result<OpenedDataset, PipelineError> {
    let dataset = match files {
        FileList::Local(spec) => adapt_formats::Parquet::open(spec, options)?,
        FileList::Fetched(paths) => adapt_formats::Parquet::open_files(paths, options)?,
    };
    let shards = crate::Shards {
        ranges: dataset.row_group_ranges(),
        interleave: PARQUET_STREAM_INTERLEAVE,
    };
    let class_names = dataset.class_names().map(<[String]>::to_vec);
    Ok(OpenedDataset {
        shards: Some(shards),
        class_names,
        ..OpenedDataset::plain(
            std::sync::Arc::new(dataset),
            super::normalize_of(&ParquetFormat),
        )
    })
}

#[cfg(not(feature = "parquet"))]
fn read_parquet(files: FileList<'_>, _: &ParquetOptions) -> Result<OpenedDataset, PipelineError> {
    let spec = match &files {
        FileList::Local(spec) => std::path::PathBuf::from(spec),
        FileList::Fetched(paths) => paths.first().cloned().unwrap_or_default(),
    };
    Err(FormatError::not_built_parquet(&spec).into())
}

/// Whether this build reads Parquet: checked before any file is fetched.
fn parquet_built(path: &Path) -> Result<(), PipelineError> {
    if adapt_formats::PARQUET_ENABLED {
        return Ok(());
    }
    Err(FormatError::not_built_parquet(path).into())
}
