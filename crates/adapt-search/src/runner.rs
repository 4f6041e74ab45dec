//! Runs trials for a search: feasibility first, memoisation by canonical
//! configuration, the trace, and noise-aware comparison.

use crate::{Config, Measured, Objective, Space};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What one trial gave.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A measured cost.
    Cost {
        /// The cost.
        cost: f64,
    },
    /// Refused before running.
    Infeasible {
        /// Why.
        reason: String,
    },
    /// The objective failed.
    Failed {
        /// Its message.
        message: String,
    },
    /// Stopped once it passed `bound` (pruning: it could no longer be the
    /// pick); the whole trial's cost estimated, as the search counts it.
    CutShort {
        /// The estimated cost of the whole trial (at least `bound`).
        estimate: f64,
        /// The cost past which it was stopped.
        bound: f64,
    },
    /// Not run: predicted to lose (pruning; the reason says from what).
    Skipped {
        /// Why.
        reason: String,
    },
}

impl Outcome {
    /// Whether the objective ran (a cost, a cut-short or a failed trial).
    pub fn ran(&self) -> bool {
        !matches!(self, Outcome::Infeasible { .. } | Outcome::Skipped { .. })
    }
}

/// A configuration's costs measured before a search on the same objective
/// with the same trials (the tuner's noise probes); see
/// [`crate::avl_search_from`].
#[derive(Clone, Debug, PartialEq)]
pub struct Prior {
    /// The configuration.
    pub config: Config,
    /// Its measured costs, in order.
    pub costs: Vec<f64>,
}

/// One entry of the trace, in the order trials happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trial {
    /// The canonical configuration.
    pub config: Config,
    /// What came of it.
    pub outcome: Outcome,
    /// Wall time of the trial (zero for an infeasible or skipped one).
    pub wall: Duration,
    /// 1 for the first measurement of this configuration, 2 for its first
    /// repeat, and so on (0 for a skipped one).
    pub repeat: usize,
}

#[derive(Clone, Debug)]
enum Record {
    Costs(Vec<f64>),
    Unusable,
}

pub(crate) struct Runner<'a, O: Objective + ?Sized> {
    pub(crate) space: &'a Space,
    objective: &'a mut O,
    memo: HashMap<Config, Record>,
    pub(crate) trace: Vec<Trial>,
    started: Instant,
    /// Pruning: a first measurement may stop past this factor times the
    /// cheapest cost measured so far (`None`: every trial runs whole).
    cut: Option<f64>,
    /// The cheapest finite cost measured so far.
    floor: f64,
    /// Configurations measured before the search (`with_prior`), in order.
    prior: Vec<Config>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

impl<'a, O: Objective + ?Sized> Runner<'a, O> {
    pub(crate) fn new(space: &'a Space, objective: &'a mut O) -> Self {
        Self {
            space,
            objective,
            memo: HashMap::new(),
            trace: Vec::new(),
            started: Instant::now(),
            cut: None,
            floor: f64::INFINITY,
            prior: Vec::new(),
        }
    }

    /// The same runner, stopping a first measurement once it passes
    /// `factor` × the cheapest cost so far.
    pub(crate) fn cutting_past(mut self, factor: Option<f64>) -> Self {
        self.cut = factor;
        self
    }

