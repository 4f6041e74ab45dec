//! PyTorch's four loader knobs as one value: the loader's configuration,
//! the runner's options, the tuner's search and the fronts' keywords all
//! hold this one struct, so a knob is added here, where the loader honours
//! it, and as its Python keyword.

use serde::{Deserialize, Serialize};

/// The prefetch factor PyTorch uses with workers when none is given.
pub const DEFAULT_PREFETCH: usize = 2;

/// The most worker threads a loader starts.
pub const MAX_WORKERS: usize = 1024;

/// `num_workers`, `prefetch_factor`, `pin_memory` and `persistent_workers`,
/// with PyTorch's names, defaults and rules. (De)serialised by those names,
/// unknown names refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoaderKnobs {
    /// Worker threads; 0 loads in the calling thread.
    pub num_workers: usize,
    /// Batches in flight per worker; `None` means [`DEFAULT_PREFETCH`] with
    /// workers. Setting it with 0 workers is an error, as in PyTorch.
    #[serde(default)]
    pub prefetch_factor: Option<usize>,
    /// Collate into page-locked buffers.
    #[serde(default)]
    pub pin_memory: bool,
    /// Keep workers and their state across epochs (needs workers).
    #[serde(default)]
    pub persistent_workers: bool,
}

impl Default for LoaderKnobs {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl LoaderKnobs {
    /// PyTorch's defaults: no workers, nothing pinned.
    pub const DEFAULT: LoaderKnobs = LoaderKnobs {
        num_workers: 0,
        prefetch_factor: None,
        pin_memory: false,
        persistent_workers: false,
    };

    /// `num_workers` workers with `prefetch_factor` batches each, nothing
    /// pinned or kept (the canonical form).
    pub fn workers(num_workers: usize, prefetch_factor: usize) -> Self {
        LoaderKnobs {
            num_workers,
            prefetch_factor: Some(prefetch_factor),
            ..Self::DEFAULT
        }
        .canonical()
    }

    /// The one form of these knobs PyTorch's rules allow and that behaves
    /// the same: without workers no prefetch factor and no persistence,
    /// with workers the prefetch factor spelled out.
    pub fn canonical(self) -> Self {
        let workers = self.num_workers > 0;
        LoaderKnobs {
            prefetch_factor: workers.then(|| self.prefetch_factor.unwrap_or(DEFAULT_PREFETCH)),
            persistent_workers: workers && self.persistent_workers,
            ..self
        }
    }

    /// The prefetch factor in effect: 0 without workers.
    pub fn effective_prefetch(&self) -> usize {
        if self.num_workers == 0 {
            0
        } else {
            self.prefetch_factor.unwrap_or(DEFAULT_PREFETCH)
        }
    }

    /// Batches built ahead of the consumer at most: `num_workers ×
    /// prefetch_factor`, and with 0 workers the one being built — the one
    /// rule the loader, the tuner's memory budget and a pack's frame cache
    /// size by.
    pub fn max_in_flight(&self) -> usize {
        self.num_workers
            .saturating_mul(self.prefetch_factor.unwrap_or(DEFAULT_PREFETCH))
            .max(1)
    }

    /// Batches in memory at once: those in flight plus the consumer's one.
    pub fn batches_in_memory(&self) -> usize {
        self.max_in_flight().saturating_add(1)
    }

