//! One epoch: tasks to the workers, results back in sampler order through a
//! reorder window, errors instead of hangs.

use crate::stages::EpochStats;
use crate::worker::{Context, Done, Task, WorkerState, Workers, build, inline_state};
use crate::{Batch, Loader, LoaderConfig, LoaderError, LoaderState, Segment, StageStats};
use crossbeam_channel::RecvTimeoutError;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits for the workers' next result: without a timeout or an interrupt
/// check, blocking; otherwise in slices of at most [`POLL`], failing at the
/// deadline or when `interrupt` answers `true`.
fn wait_result(
    results: &crossbeam_channel::Receiver<Done>,
    deadline: Option<(Instant, Duration)>,
    interrupt: &mut Option<&mut (dyn FnMut() -> bool + '_)>,
    epoch: u64,
    batch: usize,
) -> Result<Done, LoaderError> {
    let gone = || LoaderError::WorkersGone { epoch, batch };
    loop {
        let wait = match (deadline, interrupt.is_some()) {
            (None, false) => None,
            (None, true) => Some(POLL),
            (Some((d, _)), polling) => {
                let left = d.saturating_duration_since(Instant::now());
                Some(if polling { left.min(POLL) } else { left })
            }
        };
        let Some(w) = wait else {
            return results.recv().map_err(|_| gone());
        };
        match results.recv_timeout(w) {
            Ok(done) => return Ok(done),
            Err(RecvTimeoutError::Disconnected) => return Err(gone()),
            Err(RecvTimeoutError::Timeout) => {
                if let Some((d, waited)) = deadline
                    && Instant::now() >= d
                {
                    return Err(LoaderError::Timeout {
                        epoch,
                        batch,
                        waited,
                    });
                }
                if let Some(f) = interrupt.as_mut()
                    && f()
                {
                    return Err(LoaderError::Interrupted { epoch, batch });
                }
            }
        }
    }
}

/// Who builds an epoch's batches.
enum Builders {
    /// `num_workers = 0`: batches are built in `next()`.
    Inline(WorkerState),
    /// The loader's persistent workers.
    Persistent(Arc<Workers>),
    /// Workers of this epoch only, joined when it ends or is dropped.
    Owned(Workers),
}

/// One epoch's batches, in sampler order. After an error the epoch is over
/// and `next()` returns `None`.
///
/// It borrows its loader mutably (`'a`), so one epoch runs at a time; what
/// it reads of the loader it holds itself (shared parts), which lets
/// [`crate::Feed`] keep an epoch beside the loader it came from.
pub struct Epoch<'a> {
    core: EpochCore,
    _loader: PhantomData<&'a mut Loader>,
}

/// The epoch itself, free of the loader's borrow.
pub(crate) struct EpochCore {
    ctx: Arc<Context>,
    config: Arc<LoaderConfig>,
    builders: Builders,
    epoch: u64,
    generation: u64,
    order: Arc<Vec<usize>>,
    batches: usize,
    /// Next batch number to hand out.
    next_out: usize,
    /// Next batch number to submit to the workers.
    next_in: usize,
    /// Results that arrived ahead of `next_out`, by offset from it.
    window: VecDeque<Option<Result<Batch, LoaderError>>>,
    finished: bool,
    skipped: usize,
    max_in_flight: usize,
    /// Earlier world sizes of this (resumed) epoch.
    segments: Vec<Segment>,
    /// Where the epoch's time goes, when the loader records it.
    stats: Option<Arc<EpochStats>>,
}

impl<'a> Epoch<'a> {
    pub(crate) fn start(
        loader: &'a mut Loader,
        epoch: u64,
        generation: u64,
        segments: Vec<Segment>,
        skip: usize,
    ) -> Result<Self, LoaderError> {
        Ok(Self {
            core: EpochCore::start(loader, epoch, generation, segments, skip)?,
            _loader: PhantomData,
        })
    }

    /// Number of batches this epoch yields (fewer only when `skip` empties
    /// a whole batch).
    pub fn batches(&self) -> usize {
        self.core.batches
    }

    /// Samples skipped so far under the `skip` policy.
    pub fn skipped(&self) -> usize {
        self.core.skipped
    }

    /// The most batches that were in flight at once so far (never above
    /// `num_workers × prefetch_factor`).
    pub fn max_in_flight(&self) -> usize {
        self.core.max_in_flight
    }