    /// The same runner, knowing the costs measured before the search on
    /// the same objective and trials: they stand as first measurements
    /// (no trial runs them again; only later ones are trials), and the
    /// cheapest median is the floor pruning cuts against. Non-finite costs
    /// are left out, and so is a configuration with none left or one the
    /// objective finds infeasible.
    pub(crate) fn with_prior(mut self, before: &[Prior]) -> Self {
        for p in before {
            let costs: Vec<f64> = p.costs.iter().copied().filter(|c| c.is_finite()).collect();
            if costs.is_empty() {
                continue;
            }
            let c = self.space.canonicalize(&p.config);
            // Measured outside the search's constraints (a probe over the
            // memory budget): the search must not pick it from here.
            if self.objective.feasible(&c).is_err() {
                continue;
            }
            let m = median(&costs);
            if m > 0.0 {
                self.floor = self.floor.min(m);
            }
            match self.memo.get_mut(&c) {
                Some(Record::Costs(v)) => v.extend(costs),
                _ => {
                    self.memo.insert(c.clone(), Record::Costs(costs));
                    self.prior.push(c);
                }
            }
        }
        self
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Objective runs so far (repeats included; infeasible and skipped
    /// ones excluded).
    pub(crate) fn runs(&self) -> usize {
        self.trace.iter().filter(|t| t.outcome.ran()).count()
    }

    /// Records that `config` was not run, and why.
    pub(crate) fn skip(&mut self, config: &Config, reason: String) {
        self.trace.push(Trial {
            config: self.space.canonicalize(config),
            outcome: Outcome::Skipped { reason },
            wall: Duration::ZERO,
            repeat: 0,
        });
    }

    /// Whether `config`'s canonical form has been measured (or found
    /// unusable): its cost costs no trial.
    pub(crate) fn known(&self, config: &Config) -> bool {
        self.memo.contains_key(&self.space.canonicalize(config))
    }

    /// The pruning margin (a factor over a cost), when pruning.
    pub(crate) fn cut_factor(&self) -> Option<f64> {
        self.cut
    }

    fn run(&mut self, config: &Config, repeat: usize) -> Option<f64> {
        if let Err(reason) = self.objective.feasible(config) {
            self.trace.push(Trial {
                config: config.clone(),
                outcome: Outcome::Infeasible { reason },
                wall: Duration::ZERO,
                repeat,
            });
            return None;
        }
        let bound = self
            .cut
            .filter(|_| repeat == 1 && self.floor.is_finite())
            .map(|f| self.floor * f);
        let t = Instant::now();
        let result = match bound {
            Some(b) => self.objective.measure_until(config, b),
            None => self.objective.measure(config).map(Measured::Whole),
        };
        let wall = t.elapsed();
        let (outcome, cost) = match result {
            Ok(Measured::Whole(c)) if c.is_finite() => (Outcome::Cost { cost: c }, Some(c)),
            Ok(Measured::CutShort(e)) if e.is_finite() => (
                Outcome::CutShort {
                    estimate: e,
                    bound: bound.unwrap_or(e),
                },
                Some(e),
            ),
            Ok(Measured::Whole(c) | Measured::CutShort(c)) => (
                Outcome::Failed {
                    message: format!("non-finite cost {c}"),
                },
                None,
            ),
            Err(e) => (
                Outcome::Failed {
                    message: e.to_string(),
                },
                None,
            ),
        };
        if let Some(c) = cost {
            self.floor = self.floor.min(c);
        }
        self.trace.push(Trial {
            config: config.clone(),
            outcome,
            wall,
            repeat,
        });
        cost
    }

    /// The canonical form of `config` and its cost (the median of its
    /// measurements; +inf when infeasible or failed), measuring it once if
    /// it never was.
    pub(crate) fn cost(&mut self, config: &Config) -> (Config, f64) {
        let c = self.space.canonicalize(config);
        let cost = match self.memo.get(&c) {
            Some(Record::Costs(v)) => median(v),
            Some(Record::Unusable) => f64::INFINITY,
            None => {
                let rec = match self.run(&c, 1) {
                    Some(x) => Record::Costs(vec![x]),
                    None => Record::Unusable,
                };
                self.memo.insert(c.clone(), rec);
                return self.cost(&c);
            }
        };
        (c, cost)
    }

    /// Whether the canonical form of `config` may run (no trial is made).
    pub(crate) fn feasible(&self, config: &Config) -> bool {
        self.objective
            .feasible(&self.space.canonicalize(config))
            .is_ok()
    }

    pub(crate) fn repeats(&self, c: &Config) -> usize {
        match self.memo.get(c) {
            Some(Record::Costs(v)) => v.len(),
            _ => usize::MAX,
        }
    }

    pub(crate) fn remeasure(&mut self, c: &Config) {
        let n = self.repeats(c);
        if n == usize::MAX {
            return;
        }
        let x = self.run(c, n + 1);
        if let Some(Record::Costs(v)) = self.memo.get_mut(c) {
            // A repeat that fails counts as +inf in the median: a flaky
            // configuration should not win on its lucky run.
            v.push(x.unwrap_or(f64::INFINITY));
        }
    }

    /// The median of `c`'s measurements from the `from`-th on (+∞ when
    /// there are none or it is unusable).
    pub(crate) fn median_from(&self, c: &Config, from: usize) -> f64 {
        match self.memo.get(c) {
            Some(Record::Costs(v)) if v.len() > from => median(&v[from..]),
            _ => f64::INFINITY,
        }
    }

    /// Whether `a` is strictly better than `b` by their current medians
    /// (ties are not better).
    pub(crate) fn better(&mut self, a: &Config, b: &Config) -> bool {
        let (a, ca) = self.cost(a);
        let (b, cb) = self.cost(b);
        a != b && ca < cb
    }

    /// Every configuration measured so far with a finite cost (its median),
    /// the prior ones included, cheapest first; ties in the order they were
    /// first measured.
    pub(crate) fn measured(&self) -> Vec<(Config, f64)> {
        let mut seen: Vec<&Config> = self.prior.iter().collect();
        for t in &self.trace {
            if !seen.contains(&&t.config) {
                seen.push(&t.config);
            }
        }
        let mut out: Vec<(Config, f64)> = seen
            .into_iter()
            .filter_map(|c| match self.memo.get(c) {
                Some(Record::Costs(v)) => {
                    let m = median(v);
                    m.is_finite().then(|| (c.clone(), m))
                }
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| a.1.total_cmp(&b.1));
        out
    }
}
