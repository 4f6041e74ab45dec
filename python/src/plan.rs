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

#[pymethods]
impl IndexPlan {
    #[new]
    #[pyo3(signature = (len, batch_size, shuffle, drop_last, seed, rank=None, world_size=None, identity=String::new()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        len: usize,
        batch_size: usize,
        shuffle: bool,
        drop_last: bool,
        seed: u64,
        rank: Option<usize>,
        world_size: Option<usize>,
        identity: String,
    ) -> PyResult<Self> {
        let distributed = match (rank, world_size) {
            (Some(rank), Some(world_size)) => Some(Distributed { rank, world_size }),
            _ => None,
        };
        let config = LoaderConfig {
            batch_size,
            shuffle,
            drop_last,
            seed,
            distributed,
            identity,
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