    /// A checkpoint at this batch boundary: resuming from it
    /// ([`Loader::resume`]) yields the batches this epoch has not yet
    /// yielded, byte for byte. Take it between two `next()` calls.
    pub fn state(&self) -> LoaderState {
        self.core.state()
    }

    /// Whether every batch of the epoch has been handed out (a checkpoint
    /// taken now resumes into an empty epoch: go on with the next).
    pub fn is_done(&self) -> bool {
        self.core.is_done()
    }

    /// The dataset indices of this epoch, in order.
    pub fn order(&self) -> &[usize] {
        &self.core.order
    }

    /// Where this epoch's time went so far (`None` when the loader's
    /// `stage_timing` is off).
    pub fn stats(&self) -> Option<StageStats> {
        self.core.stats()
    }

    /// The next batch, as `next()`, but asking `interrupt` every [`POLL`]
    /// while it waits (a Python binding checks for Ctrl-C there). When
    /// `interrupt` answers `true` this returns [`LoaderError::Interrupted`]
    /// and the epoch is over; the loader can start another.
    pub fn next_interruptible(
        &mut self,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Option<Result<Batch, LoaderError>> {
        self.core.advance(Some(interrupt))
    }
}

impl EpochCore {
    pub(crate) fn start(
        loader: &mut Loader,
        epoch: u64,
        generation: u64,
        segments: Vec<Segment>,
        skip: usize,
    ) -> Result<Self, LoaderError> {
        let config = &loader.config;
        let len = loader.ctx.dataset.len();
        let order = Arc::new(crate::sampler::order_after(config, len, epoch, &segments));
        if let Some(&bad) = order.iter().find(|&&i| i >= len) {
            return Err(LoaderError::InvalidConfig(format!(
                "the sampler gave index {bad} for a dataset of {len}"
            )));
        }
        let builders = match (&loader.persistent, config.knobs.num_workers) {
            (_, 0) => Builders::Inline(inline_state()),
            (Some(w), _) => {
                // This epoch is now the one the persistent workers serve.
                w.activate(generation);
                Builders::Persistent(Arc::clone(w))
            }
            (None, n) => Builders::Owned(Workers::spawn(&loader.ctx, n)?),
        };
        let batches = config.batches_for(order.len());
        let skip = skip.min(batches);
        let mut e = Self {
            ctx: Arc::clone(&loader.ctx),
            config: Arc::clone(&loader.config),
            builders,
            epoch,
            generation,
            order,
            batches,
            next_out: skip,
            next_in: skip,
            window: VecDeque::new(),
            finished: false,
            skipped: 0,
            max_in_flight: 0,
            segments,
            stats: config
                .stage_timing
                .then(|| Arc::new(EpochStats::new(config.knobs.num_workers))),
        };
        e.fill();
        Ok(e)
    }

