//! Offline evaluation: search strategies run against a grid recorded in an
//! earlier report instead of the loader, optionally with seeded noise.

use crate::{KnobSpace, LoaderKnobs, Report, TuneError};
use adapt_search::{AvlOptions, Config, Objective, TrialError, avl_search};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::HashMap;

/// How one strategy fared on one recorded grid over many seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayStats {
    /// Batch size of the recorded run.
    pub batch_size: usize,
    /// `plain`, `refined` or `refined+race` (or the caller's label).
    pub strategy: String,
    /// Seeds run.
    pub seeds: usize,
    /// Fraction of seeds whose pick's recorded cost is within 5% of the
    /// recorded optimum.
    pub within_5_percent: f64,
    /// Fraction whose pick is the recorded optimum.
    pub exact: f64,
    /// Mean objective runs.
    pub mean_trials: f64,
    /// Size of the recorded grid.
    pub grid_size: usize,
}

struct Recorded<'a> {
    costs: &'a HashMap<LoaderKnobs, f64>,
    noise: f64,
    rng: ChaCha8Rng,
}

impl Objective for Recorded<'_> {
    fn feasible(&self, config: &Config) -> Result<(), String> {
        if self.costs.contains_key(&KnobSpace::knobs(config)) {
            Ok(())
        } else {
            Err("not in the recorded grid".into())
        }
    }
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        let c = self
            .costs
            .get(&KnobSpace::knobs(config))
            .copied()
            .ok_or("not recorded")?;
        let m = if self.noise > 0.0 {
            self.rng.random_range(1.0 - self.noise..1.0 + self.noise)
        } else {
            1.0
        };
        Ok(c * m)
    }
}

/// The strategies a replay compares: the paper's plain descent, the
/// refined one, and the refined one with the race at the threshold the
/// live tuner would measure on this `noise` (the trimmed range of 5 trials
/// of a uniform ±noise is 2/3 of it on average; the default 5% without
/// noise).
pub fn replay_strategies(noise: f64) -> Vec<(&'static str, AvlOptions)> {
    let mut raced = crate::TuneOptions::REFINED_AVL;
    if noise > 0.0 {
        raced.noise.threshold = crate::threshold_from_spread(noise * 2.0 / 3.0);
    }
    vec![
        ("plain", AvlOptions::plain()),
        (
            "refined",
            AvlOptions {
                refine: true,
                ..AvlOptions::plain()
            },
        ),
        ("refined+race", raced),
    ]
}

/// Runs each `(label, options)` over `seeds` seeds on every recorded grid of
/// `report`, with a multiplicative noise of ±`noise` (0 = none).
pub fn replay(
    report: &Report,
    strategies: &[(&str, AvlOptions)],
    seeds: usize,
    noise: f64,
) -> Result<Vec<ReplayStats>, TuneError> {
    if !(0.0..1.0).contains(&noise) {
        return Err(TuneError::InvalidOption(format!(
            "replay noise {noise} must be in [0, 1)"
        )));
    }
    if seeds == 0 {
        return Err(TuneError::InvalidOption(
            "replay needs at least one seed".into(),
        ));
    }
    if report.runs.is_empty() {
        return Err(TuneError::Replay(
            "the report holds no run (no batch size was tuned)".into(),
        ));
    }
    let mut out = Vec::new();
    for run in &report.runs {
        let costs = recorded_costs(run)?;
        let best = costs.values().copied().fold(f64::INFINITY, f64::min);
        let workers: Vec<i64> = {
            let mut w: Vec<i64> = costs.keys().map(|k| k.num_workers as i64).collect();
            w.sort_unstable();
            w.dedup();
            w
        };
        let cuda = costs.keys().any(|k| k.pin_memory);
        let space = KnobSpace::with_domains(workers, cuda);
        for (label, options) in strategies {
            let (mut within, mut exact, mut trials) = (0usize, 0usize, 0usize);
            for seed in 0..seeds {
                let mut obj = Recorded {
                    costs: &costs,
                    noise,
                    rng: ChaCha8Rng::seed_from_u64(seed as u64),
                };
                let r = avl_search(space.space(), &mut obj, options);
                trials += r.trials;
                if let Some(pick) = r.best {
                    let c = costs
                        .get(&KnobSpace::knobs(&pick))
                        .copied()
                        .unwrap_or(f64::INFINITY);
                    within += usize::from(c <= best * 1.05);
                    exact += usize::from(c == best);
                }
            }
            out.push(ReplayStats {
                batch_size: run.batch_size,
                strategy: (*label).to_owned(),
                seeds,
                within_5_percent: within as f64 / seeds as f64,
                exact: exact as f64 / seeds as f64,
                mean_trials: trials as f64 / seeds as f64,
                grid_size: costs.len(),
            });
        }
    }
    Ok(out)
}

/// The recorded grid of one run, checked: a report read back from a file
/// must record a positive number of seconds per configuration (infinite
/// marks a failed trial, left out).
fn recorded_costs(run: &crate::RunReport) -> Result<HashMap<LoaderKnobs, f64>, TuneError> {
    if let Some(bad) = run
        .grid
        .iter()
        .find(|c| c.seconds.is_nan() || c.seconds <= 0.0)
    {
        return Err(TuneError::Replay(format!(
            "the report's grid for batch size {} records {} s for {}: not a time",
            run.batch_size, bad.seconds, bad.config
        )));
    }
    if run.grid.is_empty() {
        return Err(TuneError::Replay(format!(
            "the report has no recorded grid for batch size {} (tune with --strategy grid or both)",
            run.batch_size
        )));
    }
    let costs: HashMap<LoaderKnobs, f64> = run
        .grid
        .iter()
        .filter(|c| c.seconds.is_finite())
        // Canonical, as the search's configurations are (a report of an
        // earlier version holds a prefetch factor beside 0 workers).
        .map(|c| (c.config.canonical(), c.seconds))
        .collect();
    if costs.is_empty() {
        return Err(TuneError::Replay(format!(
            "the report's grid for batch size {} records no finite time (every cost is null)",
            run.batch_size
        )));
    }
    Ok(costs)
}
