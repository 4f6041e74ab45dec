//! Datasets by name: what `--dataset KIND --path DIR` opens.

use crate::{FormatName, PipelineError};
use adapt_dataset::{Dataset, Shape, ShardOrder};
use adapt_pack::{PackDataset, ShardStream};
use adapt_transform::{Mapped, Normalize, Resize};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which data: a format name, its folder and the format's options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetSpec {
    /// The format (one of [`crate::FORMATS`]; in JSON its name).
    pub kind: FormatName,
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
    /// For formats whose records have named parts (WebDataset members,
    /// Parquet columns): which are the image and the label (`None`: the
    /// format's [`crate::Format::fields`]).
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

impl DatasetSpec {
    /// `kind` at `path`, training split, no resize.
    pub fn new(kind: impl Into<FormatName>, path: impl Into<PathBuf>) -> Self {
        Self {
            kind: kind.into(),
            path: path.into(),
            test_split: false,
            resize: None,
            parts: Vec::new(),
            fields: None,
        }
    }

    /// The format called `kind` (case-insensitive) at `path`; an unknown
    /// name is refused with every format listed.
    pub fn named(kind: &str, path: impl Into<PathBuf>) -> Result<Self, PipelineError> {
        Ok(Self::new(kind.parse::<FormatName>()?, path))
    }

    /// The concatenation of `parts`.
    pub fn concat(parts: Vec<DatasetSpec>) -> Self {
        Self {
            parts,
            ..Self::new(&crate::ConcatFormat, "")
        }
    }

    /// Opens the data.
    pub fn open(&self) -> Result<OpenedDataset, PipelineError> {
        let opened = self.kind.format().open(self)?;
        match self.resize {
            Some((w, h)) => opened.resized(w, h),
            None => Ok(opened),
        }
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

impl OpenedDataset {
    /// `dataset` normalised with `normalize`, without a pack, class names
    /// or shards.
    pub fn plain(dataset: Arc<dyn Dataset>, normalize: (Vec<f32>, Vec<f32>)) -> Self {
        Self {
            dataset,
            normalize,
            pack: None,
            class_names: None,
            shards: None,
        }
    }
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
        let knobs = config.knobs;
        let (seed, batch_size) = (config.seed, config.batch_size);
        let (rank, world) = config
            .distributed
            .map_or((0, 1), |d| (d.rank, d.world_size));
        check_interleave(stream, interleave, self.pack.is_some())?;
        match (stream, &self.pack, &self.shards) {
            (Some(buffer), Some(pack), _) => {
                // Every frame the buffer and the batches in flight touch stays
                // decompressed, so each frame is read once per epoch.
                let in_flight = knobs.batches_in_memory();
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
                pack.set_cache_frames(pack.frames_for(knobs.num_workers.max(1) * 2));
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
