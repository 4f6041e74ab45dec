//! Runs trials for a search: feasibility first, memoisation by canonical
//! configuration, the trace, and noise-aware comparison.

use crate::{Config, Objective, Space};
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
}

/// One entry of the trace, in the order trials happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trial {
    /// The canonical configuration.
    pub config: Config,
    /// What came of it.
    pub outcome: Outcome,
    /// Wall time of the trial (zero for an infeasible one).
    pub wall: Duration,
    /// 1 for the first measurement of this configuration, 2 for its first
    /// repeat, and so on.
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
        }
    }

    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Objective runs so far (repeats included; infeasible ones excluded).
    pub(crate) fn runs(&self) -> usize {
        self.trace
            .iter()
            .filter(|t| !matches!(t.outcome, Outcome::Infeasible { .. }))
            .count()
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
        let t = Instant::now();
        let result = self.objective.measure(config);
        let wall = t.elapsed();
        let (outcome, cost) = match result {
            Ok(c) if c.is_finite() => (Outcome::Cost { cost: c }, Some(c)),
            Ok(c) => (
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
    /// cheapest first; ties in the order they were first measured.
    pub(crate) fn measured(&self) -> Vec<(Config, f64)> {
        let mut seen: Vec<&Config> = Vec::new();
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
