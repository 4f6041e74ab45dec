//! Datasets by name: what `--dataset KIND --path DIR` opens.

use crate::PipelineError;
use adapt_dataset::{Concat, Dataset, Shape, ShardOrder};
use adapt_formats::{
    CelebA, CelebAOptions, Cifar10, DIGIFACE_IMAGE_SIZE, DatasetKind, DigiFace, DigiFaceOptions,
    FormatError, ImageFolder, OpenOptions, ParquetOptions, Split, WebDataset, WebDatasetOptions,
};
use adapt_pack::{PackDataset, ShardStream};
use adapt_transform::{Mapped, Normalize, Resize};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which data: a format name, its folder and the format's options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetSpec {
    /// `cifar10`, `celeba`, `digiface`, `celeba+digiface` (a folder holding
    /// `celeba/` and `digiface/`), `imagefolder`, `webdataset`, `parquet`
    /// or `pack`.
    pub kind: String,
    /// The folder holding the format's files (WebDataset and Parquet: the
    /// files as their users name them — a folder, `::`-separated files,
    /// brace patterns).
    pub path: PathBuf,
    /// CIFAR-10's split: `train` (default) or `test`.
    #[serde(default)]
    pub test_split: bool,
    /// Resize every sample to (width, height) right after the format's fixed
    /// steps (an image folder of mixed sizes, without a transform that
    /// fixes the size).
    #[serde(default)]
    pub resize: Option<(u32, u32)>,
    /// For kind `concat`: the datasets read one after the other (labels
    /// unchanged, as PyTorch's `ConcatDataset`); `path` is then unused.
    #[serde(default)]
    pub parts: Vec<DatasetSpec>,
    /// For kinds `webdataset` and `parquet`: which parts of a record are
    /// the image and the label (`None`: the format's defaults).
    #[serde(default, alias = "webdataset", skip_serializing_if = "Option::is_none")]
    pub fields: Option<SampleFields>,
}

/// Which parts of a record are the image and the label: WebDataset member
/// extensions, or Parquet column names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleFields {
    /// WebDataset: the image member's extension, alternatives separated by
    /// `;`. Parquet: the image column (a `{bytes, path}` struct or binary).
    pub image: String,
    /// WebDataset: the label member's extension (an integer in ASCII).
    /// Parquet: the integer label column. `None`: no labels (-1).
    pub label: Option<String>,
    /// WebDataset: the text member's extension (a caption, `txt` or
    /// `json`). Parquet: a string column. Read beside each sample
    /// (`Dataset::text`); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl SampleFields {
    /// The format's defaults (WebDataset `jpg;jpeg;png;webp` and `cls`,
    /// Parquet `image` and `label`); `None` for a kind without fields.
    pub fn default_for(kind: &str) -> Option<Self> {
        match kind.to_ascii_lowercase().as_str() {
            "webdataset" => {
                let o = WebDatasetOptions::default();
                Some(Self {
                    image: o.image,
                    label: o.label,
                    text: o.text,
                })
            }
            "parquet" => {
                let o = ParquetOptions::default();
                Some(Self {
                    image: o.image,
                    label: o.label,
                    text: None,
                })
            }
            _ => None,
        }
    }
}

impl DatasetSpec {
    /// `kind` at `path`, training split, no resize.
    pub fn new(kind: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        Self {
            kind: kind.into(),
            path: path.into(),
            test_split: false,
            resize: None,
            parts: Vec::new(),
            fields: None,
        }
    }

    /// The concatenation of `parts`.
    pub fn concat(parts: Vec<DatasetSpec>) -> Self {
        Self {
            parts,
            ..Self::new("concat", "")
        }
    }

    /// Opens the data.
    pub fn open(&self) -> Result<OpenedDataset, PipelineError> {
        if self.kind == "concat" {
            return self.open_concat();
        }
        let split = if self.test_split {
            Split::Test
        } else {
            Split::Train
        };
        let kind = self.kind.to_ascii_lowercase();
        let opened = match (kind.as_str(), &self.fields) {
            ("webdataset", Some(fields)) => open_webdataset(&self.path, fields)?,
            ("parquet", Some(fields)) => open_parquet(&self.path, fields)?,
            _ => open_dataset(&self.kind, &self.path, split)?,
        };
        match self.resize {
            Some((w, h)) => opened.resized(w, h),
            None => Ok(opened),
        }
    }
}

