//! A run: a pipeline's loader with its knobs, pinned pool, ranks and online
//! autotuning, driven by its consumer — what `cargo xtask load` and
//! `adapt.DataLoader` both hold.

use crate::AdaptError;
use adapt_loader::{
    Batch, Distributed, Feed, Launch, Loader, LoaderConfig, LoaderError, LoaderKnobs, LoaderState,
};
use adapt_pipeline::{Built, Pipeline};
use adapt_transfer::{Device, PinnedPool, TransferEngine, pinned_pool_size};
use adapt_tune::{AutotunedFeed, Machine, MaybeTuned, Profile};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Online autotuning of `num_workers` and `prefetch_factor` during the first
/// epoch, by how long the consumer waits.
#[derive(Clone, Debug, PartialEq)]
pub struct Autotune {
    /// Batches timed per candidate.
    pub window: usize,
    /// Batches left untimed after each switch (settling in).
    pub warmup: usize,
    /// Start from this profile's entry for the pipeline and batch size, and
    /// save what the search settled on there (once).
    pub profile: Option<PathBuf>,
}

impl Default for Autotune {
    fn default() -> Self {
        Self {
            window: 8,
            warmup: 2,
            profile: None,
        }
    }
}

/// How a run loads: PyTorch's knobs and names, plus what adapt adds.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Samples per batch.
    pub batch_size: usize,
    /// Reshuffle every epoch from the seed.
    pub shuffle: bool,
    /// Drop the last incomplete batch.
    pub drop_last: bool,
    /// Seed of the order and of every random step.
    pub seed: u64,
    /// PyTorch's four knobs; `pin_memory` page-locks only when `device` is
    /// a usable GPU.
    pub knobs: LoaderKnobs,
    /// Packs only: read shard by shard with a shuffle buffer of this many samples.
    pub stream: Option<usize>,
    /// WebDataset and Parquet streams: shards (row groups) read at once,
    /// each record from one drawn at random (`None`: the format's default,
    /// 64 tar shards, 16 row groups).
    pub interleave: Option<usize>,
    /// This process's share of a distributed run.
    pub distributed: Option<Distributed>,
    /// How long to wait for one batch before failing.
    pub timeout: Option<Duration>,
    /// The device `pin_memory` page-locks for (without a driver or device,
    /// pinned means ordinary memory, as on the host backend).
    pub device: Device,
    /// Tune the workers while loading.
    pub autotune: Option<Autotune>,
    /// Record where each epoch's time goes ([`Run::stages`]); on unless
    /// `ADAPT_STAGE_TIMING=0`.
    pub stage_timing: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            batch_size: 1,
            shuffle: false,
            drop_last: false,
            seed: 0,
            knobs: LoaderKnobs::DEFAULT,
            stream: None,
            interleave: None,
            distributed: None,
            timeout: None,
            device: Device::Cuda(0),
            autotune: None,
            stage_timing: std::env::var("ADAPT_STAGE_TIMING").map_or(true, |v| v != "0"),
        }
    }
}

/// What a run was built with, for reports and the Python side.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The pipeline's identity (what profiles and checkpoints are keyed by).
    pub identity: String,
    /// The pipeline as JSON (dataset, steps, output, shape).
    pub description: serde_json::Value,
    /// Mean and std left for the device to apply (u8 output).
    pub device_normalize: Option<(Vec<f32>, Vec<f32>)>,
    /// One sample's shape as batched: (height, width, channels).
    pub sample_shape: [u32; 3],
    /// `f32`, `u8` or `u8-nhwc`.
    pub output: &'static str,
    /// The steps' canonical text form.
    pub transforms: String,
    /// Whether batches are collated into page-locked memory.
    pub page_locked: bool,
    /// Batches per epoch for this rank.
    pub batches_per_epoch: usize,
    /// The steps the workers run, by their text form (the stages' names).
    pub step_names: Vec<String>,
}

/// A pipeline's loader, ready to run epochs.
pub struct Run {
    feed: MaybeTuned,
    /// The page-locked pool batches are collated into, when pinned.
    pinned: Option<Arc<PinnedPool>>,
    /// Keeps the pool's context alive while the loader uses it.
    _engine: Option<TransferEngine>,
    info: RunInfo,
    batch_size: usize,
    /// With autotune and a profile: where the settled knobs go, once.
    save_to: Option<PathBuf>,
    saved: bool,
    /// The data, for what batches do not carry (texts).
    dataset: Arc<dyn adapt_dataset::Dataset>,
}

