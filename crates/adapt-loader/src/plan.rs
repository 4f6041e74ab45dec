//! The index plan of an epoch without a dataset to read: which indices each
//! batch of this rank holds, and the checkpoint after any batch. A loader
//! whose samples are read elsewhere (a Python dataset's `__getitem__` in
//! Python workers) takes its order, its ranks' shares and its exact and
//! elastic resume from here, so they are the Rust loader's own.

use crate::resume::FORMAT;
use crate::sampler::order_after;
use crate::{LoaderConfig, LoaderError, LoaderState, Segment};

/// The batching of a dataset of `len` samples under `config` (its batch
/// size, shuffle, seed, drop_last, ranks and identity; a custom sampler's
/// order too).
#[derive(Clone, Debug)]
pub struct Plan {
    config: LoaderConfig,
    len: usize,
}

/// One epoch of a [`Plan`]: its order and where it starts.
#[derive(Clone, Debug)]
pub struct EpochPlan {
    /// The epoch.
    pub epoch: u64,
    /// This rank's indices of the epoch, in order (after any earlier
    /// segments of a resumed epoch).
    pub order: Vec<usize>,
    /// Batches of `order` already delivered (a resumed epoch skips them).
    pub skip: usize,
    segments: Vec<Segment>,
    config: LoaderConfig,
    len: usize,
}

impl Plan {
    /// The plan of `config` over `len` samples; the configuration is
    /// checked as a loader checks it.
    pub fn new(config: LoaderConfig, len: usize) -> Result<Self, LoaderError> {
        config.validate(len)?;
        Ok(Self { config, len })
    }

    /// Epoch `epoch` from its first batch.
    pub fn epoch(&self, epoch: u64) -> EpochPlan {
        self.make(epoch, Vec::new(), 0)
    }

    /// The rest of the epoch `state` was taken in, as
    /// [`Loader::resume`](crate::Loader::resume) resumes it (on another
    /// world size, the samples not yet delivered are dealt anew).
    pub fn resume(&self, state: &LoaderState) -> Result<EpochPlan, LoaderError> {
        let (segments, skip) = resume_segments(&self.config, self.len, state)?;
        Ok(self.make(state.epoch, segments, skip))
    }

    fn make(&self, epoch: u64, segments: Vec<Segment>, skip: usize) -> EpochPlan {
        let order = order_after(&self.config, self.len, epoch, &segments);
        let batches = self.config.batches_for(order.len());
        EpochPlan {
            epoch,
            order,
            skip: skip.min(batches),
            segments,
            config: self.config.clone(),
            len: self.len,
        }
    }
}

impl EpochPlan {
    /// Batches in the epoch (those skipped included).
    pub fn batches(&self) -> usize {
        self.config.batches_for(self.order.len())
    }

    /// The indices of batch `k` (`k < batches()`).
    pub fn batch(&self, k: usize) -> &[usize] {
        let b = self.config.batch_size;
        let end = ((k + 1) * b).min(self.order.len());
        &self.order[(k * b).min(end)..end]
    }

    /// The checkpoint once batches `0..delivered` of this epoch are
    /// delivered (`delivered` counts the skipped ones).
    pub fn state_after(&self, delivered: usize) -> LoaderState {
        let (rank, world_size) = self
            .config
            .distributed
            .map_or((0, 1), |d| (d.rank, d.world_size));
        LoaderState {
            format: FORMAT,
            epoch: self.epoch,
            batches: delivered.min(self.batches()),
            segments: self.segments.clone(),
            rank,
            world_size,
            seed: self.config.seed,
            batch_size: self.config.batch_size,
            shuffle: self.config.shuffle,
            drop_last: self.config.drop_last,
            dataset_len: self.len,
            identity: self.config.identity.clone(),
            custom_sampler: self.config.sampler.is_some(),
            sampler: crate::resume::sampler_description(&self.config),
        }
    }
}

/// Where a checkpoint resumes under `config`: the earlier segments of its
/// epoch and the batches of the current one to skip.
pub(crate) fn resume_segments(
    config: &LoaderConfig,
    len: usize,
    state: &LoaderState,
) -> Result<(Vec<Segment>, usize), LoaderError> {
    state.check_against(config, len)?;
    let world = config.distributed.map_or(1, |d| d.world_size);
    if state.world_size == world {
        return Ok((state.segments.clone(), state.batches));
    }
    if config.sampler.is_some() {
        return Err(LoaderError::InvalidConfig(format!(
            "a custom sampler's epoch resumes on its own world size ({}), not {world}",
            state.world_size
        )));
    }
    let mut s = state.segments.clone();
    s.push(Segment {
        world_size: state.world_size,
        batches: state.batches,
    });
    Ok((s, 0))
}
