use crate::PackError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What the records of a pack hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// Decoded u8 pixels after the format's fixed steps: fastest to read.
    Raw,
    /// The original JPEG/PNG bytes and the fixed steps still to apply:
    /// smallest.
    Encoded,
}

impl std::str::FromStr for Store {
    type Err = PackError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "raw" => Ok(Store::Raw),
            "encoded" => Ok(Store::Encoded),
            _ => Err(PackError::InvalidOption(format!(
                "store {s:?}: expected raw or encoded"
            ))),
        }
    }
}

/// One shard as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// File name inside the pack folder.
    pub file: String,
    /// Samples it holds.
    pub samples: usize,
    /// Its size in bytes.
    pub bytes: u64,
    /// xxh3-64 of the whole file, hex.
    pub xxh3: String,
}

/// `manifest.json`: written last, so a pack without one is incomplete.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `adapt-pack`.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// Identity of the writing run's inputs (source, seed, sizes), hex; every
    /// shard header carries it too.
    pub pack_id: String,
    /// Source format name (`cifar10`, `celeba` …).
    pub source_dataset: String,
    /// Source path as given.
    pub source_path: String,
    /// Samples in the pack (= in the source).
    pub samples: usize,
    /// Samples per shard (the last may hold fewer).
    pub shard_size: usize,
    /// Raw pixels or encoded bytes.
    pub store: Store,
    /// Seed of the shuffle before packing.
    pub seed: u64,
    /// zstd level used.
    pub zstd_level: i32,
    /// Target uncompressed bytes per frame.
    pub frame_bytes: usize,
    /// Number of classes, when the source knows it.
    pub classes: Option<usize>,
    /// Class names, when the source has them.
    pub class_names: Option<Vec<String>>,
    /// Sample shape `[H, W, C]` after the fixed steps, when fixed.
    pub shape: Option<[u32; 3]>,
    /// The shards, in order.
    pub shards: Vec<ShardInfo>,
}

/// The manifest's file name.
pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const FORMAT: &str = "adapt-pack";
pub(crate) const VERSION: u32 = 1;

impl Manifest {
    /// Reads and checks `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Self, PackError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| PackError::Manifest {
            path: path.clone(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                "no manifest: not a pack, or an incomplete one (rerun the writer to finish it)"
                    .into()
            } else {
                e.to_string()
            },
        })?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| PackError::Manifest {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if m.format != FORMAT || m.version != VERSION {
            return Err(PackError::Manifest {
                path,
                message: format!(
                    "format {:?} version {} (expected {FORMAT} {VERSION})",
                    m.format, m.version
                ),
            });
        }
        let total: usize = m.shards.iter().map(|s| s.samples).sum();
        if total != m.samples || m.shards.is_empty() {
            return Err(PackError::Manifest {
                path,
                message: format!(
                    "shards hold {total} samples, the manifest says {}",
                    m.samples
                ),
            });
        }
        Ok(m)
    }
}
