//! The monitor: one trial runs the loader with one configuration over a
//! fixed random subset for several epochs and reports the wall time of the
//! whole path the paper measures (start-up, load, transform, collate; on
//! the host backend there is no transfer).

use crate::{KnobSpace, LoaderKnobs, TuneError};
use adapt_dataset::{Dataset, Subset};
use adapt_loader::{Loader, LoaderConfig};
use adapt_search::{Config, Measured, Objective, TrialError};
use adapt_transfer::TransferEngine;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

/// How long a trial is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialSpec {
    /// Samples in the trial's subset (the whole dataset when larger).
    pub samples: usize,
    /// Epochs over the subset; at least 2, so an epoch boundary (where
    /// `persistent_workers` matters) is inside every trial.
    pub epochs: u64,
    /// Seed of the subset and of the shuffle.
    pub seed: u64,
}

impl Default for TrialSpec {
    /// 16,384 samples × 2 epochs: on CIFAR-10 the shortest subset whose
    /// grid ranks configurations as a full-epoch grid does, up to the noise
    /// between two full-epoch grids (see `docs/tuning.md`).
    fn default() -> Self {
        Self {
            samples: 16_384,
            epochs: 2,
            seed: 0,
        }
    }
}

/// Runs `epochs` epochs of `dataset` with `knobs` on `base` and returns the
/// wall seconds, loader construction (worker start-up) included. With a CUDA
/// engine every batch is copied to the device (pinned buffers when
/// `pin_memory`), as the paper's measurement includes the transfer.
///
/// `train_step` is the consumer's time per batch (a training step's stand-in):
/// the loader then only has to keep ahead of it.
pub fn time_loader(
    dataset: &Arc<dyn Dataset>,
    base: &LoaderConfig,
    knobs: &LoaderKnobs,
    epochs: u64,
    engine: Option<&TransferEngine>,
    train_step: Option<std::time::Duration>,
) -> Result<f64, TuneError> {
    let trial = Trial {
        dataset,
        base,
        knobs,
        epochs,
        engine,
        train_step,
    };
    Ok(trial.run(None)?.value())
}

/// When a trial bounded by pruning stops, and what it is then estimated
/// to cost whole.
///
/// Past the bound it stops after the batch that ends there, estimated as
/// the time so far scaled by the batches left. A trial whose batches come
/// from one producer (no workers, or one) arrives at a steady pace, so
/// once a quarter of its batches are read it also stops when its pace
/// since the first batch (start-up left out, which only lowers the
/// projection) projects the whole trial past the bound by more than
/// [`Pace::PROJECTION_MARGIN`]. With more workers batches arrive in groups
/// and a projection just after a group over-estimates: they run to the
/// bound.
struct Pace {
    total: u64,
    steady: bool,
    first: Option<f64>,
}

impl Pace {
    /// How far past the bound a projection must land to stop early.
    const PROJECTION_MARGIN: f64 = 1.1;

    fn new(total: u64, steady: bool) -> Self {
        Self {
            total,
            steady,
            first: None,
        }
    }

    /// The whole trial's estimated cost when it should stop after `done`
    /// batches read by `t` seconds under `bound`; `None` to go on.
    fn cut(&mut self, done: u64, t: f64, bound: f64) -> Option<f64> {
        let first = *self.first.get_or_insert(t);
        if done >= self.total || done == 0 {
            return None;
        }
        if t > bound {
            return Some(t * self.total as f64 / done as f64);
        }
        if !self.steady || done < 2 || done * 4 < self.total {
            return None;
        }
        let projected = first + (t - first) / (done - 1) as f64 * (self.total - 1) as f64;
        (projected > bound * Self::PROJECTION_MARGIN).then_some(projected)
    }
}

/// One timed run of the loader (see [`time_loader`]).
struct Trial<'a> {
    dataset: &'a Arc<dyn Dataset>,
    base: &'a LoaderConfig,
    knobs: &'a LoaderKnobs,
    epochs: u64,
    engine: Option<&'a TransferEngine>,
    train_step: Option<std::time::Duration>,
}

