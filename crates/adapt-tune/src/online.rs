//! Tuning while training: the ADaPT descent run on the consumer's own
//! waits during the first epoch. Each candidate configuration serves a few
//! batches; the one whose batches kept the consumer waiting least wins
//! (ties — waits within the noise — go to the cheaper configuration, so a
//! loader that only has to keep up uses the fewest threads that do). The
//! switch happens between batches through a checkpoint, so the data order
//! never changes.

use crate::{LoaderKnobs, Machine};
use adapt_loader::{Batch, DEFAULT_PREFETCH, Feed, LoaderError};
use std::time::{Duration, Instant};

/// The descent over one knob's sorted values: nodes of the balanced tree
/// (upper middle as root, as the offline search builds it).
#[derive(Clone, Debug)]
struct Tree {
    values: Vec<usize>,
    /// The current node's interval of `values` and its index.
    lo: usize,
    hi: usize,
    at: usize,
}

impl Tree {
    fn new(values: Vec<usize>, start: Option<usize>) -> Self {
        let mut t = Self {
            lo: 0,
            hi: values.len() - 1,
            at: values.len() / 2,
            values,
        };
        // Start from a given value's node (a profile's), found by descent.
        if let Some(v) = start {
            while t.values[t.at] != v {
                let (l, r) = t.children();
                let next = if v < t.values[t.at] { l } else { r };
                match next {
                    Some(n) => t.go(n),
                    None => break,
                }
            }
        }
        t
    }

    fn mid(lo: usize, hi: usize) -> usize {
        lo + (hi - lo).div_ceil(2)
    }

    /// Indices of the left and right children.
    fn children(&self) -> (Option<usize>, Option<usize>) {
        let l = (self.at > self.lo).then(|| Self::mid(self.lo, self.at - 1));
        let r = (self.at < self.hi).then(|| Self::mid(self.at + 1, self.hi));
        (l, r)
    }

    fn go(&mut self, child: usize) {
        if child < self.at {
            self.hi = self.at - 1;
        } else {
            self.lo = self.at + 1;
        }
        self.at = child;
    }

    fn value(&self) -> usize {
        self.values[self.at]
    }
}

/// Where the descent is.
#[derive(Clone, Debug)]
enum Phase {
    /// Measuring tree `tree`'s current node, then its children in turn.
    Measuring {
        tree: usize,
        /// Candidate values for this step: the current node first, then
        /// its children; `results` holds the waits of those measured.
        candidates: Vec<usize>,
        results: Vec<f64>,
    },
    Settled,
}

/// The online search: feed it each batch's consumer wait; it answers with
/// the knobs to switch to.
#[derive(Clone, Debug)]
pub struct OnlineTuner {
    trees: [Tree; 2],
    knobs: LoaderKnobs,
    phase: Phase,
    window: usize,
    warmup: usize,
    seen: usize,
    waits: Vec<f64>,
    /// Waits closer than this (seconds, or relative) are a tie.
    tie_abs: f64,
    tie_rel: f64,
    moves: Vec<(LoaderKnobs, f64)>,
}

impl OnlineTuner {
    /// Starts from the trees' roots, as the paper's search does, or from
    /// `start` (a profile's knobs: the descent goes on below them);
    /// `window` batches are timed per candidate after `warmup` batches of
    /// settling in. Worker counts 0 … 2 × cores, prefetch 1 … 16.
    pub fn new(
        machine: &Machine,
        start: Option<LoaderKnobs>,
        window: usize,
        warmup: usize,
    ) -> Self {
        let workers: Vec<usize> = (0..=2 * machine.cores.max(1)).collect();
        let prefetch = vec![1, 2, 4, 8, 16];
        let w = Tree::new(
            workers,
            start.map(|s| s.num_workers.min(2 * machine.cores.max(1))),
        );
        let p = Tree::new(
            prefetch,
            start.map(|s| s.prefetch_factor.unwrap_or(DEFAULT_PREFETCH).clamp(1, 16)),
        );
        let start = start.unwrap_or(LoaderKnobs::DEFAULT);
        let mut t = Self {
            knobs: LoaderKnobs {
                num_workers: w.value(),
                prefetch_factor: Some(p.value()),
                ..start
            },
            trees: [w, p],
            phase: Phase::Settled,
            window: window.max(1),
            warmup,
            seen: 0,
            waits: Vec::new(),
            tie_abs: 0.0005,
            tie_rel: 0.10,
            moves: Vec::new(),
        };
        t.phase = t.step_phase(0);
        t
    }

    /// The knobs in use now (canonical: the descent keeps its prefetch
    /// factor while it tries 0 workers).
    pub fn knobs(&self) -> LoaderKnobs {
        self.knobs.canonical()
    }

    /// The settled knobs, once the descent ended.
    pub fn settled(&self) -> Option<LoaderKnobs> {
        matches!(self.phase, Phase::Settled).then(|| self.knobs())
    }