    /// `Err` with PyTorch's reason (where it has one) for knobs no loader
    /// runs.
    pub fn check(&self) -> Result<(), String> {
        if self.num_workers == 0 && self.prefetch_factor.is_some() {
            return Err(
                "prefetch_factor can only be set with num_workers > 0 (as in PyTorch)".into(),
            );
        }
        if self.prefetch_factor == Some(0) {
            return Err("prefetch_factor must be at least 1".into());
        }
        if self.num_workers > MAX_WORKERS {
            return Err(format!(
                "num_workers {} is more threads than any machine runs usefully (at most {MAX_WORKERS})",
                self.num_workers
            ));
        }
        if self.num_workers == 0 && self.persistent_workers {
            return Err("persistent_workers needs num_workers > 0 (as in PyTorch)".into());
        }
        // Guard the in-flight bound's arithmetic against absurd values.
        if self
            .num_workers
            .checked_mul(self.effective_prefetch())
            .is_none_or(|n| n > 1 << 24)
        {
            return Err(format!(
                "num_workers {} × prefetch_factor {} is not a usable number of batches in flight",
                self.num_workers,
                self.effective_prefetch()
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for LoaderKnobs {
    /// PyTorch's keywords as Python writes them: `num_workers=4
    /// prefetch_factor=2 pin_memory=False persistent_workers=True`
    /// (`prefetch_factor=None` without workers).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let py = |b: bool| if b { "True" } else { "False" };
        let prefetch = self
            .prefetch_factor
            .map_or_else(|| "None".to_owned(), |p| p.to_string());
        write!(
            f,
            "num_workers={} prefetch_factor={prefetch} pin_memory={} persistent_workers={}",
            self.num_workers,
            py(self.pin_memory),
            py(self.persistent_workers)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_form_drops_what_no_workers_ignore() {
        let k = LoaderKnobs {
            num_workers: 0,
            prefetch_factor: Some(8),
            pin_memory: true,
            persistent_workers: true,
        };
        assert!(k.check().is_err());
        let c = k.canonical();
        assert_eq!(c.prefetch_factor, None);
        assert!(!c.persistent_workers && c.pin_memory);
        assert!(c.check().is_ok());
        assert_eq!(
            LoaderKnobs::workers(3, 4).canonical(),
            LoaderKnobs::workers(3, 4)
        );
        let unset = LoaderKnobs {
            num_workers: 2,
            ..LoaderKnobs::DEFAULT
        };
        assert_eq!(unset.canonical().prefetch_factor, Some(DEFAULT_PREFETCH));
    }

    #[test]
    fn in_flight_is_workers_times_prefetch_and_one_without_workers() {
        assert_eq!(LoaderKnobs::DEFAULT.max_in_flight(), 1);
        assert_eq!(LoaderKnobs::DEFAULT.batches_in_memory(), 2);
        assert_eq!(LoaderKnobs::workers(3, 4).max_in_flight(), 12);
        let unset = LoaderKnobs {
            num_workers: 3,
            ..LoaderKnobs::DEFAULT
        };
        assert_eq!(unset.max_in_flight(), 6);
        assert_eq!(LoaderKnobs::DEFAULT.effective_prefetch(), 0);
    }

    #[test]
    fn checks_pytorchs_rules_by_name() {
        let bad = |k: LoaderKnobs, word: &str| {
            let e = k.check().err().unwrap_or_default();
            assert!(e.contains(word), "{k}: {e}");
        };
        bad(
            LoaderKnobs {
                prefetch_factor: Some(2),
                ..LoaderKnobs::DEFAULT
            },
            "prefetch_factor",
        );
        bad(LoaderKnobs::workers(1, 0), "at least 1");
        bad(LoaderKnobs::workers(MAX_WORKERS + 1, 1), "num_workers");
        bad(
            LoaderKnobs {
                persistent_workers: true,
                ..LoaderKnobs::DEFAULT
            },
            "persistent_workers",
        );
        bad(LoaderKnobs::workers(1000, 1 << 20), "in flight");
    }

    #[test]
    fn serialises_by_pytorchs_names_and_refuses_others() {
        let k = LoaderKnobs::workers(2, 4);
        let text = serde_json::to_string(&k).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"num_workers":2,"prefetch_factor":4,"pin_memory":false,"persistent_workers":false}"#
        );
        assert_eq!(serde_json::from_str::<LoaderKnobs>(&text).ok(), Some(k));
        let e = serde_json::from_str::<LoaderKnobs>(r#"{"num_workers":2,"prefetch":4}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("prefetch"), "{e}");
        assert_eq!(
            LoaderKnobs::DEFAULT.to_string(),
            "num_workers=0 prefetch_factor=None pin_memory=False persistent_workers=False"
        );
    }
}
