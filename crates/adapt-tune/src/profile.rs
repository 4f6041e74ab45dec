//! Profiles: tuned knobs saved by dataset, batch size and machine, so a
//! loader can be built without searching again.

use crate::{LoaderKnobs, Machine, TuneError};
use adapt_loader::LoaderConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What a tuned configuration belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileKey {
    /// `dataset_fingerprint` of the dataset.
    pub dataset: String,
    /// Batch size.
    pub batch_size: usize,
    /// The machine it was measured on.
    pub machine: Machine,
}

/// One saved result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileEntry {
    /// What it is for.
    pub key: ProfileKey,
    /// The chosen knobs.
    pub knobs: LoaderKnobs,
    /// Its trial cost when chosen, seconds.
    pub seconds: f64,
    /// The cheapest configuration within the measured noise of the best
    /// (when the search measured one): fewer threads for the same speed.
    #[serde(default)]
    pub cheapest: Option<LoaderKnobs>,
    /// The search that chose it.
    #[serde(default)]
    pub strategy: Option<crate::StrategyRecord>,
}

/// A profile file: a versioned list of entries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Format version (1).
    pub version: u32,
    /// Saved results.
    pub entries: Vec<ProfileEntry>,
}

/// Knobs a loader could run: PyTorch's rules ([`LoaderKnobs::check`]) and
/// a prefetch factor of sane size (a prefetch factor beside 0 workers is
/// what earlier versions wrote: read, then dropped).
fn plausible(k: &LoaderKnobs) -> bool {
    let read = LoaderKnobs {
        prefetch_factor: k.prefetch_factor.filter(|_| k.num_workers > 0),
        ..*k
    };
    read.check().is_ok() && k.prefetch_factor.is_none_or(|p| p <= 4096)
}

impl Profile {
    /// Reads a profile; a missing file is an empty profile, a corrupt one an
    /// error naming it.
    pub fn load(path: &Path) -> Result<Self, TuneError> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut p: Profile = serde_json::from_str(&text)
                    .map_err(|e| TuneError::file(path, format!("corrupt profile: {e}")))?;
                if p.version != 1 {
                    return Err(TuneError::file(
                        path,
                        format!("profile version {} is not 1", p.version),
                    ));
                }
                // Knobs read from a file are checked as a user's would be.
                if let Some(e) = p
                    .entries
                    .iter()
                    .find(|e| !plausible(&e.knobs) || e.cheapest.is_some_and(|c| !plausible(&c)))
                {
                    return Err(TuneError::file(
                        path,
                        format!(
                            "entry for {} (batch {}) holds unusable knobs: {}",
                            e.key.dataset, e.key.batch_size, e.knobs
                        ),
                    ));
                }
                for e in &mut p.entries {
                    e.knobs = e.knobs.canonical();
                    e.cheapest = e.cheapest.map(LoaderKnobs::canonical);
                }
                Ok(p)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Profile {
                version: 1,
                entries: Vec::new(),
            }),
            Err(e) => Err(TuneError::io(path, e)),
        }
    }

    /// Writes the profile (through a temporary file and a rename).
    pub fn save(&self, path: &Path) -> Result<(), TuneError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| TuneError::file(path, e))?;
        let tmp = path.with_extension("partial");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| TuneError::io(path, e))
    }

    /// The entry for this dataset and batch size measured on a machine that
    /// matches `machine`. Entries from other machines are not used.
    pub fn lookup(
        &self,
        dataset: &str,
        batch_size: usize,
        machine: &Machine,
    ) -> Option<&ProfileEntry> {
        self.entries.iter().find(|e| {
            e.key.dataset == dataset
                && e.key.batch_size == batch_size
                && e.key.machine.matches(machine)
        })
    }

    /// Adds or replaces the entry with the same key.
    pub fn insert(&mut self, entry: ProfileEntry) {
        self.version = 1;
        self.entries.retain(|e| {
            !(e.key.dataset == entry.key.dataset
                && e.key.batch_size == entry.key.batch_size
                && e.key.machine.matches(&entry.key.machine))
        });
        self.entries.push(entry);
    }

    /// Records knobs that tuning while training settled on (the online
    /// search), replacing the entry with the same key.
    pub fn insert_settled(
        &mut self,
        dataset: &str,
        batch_size: usize,
        machine: &Machine,
        knobs: LoaderKnobs,
    ) {
        self.insert(ProfileEntry {
            key: ProfileKey {
                dataset: dataset.to_owned(),
                batch_size,
                machine: machine.clone(),
            },
            knobs,
            seconds: 0.0,
            cheapest: None,
            strategy: Some(crate::StrategyRecord {
                search: "online".into(),
                avl: "plain".into(),
                threshold_from: "fixed".into(),
                ..Default::default()
            }),
        });
    }

    /// A loader configuration from a saved entry: `base` with the tuned
    /// knobs applied, or `None` when the profile has nothing for this
    /// dataset, batch size and machine.
    pub fn loader_config(
        &self,
        dataset: &str,
        base: &LoaderConfig,
        machine: &Machine,
    ) -> Option<LoaderConfig> {
        let e = self.lookup(dataset, base.batch_size, machine)?;
        let mut c = base.clone();
        c.knobs = e.knobs.canonical();
        Some(c)
    }
}
