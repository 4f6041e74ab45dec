//! The four knobs as a search space: domains derived from the machine, the
//! canonical form PyTorch's rules imply, and the memory budget.

use crate::Machine;
use adapt_loader::LoaderKnobs;
use adapt_search::{Config, Objective, Param, Space, TrialError, Value};
use serde::{Deserialize, Serialize};

/// The paper's "recommended" values: half the cores, prefetch 2.
pub fn recommended_knobs(machine: &Machine) -> LoaderKnobs {
    LoaderKnobs::workers((machine.cores / 2).max(1), 2)
}

/// The search space's dimensions, in the order its configurations hold
/// them: a configuration's values are read and written by name through
/// these, never by a bare position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dim {
    /// `num_workers`.
    NumWorkers,
    /// `prefetch_factor`.
    PrefetchFactor,
    /// `pin_memory`.
    PinMemory,
    /// `persistent_workers`.
    PersistentWorkers,
}

impl Dim {
    /// Every dimension, in the space's order.
    pub const ALL: [Dim; 4] = [
        Dim::NumWorkers,
        Dim::PrefetchFactor,
        Dim::PinMemory,
        Dim::PersistentWorkers,
    ];

    /// The knob's name (PyTorch's keyword).
    pub fn name(self) -> &'static str {
        match self {
            Dim::NumWorkers => "num_workers",
            Dim::PrefetchFactor => "prefetch_factor",
            Dim::PinMemory => "pin_memory",
            Dim::PersistentWorkers => "persistent_workers",
        }
    }

    /// Its position in a configuration.
    pub fn at(self) -> usize {
        self as usize
    }

    /// Its value in `k` (canonical) as Python writes it: integers as
    /// digits (the prefetch factor PyTorch's default without workers, so
    /// `int()` always reads it), booleans `True` / `False`.
    pub fn python_value(self, k: &LoaderKnobs) -> String {
        let k = k.canonical();
        let py = |b: bool| if b { "True" } else { "False" }.to_owned();
        match self {
            Dim::NumWorkers => k.num_workers.to_string(),
            Dim::PrefetchFactor => k
                .prefetch_factor
                .unwrap_or(adapt_loader::DEFAULT_PREFETCH)
                .to_string(),
            Dim::PinMemory => py(k.pin_memory),
            Dim::PersistentWorkers => py(k.persistent_workers),
        }
    }
}

/// Which knob space a tuning run searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpaceKind {
    /// Sized to this machine: num_workers 0 … 2 × cores.
    #[default]
    Machine,
    /// The paper's: num_workers 1, 2, 4 … 64, whatever the machine.
    Paper,
}

impl SpaceKind {
    /// Every kind, as the command line lists them.
    pub const ALL: [SpaceKind; 2] = [SpaceKind::Machine, SpaceKind::Paper];

    /// The name written on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SpaceKind::Machine => "machine",
            SpaceKind::Paper => "paper",
        }
    }
}

impl std::str::FromStr for SpaceKind {
    type Err = crate::TuneError;
    fn from_str(s: &str) -> Result<Self, crate::TuneError> {
        SpaceKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                crate::TuneError::InvalidOption(format!("space {s:?}: expected machine or paper"))
            })
    }
}

/// The knob space of one machine.
#[derive(Clone, Debug)]
pub struct KnobSpace {
    space: Space,
    /// Why some knob is fixed (no CUDA device: pin_memory off).
    pub notes: Vec<String>,
}

impl KnobSpace {
    /// num_workers 0 … 2 × cores, prefetch_factor 1 … 2048 in powers of
    /// two, pin_memory only with a CUDA device, persistent_workers on/off.
    /// Priority (outermost first): persistent, pin, prefetch, workers.
    pub fn for_machine(machine: &Machine) -> Self {
        let max_workers = (2 * machine.cores) as i64;
        Self::with_domains((0..=max_workers).collect(), machine.gpu.is_some())
    }

