//! The worker-pool data loader: batches from any [`adapt_dataset::Dataset`],
//! with PyTorch's DataLoader knobs (`num_workers`, `prefetch_factor`,
//! `pin_memory`, `persistent_workers`) and none of its failure modes.
//!
//! It is not a tuner (that is `adapt-tune`) and does not move data to a
//! device (that is `adapt-transfer`, which plugs in through
//! [`BufferProvider`]).
//!
//! Key design choices:
//! - Workers are OS threads sharing the dataset through an `Arc`; each builds
//!   whole batches and collates (normalises) straight into a buffer from a
//!   pool, returned when the consumer drops the [`Batch`]. No allocation per
//!   batch in steady state.
//! - Batches come out in sampler order whatever the worker count: the order
//!   is a pure function of (seed, epoch, rank, world size) and **no tuning
//!   knob changes the data**. Tasks go to whichever worker is free (one
//!   shared queue), not round-robin as PyTorch does, so one slow sample does
//!   not stall the batches queued behind it on the same worker.
//! - At most `num_workers × prefetch_factor` batches are in flight, plus the
//!   one the consumer holds.
//! - Every failure ends in an error naming the batch (and sample), never in a
//!   hang or a silently short epoch; dropping an epoch or the loader stops and
//!   joins its workers.
//!
//! ```
//! use adapt_dataset::{Dataset, Sample, Error, Read};
//! use adapt_loader::{Loader, LoaderConfig, LoaderKnobs};
//! use std::sync::Arc;
//!
//! struct Tiny;
//! impl Dataset for Tiny {
//!     fn len(&self) -> usize { 10 }
//!     fn read<'a>(&'a self, i: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
//!         adapt_dataset::check_index(i, 10)?;
//!         *buf = Sample::hwc(vec![i as u8; 12], 2, 2, 3, i as i64)?;
//!         Ok(Read::Filled)
//!     }
//!     fn sample_shape(&self) -> Option<adapt_dataset::Shape> { Some(adapt_dataset::Shape::new(2, 2, 3)) }
//! }
//!
//! let config = LoaderConfig {
//!     batch_size: 4,
//!     knobs: LoaderKnobs { num_workers: 2, ..LoaderKnobs::DEFAULT },
//!     ..LoaderConfig::default()
//! };
//! let mut loader = Loader::new(Arc::new(Tiny), config).unwrap();
//! let sizes: Vec<usize> = loader.epoch(0).unwrap().map(|b| b.unwrap().len()).collect();
//! assert_eq!(sizes, [4, 4, 2]);
//! ```

mod batch;
mod collate;
mod config;
mod epoch;
mod error;
mod feed;
mod knobs;
mod plan;
mod pool;
mod resume;
mod sampler;
mod stages;
mod worker;

pub use batch::Batch;
pub use collate::{collate_sample, transform_read};
pub use config::{Distributed, ErrorPolicy, LoaderConfig, OutputFormat, Sampler};
pub use epoch::{Epoch, POLL};
pub use error::LoaderError;
pub use feed::Feed;
pub use knobs::{DEFAULT_PREFETCH, LoaderKnobs, MAX_WORKERS};
pub use plan::{EpochPlan, Plan};
pub use pool::{AlignedBytes, BufferProvider, HeapBuffers, HostBuffer};
pub use resume::{Launch, LoaderState, Segment};
pub use sampler::epoch_order;
pub use stages::{StageStats, WorkerStats};

use adapt_dataset::{Dataset, Shape};
use adapt_transform::{Compose, Normalize, Transform};
use pool::BatchPool;
use std::sync::Arc;
use worker::{Context, Workers};

/// A data loader over one dataset with one configuration.
pub struct Loader {
    ctx: Arc<Context>,
    config: Arc<LoaderConfig>,
    /// The workers kept across epochs when `persistent_workers` is on.
    persistent: Option<Arc<Workers>>,
    next_generation: u64,
}

impl Loader {
    /// A loader over `dataset`. Every impossible configuration is an error
    /// here, not a panic later.
    pub fn new(dataset: Arc<dyn Dataset>, config: LoaderConfig) -> Result<Self, LoaderError> {
        Self::with_buffers(dataset, config, None)
    }

