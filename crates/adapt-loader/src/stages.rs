//! Where an epoch's time went: each worker's busy time and its split into
//! read, decode, each step and collate, and how long the consumer waited
//! for its batches — recorded as the epoch runs, cheap enough to leave on.
//!
//! Each batch's build is timed whole; one sample in
//! [`adapt_dataset::stage::SAMPLE_EVERY`] is timed stage by stage
//! ([`adapt_dataset::stage`]), and the timed samples' split, scaled to the
//! busy time, is the estimate of each stage's seconds.

use adapt_dataset::stage::{SLOTS, Stage};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One worker's counters for one epoch.
#[derive(Default)]
struct WorkerCounters {
    busy_ns: AtomicU64,
    batches: AtomicU64,
    samples: AtomicU64,
    timed: AtomicU64,
    split: [AtomicU64; SLOTS],
}

/// An epoch's counters, shared by its workers and its consumer.
pub(crate) struct EpochStats {
    started: Instant,
    /// When the last batch was handed out.
    ended: Mutex<Option<Instant>>,
    workers: Vec<WorkerCounters>,
    wait_ns: AtomicU64,
    threads: usize,
}

/// What one batch's build adds: its busy time, samples, and the split of
/// the samples timed stage by stage.
#[derive(Default)]
pub(crate) struct BatchTimes {
    pub(crate) busy: Duration,
    pub(crate) samples: u64,
    pub(crate) timed: u64,
    pub(crate) split: [u64; SLOTS],
}

impl BatchTimes {
    /// Adds one timed sample's split.
    pub(crate) fn add_timed(&mut self, split: [u64; SLOTS]) {
        self.timed += 1;
        for (a, b) in self.split.iter_mut().zip(split) {
            *a += b;
        }
    }
}

impl EpochStats {
    /// Counters for `workers` builders (0 workers: the consumer's thread).
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            started: Instant::now(),
            ended: Mutex::new(None),
            workers: (0..workers.max(1))
                .map(|_| WorkerCounters::default())
                .collect(),
            wait_ns: AtomicU64::new(0),
            threads: workers,
        }
    }

    pub(crate) fn add_batch(&self, worker: usize, t: &BatchTimes) {
        let Some(w) = self.workers.get(worker) else {
            return;
        };
        w.busy_ns.fetch_add(nanos(t.busy), Ordering::Relaxed);
        w.batches.fetch_add(1, Ordering::Relaxed);
        w.samples.fetch_add(t.samples, Ordering::Relaxed);
        w.timed.fetch_add(t.timed, Ordering::Relaxed);
        for (slot, v) in w.split.iter().zip(t.split) {
            if v > 0 {
                slot.fetch_add(v, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn add_wait(&self, waited: Duration) {
        self.wait_ns.fetch_add(nanos(waited), Ordering::Relaxed);
    }

    pub(crate) fn mark_end(&self) {
        *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// What was recorded so far (the epoch's time up to its last batch, or
    /// up to now while it runs).
    pub(crate) fn snapshot(&self) -> StageStats {
        let ended = *self.ended.lock().unwrap_or_else(|p| p.into_inner());
        let seconds = ended.unwrap_or_else(Instant::now) - self.started;
        let mut stages = [0f64; SLOTS];
        let workers = self
            .workers
            .iter()
            .map(|w| {
                let busy = secs(w.busy_ns.load(Ordering::Relaxed));
                let split: Vec<u64> = w.split.iter().map(|s| s.load(Ordering::Relaxed)).collect();
                let timed: u64 = split.iter().sum();
                for (k, v) in split.iter().enumerate() {
                    // The timed samples' share of each stage, of this worker's busy time.
                    if timed > 0 {
                        stages[k] += busy * *v as f64 / timed as f64;
                    }
                }
                WorkerStats {
                    busy_seconds: busy,
                    batches: w.batches.load(Ordering::Relaxed),
                    samples: w.samples.load(Ordering::Relaxed),
                }
            })
            .collect();
        StageStats {
            seconds: seconds.as_secs_f64(),
            num_workers: self.threads,
            workers,
            stage_seconds: stages,
            wait_seconds: secs(self.wait_ns.load(Ordering::Relaxed)),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn secs(ns: u64) -> f64 {
    ns as f64 * 1e-9
}

/// One builder's share of an epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerStats {
    /// Seconds spent building batches (reading a sample to collating it).
    pub busy_seconds: f64,
    /// Batches it built.
    pub batches: u64,
    /// Samples it built.
    pub samples: u64,
}

/// Where an epoch's time went, as recorded so far.
#[derive(Clone, Debug, PartialEq)]
pub struct StageStats {
    /// The epoch's time: from its start to its last batch (to now while it runs).
    pub seconds: f64,
    /// The loader's workers (0: batches built in the consumer's thread).
    pub num_workers: usize,
    /// Per worker (one entry for the consumer's thread with 0 workers).
    pub workers: Vec<WorkerStats>,
    /// Seconds per stage summed over the workers, by
    /// [`adapt_dataset::stage::Stage::slot`]: read, decode, the steps, collate.
    pub stage_seconds: [f64; SLOTS],
    /// Seconds the consumer spent in `next()` waiting for its batches (with
    /// 0 workers: building them).
    pub wait_seconds: f64,
}

impl StageStats {
    /// Seconds of `stage`.
    pub fn stage(&self, stage: Stage) -> f64 {
        self.stage_seconds[stage.slot()]
    }

    /// The workers' busy time summed.
    pub fn busy_seconds(&self) -> f64 {
        self.workers.iter().map(|w| w.busy_seconds).sum()
    }
}