    /// The paper's space (section 4): num_workers 1 and 2 … 64 by 2,
    /// prefetch_factor 1 … 2048 in powers of two, both booleans — 1,584
    /// configurations with a CUDA device (pin_memory fixed off without
    /// one, as in every space).
    pub fn paper(cuda: bool) -> Self {
        let workers = std::iter::once(1).chain((2..=64).step_by(2)).collect();
        Self::with_domains(workers, cuda)
    }

    /// The space `kind` names on `machine`.
    pub fn of_kind(kind: SpaceKind, machine: &Machine) -> Self {
        match kind {
            SpaceKind::Machine => Self::for_machine(machine),
            SpaceKind::Paper => Self::paper(machine.gpu.is_some()),
        }
    }

    /// A space over given worker counts (prefetch and booleans as above).
    pub fn with_domains(workers: Vec<i64>, cuda: bool) -> Self {
        let mut notes = Vec::new();
        if !cuda {
            notes.push(
                "pin_memory fixed off: no CUDA device, pinning would only cost time".to_owned(),
            );
        }
        // Built in `Dim::ALL`'s order, so `Dim::at` is each one's position.
        let params = Dim::ALL.map(|d| match d {
            Dim::NumWorkers => Param::ints(d.name(), workers.clone())
                .unwrap_or_else(|_| Param::fixed(d.name(), Value::Int(0))),
            Dim::PrefetchFactor => Param::powers_of_two(d.name(), 1, 2048)
                .unwrap_or_else(|_| Param::fixed(d.name(), Value::Int(2))),
            Dim::PinMemory if cuda => Param::boolean(d.name()),
            Dim::PinMemory => Param::fixed(d.name(), Value::Bool(false)),
            Dim::PersistentWorkers => Param::boolean(d.name()),
        });
        let priority = [
            Dim::PersistentWorkers,
            Dim::PinMemory,
            Dim::PrefetchFactor,
            Dim::NumWorkers,
        ];
        let space = Space::new(params.to_vec())
            .and_then(|s| s.with_priority(&priority.map(Dim::name)))
            .unwrap_or_else(|e| unreachable!("fixed names are distinct: {e}"))
            .with_canonical(|c| {
                // PyTorch rejects prefetch and persistence without workers:
                // all such configurations are the one "no workers" configuration.
                if c.int(Dim::NumWorkers.at()) == 0 {
                    c.0[Dim::PrefetchFactor.at()] =
                        Value::Int(adapt_loader::DEFAULT_PREFETCH as i64);
                    c.0[Dim::PersistentWorkers.at()] = Value::Bool(false);
                }
            });
        Self { space, notes }
    }

    /// The largest worker count the space holds.
    pub fn max_workers(&self) -> usize {
        let Some(i) = self.space.index_of(Dim::NumWorkers.name()) else {
            return 0;
        };
        self.space.params()[i]
            .values()
            .iter()
            .filter_map(|v| match v {
                Value::Int(w) => Some(*w),
                _ => None,
            })
            .max()
            .map_or(0, |w| w.max(0) as usize)
    }

    /// The search space.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Knobs of a search configuration.
    pub fn knobs(config: &Config) -> LoaderKnobs {
        LoaderKnobs {
            num_workers: config.int(Dim::NumWorkers.at()).max(0) as usize,
            prefetch_factor: Some(config.int(Dim::PrefetchFactor.at()).max(1) as usize),
            pin_memory: config.bool(Dim::PinMemory.at()),
            persistent_workers: config.bool(Dim::PersistentWorkers.at()),
        }
        .canonical()
    }

