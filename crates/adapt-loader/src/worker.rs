//! Building a batch, and the worker threads that do it.

use crate::pool::BatchPool;
use crate::stages::{BatchTimes, EpochStats};
use crate::{Batch, ErrorPolicy, LoaderError, OutputFormat};
use adapt_dataset::stage::{self, Stage};
use adapt_dataset::{Dataset, Sample, Shape};
use adapt_transform::{Compose, Normalize, SampleRng, Scratch};
use crossbeam_channel::{Receiver, Sender};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

/// What every worker shares (by `Arc`, never copied).
pub(crate) struct Context {
    pub(crate) dataset: Arc<dyn Dataset>,
    pub(crate) transforms: Option<Arc<Compose>>,
    pub(crate) decoder: Option<Arc<dyn adapt_dataset::ScaledDecode>>,
    pub(crate) normalize: Normalize,
    pub(crate) shape: Shape,
    pub(crate) output: OutputFormat,
    /// Seed of the random transforms.
    pub(crate) seed: u64,
    pub(crate) pool: Arc<BatchPool>,
    pub(crate) policy: ErrorPolicy,
    /// How long threads poll a channel before sleeping (zero when the
    /// workers and the consumer outnumber the cores).
    pub(crate) spin: std::time::Duration,
    /// Worker threads running now (for shutdown checks).
    pub(crate) live: std::sync::atomic::AtomicUsize,
}

/// Counts a worker as live for as long as it exists.
struct LiveGuard<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for LiveGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Per-worker state, kept across epochs by persistent workers.
#[derive(Default)]
pub(crate) struct WorkerState {
    sample: Sample,
    scratch: Scratch,
    /// One output row, for collating through a deferred crop or flip.
    row: Vec<u8>,
    /// Samples this worker has built (which ones are timed stage by stage).
    built: u64,
}

/// One batch to build: a slice of the epoch's order.
pub(crate) struct Task {
    pub(crate) generation: u64,
    pub(crate) epoch: u64,
    pub(crate) number: usize,
    pub(crate) order: Arc<Vec<usize>>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// The epoch's stage counters, when it records them.
    pub(crate) stats: Option<Arc<EpochStats>>,
}

/// A built batch (or its error), tagged with the epoch generation it
/// belongs to so a later epoch can discard stale results.
pub(crate) struct Done {
    pub(crate) generation: u64,
    pub(crate) number: usize,
    pub(crate) result: Result<Batch, LoaderError>,
}

/// Builds one batch, turning a panic into an error.
pub(crate) fn build(
    ctx: &Arc<Context>,
    state: &mut WorkerState,
    task: &Task,
    worker: usize,
    cancelled: &mut dyn FnMut() -> bool,
) -> Result<Batch, LoaderError> {
    let started = std::time::Instant::now();
    let mut times = BatchTimes::default();
    let timing = task.stats.is_some().then_some(&mut times);
    match catch_unwind(AssertUnwindSafe(|| {
        build_inner(ctx, state, task, cancelled, timing)
    })) {
        Ok(r) => {
            if let Some(stats) = &task.stats {
                times.busy = started.elapsed();
                stats.add_batch(worker, &times);
            }
            r
        }
        Err(payload) => {
            // The state may be mid-update; start the next batch afresh.
            *state = WorkerState::default();
            stage::end();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            Err(LoaderError::WorkerPanicked {
                epoch: task.epoch,
                batch: task.number,
                worker,
                message,
            })
        }
    }
}