impl DatasetSpec {
    fn open_concat(&self) -> Result<OpenedDataset, PipelineError> {
        let opened: Vec<OpenedDataset> = self
            .parts
            .iter()
            .map(DatasetSpec::open)
            .collect::<Result<_, _>>()?;
        let first = opened
            .first()
            .ok_or_else(|| PipelineError::Option("a concatenation of no dataset".into()))?;
        let normalize = first.normalize.clone();
        let parts: Vec<Arc<dyn Dataset>> = opened.iter().map(|o| Arc::clone(&o.dataset)).collect();
        let dataset: Arc<dyn Dataset> = Arc::new(Concat::new(parts));
        Ok(OpenedDataset {
            dataset,
            normalize,
            pack: None,
            class_names: None,
            shards: None,
        })
    }
}

/// A dataset opened by format name, with what the command line needs.
pub struct OpenedDataset {
    /// The samples.
    pub dataset: Arc<dyn Dataset>,
    /// The format's usual normalisation (the default pipeline's last step).
    pub normalize: (Vec<f32>, Vec<f32>),
    /// The pack, when the format is `pack` (for origins and streaming).
    pub pack: Option<Arc<PackDataset>>,
    /// Class names, when the format has them.
    pub class_names: Option<Vec<String>>,
    /// The shards of sharded loose data (WebDataset shards, Parquet row
    /// groups), which can be streamed shard by shard.
    pub shards: Option<Shards>,
}

fn normalize_of(kind: DatasetKind) -> (Vec<f32>, Vec<f32>) {
    let (mean, std) = kind.statistics();
    (mean.to_vec(), std.to_vec())
}

/// The kinds a [`DatasetSpec`] opens: the formats' own, then the
/// combinations this crate adds (`concat` is given with its parts).
pub fn dataset_kinds() -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = DatasetKind::ALL.iter().map(|k| k.name()).collect();
    kinds.extend(["celeba+digiface", "pack"]);
    kinds
}

impl OpenedDataset {
    /// The same data resized to `width` × `height` (bilinear) after the
    /// format's fixed steps.
    pub fn resized(mut self, width: u32, height: u32) -> Result<Self, PipelineError> {
        let resize = Resize::new(width, height)
            .map_err(|e| PipelineError::Option(format!("resize {width}x{height}: {e}")))?;
        // Every reader produces RGB, so the resized shape is known even when
        // the source's sizes differ.
        let shape = Shape::new(height, width, 3);
        self.dataset = Arc::new(Mapped::new(self.dataset, resize).with_shape(shape));
        Ok(self)
    }

    /// The format's usual normaliser.
    pub fn default_normalizer(&self) -> Option<Normalize> {
        Normalize::new(&self.normalize.0, &self.normalize.1).ok()
    }

