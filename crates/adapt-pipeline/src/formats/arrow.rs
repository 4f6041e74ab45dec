//! Hugging Face `datasets`' Arrow files as a format: record batches are
//! its shards; a build without the `parquet` feature (which reads Arrow
//! too) refuses them by name.

use super::files::{FileList, file_list};
use super::parquet::{column_options, default_columns};
use super::{Format, imagenet};
use crate::{DatasetSpec, OpenedDataset, PipelineError, SampleFields};
use adapt_formats::{FormatError, ParquetOptions};

/// Arrow record batches a stream reads at once: `datasets` writes batches
/// of 1,000 rows by default, so fewer than Parquet's row groups.
pub const ARROW_STREAM_INTERLEAVE: usize = 8;

/// A `datasets` Dataset's Arrow files (its cache files, or a
/// `save_to_disk` folder): the `Image` feature's column, an integer label.
pub struct ArrowFormat;

impl Format for ArrowFormat {
    fn name(&self) -> &'static str {
        "arrow"
    }

    fn describe(&self) -> &'static str {
        "Hugging Face datasets' Arrow files: a save_to_disk folder of one split, a Dataset's cache files ('::'-separated), local, s3:// or https://"
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
        if !adapt_formats::PARQUET_ENABLED {
            return Err(not_built(&spec.path).into());
        }
        read_arrow(file_list(&spec.path, "Arrow files")?, &column_options(spec))
    }
}

/// The refusal of a build without the reader.
fn not_built(path: &std::path::Path) -> FormatError {
    FormatError::NotBuilt {
        path: path.to_owned(),
        format: "Arrow",
        feature: "parquet",
    }
}

#[cfg(feature = "parquet")]
fn read_arrow(
    files: FileList<'_>,
    options: &ParquetOptions,
) -> Result<OpenedDataset, PipelineError> {
    let dataset = match files {
        FileList::Local(spec) => adapt_formats::ArrowFiles::open(spec, options)?,
        FileList::Fetched(paths) => adapt_formats::ArrowFiles::open_files(paths, options)?,
    };
    let shards = crate::Shards {
        ranges: dataset.record_batch_ranges(),
        interleave: ARROW_STREAM_INTERLEAVE,
    };
    let class_names = dataset.class_names().map(<[String]>::to_vec);
    Ok(OpenedDataset {
        shards: Some(shards),
        class_names,
        ..OpenedDataset::plain(
            std::sync::Arc::new(dataset),
            super::normalize_of(&ArrowFormat),
        )
    })
}

#[cfg(not(feature = "parquet"))]
fn read_arrow(files: FileList<'_>, _: &ParquetOptions) -> Result<OpenedDataset, PipelineError> {
    let spec = match &files {
        FileList::Local(spec) => std::path::PathBuf::from(spec),
        FileList::Fetched(paths) => paths.first().cloned().unwrap_or_default(),
    };
    Err(not_built(&spec).into())
}