    /// Every configuration tried, with its mean wait per batch (seconds).
    pub fn tried(&self) -> &[(LoaderKnobs, f64)] {
        &self.moves
    }

    /// The candidates of tree `tree` at its current node.
    fn step_phase(&self, tree: usize) -> Phase {
        if tree >= self.trees.len() {
            return Phase::Settled;
        }
        let t = &self.trees[tree];
        let (l, r) = t.children();
        let mut candidates = vec![t.value()];
        candidates.extend(l.map(|i| t.values[i]));
        candidates.extend(r.map(|i| t.values[i]));
        Phase::Measuring {
            tree,
            candidates,
            results: Vec::new(),
        }
    }

    fn with_value(&self, tree: usize, v: usize) -> LoaderKnobs {
        let mut k = self.knobs;
        if tree == 0 {
            k.num_workers = v;
        } else {
            k.prefetch_factor = Some(v);
        }
        k
    }

    /// Cheaper first: fewer workers, then fewer batches in flight.
    fn cost_key(k: &LoaderKnobs) -> (usize, usize) {
        (k.num_workers, k.batches_in_memory())
    }

    /// One batch's consumer wait; `Some(knobs)` when the loader should
    /// switch before the next batch.
    pub fn observe(&mut self, wait: Duration) -> Option<LoaderKnobs> {
        let Phase::Measuring {
            tree,
            candidates,
            results,
        } = &mut self.phase
        else {
            return None;
        };
        let tree = *tree;
        self.seen += 1;
        if self.seen <= self.warmup {
            return None;
        }
        self.waits.push(wait.as_secs_f64());
        if self.waits.len() < self.window {
            return None;
        }
        let mean = self.waits.iter().sum::<f64>() / self.waits.len() as f64;
        self.waits.clear();
        self.seen = 0;
        results.push(mean);
        let (cands, res) = (candidates.clone(), results.clone());
        let measured = self.with_value(tree, cands[res.len() - 1]);
        self.moves.push((measured.canonical(), mean));
        if res.len() < cands.len() {
            // Next candidate.
            let next = self.with_value(tree, cands[res.len()]);
            self.knobs = next;
            return Some(next.canonical());
        }
        // All measured: the best, ties to the cheaper.
        let best_wait = res.iter().copied().fold(f64::INFINITY, f64::min);
        let tie = |w: f64| w <= best_wait + self.tie_abs.max(best_wait * self.tie_rel);
        let best = cands
            .iter()
            .zip(&res)
            .filter(|(_, w)| tie(**w))
            .map(|(v, _)| *v)
            .min_by_key(|v| Self::cost_key(&self.with_value(tree, *v)))
            .unwrap_or(cands[0]);
        let before = self.knobs;
        if best == cands[0] {
            // The current node wins: this tree is done; the next one starts
            // from here.
            self.knobs = self.with_value(tree, best);
            self.phase = self.step_phase(tree + 1);
        } else {
            let t = &mut self.trees[tree];
            let idx = t.values.iter().position(|&v| v == best).unwrap_or(t.at);
            t.go(idx);
            self.knobs = self.with_value(tree, best);
            // Continue the descent below the new node (its value is
            // measured again as the first candidate: cheap, and fair to
            // the children measured after it).
            self.phase = self.step_phase(tree);
            if let Phase::Measuring { candidates, .. } = &self.phase
                && candidates.len() == 1
            {
                self.phase = self.step_phase(tree + 1);
            }
        }
        if let Phase::Measuring {
            tree, candidates, ..
        } = &self.phase
        {
            let first = self.with_value(*tree, candidates[0]);
            self.knobs = first;
        }
        (self.knobs != before).then(|| self.knobs())
    }
}

/// A loader driven by its consumer that tunes itself during the first
/// epoch (`OnlineTuner`), then keeps what it settled on.
pub struct AutotunedFeed {
    feed: Feed,
    tuner: OnlineTuner,
    /// Each batch's wait (seconds), for reports.
    waits: Vec<f64>,
}

impl AutotunedFeed {
    /// Wraps `feed`; the search starts from `start` (a profile's knobs)
    /// or from the trees' roots.
    pub fn new(
        feed: Feed,
        machine: &Machine,
        start: Option<LoaderKnobs>,
        window: usize,
        warmup: usize,
    ) -> Result<Self, LoaderError> {
        let c = feed.loader().config();
        // The descent moves the workers and the prefetch factor only.
        let start = start.map(|s| LoaderKnobs {
            num_workers: s.num_workers,
            prefetch_factor: s.prefetch_factor,
            ..c.knobs
        });
        let tuner = OnlineTuner::new(machine, start, window, warmup);
        let mut me = Self {
            feed,
            tuner,
            waits: Vec::new(),
        };
        // The descent's first candidate may differ from the loader's knobs.
        me.apply()?;
        Ok(me)
    }

