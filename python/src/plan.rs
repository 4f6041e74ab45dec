//! The index plan for loaders whose samples Python reads (a user's own
//! dataset): `IndexPlan` binds `adapt::Plan`, so the order, the ranks'
//! shares and exact and elastic resume are the Rust loader's.

use crate::py_error;
use adapt::{AdaptError as Error, Distributed, EpochPlan, LoaderConfig, LoaderState, Plan};
use pyo3::prelude::*;

/// The batching of a dataset of `len` samples: batch size, shuffle from
/// `seed`, drop_last, this rank of `world_size`, and the identity a
/// checkpoint must match.
#[pyclass(frozen, module = "adapt._adapt")]
pub(crate) struct IndexPlan(Plan);

/// What an `IndexPlan` is built from, by name (an unknown or missing name
/// is refused naming it).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanOptions {
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    seed: u64,
    #[serde(default)]
    rank: Option<usize>,
    #[serde(default)]
    world_size: Option<usize>,
    #[serde(default)]
    identity: String,
}

#[pymethods]
impl IndexPlan {
    /// The plan of `len` samples with `options_json` (`PlanOptions` as
    /// JSON: batch_size, shuffle, drop_last, seed, rank, world_size,
    /// identity).
    #[new]
    fn new(len: usize, options_json: &str) -> PyResult<Self> {
        let o: PlanOptions = serde_json::from_str(options_json)
            .map_err(|e| crate::ConfigError::new_err(format!("plan options: {e}")))?;
        let distributed = match (o.rank, o.world_size) {
            (Some(rank), Some(world_size)) => Some(Distributed { rank, world_size }),
            _ => None,
        };
        let config = LoaderConfig {
            batch_size: o.batch_size,
            shuffle: o.shuffle,
            drop_last: o.drop_last,
            seed: o.seed,
            distributed,
            identity: o.identity,
            ..LoaderConfig::default()
        };
        Plan::new(config, len)
            .map(Self)
            .map_err(|e| py_error(Error::from(e)))
    }

    /// Epoch `epoch` from its first batch.
    fn start(&self, epoch: u64) -> EpochIndexPlan {
        EpochIndexPlan(self.0.epoch(epoch))
    }

    /// The rest of the epoch a checkpoint (`EpochIndexPlan.state`'s text)
    /// was taken in.
    fn resume(&self, state: &str) -> PyResult<EpochIndexPlan> {
        let state = LoaderState::from_text(state).map_err(|e| py_error(Error::from(e)))?;
        self.0
            .resume(&state)
            .map(EpochIndexPlan)
            .map_err(|e| py_error(Error::from(e)))
    }
}

/// One epoch of an `IndexPlan`.
#[pyclass(frozen, module = "adapt._adapt")]
pub(crate) struct EpochIndexPlan(EpochPlan);

#[pymethods]
impl EpochIndexPlan {
    /// The epoch.
    #[getter]
    fn epoch(&self) -> u64 {
        self.0.epoch
    }

    /// Batches already delivered (a resumed epoch starts after them).
    #[getter]
    fn skip(&self) -> usize {
        self.0.skip
    }

    /// Batches in the epoch, the skipped ones included.
    fn __len__(&self) -> usize {
        self.0.batches()
    }

    /// The indices of every batch from `skip` on.
    fn batches(&self) -> Vec<Vec<usize>> {
        (self.0.skip..self.0.batches())
            .map(|k| self.0.batch(k).to_vec())
            .collect()
    }

    /// The checkpoint once batches `0..delivered` are delivered.
    fn state(&self, delivered: usize) -> String {
        self.0.state_after(delivered).to_text()
    }
}