    /// Prepares sharded data for a loader of `config` (its seed, ranks,
    /// batch size and knobs): shard-by-shard streaming (`stream` = shuffle
    /// buffer in samples) as the sampler, this rank's share, and for a pack
    /// a frame cache sized so each frame is decompressed once per epoch.
    /// `None` for random access. Data without shards (loose files) refuses
    /// `stream`. `interleave` = (shards read at once, for WebDataset and
    /// Parquet streams; `None`: the format's default) is refused without
    /// `stream` and for packs.
    pub fn stream_sampler(
        &self,
        stream: Option<usize>,
        interleave: Option<usize>,
        config: &adapt_loader::LoaderConfig,
    ) -> Result<Option<Arc<dyn adapt_loader::Sampler>>, PipelineError> {
        let (num_workers, prefetch_factor) = (config.num_workers, config.prefetch_factor);
        let (seed, batch_size) = (config.seed, config.batch_size);
        let (rank, world) = config
            .distributed
            .map_or((0, 1), |d| (d.rank, d.world_size));
        check_interleave(stream, interleave, self.pack.is_some())?;
        match (stream, &self.pack, &self.shards) {
            (Some(buffer), Some(pack), _) => {
                // Every frame the buffer and the batches in flight touch stays
                // decompressed, so each frame is read once per epoch.
                let in_flight = adapt_loader::max_in_flight(num_workers, prefetch_factor) + 1;
                let samples = buffer.saturating_add(in_flight.saturating_mul(batch_size));
                pack.set_cache_frames(pack.frames_for(samples));
                let order = ShardStream::new(pack, seed, buffer).with_rank(rank, world);
                Ok(Some(Arc::new(order)))
            }
            (Some(buffer), None, Some(shards)) => {
                let order = ShardOrder::new(shards.ranges.clone(), seed, buffer)
                    .with_interleave(interleave.unwrap_or(shards.interleave))
                    .with_rank(rank, world);
                Ok(Some(Arc::new(order)))
            }
            (Some(_), None, None) => Err(PipelineError::Option(
                "--stream reads sharded data only (--dataset pack, webdataset or parquet)".into(),
            )),
            (None, Some(pack), _) => {
                pack.set_cache_frames(pack.frames_for(num_workers.max(1) * 2));
                Ok(None)
            }
            (None, None, _) => Ok(None),
        }
    }
}

/// Refuses an `interleave` that cannot apply: without `stream`, zero, or
/// for a pack (packing shuffled the samples, so its stream reads one shard
/// at a time).
fn check_interleave(
    stream: Option<usize>,
    interleave: Option<usize>,
    pack: bool,
) -> Result<(), PipelineError> {
    let refuse = |why: &str| Err(PipelineError::Option(format!("--interleave: {why}")));
    match interleave {
        None => Ok(()),
        Some(0) => refuse("read at least 1 shard at once"),
        Some(_) if stream.is_none() => {
            refuse("applies to streams only (give --stream N, the shuffle buffer)")
        }
        Some(_) if pack => refuse(
            "a pack streams one shard at a time (its samples were shuffled when packed); \
             interleave is for WebDataset and Parquet streams",
        ),
        Some(_) => Ok(()),
    }
}

/// The shards of sharded loose data and how many a stream reads at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shards {
    /// The samples of each shard, as index ranges in storage order.
    pub ranges: Vec<std::ops::Range<usize>>,
    /// Shards a stream reads at once ([`ShardOrder::with_interleave`]).
    pub interleave: usize,
}

/// WebDataset shards a stream reads at once: reading a member is one
/// positioned read, so open shards cost nothing, and 64 mix a class-sorted
/// set's batches five times more than one shard at a time
/// (`docs/benchmarks.md`, shuffle quality).
pub const WEBDATASET_STREAM_INTERLEAVE: usize = 64;

/// Parquet row groups a stream reads at once: each open group stays
/// decoded in the row-group cache, so fewer than for tar shards (16 of
/// ImageNet-sized groups of 100 images, about 11 MB each, and those the
/// buffer spans fit the 512 MiB cache).
pub const PARQUET_STREAM_INTERLEAVE: usize = 16;

