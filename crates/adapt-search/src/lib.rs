//! The ADaPT parameter search: one balanced (AVL) tree per parameter, nested
//! by priority, each descended coarsely from its root; and the grid search it
//! is measured against.
//!
//! This crate does not know what a data loader is. It is generic over a
//! [`Space`] of parameters with ordered finite domains and an [`Objective`]
//! (configuration → cost, lower is better), and is tested on analytic costs
//! whose optimum is known. `adapt-tune` binds it to real loader runs.
//!
//! The reading of the paper it follows (tree shape, priorities, stopping
//! rule, ties) is `docs/tuning.md`; it adds two things the paper lacks and
//! keeps them optional so the plain algorithm stays available: a
//! *refinement* that steps to sorted-order neighbours after the descent, a
//! *noise policy* that races the near-ties at the end (re-measured; the
//! medians of the new measurements decide), and *pruning* that stops a
//! trial once it is clearly losing and does not try again a value that
//! clearly lost under two other contexts.
//!
//! ```
//! use adapt_search::{AvlOptions, Config, Objective, Param, Space, TrialError, avl_search};
//!
//! struct Bowl;
//! impl Objective for Bowl {
//!     fn measure(&mut self, c: &Config) -> Result<f64, TrialError> {
//!         Ok((c.int(0) - 7).abs() as f64)
//!     }
//! }
//! let space = Space::new(vec![Param::range("x", 1, 15, 1).unwrap()]).unwrap();
//! let plain = avl_search(&space, &mut Bowl, &AvlOptions::plain());
//! assert_eq!(plain.best.unwrap().int(0), 8); // the root beats both children: a coarse descent
//! let refined = avl_search(&space, &mut Bowl, &AvlOptions { refine: true, ..AvlOptions::plain() });
//! assert_eq!(refined.best.unwrap().int(0), 7);
//! ```

mod avl;
mod grid;
mod param;
mod runner;
mod tree;

pub use avl::{AvlOptions, AvlResult, Move, NoisePolicy, avl_search, avl_search_from};
pub use grid::{GridResult, grid_search};
pub use param::{Config, Param, ParamError, Space, Value};
pub use runner::{Outcome, Prior, Trial};
pub use tree::Tree;

/// Why a trial produced no cost.
pub type TrialError = Box<dyn std::error::Error + Send + Sync>;

/// What the search minimises.
pub trait Objective {
    /// Decides, before running, whether a configuration may run at all (for
    /// example against a memory budget). An `Err` carries the reason; such a
    /// configuration is never measured and never chosen.
    fn feasible(&self, _config: &Config) -> Result<(), String> {
        Ok(())
    }

    /// Runs one trial: the configuration's cost (seconds, say), or why it
    /// failed. A failed configuration is never chosen.
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError>;

    /// Runs one trial whose exact cost the search has no use for past
    /// `bound`: an objective that can may stop once the cost is sure to pass
    /// it and return [`Measured::CutShort`] with an estimate of the whole
    /// trial's cost (at least `bound`). The default runs the whole trial.
    fn measure_until(&mut self, config: &Config, bound: f64) -> Result<Measured, TrialError> {
        let _ = bound;
        self.measure(config).map(Measured::Whole)
    }
}

/// What [`Objective::measure_until`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measured {
    /// The whole trial's cost.
    Whole(f64),
    /// The trial was stopped past the bound; the whole trial's cost
    /// estimated (for a timed trial: the time so far scaled by the work
    /// left), at least the bound.
    CutShort(f64),
}

impl Measured {
    /// The cost the search counts: the whole trial's, or its estimate.
    pub fn value(self) -> f64 {
        match self {
            Measured::Whole(c) | Measured::CutShort(c) => c,
        }
    }
}

impl<O: Objective + ?Sized> Objective for &mut O {
    fn feasible(&self, config: &Config) -> Result<(), String> {
        (**self).feasible(config)
    }
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        (**self).measure(config)
    }
    fn measure_until(&mut self, config: &Config, bound: f64) -> Result<Measured, TrialError> {
        (**self).measure_until(config, bound)
    }
}