    pub(crate) fn state(&self) -> LoaderState {
        let config = &self.config;
        let (rank, world_size) = config
            .distributed
            .map_or((0, 1), |d| (d.rank, d.world_size));
        LoaderState {
            format: crate::resume::FORMAT,
            epoch: self.epoch,
            batches: self.next_out,
            segments: self.segments.clone(),
            rank,
            world_size,
            seed: config.seed,
            batch_size: config.batch_size,
            shuffle: config.shuffle,
            drop_last: config.drop_last,
            dataset_len: self.ctx.dataset.len(),
            identity: config.identity.clone(),
            custom_sampler: config.sampler.is_some(),
            sampler: crate::resume::sampler_description(config),
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.finished || self.next_out >= self.batches
    }

    pub(crate) fn left(&self) -> usize {
        if self.finished {
            0
        } else {
            self.batches - self.next_out
        }
    }

    fn workers(&self) -> Option<&Workers> {
        match &self.builders {
            Builders::Inline(_) => None,
            Builders::Persistent(w) => Some(&**w),
            Builders::Owned(w) => Some(w),
        }
    }

    fn task(&self, number: usize) -> Task {
        let bs = self.config.batch_size;
        Task {
            generation: self.generation,
            epoch: self.epoch,
            number,
            order: Arc::clone(&self.order),
            start: number * bs,
            end: ((number + 1) * bs).min(self.order.len()),
            stats: self.stats.clone(),
        }
    }

    pub(crate) fn stats(&self) -> Option<StageStats> {
        self.stats.as_ref().map(|s| s.snapshot())
    }

    /// Submits tasks until the in-flight bound or the epoch's end.
    fn fill(&mut self) {
        let Some(workers) = self.workers() else {
            return;
        };
        let bound = self.config.max_in_flight();
        let mut next_in = self.next_in;
        while next_in < self.batches && next_in - self.next_out < bound {
            // A closed queue shows up as WorkersGone when results are awaited.
            workers.submit(self.task(next_in));
            next_in += 1;
        }
        self.next_in = next_in;
        self.max_in_flight = self.max_in_flight.max(self.next_in - self.next_out);
    }

    /// The next batch in order: built here (no workers) or taken from the
    /// workers' results. `interrupt`, when given, is asked every
    /// [`POLL`] while waiting (and while building without workers); when it
    /// answers `true` the wait ends with [`LoaderError::Interrupted`].
    fn receive<'f>(
        &mut self,
        mut interrupt: Option<&mut (dyn FnMut() -> bool + 'f)>,
    ) -> Result<Batch, LoaderError> {
        let (epoch, batch) = (self.epoch, self.next_out);
        if matches!(self.builders, Builders::Inline(_)) {
            return self.receive_inline(interrupt);
        }
        let deadline = self.config.timeout.map(|t| (Instant::now() + t, t));
        loop {
            if let Some(Some(_)) = self.window.front()
                && let Some(Some(r)) = self.window.pop_front()
            {
                return r;
            }
            let Some(workers) = self.workers() else {
                unreachable!("inline handled above")
            };
            if !workers.is_active(self.generation) {
                return Err(LoaderError::Superseded { epoch });
            }
            let done = match crate::worker::spin_recv(&workers.results, self.ctx.spin) {
                Some(done) => done,
                None => wait_result(&workers.results, deadline, &mut interrupt, epoch, batch)?,
            };
            let Done {
                generation,
                number,
                result,
            } = done;
            if generation != self.generation || number < self.next_out {
                continue; // A stale result of an abandoned epoch: its drop recycles the buffer.
            }
            let slot = number - self.next_out;
            if self.window.len() <= slot {
                self.window.resize_with(slot + 1, || None);
            }
            self.window[slot] = Some(result);
        }
    }

    /// Builds the next batch in this thread (no workers), asking
    /// `interrupt` at most every [`POLL`].
    fn receive_inline<'f>(
        &mut self,
        mut interrupt: Option<&mut (dyn FnMut() -> bool + 'f)>,
    ) -> Result<Batch, LoaderError> {
        let (epoch, batch) = (self.epoch, self.next_out);
        let task = self.task(self.next_out);
        self.max_in_flight = self.max_in_flight.max(1);
        let Builders::Inline(state) = &mut self.builders else {
            unreachable!("only called without workers")
        };
        let mut interrupted = false;
        let mut last = Instant::now();
        let mut cancelled = || {
            // Asked once per sample; the caller's check (which may take
            // a lock) runs at most every POLL.
            if let Some(f) = interrupt.as_mut()
                && last.elapsed() >= POLL
            {
                last = Instant::now();
                interrupted |= f();
            }
            interrupted
        };
        let built = build(&self.ctx, state, &task, 0, &mut cancelled);
        if interrupted {
            Err(LoaderError::Interrupted { epoch, batch })
        } else {
            built
        }
    }

    pub(crate) fn advance<'f>(
        &mut self,
        mut interrupt: Option<&mut (dyn FnMut() -> bool + 'f)>,
    ) -> Option<Result<Batch, LoaderError>> {
        while !self.finished && self.next_out < self.batches {
            let asked = Instant::now();
            let r = self.receive(interrupt.as_deref_mut());
            if let Some(s) = &self.stats {
                s.add_wait(asked.elapsed());
                if self.next_out + 1 >= self.batches || r.is_err() {
                    s.mark_end();
                }
            }
            if matches!(r, Err(LoaderError::Interrupted { .. })) {
                // Nothing was consumed: the position stays at this batch.
                self.finished = true;
                return Some(r);
            }
            self.next_out += 1;
            self.fill();
            match r {
                Ok(b) => {
                    self.skipped += b.skipped;
                    if b.is_empty() {
                        continue; // every sample skipped: nothing to yield
                    }
                    return Some(Ok(b));
                }
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// How often a waiting epoch asks its interrupt check.
pub const POLL: Duration = Duration::from_millis(50);

impl Iterator for Epoch<'_> {
    type Item = Result<Batch, LoaderError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.core.advance(None)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.core.left()))
    }
}

impl Drop for EpochCore {
    fn drop(&mut self) {
        if let Some(w) = self.workers() {
            // Stop building this epoch's batches now; owned workers are then
            // joined by their own drop.
            w.cancel(self.generation);
        }
    }
}
