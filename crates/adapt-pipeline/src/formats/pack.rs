//! adapt's packs as a format: shards in a folder or an object store,
//! normalised as the format they were packed from.

use super::{Format, lookup, normalize_of};
use crate::{DatasetSpec, OpenedDataset, PipelineError};
use adapt_dataset::Dataset;
use adapt_pack::PackDataset;
use std::sync::Arc;

/// A pack written by `pack` (a folder, or `s3://bucket/prefix`).
pub struct PackFormat;

impl Format for PackFormat {
    fn name(&self) -> &'static str {
        "pack"
    }

    fn describe(&self) -> &'static str {
        "adapt's shuffled shards, written by `pack` (a folder, s3:// or https://)"
    }

    /// A pack is normalised as its source format (its manifest names it);
    /// these are for a source no format here knows: 0.5 per channel.
    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        ([0.5; 3], [0.5; 3])
    }

    fn remote(&self) -> bool {
        true
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        let path = &spec.path;
        let remote = path.to_str().filter(|p| adapt_remote::is_remote(p));
        let pack = Arc::new(match remote {
            Some(url) => open_remote(url)?,
            None if !path.exists() => return Err(PipelineError::MissingPath(path.to_owned())),
            None => PackDataset::open(path)?,
        });
        let m = pack.manifest();
        let normalize = match lookup(&m.source_dataset) {
            Ok(source) => normalize_of(source),
            Err(_) => normalize_of(self),
        };
        let class_names = m.class_names.clone();
        Ok(OpenedDataset {
            pack: Some(Arc::clone(&pack)),
            class_names,
            ..OpenedDataset::plain(pack as Arc<dyn Dataset>, normalize)
        })
    }
}

/// The pack at `url` in an object store, with the process's options.
#[cfg(feature = "s3")]
fn open_remote(url: &str) -> Result<PackDataset, PipelineError> {
    Ok(adapt_remote::open_pack(
        url,
        &adapt_remote::default_options(),
    )?)
}

/// Without the S3 client: an error that says how to get it.
#[cfg(not(feature = "s3"))]
fn open_remote(url: &str) -> Result<PackDataset, PipelineError> {
    Err(PipelineError::NoS3(url.to_owned()))
}