impl Trial<'_> {
    /// The run's seconds; with a `bound`, stopped after the first batch
    /// that ends past it, its whole time estimated as the time so far
    /// scaled by the batches left ([`Measured::CutShort`]).
    fn run(&self, bound: Option<f64>) -> Result<Measured, TuneError> {
        let mut config = self.base.clone();
        config.knobs = self.knobs.canonical();
        // The pool size every front uses for this configuration.
        let pinned = match self.engine {
            Some(e) if self.knobs.pin_memory => {
                e.pinned_buffers(adapt_transfer::pinned_pool_size(&config))
            }
            _ => None,
        };
        let start = Instant::now();
        let mut loader = Loader::with_buffers(Arc::clone(self.dataset), config, pinned)?;
        let total = (loader.batches_per_epoch() as u64 * self.epochs).max(1);
        let (mut done, mut checksum) = (0u64, 0u8);
        let mut pace = Pace::new(total, self.knobs.num_workers <= 1);
        let mut past = |done: u64| {
            let t = start.elapsed().as_secs_f64();
            bound.and_then(|b| pace.cut(done, t, b))
        };
        for e in 0..self.epochs {
            let epoch = loader.epoch(e)?;
            match self.engine {
                Some(engine) => {
                    for batch in engine.epoch(epoch, adapt_transfer::COPY_DEPTH) {
                        let batch = batch?;
                        self.step();
                        engine.recycle(batch);
                        done += 1;
                        if let Some(estimate) = past(done) {
                            return Ok(Measured::CutShort(estimate));
                        }
                    }
                }
                None => {
                    for batch in epoch {
                        let batch = batch?;
                        // Touch the batch as a consumer would (one byte per sample).
                        let bytes = batch.bytes();
                        checksum ^= bytes
                            .iter()
                            .step_by(bytes.len() / batch.len().max(1))
                            .fold(0, |a, &b| a ^ b);
                        self.step();
                        done += 1;
                        if let Some(estimate) = past(done) {
                            return Ok(Measured::CutShort(estimate));
                        }
                    }
                }
            }
        }
        drop(loader);
        std::hint::black_box(checksum);
        Ok(Measured::Whole(start.elapsed().as_secs_f64()))
    }

    /// The consumer's training step, when it has one.
    fn step(&self) {
        if let Some(s) = self.train_step {
            std::thread::sleep(s);
        }
    }
}

/// Fewest batches per epoch a trial is shortened to: on CIFAR-10 at batch
/// 2048, grids over 4-batch epochs ranked configurations at Spearman's
/// ρ = 0.44 against a full-epoch grid, 8-batch epochs at 0.74, the noise
/// ceiling (`docs/tuning.md`, "Trial length").
pub const MIN_TRIAL_BATCHES: usize = 8;

/// Sizes a trial over a dataset of `len` samples at `batch_size` so that
/// it lasts about `seconds`, timing each length tried with `time`: a trial
/// over twice as long is shortened first (fewer epochs down to 2, else
/// fewer samples down to `MIN_TRIAL_BATCHES` batches), then a trial too
/// short lengthened (more samples up to the whole dataset, then more
/// epochs). Returns the length kept and its last time.
pub(crate) fn size_trial(
    mut spec: TrialSpec,
    len: usize,
    batch_size: usize,
    seconds: f64,
    time: &mut dyn FnMut(TrialSpec) -> Result<f64, TuneError>,
) -> Result<(TrialSpec, f64), TuneError> {
    let mut t = time(spec)?;
    // Too long (a JPEG set at the default 16,384 samples takes seconds a
    // trial, and a search runs a hundred of them): shorten once, to about
    // the target, but never below MIN_TRIAL_BATCHES batches per epoch,
    // under which the ranking of worker counts falls apart.
    let floor = (batch_size.saturating_mul(MIN_TRIAL_BATCHES)).clamp(1, len.max(1));
    if t > 2.0 * seconds && spec.samples > floor {
        let mut shorter = spec;
        let shrink = seconds * 1.2 / t.max(1e-6);
        if shorter.epochs > 2 {
            shorter.epochs = ((shorter.epochs as f64 * shrink).ceil() as u64).max(2);
        } else {
            shorter.samples = ((shorter.samples as f64 * shrink).ceil() as usize).max(floor);
        }
        if shorter != spec {
            spec = shorter;
            t = time(spec)?;
        }
    }
    for _ in 0..6 {
        if t >= seconds {
            break;
        }
        // Aim 20% past the target: trial time is not quite linear.
        let grow = (seconds / t.max(1e-6) * 1.2).min(64.0);
        let mut longer = spec;
        if longer.samples < len {
            longer.samples = ((longer.samples as f64 * grow).ceil() as usize).min(len);
        } else {
            longer.epochs = ((longer.epochs as f64 * grow).ceil() as u64).clamp(2, 1000);
        }
        if longer == spec {
            break;
        }
        spec = longer;
        t = time(spec)?;
    }
    Ok((spec, t))
}

/// The objective the search minimises: seconds of one trial.
pub struct LoaderObjective {
    dataset: Arc<dyn Dataset>,
    subset: Arc<dyn Dataset>,
    base: LoaderConfig,
    spec: TrialSpec,
    engine: Option<Arc<TransferEngine>>,
    train_step: Option<std::time::Duration>,
}

impl LoaderObjective {
    /// Trials over a random subset of `dataset` with `base`'s batch size,
    /// shuffle, normalisation and transform.
    pub fn new(
        dataset: Arc<dyn Dataset>,
        base: LoaderConfig,
        spec: TrialSpec,
    ) -> Result<Self, TuneError> {
        if spec.epochs < 2 {
            return Err(TuneError::InvalidOption(
                "a trial needs at least 2 epochs (to include an epoch boundary)".into(),
            ));
        }
        if spec.samples == 0 {
            return Err(TuneError::InvalidOption(
                "a trial needs at least one sample".into(),
            ));
        }
        let subset: Arc<dyn Dataset> = Arc::new(Subset::random(
            Arc::clone(&dataset),
            spec.samples,
            spec.seed,
        ));
        Ok(Self {
            dataset,
            subset,
            base,
            spec,
            engine: None,
            train_step: None,
        })
    }