fn build_inner(
    ctx: &Arc<Context>,
    state: &mut WorkerState,
    task: &Task,
    cancelled: &mut dyn FnMut() -> bool,
    mut timing: Option<&mut BatchTimes>,
) -> Result<Batch, LoaderError> {
    let mut slot = ctx.pool.take()?;
    let per = ctx.shape.len() * ctx.output.bytes_per_value();
    let mut skipped = 0;
    let mut batch = |slot: &mut crate::pool::Slot| -> Result<(), LoaderError> {
        let indices = &task.order[task.start..task.end];
        for (k, &index) in indices.iter().enumerate() {
            if cancelled() {
                break;
            }
            // The next sample's memory is fetched while this one is built.
            if let Some(&next) = indices.get(k + 1) {
                ctx.dataset.prefetch(next);
            }
            let fail = |source| LoaderError::SampleFailed {
                epoch: task.epoch,
                batch: task.number,
                index,
                origin: ctx.dataset.source(index),
                source,
            };
            let j = slot.labels.len();
            let out = &mut slot.data.as_bytes_mut()[j * per..(j + 1) * per];
            let timed = timing.is_some() && state.built.is_multiple_of(stage::SAMPLE_EVERY);
            state.built += 1;
            if timed {
                stage::begin(Stage::Read);
            }
            let read = read_one(ctx, state, task.epoch, index, out);
            if let (Some(t), Some(split)) = (timing.as_deref_mut(), stage::end()) {
                t.add_timed(split);
            }
            let label = match read {
                Ok(label) => label,
                Err(e) => match ctx.policy {
                    ErrorPolicy::Fail => return Err(fail(e)),
                    ErrorPolicy::Skip => {
                        skipped += 1;
                        continue;
                    }
                },
            };
            slot.labels.push(label);
            slot.indices.push(index);
            if let Some(t) = timing.as_deref_mut() {
                t.samples += 1;
            }
        }
        Ok(())
    };
    let result = batch(&mut slot);
    let built = Batch {
        epoch: task.epoch,
        number: task.number,
        shape: ctx.shape,
        output: ctx.output,
        skipped,
        slot: Some(slot),
        pool: Arc::clone(&ctx.pool),
    };
    // On error the slot goes back to the pool with `built`'s drop.
    result.map(|()| built)
}

/// Reads sample `index` (of `epoch`), transforms it and collates it into
/// `out`, the sample's bytes in the batch; returns its label. Without a
/// transform, a sample the format lends (CIFAR-10's mapped records) is
/// collated straight from where it lives: one copy per byte, into the batch.
fn read_one(
    ctx: &Context,
    state: &mut WorkerState,
    epoch: u64,
    index: usize,
    out: &mut [u8],
) -> Result<i64, adapt_dataset::Error> {
    if let (Some(t), Some(dec)) = (&ctx.transforms, &ctx.decoder)
        && let Some(enc) = ctx.dataset.encoded(index)
    {
        // Decoded here, at a reduced scale where the first step shrinks.
        let enc = enc?;
        state.scratch.rng = SampleRng::new(ctx.seed, epoch, ctx.dataset.draw_key(index));
        let g = t.apply_encoded_deferring(&enc, &**dec, &mut state.sample, &mut state.scratch)?;
        return collate(ctx, state.sample.view(), g, &mut state.row, out);
    }
    let read = ctx.dataset.read(index, &mut state.sample)?;
    let (view, geometry) = match &ctx.transforms {
        None => (read.view(&state.sample), None),
        Some(t) => {
            // The draws depend only on (seed, epoch, sample): never on the
            // worker, the batch or the rank.
            let rng = SampleRng::new(ctx.seed, epoch, ctx.dataset.draw_key(index));
            crate::transform_read(t, read, rng, &mut state.sample, &mut state.scratch)?
        }
    };
    collate(ctx, view, geometry, &mut state.row, out)
}

