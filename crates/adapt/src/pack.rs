//! Writing and verifying packs wherever they live: a local folder or an
//! S3-compatible store (`s3://bucket/prefix`), one call each.

use crate::AdaptError;
use adapt_pack::{Manifest, PackOptions, SourceInfo, VerifyReport};
use adapt_pipeline::DatasetSpec;
use adapt_remote::{RemoteOptions, UploadReport};
use std::path::Path;

/// What writing a pack did.
pub struct Written {
    /// The pack's manifest.
    pub manifest: Manifest,
    /// For an object store: what went up, what was already there, what
    /// old objects were removed.
    pub upload: Option<UploadReport>,
}

/// A dataset opened to be packed (once: CIFAR-10 reads its records at
/// open, so sizing a progress bar and packing share one read).
pub struct Source {
    opened: adapt_pipeline::OpenedDataset,
    info: SourceInfo,
}

impl Source {
    /// Opens the dataset `spec` (a format, not a pack).
    pub fn open(spec: &DatasetSpec) -> Result<Self, AdaptError> {
        if spec.kind == "pack" {
            return Err(AdaptError::Option(
                "the source must be a dataset format, not a pack".into(),
            ));
        }
        let opened = spec.open()?;
        let info = SourceInfo {
            dataset: spec.kind.clone(),
            path: spec.path.display().to_string(),
            class_names: opened.class_names.clone(),
        };
        Ok(Self { opened, info })
    }

    /// Samples the source holds.
    pub fn len(&self) -> usize {
        self.opened.dataset.len()
    }

    /// Whether the source holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Packs `source` into `dest` — a folder, or `s3://…` (staged in the cache
/// folder, uploaded shard by shard, the manifest last). `progress` counts
/// samples packed.
pub fn write(
    source: &Source,
    dest: &str,
    options: &PackOptions,
    remote: &RemoteOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Written, AdaptError> {
    let (ds, info) = (&*source.opened.dataset, &source.info);
    if adapt_remote::is_remote(dest) {
        let (manifest, upload) = publish(ds, info, dest, options, remote, progress)?;
        return Ok(Written {
            manifest,
            upload: Some(upload),
        });
    }
    let manifest = adapt_pack::write_pack(ds, info, Path::new(dest), options, progress)?;
    Ok(Written {
        manifest,
        upload: None,
    })
}

/// Checks every checksum and count of the pack at `pack` (a folder or
/// `s3://…`) and names any damage; with `against`, also that the source
/// still holds the content the pack was made from.
pub fn verify(
    pack: &str,
    against: Option<&DatasetSpec>,
    remote: &RemoteOptions,
) -> Result<VerifyReport, AdaptError> {
    let (report, manifest) = if adapt_remote::is_remote(pack) {
        verify_remote(pack, remote)?
    } else {
        let dir = Path::new(pack);
        (adapt_pack::verify(dir)?, Manifest::load(dir)?)
    };
    if let Some(spec) = against {
        let opened = spec.open()?;
        adapt_pack::check_source(&manifest, Path::new(pack), &*opened.dataset)?;
    }
    Ok(report)
}

#[cfg(feature = "s3")]
fn publish(
    ds: &dyn adapt_dataset::Dataset,
    info: &SourceInfo,
    dest: &str,
    options: &PackOptions,
    remote: &RemoteOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Manifest, UploadReport), AdaptError> {
    Ok(adapt_remote::publish(
        ds, info, dest, options, remote, progress,
    )?)
}

#[cfg(feature = "s3")]
fn verify_remote(
    pack: &str,
    remote: &RemoteOptions,
) -> Result<(VerifyReport, Manifest), AdaptError> {
    let r = adapt_remote::verify_pack(pack, remote)?;
    let storage = adapt_remote::RemoteStorage::connect(pack, remote)?;
    Ok((r, Manifest::load_from(&storage)?))
}

#[cfg(not(feature = "s3"))]
fn publish(
    _: &dyn adapt_dataset::Dataset,
    _: &SourceInfo,
    dest: &str,
    _: &PackOptions,
    _: &RemoteOptions,
    _: &(dyn Fn(u64) + Sync),
) -> Result<(Manifest, UploadReport), AdaptError> {
    Err(adapt_pipeline::PipelineError::NoS3(dest.to_owned()).into())
}

#[cfg(not(feature = "s3"))]
fn verify_remote(pack: &str, _: &RemoteOptions) -> Result<(VerifyReport, Manifest), AdaptError> {
    Err(adapt_pipeline::PipelineError::NoS3(pack.to_owned()).into())
}