/// Opens a dataset by format name (`cifar10`, `celeba`, `digiface`,
/// `celeba+digiface` — a folder holding `celeba/` and `digiface/`, DigiFace
/// labels offset past CelebA's —, `imagefolder`, `webdataset` and `parquet`
/// with their default fields, `pack`). A pack may be
/// `s3://bucket/prefix`, read with `adapt_remote::default_options()`.
pub fn open_dataset(kind: &str, path: &Path, split: Split) -> Result<OpenedDataset, PipelineError> {
    if let Some(fields) = SampleFields::default_for(kind) {
        return match kind.to_ascii_lowercase().as_str() {
            "parquet" => open_parquet(path, &fields),
            _ => open_webdataset(path, &fields),
        };
    }
    let remote = path.to_str().is_some_and(adapt_remote::is_remote);
    if remote && !kind.eq_ignore_ascii_case("pack") {
        return Err(PipelineError::Option(format!(
            "{}: only packs, WebDataset shards and Parquet files are read from object \
             storage (pack the source with `pack --out s3://…` and open it as --dataset pack)",
            path.display()
        )));
    }
    if !remote && !path.exists() {
        return Err(PipelineError::MissingPath(path.to_owned()));
    }
    let plain = |dataset: Arc<dyn Dataset>, k: DatasetKind| OpenedDataset {
        dataset,
        normalize: normalize_of(k),
        pack: None,
        class_names: None,
        shards: None,
    };
    match kind.to_ascii_lowercase().as_str() {
        "celeba+digiface" => Ok(plain(celeba_digiface(path)?, DatasetKind::CelebA)),
        "pack" => open_pack(path, remote),
        "cifar10" => {
            let c = Cifar10::open(path, split)?;
            let names = c.classes().to_vec();
            Ok(OpenedDataset {
                class_names: Some(names),
                ..plain(Arc::new(c), DatasetKind::Cifar10)
            })
        }
        "imagefolder" => {
            let f = ImageFolder::open(path)?;
            let names = f.classes().to_vec();
            Ok(OpenedDataset {
                class_names: Some(names),
                ..plain(Arc::new(f), DatasetKind::ImageFolder)
            })
        }
        other => {
            let k: DatasetKind = other
                .parse()
                .map_err(|_| PipelineError::UnknownDataset(other.to_owned()))?;
            Ok(plain(
                adapt_formats::open(k, path, &OpenOptions::default())?,
                k,
            ))
        }
    }
}

/// The files `path` names: a local list (`::`-separated, brace patterns,
/// folders) left to the reader, or a list of `s3://…`/`https://…` files
/// (brace patterns expanded here) fetched into the cache folder.
enum FileList<'a> {
    Local(&'a str),
    Fetched(Vec<PathBuf>),
}

/// The file list in `path`; a remote one is fetched now (`what` names the
/// files in messages).
fn file_list<'a>(path: &'a Path, what: &str) -> Result<FileList<'a>, PipelineError> {
    let spec = path.to_str().ok_or_else(|| {
        PipelineError::Option(format!("{}: file list is not UTF-8", path.display()))
    })?;
    let parts: Vec<&str> = spec.split("::").filter(|p| !p.is_empty()).collect();
    let remote = parts.iter().filter(|p| adapt_remote::is_remote(p)).count();
    if remote == 0 {
        return Ok(FileList::Local(spec));
    }
    if remote < parts.len() {
        return Err(PipelineError::Option(format!(
            "{spec}: {what} are either all local or all in a store (s3://, https://), not both"
        )));
    }
    let mut urls = Vec::new();
    for part in parts {
        let expanded = adapt_formats::expand_braces(part, adapt_formats::MAX_SHARDS)
            .map_err(|reason| PipelineError::Option(format!("{part}: {reason}")))?;
        urls.extend(expanded);
        if urls.len() > adapt_formats::MAX_SHARDS {
            return Err(PipelineError::Option(format!(
                "{spec}: more than {} files",
                adapt_formats::MAX_SHARDS
            )));
        }
    }
    Ok(FileList::Fetched(fetch(&urls)?))
}

/// Local copies of the files at `urls`, with the process's options.
#[cfg(feature = "s3")]
fn fetch(urls: &[String]) -> Result<Vec<PathBuf>, PipelineError> {
    Ok(adapt_remote::fetch_files(
        urls,
        &adapt_remote::default_options(),
    )?)
}

/// Without the client: an error that says how to get it.
#[cfg(not(feature = "s3"))]
fn fetch(urls: &[String]) -> Result<Vec<PathBuf>, PipelineError> {
    Err(PipelineError::NoS3(
        urls.first().cloned().unwrap_or_default(),
    ))
}