impl Run {
    /// Opens `pipeline`'s data and builds its loader with `options`. With
    /// `pin_memory` and a usable GPU the loader collates into that
    /// device's page-locked pool, sized by [`pinned_pool_size`].
    pub fn open(pipeline: &Pipeline, options: &RunOptions) -> Result<Run, AdaptError> {
        let engine = match (options.knobs.pin_memory, options.device) {
            (true, Device::Cuda(n)) => TransferEngine::new(Device::Cuda(n)).ok(),
            _ => None,
        };
        let pool = engine.as_ref().and_then(|e| e.pinned_pool().cloned());
        let mut run = Self::open_with_pool(pipeline, options, pool)?;
        run._engine = engine;
        Ok(run)
    }

    /// As [`Run::open`], with page-locked buffers from `pool` (any
    /// allocator: the tests count what a `CountingAllocator` hands out)
    /// when `pin_memory`.
    pub fn open_with_pool(
        pipeline: &Pipeline,
        options: &RunOptions,
        pool: Option<Arc<PinnedPool>>,
    ) -> Result<Run, AdaptError> {
        let built = pipeline.build()?;
        let config = loader_config(&built, options)?;
        let pinned = pool.filter(|_| options.knobs.pin_memory);
        let provider = pinned.as_ref().map(|p| {
            p.reserve(pinned_pool_size(&config));
            p.provider()
        });
        let dataset = built.dataset();
        let loader = Loader::with_buffers(Arc::clone(&dataset), config, provider)?;
        let info = RunInfo {
            identity: built.identity(),
            description: built.describe(pipeline),
            device_normalize: built.device_normalize.clone(),
            sample_shape: {
                let s = loader.sample_shape();
                [s.height, s.width, s.channels]
            },
            output: built.output.name(),
            transforms: built.transforms_text(),
            page_locked: pinned.is_some(),
            batches_per_epoch: loader.batches_per_epoch(),
            step_names: built.step_names(),
        };
        let (feed, save_to) = drive(Feed::new(loader), options, &info.identity)?;
        Ok(Run {
            feed,
            pinned,
            _engine: None,
            info,
            batch_size: options.batch_size,
            save_to,
            saved: false,
            dataset,
        })
    }

    /// The texts (captions) of `batch`'s samples in batch order, read on
    /// the caller's thread, where the data was opened with a text field
    /// (`SampleFields::text`); `None` without one.
    pub fn texts(&self, batch: &Batch) -> Result<Option<Vec<String>>, AdaptError> {
        crate::data::texts_of(&*self.dataset, batch.indices())
    }

    /// What the run was built with.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// The loader's configuration now (autotuning changes the workers).
    pub fn config(&self) -> &LoaderConfig {
        self.feed.as_feed().loader().config()
    }

    /// The index plan of the run's epochs (this rank's samples per batch,
    /// in order), read from nothing.
    pub fn plan(&self) -> Result<adapt_loader::Plan, AdaptError> {
        Ok(self.feed.as_feed().loader().plan()?)
    }

    /// The page-locked pool's bound now, when the run is pinned.
    pub fn pinned_pool(&self) -> Option<&Arc<PinnedPool>> {
        self.pinned.as_ref()
    }

    /// The self-tuning feed, with autotune.
    pub fn autotune(&self) -> Option<&AutotunedFeed> {
        self.feed.tuned()
    }

    /// Starts epoch `epoch`; returns its number of batches.
    pub fn start(&mut self, epoch: u64) -> Result<usize, AdaptError> {
        Ok(self.feed.feed().start(epoch)?)
    }

    /// Whether `state` can be resumed here: the refusal [`Run::resume`]
    /// would give (another pipeline, dataset, seed or batching), now.
    pub fn check_resumable(&self, state: &LoaderState) -> Result<(), AdaptError> {
        Ok(self.feed.as_feed().check_resumable(state)?)
    }

    /// Resumes from a checkpoint; returns the batches left in its epoch.
    pub fn resume(&mut self, state: &LoaderState) -> Result<usize, AdaptError> {
        Ok(self.feed.feed().resume(state)?)
    }

    /// The next batch of the epoch, `None` at its end. `interrupt` is
    /// polled while waiting (true ends the epoch with
    /// `LoaderError::Interrupted`). With autotune, the knobs the search
    /// settles on are saved to the profile once.
    pub fn next(
        &mut self,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Option<Result<Batch, AdaptError>> {
        let item = self.feed.next(interrupt);
        self.follow_knobs();
        if let Err(e) = self.save_settled() {
            return Some(Err(e));
        }
        item.map(|r| r.map_err(AdaptError::from))
    }

    /// The epoch's batches as an iterator (what the transfer engine wraps).
    /// The pool follows the knobs as in [`Run::next`]; a settled autotune
    /// configuration is saved by `next` only.
    pub fn batches(&mut self) -> impl Iterator<Item = Result<Batch, LoaderError>> + '_ {
        std::iter::from_fn(move || {
            let item = self.feed.next(&mut || false);
            self.follow_knobs();
            item
        })
    }

