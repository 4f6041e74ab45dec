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
            dataset: spec.kind.to_string(),
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

/// How [`write_webdataset`] writes: samples per shard, the shuffle's seed,
/// the shards' name prefix (`PREFIX-000000.tar`, …), and whether shards of
/// that prefix already in the folder may be replaced.
#[derive(Clone, Debug)]
pub struct WebDatasetOut {
    /// Samples per shard (at least 1).
    pub shard_size: usize,
    /// Seed of the shuffle before writing (as a pack's).
    pub seed: u64,
    /// Shard name prefix.
    pub prefix: String,
    /// Replace shards of this prefix found in the folder (once the new
    /// ones are complete; extra old ones are removed after).
    pub overwrite: bool,
}

/// Writes `source` as WebDataset tar shards in the folder `dest`, for
/// other tools: shuffled from the seed as a pack is, each sample `KEY.jpg`
/// or `KEY.png` and `KEY.cls` (the label in decimal), `KEY` the source
/// index in 8 digits. An image the source holds encoded without a crop is
/// written as its file's bytes; any other is the decoded RGB sample as
/// PNG. Each shard is written under a temporary name and renamed when
/// complete. Returns the shards written, in order.
pub fn write_webdataset(
    source: &Source,
    dest: &Path,
    o: &WebDatasetOut,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<std::path::PathBuf>, AdaptError> {
    let old = tar_shards(dest, &o.prefix)?;
    if !old.is_empty() && !o.overwrite {
        return Err(AdaptError::Option(format!(
            "{} already holds {} shards named {}-NNNNNN.tar: give another folder or \
             --overwrite",
            dest.display(),
            old.len(),
            o.prefix
        )));
    }
    let ds = &*source.opened.dataset;
    let format = |e| AdaptError::Pipeline(adapt_pipeline::PipelineError::Format(e));
    let mut w =
        adapt_formats::WebDatasetWriter::new(dest, &o.prefix, o.shard_size).map_err(format)?;
    for i in adapt_dataset::permutation(ds.len(), o.seed, 0) {
        let (ext, image, label) = webdataset_image(ds, i, dest)?;
        let cls = label.to_string();
        w.write(
            &format!("{i:08}"),
            &[(ext, &image), ("cls", cls.as_bytes())],
        )
        .map_err(format)?;
        progress(1);
    }
    let written = w.finish().map_err(format)?;
    for stale in old.iter().filter(|p| !written.contains(p)) {
        std::fs::remove_file(stale).map_err(|source| AdaptError::Io {
            path: stale.clone(),
            source,
        })?;
    }
    Ok(written)
}

/// Sample `i` as a WebDataset image member: its extension, bytes, label.
fn webdataset_image(
    ds: &dyn adapt_dataset::Dataset,
    i: usize,
    dest: &Path,
) -> Result<(&'static str, Vec<u8>, i64), AdaptError> {
    let failed = |source| {
        AdaptError::Pipeline(adapt_pipeline::PipelineError::Sample {
            index: i,
            origin: ds.source(i),
            source,
        })
    };
    if let Some(e) = ds.encoded(i) {
        let e = e.map_err(failed)?;
        let ext = match e.bytes.get(..4) {
            Some([0xff, 0xd8, 0xff, _]) => Some("jpg"),
            Some([0x89, b'P', b'N', b'G']) => Some("png"),
            _ => None,
        };
        if let (Some(ext), None) = (ext, e.steps.crop) {
            return Ok((ext, e.bytes, e.label));
        }
    }
    let s = ds.get(i).map_err(failed)?;
    let png = adapt_formats::encode_png(
        dest,
        &s.hwc_bytes(),
        s.shape.width,
        s.shape.height,
        s.shape.channels,
    )
    .map_err(|e| AdaptError::Pipeline(adapt_pipeline::PipelineError::Format(e)))?;
    Ok(("png", png, s.label))
}

/// The shards `PREFIX-NNNNNN.tar` in `dir` (none when it does not exist).
fn tar_shards(dir: &Path, prefix: &str) -> Result<Vec<std::path::PathBuf>, AdaptError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(AdaptError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut out: Vec<_> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.as_deref()
                .and_then(|n| {
                    n.strip_prefix(prefix)?
                        .strip_prefix('-')?
                        .strip_suffix(".tar")
                })
                .is_some_and(|d| d.len() == 6 && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    out.sort();
    Ok(out)
}
