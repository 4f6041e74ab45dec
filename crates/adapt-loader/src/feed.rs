//! A loader that owns its current epoch, for callers that cannot hold a
//! borrow across calls (a Python object): one epoch at a time, the previous
//! one dropped (its workers' tasks cancelled) before the next starts.

use crate::epoch::EpochCore;
use crate::{Batch, Loader, LoaderError, LoaderKnobs, LoaderState, Segment, StageStats};

/// A [`Loader`] with its current epoch.
pub struct Feed {
    // Declared first, so dropped before the loader's workers.
    epoch: Option<EpochCore>,
    loader: Loader,
}

impl Feed {
    /// Wraps `loader`; no epoch is running.
    pub fn new(loader: Loader) -> Self {
        Self {
            epoch: None,
            loader,
        }
    }

    /// The loader.
    pub fn loader(&self) -> &Loader {
        &self.loader
    }

    fn begin(
        &mut self,
        epoch: u64,
        segments: Vec<Segment>,
        skip: usize,
    ) -> Result<usize, LoaderError> {
        // The old epoch goes first: its workers drop its tasks.
        self.epoch = None;
        let generation = self.loader.next_generation();
        let core = EpochCore::start(&mut self.loader, epoch, generation, segments, skip)?;
        let left = core.left();
        self.epoch = Some(core);
        Ok(left)
    }

    /// Starts `epoch`; returns its number of batches.
    pub fn start(&mut self, epoch: u64) -> Result<usize, LoaderError> {
        self.begin(epoch, Vec::new(), 0)
    }

    /// Whether `state` can be resumed here ([`Loader::check_resumable`]).
    pub fn check_resumable(&self, state: &LoaderState) -> Result<(), LoaderError> {
        self.loader.check_resumable(state)
    }

    /// Resumes a checkpoint's epoch (as [`Loader::resume`]); returns the
    /// batches left in it.
    pub fn resume(&mut self, state: &LoaderState) -> Result<usize, LoaderError> {
        let (segments, skip) = self.loader.resume_plan(state)?;
        self.begin(state.epoch, segments, skip)
    }

    /// The next batch of the current epoch (`None` at its end or without
    /// one), asking `interrupt` every [`crate::POLL`] while waiting.
    pub fn next(
        &mut self,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Option<Result<Batch, LoaderError>> {
        self.epoch.as_mut()?.advance(Some(interrupt))
    }

    /// Where the current epoch's time went so far (`None` without an epoch,
    /// or with `stage_timing` off).
    pub fn stats(&self) -> Option<StageStats> {
        self.epoch.as_ref().and_then(EpochCore::stats)
    }

    /// The checkpoint after the last batch handed out, when an epoch runs.
    pub fn state(&self) -> Option<LoaderState> {
        self.epoch.as_ref().map(EpochCore::state)
    }

    /// Switches to other worker knobs between two batches: the running
    /// epoch (if any) is checkpointed, its workers stopped, and it resumes
    /// on a loader with the new knobs — the same batches follow, byte for
    /// byte; the batches prefetched so far are built again.
    pub fn reconfigure(&mut self, knobs: LoaderKnobs) -> Result<(), LoaderError> {
        let state = self.state();
        self.epoch = None;
        self.loader = self.loader.reconfigured(knobs)?;
        if let Some(s) = state {
            self.resume(&s)?;
        }
        Ok(())
    }

    /// Ends the current epoch now.
    pub fn stop(&mut self) {
        self.epoch = None;
    }
}
