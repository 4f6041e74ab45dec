//! What a tuning run is asked to do: the pipeline, the searches, the trial
//! and comparison lengths, the profile.

use crate::report::StrategyRecord;
use crate::{TrialSpec, TuneError};
use adapt_pipeline::{DatasetSpec, Pipeline};
use adapt_search::{AvlOptions, NoisePolicy};
use std::path::PathBuf;

/// Which searches to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The AVL search only.
    Avl,
    /// The grid only (its best is the pick).
    Grid,
    /// Both, with the paper's Table 1 comparison.
    Both,
}

impl Strategy {
    /// Every strategy, in the order the command line lists them.
    pub const ALL: [Strategy; 3] = [Strategy::Avl, Strategy::Grid, Strategy::Both];

    /// The strategy's name as written on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Avl => "avl",
            Strategy::Grid => "grid",
            Strategy::Both => "both",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Strategy {
    type Err = TuneError;
    fn from_str(s: &str) -> Result<Self, TuneError> {
        Strategy::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                TuneError::InvalidOption(format!("strategy {s:?}: expected avl, grid or both"))
            })
    }
}

/// Everything a tuning run needs.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// What is tuned: the data (split and concatenated parts included), the
    /// steps and the output, exactly as a run would open them — the
    /// profile entry is keyed by this pipeline's identity.
    pub pipeline: Pipeline,
    /// Batch sizes, each tuned separately.
    pub batch_sizes: Vec<usize>,
    /// Searches to run.
    pub strategy: Strategy,
    /// Memory budget in bytes; `None` = half the available memory.
    pub budget_bytes: Option<u64>,
    /// Trial length.
    pub trial: TrialSpec,
    /// AVL search options.
    pub avl: AvlOptions,
    /// Repeats of the final comparison.
    pub final_repeats: usize,
    /// Samples per epoch of the final comparison; `None` = the whole
    /// dataset up to 60,000.
    pub final_samples: Option<usize>,
    /// Profile file to reuse and update.
    pub profile: Option<PathBuf>,
    /// Search again even when the profile has an entry.
    pub retune: bool,
    /// `--command` tuning: how long a trial may run before its process
    /// group is killed and the trial fails.
    pub trial_limit: crate::TrialLimit,
    /// Lengthen trials (more samples, then more epochs) until one lasts at
    /// least this many seconds; `None` keeps `trial` as given.
    pub trial_seconds: Option<f64>,
    /// Trials of one configuration measured before the search to find the
    /// trial-to-trial noise (at least 2 to measure it; 0 or 1: not
    /// measured, the noise policy keeps its fixed threshold).
    pub noise_repeats: usize,
    /// The consumer's time per batch in every trial (a training step's
    /// stand-in): the loader only has to keep ahead of it.
    pub train_step: Option<std::time::Duration>,
    /// `--command` tuning: the cost is the number this regular expression's
    /// first group (or whole match) finds in the program's output, its
    /// last match; `None`: the process's wall time.
    pub metric: Option<String>,
    /// The knob space searched: sized to the machine, or the paper's.
    pub space: crate::SpaceKind,
}

/// What reports call an AVL descent: `refined` or `plain`.
pub(crate) fn descent_name(avl: &AvlOptions) -> &'static str {
    if avl.refine { "refined" } else { "plain" }
}

impl TuneOptions {
    /// The AVL options of a live run: refined, with the noise race.
    pub const REFINED_AVL: AvlOptions = AvlOptions {
        refine: true,
        noise: NoisePolicy {
            threshold: 0.05,
            max_repeats: 3,
            candidates: 3,
        },
        prune: true,
    };

    /// The paper's plain descent with the same race and pruning.
    pub const PLAIN_AVL: AvlOptions = AvlOptions {
        refine: false,
        ..Self::REFINED_AVL
    };

    /// What a run searches with unless told: chosen by measurement
    /// (`docs/tuning.md`, "Which descent").
    pub const DEFAULT_AVL: AvlOptions = Self::REFINED_AVL;

    /// The AVL options for the descent named `plain` or `refined` (`None`:
    /// the default's), with the race unless `race` is false (`plain`
    /// without it is the paper's algorithm as published) and pruning
    /// unless `prune` is false (pruning needs the race's measured noise).
    pub fn avl_named(
        descent: Option<&str>,
        race: bool,
        prune: bool,
    ) -> Result<AvlOptions, TuneError> {
        let mut avl = match descent {
            None => Self::DEFAULT_AVL,
            Some("plain") => Self::PLAIN_AVL,
            Some("refined") => Self::REFINED_AVL,
            Some(other) => {
                return Err(TuneError::InvalidOption(format!(
                    "unknown AVL descent {other:?}: plain or refined"
                )));
            }
        };
        if !race {
            avl.noise = NoisePolicy::OFF;
        }
        avl.prune = prune && race;
        Ok(avl)
    }

    /// Options for `pipeline` with every other field at its default.
    pub fn new(pipeline: Pipeline) -> Self {
        Self {
            pipeline,
            ..Self::default()
        }
    }

    /// Checks what can be checked before anything runs.
    pub(crate) fn check(&self) -> Result<(), TuneError> {
        if self.batch_sizes.is_empty() || self.batch_sizes.contains(&0) {
            return Err(TuneError::InvalidOption(
                "batch sizes must be at least 1".into(),
            ));
        }
        if self.final_repeats == 0 {
            return Err(TuneError::InvalidOption(
                "the final comparison needs at least one repeat".into(),
            ));
        }
        if let Some(t) = self.trial_seconds
            && !(t.is_finite() && t > 0.0)
        {
            return Err(TuneError::InvalidOption(format!(
                "trial length {t} s must be a positive number of seconds"
            )));
        }
        Ok(())
    }

    /// What the report and profile say about the search that ran.
    pub(crate) fn record(&self) -> StrategyRecord {
        StrategyRecord {
            search: self.strategy.name().into(),
            avl: descent_name(&self.avl).into(),
            noise_threshold: self.avl.noise.threshold,
            threshold_from: if self.noise_repeats >= 2 && self.avl.noise.threshold > 0.0 {
                "measured"
            } else {
                "fixed"
            }
            .into(),
            noise_max_repeats: self.avl.noise.max_repeats,
            noise_candidates: self.avl.noise.candidates,
            train_step_ms: self.train_step.map_or(0.0, |d| d.as_secs_f64() * 1e3),
            space: self.space.name().into(),
            prune: self.avl.prune && self.avl.noise.threshold > 0.0,
        }
    }
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            pipeline: Pipeline::new(DatasetSpec::new(
                &adapt_pipeline::Cifar10Format,
                "datasets/cifar10",
            )),
            batch_sizes: vec![128],
            strategy: Strategy::Avl,
            budget_bytes: None,
            trial: TrialSpec::default(),
            avl: Self::DEFAULT_AVL,
            final_repeats: 5,
            final_samples: None,
            profile: None,
            retune: false,
            trial_limit: crate::TrialLimit::DEFAULT,
            trial_seconds: Some(1.0),
            noise_repeats: 5,
            train_step: None,
            metric: None,
            space: crate::SpaceKind::Machine,
        }
    }
}

/// Progress messages (one per trial and per phase).
pub type Progress<'a> = &'a (dyn Fn(&str) + Send + Sync);

#[cfg(test)]
mod tests {
    use super::Strategy;

    #[test]
    fn strategy_names_read_back() {
        for s in Strategy::ALL {
            assert_eq!(s.to_string().parse::<Strategy>().ok(), Some(s));
        }
        assert!("AVL".parse::<Strategy>().is_err());
    }
}