    /// A loader whose pinned buffers (`pin_memory = true`) come from
    /// `pinned`; without one, pinned means ordinary heap memory, exactly as
    /// unpinned.
    pub fn with_buffers(
        dataset: Arc<dyn Dataset>,
        config: LoaderConfig,
        pinned: Option<Arc<dyn BufferProvider>>,
    ) -> Result<Self, LoaderError> {
        config.validate(dataset.len())?;
        let shape = sample_shape(&*dataset, config.transforms.as_deref())?;
        let normalize = match &config.normalize {
            Some(n) => n.clone(),
            None => Normalize::unit(shape.channels as usize),
        };
        if config.output.is_u8() && config.normalize.is_some() {
            return Err(LoaderError::InvalidConfig(
                "u8 output is not normalised: normalise on the device, or ask for f32 output"
                    .into(),
            ));
        }
        if !config.output.is_u8() && normalize.channels() != shape.channels as usize {
            return Err(LoaderError::InvalidConfig(format!(
                "normalisation has {} channels, samples have {}",
                normalize.channels(),
                shape.channels
            )));
        }
        let provider: Arc<dyn BufferProvider> = match (config.knobs.pin_memory, pinned) {
            (true, Some(p)) => p,
            _ => Arc::new(HeapBuffers),
        };
        let pool = BatchPool::new(
            provider,
            batch_bytes(&config, shape)?,
            config.batch_size,
            config.max_in_flight() + 1,
        );
        let ctx = Arc::new(Context {
            dataset,
            transforms: config.transforms.clone(),
            decoder: config.decoder.clone(),
            normalize,
            shape,
            output: config.output,
            seed: config.seed,
            pool,
            policy: config.on_error,
            spin: {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                if config.knobs.num_workers < cores {
                    worker::SPIN
                } else {
                    std::time::Duration::ZERO
                }
            },
            live: std::sync::atomic::AtomicUsize::new(0),
        });
        let persistent = if config.knobs.persistent_workers {
            Some(Arc::new(Workers::spawn(&ctx, config.knobs.num_workers)?))
        } else {
            None
        };
        Ok(Self {
            ctx,
            config: Arc::new(config),
            persistent,
            next_generation: 1,
        })
    }

