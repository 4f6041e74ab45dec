//! Where a sample's time goes: a per-thread stage clock that readers,
//! steps and collation mark as they hand the sample on (read → decode →
//! step 1 … → collate), timing only the samples the loader picked.
//!
//! A mark costs one thread-local read and a branch when the sample is not
//! being timed; the loader times one sample in [`SAMPLE_EVERY`] and each
//! batch as a whole, and scales the timed samples' split to the batch's
//! time (a sampling profiler's estimate, about 25 ns a sample in all).

use std::cell::Cell;
use std::time::Instant;

/// The most steps a pipeline's stages name one by one; later steps are
/// counted in the last.
pub const MAX_STEPS: usize = 12;

/// Slots of a stage split: read, decode, the steps, collate.
pub const SLOTS: usize = 3 + MAX_STEPS;

/// One sample in this many is timed stage by stage.
pub const SAMPLE_EVERY: u64 = 8;

/// A stage of one sample's way into its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Getting the bytes: a file, an object store, a member of a tar, a
    /// record of a pack (its decompression included), memory.
    Read,
    /// Turning encoded bytes into pixels (JPEG, PNG).
    Decode,
    /// The pipeline's step of this index (0-based), before collation.
    Step(usize),
    /// Writing the sample into the batch: the normalisation, and crops and
    /// flips read through while collating.
    Collate,
}

impl Stage {
    /// Its slot in a split.
    pub fn slot(self) -> usize {
        match self {
            Stage::Read => 0,
            Stage::Decode => 1,
            Stage::Step(k) => 2 + k.min(MAX_STEPS - 1),
            Stage::Collate => SLOTS - 1,
        }
    }
}

/// This thread's clock: off, or timing a sample since `since`.
struct Clock {
    on: Cell<bool>,
    slot: Cell<usize>,
    since: Cell<Option<Instant>>,
    split: Cell<[u64; SLOTS]>,
}

thread_local! {
    static CLOCK: Clock = const {
        Clock {
            on: Cell::new(false),
            slot: Cell::new(0),
            since: Cell::new(None),
            split: Cell::new([0; SLOTS]),
        }
    };
}

/// Starts timing this thread's next sample in `stage`.
pub fn begin(stage: Stage) {
    CLOCK.with(|c| {
        c.on.set(true);
        c.slot.set(stage.slot());
        c.split.set([0; SLOTS]);
        c.since.set(Some(Instant::now()));
    });
}

/// The sample being timed moves on to `stage` (nothing when none is).
#[inline]
pub fn mark(stage: Stage) {
    CLOCK.with(|c| {
        if c.on.get() {
            close_slot(c, Some(stage.slot()));
        }
    });
}

/// Ends the timed sample: nanoseconds spent in each slot.
pub fn end() -> Option<[u64; SLOTS]> {
    CLOCK.with(|c| {
        if !c.on.get() {
            return None;
        }
        close_slot(c, None);
        c.on.set(false);
        Some(c.split.get())
    })
}

/// Charges the time since the last mark to the current slot, then moves
/// to `next`.
fn close_slot(c: &Clock, next: Option<usize>) {
    let now = Instant::now();
    if let Some(since) = c.since.get() {
        let mut split = c.split.get();
        split[c.slot.get()] += u64::try_from((now - since).as_nanos()).unwrap_or(u64::MAX);
        c.split.set(split);
    }
    if let Some(n) = next {
        c.slot.set(n);
    }
    c.since.set(Some(now));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_split_a_timed_sample_and_cost_nothing_otherwise() {
        mark(Stage::Decode);
        assert_eq!(end(), None, "no sample was being timed");
        begin(Stage::Read);
        std::thread::sleep(std::time::Duration::from_millis(2));
        mark(Stage::Decode);
        std::thread::sleep(std::time::Duration::from_millis(4));
        mark(Stage::Step(40));
        mark(Stage::Collate);
        let split = end().unwrap();
        assert!(split[Stage::Read.slot()] >= 2_000_000);
        assert!(split[Stage::Decode.slot()] >= 4_000_000);
        assert!(split[Stage::Decode.slot()] > split[Stage::Read.slot()]);
        assert_eq!(Stage::Step(40).slot(), Stage::Step(MAX_STEPS - 1).slot());
        assert_eq!(end(), None, "the clock stops at the end");
    }
}