    /// The same objective whose consumer spends `step` per batch.
    #[must_use]
    pub fn with_train_step(mut self, train_step: Option<std::time::Duration>) -> Self {
        self.train_step = train_step;
        self
    }

    /// The trial length in use.
    pub fn spec(&self) -> TrialSpec {
        self.spec
    }

    /// Sizes trials so that one of `knobs` lasts about `seconds`: a trial
    /// over twice as long is shortened first (fewer epochs down to 2, else
    /// fewer samples down to `MIN_TRIAL_BATCHES` batches), then a trial too
    /// short lengthened (more samples up to the whole dataset, then more
    /// epochs). Returns the last trial's time.
    pub fn size_by_time(&mut self, knobs: &LoaderKnobs, seconds: f64) -> Result<f64, TuneError> {
        let (len, batch_size) = (self.dataset.len(), self.base.batch_size);
        let (spec, t) = size_trial(self.spec, len, batch_size, seconds, &mut |spec| {
            if spec != self.spec {
                self.respec(spec)?;
            }
            self.time(knobs)
        })?;
        debug_assert_eq!(spec, self.spec);
        Ok(t)
    }

    fn respec(&mut self, spec: TrialSpec) -> Result<(), TuneError> {
        *self = Self::new(Arc::clone(&self.dataset), self.base.clone(), spec)?
            .with_engine(self.engine.clone())
            .with_train_step(self.train_step);
        Ok(())
    }

    /// One trial of `knobs`.
    pub fn time(&self, knobs: &LoaderKnobs) -> Result<f64, TuneError> {
        Ok(self.time_until(knobs, None)?.value())
    }

    /// One trial of `knobs`, stopped past `bound` seconds when given.
    fn time_until(&self, knobs: &LoaderKnobs, bound: Option<f64>) -> Result<Measured, TuneError> {
        let trial = Trial {
            dataset: &self.subset,
            base: &self.base,
            knobs,
            epochs: self.spec.epochs,
            engine: self.engine.as_deref(),
            train_step: self.train_step,
        };
        trial.run(bound)
    }

    /// Copies every batch to the device through `engine` (a CUDA engine;
    /// the host backend has nothing to copy).
    #[must_use]
    pub fn with_engine(mut self, engine: Option<Arc<TransferEngine>>) -> Self {
        self.engine = engine;
        self
    }

    /// One pass over the subset without workers, timed and thrown away: it
    /// fills the page cache and the allocator, so the first trial is not
    /// charged for them.
    pub fn warm_up(&self) -> Result<f64, TuneError> {
        time_loader(
            &self.subset,
            &self.base,
            &LoaderKnobs::DEFAULT,
            1,
            self.engine.as_deref(),
            None,
        )
    }
}

impl Objective for LoaderObjective {
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        Ok(self.time(&KnobSpace::knobs(config))?)
    }
    fn measure_until(&mut self, config: &Config, bound: f64) -> Result<Measured, TrialError> {
        Ok(self.time_until(&KnobSpace::knobs(config), Some(bound))?)
    }
}

#[cfg(test)]
mod tests {
    use super::Pace;

    /// The first cut `pace` makes over batches arriving at `times`.
    fn first_cut(mut pace: Pace, times: &[f64], bound: f64) -> Option<(u64, f64)> {
        times
            .iter()
            .zip(1u64..)
            .find_map(|(&t, done)| pace.cut(done, t, bound).map(|e| (done, e)))
    }

    #[test]
    fn a_steady_trial_projected_past_its_bound_stops_after_a_quarter() {
        // One worker: 0.3 s of start-up, then a batch every 0.65 s; 16
        // batches, 10.7 s whole, against a bound of 6.4 s.
        let times: Vec<f64> = (1..=16).map(|k| 0.3 + 0.65 * k as f64).collect();
        let (done, estimate) = first_cut(Pace::new(16, true), &times, 6.4).unwrap();
        assert_eq!(done, 4, "a quarter of 16 batches");
        assert!((estimate - times[15]).abs() < 1e-9, "{estimate}");
        // Projected under the margin: it runs on to the bound.
        // Projected under the margin (10.7 < 9.9 × 1.1): it runs on to the
        // bound.
        let (done, _) = first_cut(Pace::new(16, true), &times, 9.9).unwrap();
        assert_eq!(done, 15);
        // Under its bound: never cut.
        assert_eq!(first_cut(Pace::new(16, true), &times, 10.8), None);
    }

    #[test]
    fn batches_in_groups_run_to_the_bound() {
        // Four workers: batches arrive four at a time, the whole trial 8 s.
        let times: Vec<f64> = (0..16).map(|k| 2.0 * (k / 4 + 1) as f64).collect();
        assert_eq!(
            first_cut(Pace::new(16, false), &times, 7.9),
            Some((13, 8.0 * 16.0 / 13.0))
        );
        // The same times read as one producer's would be cut after the
        // fifth batch (projected 2 + 4 × 15 = 62 s): why groups are not.
        assert_eq!(
            first_cut(Pace::new(16, true), &times, 7.9).map(|c| c.0),
            Some(5)
        );
    }
}
