//! The grid search baseline: every configuration once, ranked.

use crate::runner::Runner;
use crate::{Config, Objective, Space, Trial};
use serde::Serialize;
use std::time::Duration;

/// Every canonical configuration measured once, ranked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridResult {
    /// Configurations by cost, best first; infeasible and failed ones last
    /// with cost +inf.
    pub ranked: Vec<(Config, f64)>,
    /// Objective runs.
    pub trials: usize,
    /// Wall time of the whole search.
    pub wall: Duration,
    /// Every trial in order.
    pub trace: Vec<Trial>,
}

impl GridResult {
    /// The best configuration, unless every one failed.
    pub fn best(&self) -> Option<(&Config, f64)> {
        self.ranked
            .first()
            .filter(|(_, c)| c.is_finite())
            .map(|(c, x)| (c, *x))
    }

    /// Rank of `config` (1 = best; tied costs share the better rank), or
    /// `None` when it is not in the grid.
    pub fn rank_of(&self, config: &Config) -> Option<usize> {
        let cost = self.ranked.iter().find(|(c, _)| c == config)?.1;
        Some(1 + self.ranked.iter().filter(|(_, x)| *x < cost).count())
    }

    /// Cost of `config` in the grid.
    pub fn cost_of(&self, config: &Config) -> Option<f64> {
        self.ranked
            .iter()
            .find(|(c, _)| c == config)
            .map(|(_, x)| *x)
    }
}

/// Measures every canonical configuration of `space` once.
pub fn grid_search<O: Objective + ?Sized>(space: &Space, objective: &mut O) -> GridResult {
    let mut runner = Runner::new(space, objective);
    let mut ranked: Vec<(Config, f64)> = space
        .configurations()
        .into_iter()
        .map(|c| runner.cost(&c))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let trials = runner.runs();
    GridResult {
        ranked,
        trials,
        wall: runner.elapsed(),
        trace: runner.trace,
    }
}
