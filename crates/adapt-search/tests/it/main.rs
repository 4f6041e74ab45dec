//! The search on analytic objectives whose optimum is known.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

mod landscapes;
mod noise;
mod properties;
mod pruning;

use adapt_search::{Config, Objective, Param, Space, TrialError};

/// An objective from a closure, counting its runs.
pub(crate) struct Analytic<F> {
    pub(crate) f: F,
    pub(crate) runs: usize,
    pub(crate) infeasible: Option<fn(&Config) -> bool>,
}

impl<F: FnMut(&Config) -> Result<f64, TrialError>> Analytic<F> {
    pub(crate) fn new(f: F) -> Self {
        Self {
            f,
            runs: 0,
            infeasible: None,
        }
    }
}

impl<F: FnMut(&Config) -> Result<f64, TrialError>> Objective for Analytic<F> {
    fn feasible(&self, c: &Config) -> Result<(), String> {
        match self.infeasible {
            Some(p) if p(c) => Err("over budget".into()),
            _ => Ok(()),
        }
    }
    fn measure(&mut self, c: &Config) -> Result<f64, TrialError> {
        self.runs += 1;
        (self.f)(c)
    }
}

pub(crate) fn one_d(lo: i64, hi: i64) -> Space {
    Space::new(vec![Param::range("x", lo, hi, 1).unwrap()]).unwrap()
}

/// The paper's space: num_workers 1, 2, 4 … 64; prefetch 1 … 2048; two booleans.
/// Parameters in configuration order (num_workers, prefetch_factor,
/// pin_memory, persistent_workers); priority outermost first as in the spec.
pub(crate) fn paper_space() -> Space {
    let workers =
        Param::ints("num_workers", std::iter::once(1).chain((2..=64).step_by(2))).unwrap();
    Space::new(vec![
        workers,
        Param::powers_of_two("prefetch_factor", 1, 2048).unwrap(),
        Param::boolean("pin_memory"),
        Param::boolean("persistent_workers"),
    ])
    .unwrap()
    .with_priority(&[
        "persistent_workers",
        "pin_memory",
        "prefetch_factor",
        "num_workers",
    ])
    .unwrap()
}