    /// The search configuration of some knobs (canonical).
    pub fn config(&self, k: &LoaderKnobs) -> Config {
        let values = Dim::ALL.map(|d| match d {
            Dim::NumWorkers => Value::Int(k.num_workers as i64),
            Dim::PrefetchFactor => {
                Value::Int(k.prefetch_factor.unwrap_or(adapt_loader::DEFAULT_PREFETCH) as i64)
            }
            Dim::PinMemory => Value::Bool(k.pin_memory),
            Dim::PersistentWorkers => Value::Bool(k.persistent_workers),
        });
        self.space.canonicalize(&Config(values.to_vec()))
    }
}

/// A memory budget on what a configuration keeps in memory at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Bytes allowed.
    pub bytes: u64,
    /// Bytes of one batch.
    pub batch_bytes: u64,
}

impl Budget {
    /// Bytes a configuration holds at once: (`num_workers ×
    /// prefetch_factor` + 1) × batch bytes. Pinned buffers are these same buffers (workers
    /// collate straight into them), page-locked, so they count once.
    pub fn bytes_for(&self, k: &LoaderKnobs) -> u64 {
        (k.batches_in_memory() as u64).saturating_mul(self.batch_bytes)
    }

    /// `Err` with the reason when `k` does not fit.
    pub fn check(&self, k: &LoaderKnobs) -> Result<(), String> {
        let need = self.bytes_for(k);
        if need <= self.bytes {
            Ok(())
        } else {
            Err(format!(
                "needs {} MiB in flight, budget {} MiB",
                need >> 20,
                self.bytes >> 20
            ))
        }
    }
}

/// An objective with the budget's feasibility check in front.
pub(crate) struct Budgeted<O> {
    pub(crate) inner: O,
    pub(crate) budget: Budget,
}

impl<O: Objective> Objective for Budgeted<O> {
    fn feasible(&self, config: &Config) -> Result<(), String> {
        self.budget.check(&KnobSpace::knobs(config))?;
        self.inner.feasible(config)
    }
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        self.inner.measure(config)
    }
    fn measure_until(
        &mut self,
        config: &Config,
        bound: f64,
    ) -> Result<adapt_search::Measured, TrialError> {
        self.inner.measure_until(config, bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cores_give_97_canonical_configurations_without_cuda() {
        let m = Machine {
            cores: 2,
            memory_bytes: 1 << 34,
            available_bytes: 1 << 33,
            gpu: None,
        };
        let s = KnobSpace::for_machine(&m);
        // 1 (no workers) + 4 workers × 12 prefetch × 2 persistent.
        assert_eq!(s.space().configurations().len(), 97);
        assert_eq!(s.notes.len(), 1);
        let k = LoaderKnobs {
            num_workers: 0,
            prefetch_factor: Some(64),
            pin_memory: false,
            persistent_workers: true,
        };
        assert_eq!(KnobSpace::knobs(&s.config(&k)), LoaderKnobs::DEFAULT);
    }

    #[test]
    fn the_papers_space_has_its_1584_configurations_with_cuda() {
        let s = KnobSpace::paper(true);
        // 33 worker counts x 12 prefetch factors x 2 x 2.
        assert_eq!(s.space().configurations().len(), 1584);
        assert_eq!(s.max_workers(), 64);
        assert_eq!(KnobSpace::paper(false).space().configurations().len(), 792);
        assert_eq!("paper".parse::<SpaceKind>().ok(), Some(SpaceKind::Paper));
        assert!("grid".parse::<SpaceKind>().is_err());
    }

    #[test]
    fn budget_counts_batches_in_flight_plus_one() {
        let b = Budget {
            bytes: 10 * 1000,
            batch_bytes: 1000,
        };
        let k = |w, p| {
            LoaderKnobs {
                num_workers: w,
                prefetch_factor: Some(p),
                pin_memory: false,
                persistent_workers: false,
            }
            .canonical()
        };
        assert!(b.check(&k(4, 2)).is_ok()); // 9 batches
        assert!(b.check(&k(3, 4)).is_err()); // 13 batches
        assert!(b.check(&k(0, 2)).is_ok()); // 2 batches
    }
}
