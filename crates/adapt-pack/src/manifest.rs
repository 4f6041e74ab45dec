//! The pack manifest: shards, payload, codec, the source's digest (JSON,
//! written last).

use crate::PackError;
use crate::storage::{LocalStorage, PackStorage};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// How a pack's frames are compressed. There is no default here: the
/// writer's depends on the payload ([`crate::PackOptions::default_codec`]),
/// and a version 1 manifest, which names none, is zstd
/// ([`Codec::version_1`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Codec {
    /// zstd at the pack's level: smallest, slowest to read.
    Zstd,
    /// LZ4 (block format): a few GB/s to decompress, little gain on noisy
    /// pixels.
    Lz4,
    /// Stored as is: reads at memory speed, as large as the pixels.
    None,
}

impl Codec {
    /// The codec of a version 1 pack (written before codecs were named).
    pub fn version_1() -> Self {
        Codec::Zstd
    }
}

impl std::str::FromStr for Codec {
    type Err = PackError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "zstd" => Ok(Codec::Zstd),
            "lz4" => Ok(Codec::Lz4),
            "none" => Ok(Codec::None),
            _ => Err(PackError::InvalidOption(format!(
                "codec {s:?}: expected zstd, lz4 or none"
            ))),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
            Codec::None => "none",
        })
    }
}

/// What the records of a pack hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    /// Decoded u8 pixels after the format's fixed steps: fastest to read.
    Raw,
    /// The original JPEG/PNG bytes and the fixed steps still to apply:
    /// smallest.
    Encoded,
}

impl std::str::FromStr for Payload {
    type Err = PackError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "raw" => Ok(Payload::Raw),
            "encoded" => Ok(Payload::Encoded),
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
    /// Format version (2; 1 = before codecs and source digests).
    pub version: u32,
    /// Identity of the writing run's inputs (the source's content digest,
    /// seed, sizes, codec), hex; every shard header and shard file name
    /// carries it too.
    pub pack_id: String,
    /// xxh3-64 of every source sample's content (encoded bytes, or pixels),
    /// labels and order, hex: what ties the pack to the data it was made
    /// from ([`crate::source_digest`]). Absent in version 1 packs.
    #[serde(default)]
    pub source_digest: Option<String>,
    /// Source format name (`cifar10`, `celeba` …).
    pub source_dataset: String,
    /// Source path as given.
    pub source_path: String,
    /// Samples in the pack (= in the source).
    pub samples: usize,
    /// Samples per shard (the last may hold fewer).
    pub shard_size: usize,
    /// Raw pixels or encoded bytes.
    pub store: Payload,
    /// Seed of the shuffle before packing.
    pub seed: u64,
    /// How frames are compressed (zstd in version 1 packs).
    #[serde(default = "Codec::version_1")]
    pub codec: Codec,
    /// zstd level used (with the zstd codec).
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
pub(crate) const VERSION: u32 = 2;
/// A manifest lists shards: a few MiB at most for any real pack.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

impl Manifest {
    /// Reads and checks `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Self, PackError> {
        Self::load_from(&LocalStorage::new(dir))
    }

    /// Reads and checks the manifest of a pack in `storage`.
    pub fn load_from(storage: &dyn PackStorage) -> Result<Self, PackError> {
        let path = storage.locate(MANIFEST);
        let bytes = storage
            .read_small(MANIFEST, MAX_MANIFEST_BYTES)?
            .ok_or_else(|| PackError::Manifest {
                path: path.clone(),
                message:
                    "no manifest: not a pack, or an incomplete one (rerun the writer to finish it)"
                        .into(),
            })?;
        Self::parse(&path, &bytes)
    }

    /// Parses and checks a manifest's bytes; `path` names it in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self, PackError> {
        let path = path.to_owned();
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| PackError::Manifest {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if m.format != FORMAT || !(1..=VERSION).contains(&m.version) {
            return Err(PackError::Manifest {
                path,
                message: format!(
                    "format {:?} version {} (expected {FORMAT} 1 to {VERSION})",
                    m.format, m.version
                ),
            });
        }
        let total: usize = m.shards.iter().map(|s| s.samples).sum();
        if m.version == 1 && m.codec != Codec::Zstd {
            return Err(PackError::Manifest {
                path,
                message: "a version 1 pack names a codec".into(),
            });
        }
        if let Some(bad) = m.shards.iter().find(|s| !safe_file_name(&s.file)) {
            return Err(PackError::Manifest {
                path,
                message: format!("shard file name {:?} is not a plain file name", bad.file),
            });
        }
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

/// A name inside the pack folder: no separators, no `..`, nothing hidden.
pub(crate) fn safe_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}
