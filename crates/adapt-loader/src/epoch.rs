use crate::worker::{Done, Task, WorkerState, Workers, build, inline_state};
use crate::{Batch, Loader, LoaderError, LoaderState, Segment};
use crossbeam_channel::RecvTimeoutError;
use std::collections::VecDeque;
use std::sync::Arc;

enum Source<'a> {
    /// `num_workers = 0`: batches are built in `next()`.
    Inline(WorkerState),
    /// The loader's persistent workers.
    Persistent(&'a Workers),
    /// Workers of this epoch only, joined when it ends or is dropped.
    Owned(Workers),
}

/// One epoch's batches, in sampler order. After an error the epoch is over
/// and `next()` returns `None`.
pub struct Epoch<'a> {
    loader: &'a Loader,
    source: Source<'a>,
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
}

impl<'a> Epoch<'a> {
    pub(crate) fn start(
        loader: &'a mut Loader,
        epoch: u64,
        generation: u64,
        segments: Vec<Segment>,
        skip: usize,
    ) -> Result<Self, LoaderError> {
        let loader: &'a Loader = loader;
        let config = &loader.config;
        let len = loader.ctx.dataset.len();
        let order = Arc::new(crate::sampler::order_after(config, len, epoch, &segments));
        if let Some(&bad) = order.iter().find(|&&i| i >= len) {
            return Err(LoaderError::InvalidConfig(format!(
                "the sampler gave index {bad} for a dataset of {len}"
            )));
        }
        let source = match (&loader.persistent, config.num_workers) {
            (_, 0) => Source::Inline(inline_state()),
            (Some(w), _) => Source::Persistent(w),
            (None, n) => Source::Owned(Workers::spawn(&loader.ctx, n)?),
        };
        let batches = config.batches_for(order.len());
        let skip = skip.min(batches);
        let mut e = Self {
            loader,
            source,
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
        };
        e.fill();
        Ok(e)
    }

    /// Number of batches this epoch yields (fewer only when `skip` empties
    /// a whole batch).
    pub fn batches(&self) -> usize {
        self.batches
    }

    /// Samples skipped so far under the `skip` policy.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The most batches that were in flight at once so far (never above
    /// `num_workers × prefetch_factor`).
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// A checkpoint at this batch boundary: resuming from it
    /// ([`Loader::resume`]) yields the batches this epoch has not yet
    /// yielded, byte for byte. Take it between two `next()` calls.
    pub fn state(&self) -> LoaderState {
        let config = &self.loader.config;
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
            dataset_len: self.loader.ctx.dataset.len(),
            identity: config.identity.clone(),
            custom_sampler: config.sampler.is_some(),
        }
    }

    /// Whether every batch of the epoch has been handed out (a checkpoint
    /// taken now resumes into an empty epoch: go on with the next).
    pub fn is_done(&self) -> bool {
        self.finished || self.next_out >= self.batches
    }

    /// The dataset indices of this epoch, in order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    fn workers(&self) -> Option<&Workers> {
        match &self.source {
            Source::Inline(_) => None,
            Source::Persistent(w) => Some(w),
            Source::Owned(w) => Some(w),
        }
    }

    fn task(&self, number: usize) -> Task {
        let bs = self.loader.config.batch_size;
        Task {
            generation: self.generation,
            epoch: self.epoch,
            number,
            order: Arc::clone(&self.order),
            start: number * bs,
            end: ((number + 1) * bs).min(self.order.len()),
        }
    }

    /// Submits tasks until the in-flight bound or the epoch's end.
    fn fill(&mut self) {
        let Some(workers) = self.workers() else {
            return;
        };
        let bound = self.loader.config.max_in_flight();
        let mut next_in = self.next_in;
        while next_in < self.batches && next_in - self.next_out < bound {
            // A closed queue shows up as WorkersGone when results are awaited.
            workers.submit(self.task(next_in));
            next_in += 1;
        }
        self.next_in = next_in;
        self.max_in_flight = self.max_in_flight.max(self.next_in - self.next_out);
    }

    fn receive(&mut self) -> Result<Batch, LoaderError> {
        if matches!(self.source, Source::Inline(_)) {
            let task = self.task(self.next_out);
            self.max_in_flight = self.max_in_flight.max(1);
            let Source::Inline(state) = &mut self.source else {
                unreachable!("checked above")
            };
            return build(&self.loader.ctx, state, &task, 0, &|| false);
        }
        loop {
            if let Some(Some(_)) = self.window.front()
                && let Some(Some(r)) = self.window.pop_front()
            {
                return r;
            }
            let Some(workers) = self.workers() else {
                unreachable!("inline handled above")
            };
            let got = match crate::worker::spin_recv(&workers.results, self.loader.ctx.spin) {
                Some(done) => Ok(done),
                None => match self.loader.config.timeout {
                    Some(t) => workers.results.recv_timeout(t).map_err(|e| match e {
                        RecvTimeoutError::Timeout => LoaderError::Timeout {
                            epoch: self.epoch,
                            batch: self.next_out,
                            waited: t,
                        },
                        RecvTimeoutError::Disconnected => LoaderError::WorkersGone {
                            epoch: self.epoch,
                            batch: self.next_out,
                        },
                    }),
                    None => workers
                        .results
                        .recv()
                        .map_err(|_| LoaderError::WorkersGone {
                            epoch: self.epoch,
                            batch: self.next_out,
                        }),
                },
            };
            let Done {
                generation,
                number,
                result,
            } = got?;
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
}

impl Iterator for Epoch<'_> {
    type Item = Result<Batch, LoaderError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.finished && self.next_out < self.batches {
            let r = self.receive();
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

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.finished {
            0
        } else {
            self.batches - self.next_out
        };
        (0, Some(left))
    }
}

impl Drop for Epoch<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.workers() {
            // Stop building this epoch's batches now; owned workers are then
            // joined by their own drop.
            w.cancel(self.generation);
        }
    }
}