    fn apply(&mut self) -> Result<(), LoaderError> {
        let k = self.tuner.knobs();
        let c = self.feed.loader().config();
        if c.knobs.num_workers != k.num_workers
            || c.knobs.effective_prefetch() != k.effective_prefetch()
        {
            self.feed.reconfigure(k)?;
        }
        Ok(())
    }

    /// The feed (start epochs, checkpoints).
    pub fn feed(&mut self) -> &mut Feed {
        &mut self.feed
    }

    /// The feed, to look at (knobs now, checkpoint).
    pub fn as_feed(&self) -> &Feed {
        &self.feed
    }

    /// The tuner.
    pub fn tuner(&self) -> &OnlineTuner {
        &self.tuner
    }

    /// Every batch's consumer wait so far, seconds.
    pub fn waits(&self) -> &[f64] {
        &self.waits
    }

    /// The next batch; the time spent waiting for it is what the search
    /// minimises. Between batches the loader may switch knobs (through a
    /// checkpoint: the data that follows is unchanged).
    pub fn next(
        &mut self,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Option<Result<Batch, LoaderError>> {
        let t = Instant::now();
        let b = self.feed.next(interrupt)?;
        let wait = t.elapsed();
        self.waits.push(wait.as_secs_f64());
        if b.is_ok()
            && self.tuner.observe(wait).is_some()
            && let Err(e) = self.apply()
        {
            return Some(Err(e));
        }
        Some(b)
    }
}

/// A loader's feed, fixed or tuning itself: what the command line and
/// the Python module hold.
// One per loader: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum MaybeTuned {
    /// Fixed knobs.
    Fixed(Feed),
    /// Tuning while training.
    Tuned(AutotunedFeed),
}

impl MaybeTuned {
    /// The feed (start epochs, checkpoints).
    pub fn feed(&mut self) -> &mut Feed {
        match self {
            MaybeTuned::Fixed(d) => d,
            MaybeTuned::Tuned(a) => a.feed(),
        }
    }

    /// The feed, to look at (knobs now, checkpoint).
    pub fn as_feed(&self) -> &Feed {
        match self {
            MaybeTuned::Fixed(d) => d,
            MaybeTuned::Tuned(a) => a.as_feed(),
        }
    }

    /// The next batch (see [`AutotunedFeed::next`]).
    pub fn next(
        &mut self,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Option<Result<Batch, LoaderError>> {
        match self {
            MaybeTuned::Fixed(d) => d.next(interrupt),
            MaybeTuned::Tuned(a) => a.next(interrupt),
        }
    }

    /// The self-tuning feed, if this is one.
    pub fn tuned(&self) -> Option<&AutotunedFeed> {
        match self {
            MaybeTuned::Fixed(_) => None,
            MaybeTuned::Tuned(a) => Some(a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cores: usize) -> Machine {
        Machine {
            cores,
            ..Machine::detect()
        }
    }

    /// Runs the tuner on a synthetic wait function until it settles.
    fn descend(cores: usize, wait: impl Fn(&LoaderKnobs) -> f64) -> (LoaderKnobs, usize) {
        let mut t = OnlineTuner::new(&machine(cores), None, 2, 0);
        let mut batches = 0;
        while t.settled().is_none() && batches < 10_000 {
            let k = t.knobs();
            t.observe(Duration::from_secs_f64(wait(&k)));
            batches += 1;
        }
        (t.settled().unwrap_or(LoaderKnobs::DEFAULT), batches)
    }

    #[test]
    fn it_descends_to_the_fewest_workers_that_keep_up() {
        // The consumer waits 12 ms with no worker, 2 ms less with each,
        // none from 6 workers on: root 4 (waits), its right child 7 (keeps
        // up, as does 8), then 6 — the fewest that keep up — over 5.
        let (k, batches) = descend(4, |k| (0.012 - 0.002 * k.num_workers as f64).max(0.0));
        assert_eq!(k.num_workers, 6, "{k}");
        assert!(batches < 60, "{batches} batches");
        // The descent is the paper's, coarse: 3 workers would keep up
        // here, but the root 4 beats its children 2 and 7 (tie → cheaper).
        let (k, _) = descend(4, |k| (0.010 - 0.004 * k.num_workers as f64).max(0.0));
        assert_eq!(k.num_workers, 4, "{k}");
        // Everything keeps up: the cheapest, no workers at all.
        let (k, _) = descend(4, |_| 0.0);
        assert_eq!(k.num_workers, 0);
    }

    #[test]
    fn trees_start_from_a_given_value() {
        let t = Tree::new((0..=8).collect(), Some(3));
        assert_eq!(t.value(), 3);
        let root = Tree::new((0..=8).collect(), None);
        assert_eq!(root.value(), 4);
        assert_eq!(root.children(), (Some(2), Some(7)));
    }
}