/// Writes one transformed sample into its place in the batch.
fn collate(
    ctx: &Context,
    view: adapt_dataset::SampleView<'_>,
    geometry: Option<adapt_transform::Geometry<'_>>,
    row: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<i64, adapt_dataset::Error> {
    stage::mark(Stage::Collate);
    crate::collate_sample(
        ctx.output,
        &ctx.normalize,
        ctx.shape,
        view,
        geometry,
        row,
        out,
    )
}

/// A set of worker threads fed from one task queue.
pub(crate) struct Workers {
    /// The generation of the epoch these workers serve now: an older epoch
    /// still around must not take its results.
    active: AtomicU64,
    tasks: Option<Sender<Task>>,
    pub(crate) results: Receiver<Done>,
    /// Tasks of generations up to this one are dropped unbuilt.
    cancelled: Arc<AtomicU64>,
    handles: Vec<JoinHandle<()>>,
}

impl Workers {
    pub(crate) fn spawn(ctx: &Arc<Context>, n: usize) -> Result<Self, LoaderError> {
        let (task_tx, task_rx) = crossbeam_channel::unbounded::<Task>();
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<Done>();
        let cancelled = Arc::new(AtomicU64::new(0));
        let mut workers = Self {
            active: AtomicU64::new(0),
            tasks: Some(task_tx),
            results: done_rx,
            cancelled,
            handles: Vec::with_capacity(n),
        };
        for w in 0..n {
            let (ctx, rx, tx, cancelled) = (
                Arc::clone(ctx),
                task_rx.clone(),
                done_tx.clone(),
                Arc::clone(&workers.cancelled),
            );
            let handle = std::thread::Builder::new()
                .name(format!("adapt-worker-{w}"))
                .spawn(move || worker_loop(&ctx, w, &rx, &tx, &cancelled))
                // Dropping `workers` on this error joins the ones started.
                .map_err(LoaderError::Spawn)?;
            workers.handles.push(handle);
        }
        Ok(workers)
    }

    pub(crate) fn submit(&self, task: Task) -> bool {
        self.tasks.as_ref().is_some_and(|t| t.send(task).is_ok())
    }

    /// Marks `generation` as the epoch these workers serve.
    pub(crate) fn activate(&self, generation: u64) {
        self.active.store(generation, Ordering::SeqCst);
    }

    /// Whether `generation` is the epoch these workers serve (an owned
    /// set serves one epoch only and is always active).
    pub(crate) fn is_active(&self, generation: u64) -> bool {
        let a = self.active.load(Ordering::SeqCst);
        a == 0 || a == generation
    }

    /// Makes workers drop, unbuilt or half-built, every task of this
    /// generation and older.
    pub(crate) fn cancel(&self, generation: u64) {
        self.cancelled.fetch_max(generation, Ordering::SeqCst);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.cancel(u64::MAX);
        // Closing the queue ends each worker's loop after its current sample.
        self.tasks = None;
        for h in self.handles.drain(..) {
            // A worker's panics are caught per batch; a join error cannot
            // carry anything we could still report.
            let _ = h.join();
        }
    }
}

fn worker_loop(
    ctx: &Arc<Context>,
    worker: usize,
    tasks: &Receiver<Task>,
    done: &Sender<Done>,
    cancelled: &AtomicU64,
) {
    ctx.live.fetch_add(1, Ordering::SeqCst);
    let _live = LiveGuard(&ctx.live);
    let mut state = WorkerState::default();
    while let Some(task) = spin_recv(tasks, ctx.spin).or_else(|| tasks.recv().ok()) {
        let is_cancelled = || task.generation <= cancelled.load(Ordering::Relaxed);
        if is_cancelled() {
            continue;
        }
        let result = build(ctx, &mut state, &task, worker, &mut || is_cancelled());
        if is_cancelled() {
            continue;
        }
        if done
            .send(Done {
                generation: task.generation,
                number: task.number,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

/// How long a thread polls a channel before it sleeps on it, when every
/// thread of the loader has a core of its own. A hand-off between a worker
/// and the consumer takes a few µs when the other side is awake and tens of
/// µs when it must be woken; with small batches the wake-ups, not the work,
/// set the pace (8-sample CIFAR-10 batches with one worker: 3.2× faster
/// with the poll). When threads share cores the poll only takes time from
/// a thread with work (5–11% slower), so it is off then.
pub(crate) const SPIN: std::time::Duration = std::time::Duration::from_micros(20);

/// Polls `rx` for up to `spin`; `None` when nothing came (then block).
pub(crate) fn spin_recv<T>(rx: &Receiver<T>, spin: std::time::Duration) -> Option<T> {
    let deadline = std::time::Instant::now() + spin;
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(crossbeam_channel::TryRecvError::Disconnected) => return None,
            Err(crossbeam_channel::TryRecvError::Empty) if std::time::Instant::now() < deadline => {
                std::hint::spin_loop();
            }
            Err(crossbeam_channel::TryRecvError::Empty) => return None,
        }
    }
}

/// A worker state for loading in the calling thread.
pub(crate) fn inline_state() -> WorkerState {
    WorkerState::default()
}