/// WebDataset shards (`path` as WebDataset's users write a shard list)
/// with the given members; normalised with ImageNet's statistics.
pub fn open_webdataset(
    path: &Path,
    members: &SampleFields,
) -> Result<OpenedDataset, PipelineError> {
    let options = WebDatasetOptions {
        image: members.image.clone(),
        label: members.label.clone(),
        unpack_dir: Some(cache_folder("unpacked")),
        text: members.text.clone(),
        index_dir: Some(cache_folder("index")),
        unpack_bytes: adapt_remote::default_options().cache_bytes,
    };
    let dataset = match file_list(path, "WebDataset shards")? {
        FileList::Local(spec) => WebDataset::open(spec, &options)?,
        FileList::Fetched(files) => WebDataset::open_shards(files, &options)?,
    };
    Ok(OpenedDataset {
        shards: Some(Shards {
            ranges: dataset.shard_ranges(),
            interleave: WEBDATASET_STREAM_INTERLEAVE,
        }),
        dataset: Arc::new(dataset),
        normalize: normalize_of(DatasetKind::WebDataset),
        pack: None,
        class_names: None,
    })
}

/// A folder of the shard cache folder (`ADAPT_CACHE_DIR`): `unpacked/`
/// where gzip-compressed WebDataset shards are decompressed, `index/` where
/// shards' member lists are kept.
fn cache_folder(name: &str) -> PathBuf {
    adapt_remote::default_options().cache_dir.join(name)
}

/// Parquet files in the Hugging Face layout (`path` a folder of one split,
/// `::`-separated files or brace patterns) with the given columns; row
/// groups are its shards; normalised with ImageNet's statistics.
/// A build without the `parquet` feature refuses them, naming it.
pub fn open_parquet(path: &Path, columns: &SampleFields) -> Result<OpenedDataset, PipelineError> {
    let options = ParquetOptions {
        image: columns.image.clone(),
        label: columns.label.clone(),
        text: columns.text.clone(),
    };
    parquet_built(path)?;
    read_parquet(file_list(path, "Parquet files")?, &options)
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
    Ok(OpenedDataset {
        shards: Some(Shards {
            ranges: dataset.row_group_ranges(),
            interleave: PARQUET_STREAM_INTERLEAVE,
        }),
        class_names: dataset.class_names().map(<[String]>::to_vec),
        dataset: Arc::new(dataset),
        normalize: normalize_of(DatasetKind::Parquet),
        pack: None,
    })
}

#[cfg(not(feature = "parquet"))]
fn read_parquet(files: FileList<'_>, _: &ParquetOptions) -> Result<OpenedDataset, PipelineError> {
    let spec = match &files {
        FileList::Local(spec) => PathBuf::from(spec),
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

/// A pack in a folder or (`remote`) an object store; normalised as its
/// source format is.
fn open_pack(path: &Path, remote: bool) -> Result<OpenedDataset, PipelineError> {
    let pack = Arc::new(match path.to_str() {
        Some(url) if remote => open_remote(url)?,
        _ => PackDataset::open(path)?,
    });
    let m = pack.manifest();
    let normalize = match m.source_dataset.parse::<DatasetKind>() {
        Ok(k) => normalize_of(k),
        Err(_) => normalize_of(DatasetKind::CelebA),
    };
    let class_names = m.class_names.clone();
    Ok(OpenedDataset {
        dataset: Arc::clone(&pack) as Arc<dyn Dataset>,
        normalize,
        pack: Some(pack),
        class_names,
        shards: None,
    })
}

/// A short, stable identity of a dataset: format, canonical path, length,
/// sample shape and where its first and last samples come from.
pub fn dataset_fingerprint(kind: &str, path: &Path, ds: &dyn Dataset) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let text = format!(
        "{kind}|{}|{}|{:?}|{}|{}",
        path.display(),
        ds.len(),
        ds.sample_shape(),
        ds.source(0),
        ds.source(ds.len().saturating_sub(1))
    );
    format!(
        "{kind}-{}-{:016x}",
        ds.len(),
        adapt_dataset::fnv1a(text.as_bytes())
    )
}