    /// Raises the pinned pool to what the knobs now need (autotuning may have
    /// switched to more workers): the same rule as at open. A no-op unless
    /// pinned; an atomic max otherwise.
    fn follow_knobs(&self) {
        if let Some(p) = &self.pinned {
            p.reserve(pinned_pool_size(self.config()));
        }
    }

    /// Saves the settled knobs to the autotune profile, once.
    fn save_settled(&mut self) -> Result<(), AdaptError> {
        let settled = self.feed.tuned().and_then(|a| a.tuner().settled());
        if let (Some(k), Some(path), false) = (settled, &self.save_to, self.saved) {
            let mut p = Profile::load(path)?;
            p.insert_settled(&self.info.identity, self.batch_size, &Machine::detect(), k);
            p.save(path)?;
            self.saved = true;
        }
        Ok(())
    }

    /// Where the current epoch's time went so far (`None` without an epoch
    /// or with `stage_timing` off). With autotune, from the last switch of
    /// the knobs on.
    pub fn stages(&self) -> Option<crate::StageReport> {
        let stats = self.feed.as_feed().stats()?;
        Some(crate::StageReport::new(
            &stats,
            &self.info.step_names,
            cores(),
        ))
    }

    /// The checkpoint after the last batch handed out (`None` without an epoch).
    pub fn state(&self) -> Option<LoaderState> {
        self.feed.as_feed().state()
    }

    /// Writes the checkpoint (when an epoch runs) to `path` atomically.
    pub fn write_state(&self, path: &Path) -> Result<(), AdaptError> {
        if let Some(state) = self.state() {
            let text = state.to_text();
            // The format's error (it names the file) stays inside, downcastable.
            adapt_formats::write_atomically(path, |w| w.write_all(text.as_bytes())).map_err(
                |e| AdaptError::Io {
                    path: path.to_owned(),
                    source: std::io::Error::other(e),
                },
            )?;
        }
        Ok(())
    }

    /// Switches the knobs between two batches (the same batches follow;
    /// `pin_memory` stays as the run was built).
    pub fn reconfigure(&mut self, knobs: LoaderKnobs) -> Result<(), AdaptError> {
        self.feed.feed().reconfigure(knobs)?;
        self.follow_knobs();
        Ok(())
    }
}

/// The cores this process may use.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The loader configuration of `built` with `options`' knobs.
fn loader_config(built: &Built, o: &RunOptions) -> Result<LoaderConfig, AdaptError> {
    if let Some(t) = o.timeout
        && t.is_zero()
    {
        return Err(AdaptError::Option(
            "timeout must be a positive number of seconds".into(),
        ));
    }
    let mut config = built.loader_config(LoaderConfig {
        knobs: o.knobs,
        batch_size: o.batch_size,
        shuffle: o.shuffle,
        drop_last: o.drop_last,
        seed: o.seed,
        distributed: o.distributed,
        timeout: o.timeout,
        stage_timing: o.stage_timing,
        ..LoaderConfig::default()
    });
    config.sampler = built
        .opened
        .stream_sampler(o.stream, o.interleave, &config)?;
    Ok(config)
}

/// The feed, fixed or self-tuning (from the profile's knobs when it has
/// an entry), and where a settled configuration is saved.
fn drive(
    feed: Feed,
    options: &RunOptions,
    identity: &str,
) -> Result<(MaybeTuned, Option<PathBuf>), AdaptError> {
    let Some(auto) = &options.autotune else {
        return Ok((MaybeTuned::Fixed(feed), None));
    };
    let machine = Machine::detect();
    let start: Option<LoaderKnobs> = match &auto.profile {
        Some(p) => Profile::load(p)?
            .lookup(identity, options.batch_size, &machine)
            .map(|e| e.knobs),
        None => None,
    };
    let tuned = AutotunedFeed::new(feed, &machine, start, auto.window, auto.warmup)?;
    Ok((MaybeTuned::Tuned(tuned), auto.profile.clone()))
}

/// This process's ranks from `text`: `auto` reads torchrun's
/// `RANK`/`WORLD_SIZE` or Slurm's `SLURM_PROCID`/`SLURM_NTASKS` (with the
/// launcher's name, `None` without one), `R/W` is rank R of W.
pub fn parse_distributed(text: &str) -> Result<Option<(Distributed, &'static str)>, AdaptError> {
    if text == "auto" {
        return Ok(Launch::from_env()?.map(|l| (l.distributed, l.launcher)));
    }
    let bad = || AdaptError::Option(format!("distributed {text:?}: expected auto or RANK/WORLD"));
    let (r, w) = text.split_once('/').ok_or_else(bad)?;
    let n = |v: &str| v.trim().parse::<usize>().map_err(|_| bad());
    Ok(Some((
        Distributed {
            rank: n(r)?,
            world_size: n(w)?,
        },
        "explicit",
    )))
}