    /// Starts epoch `epoch`: its order is fixed by (seed, epoch, rank, world
    /// size). Borrowing the loader mutably keeps one epoch at a time, so a
    /// persistent worker can never serve an old epoch's order.
    pub fn epoch(&mut self, epoch: u64) -> Result<Epoch<'_>, LoaderError> {
        let generation = self.next_generation();
        Epoch::start(self, epoch, generation, Vec::new(), 0)
    }

    pub(crate) fn next_generation(&mut self) -> u64 {
        let g = self.next_generation;
        self.next_generation += 1;
        g
    }

    /// Where a checkpoint resumes: the earlier segments of its epoch and the
    /// batches of the current one to skip.
    pub(crate) fn resume_plan(
        &self,
        state: &LoaderState,
    ) -> Result<(Vec<Segment>, usize), LoaderError> {
        plan::resume_segments(&self.config, self.ctx.dataset.len(), state)
    }

    /// Whether this loader can resume `state`: the refusal
    /// [`Loader::resume`] would give, without starting anything.
    pub fn check_resumable(&self, state: &LoaderState) -> Result<(), LoaderError> {
        self.resume_plan(state).map(|_| ())
    }

    /// Resumes the epoch a checkpoint ([`Epoch::state`]) was taken in: the
    /// batches an uninterrupted run would have yielded from there, byte for
    /// byte. With another world size than the checkpoint's, the samples not
    /// yet delivered are dealt across this loader's ranks (see
    /// [`LoaderState`]). A checkpoint of another pipeline, dataset, seed or
    /// batching is refused.
    pub fn resume(&mut self, state: &LoaderState) -> Result<Epoch<'_>, LoaderError> {
        let (segments, skip) = self.resume_plan(state)?;
        let generation = self.next_generation();
        Epoch::start(self, state.epoch, generation, segments, skip)
    }

    /// The configuration.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// The index plan of this loader's epochs: which samples each batch of
    /// this rank holds, in order (the stream's order too), without reading
    /// any.
    pub fn plan(&self) -> Result<Plan, LoaderError> {
        Plan::new(LoaderConfig::clone(&self.config), self.ctx.dataset.len())
    }

    /// A loader like this one (same dataset, pipeline, batching, seed and
    /// buffer provider) with other worker knobs; `pin_memory` stays as it
    /// was (the buffers' provider was chosen at construction). Batches do
    /// not depend on the knobs, so an epoch resumed on it from this
    /// loader's checkpoint goes on with the same data.
    pub fn reconfigured(&self, knobs: LoaderKnobs) -> Result<Self, LoaderError> {
        let mut config = (*self.config).clone();
        config.knobs = LoaderKnobs {
            pin_memory: config.knobs.pin_memory,
            ..knobs
        }
        .canonical();
        Self::with_buffers(
            Arc::clone(&self.ctx.dataset),
            config,
            Some(self.ctx.pool.provider()),
        )
    }

    /// Shape of one sample as batched (after the transform).
    pub fn sample_shape(&self) -> Shape {
        self.ctx.shape
    }

    /// Number of batches per epoch (with a custom sampler, of epoch 0).
    pub fn batches_per_epoch(&self) -> usize {
        match &self.config.sampler {
            Some(s) => self
                .config
                .batches_for(s.order(self.ctx.dataset.len(), 0).len()),
            None => self.config.batches_per_epoch(self.ctx.dataset.len()),
        }
    }

    /// Bytes of one full batch's data (f32 or u8, by the output format).
    pub fn batch_bytes(&self) -> usize {
        self.ctx.pool.bytes()
    }

    /// Worker threads alive now: 0 without workers, after an epoch of
    /// non-persistent workers ends or is dropped, and after the loader is.
    pub fn live_workers(&self) -> usize {
        self.ctx.live.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many batch buffers the pool has allocated so far (bounded by the
    /// in-flight bound plus the batches the consumer keeps).
    pub fn buffers_allocated(&self) -> usize {
        self.ctx.pool.allocated()
    }
}

/// Bytes of one full batch, with overflow-safe arithmetic; refused when the
/// batches the loader may hold at once (in flight, plus the consumer's)
/// exceed the memory available now.
fn batch_bytes(config: &LoaderConfig, shape: Shape) -> Result<usize, LoaderError> {
    let too_big = |what: String| {
        LoaderError::InvalidConfig(format!(
            "a batch of {} samples of {shape} {what}",
            config.batch_size
        ))
    };
    let bytes = config
        .batch_size
        .checked_mul(shape.len())
        .and_then(|n| n.checked_mul(config.output.bytes_per_value()))
        .filter(|&n| n <= isize::MAX as usize / 2)
        .ok_or_else(|| too_big("does not fit in memory".into()))?;
    let held = bytes.saturating_mul(config.max_in_flight() + 1);
    if let Some(available) = available_memory()
        && held > available
    {
        return Err(too_big(format!(
            "is {bytes} bytes; {} of them in flight need {held}, more than the {available} bytes available",
            config.max_in_flight() + 1
        )));
    }
    Ok(bytes)
}

/// Memory available now (`MemAvailable` in /proc/meminfo), where known.
fn available_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn sample_shape(dataset: &dyn Dataset, transforms: Option<&Compose>) -> Result<Shape, LoaderError> {
    // Readers of images of mixed sizes produce RGB: the size is then left
    // to the transform to fix.
    let shape = match (dataset.sample_shape(), transforms) {
        (Some(s), _) => s,
        (None, Some(_)) => Shape::new(0, 0, 3),
        (None, None) => {
            return Err(LoaderError::InvalidConfig(
                "the dataset's samples have no fixed shape: add a resize or crop".into(),
            ));
        }
    };
    let shape = match transforms {
        Some(t) => t
            .output_shape(shape)
            .map_err(|e| LoaderError::InvalidConfig(format!("transform: {e}")))?,
        None => shape,
    };
    if shape.height == 0 || shape.width == 0 {
        return Err(LoaderError::InvalidConfig(
            "the samples' size is not fixed: add a resize or crop to a fixed size".into(),
        ));
    }
    Ok(shape)
}
