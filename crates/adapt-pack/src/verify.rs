//! Checking a pack: every checksum and count, every problem named.

use crate::format::{self, FrameEntry, Header};
use crate::frame::{open_shard, read_frame, steps_of};
use crate::storage::{LocalStorage, PackStorage, ShardFile, regular};
use crate::{Manifest, PackError};
use std::path::{Path, PathBuf};

/// What a shard holds, once checked.
pub(crate) struct ShardSummary {
    pub(crate) header: Header,
    pub(crate) frames: Vec<FrameEntry>,
    pub(crate) bytes: u64,
    pub(crate) hash: u64,
    /// The source index of every record, in order (when checked against
    /// the manifest's rules).
    pub(crate) origins: Vec<u64>,
}

/// What the manifest says every record must be.
pub(crate) struct RecordRules {
    /// Samples in the pack: every source index is below it.
    pub(crate) samples: usize,
    /// Classes: every label is in `0..classes`.
    pub(crate) classes: Option<usize>,
    /// The fixed sample shape (height, width, channels), decoded.
    pub(crate) shape: Option<[u32; 3]>,
    /// Pixels or encoded bytes.
    pub(crate) store: crate::Payload,
}

impl RecordRules {
    fn of(m: &Manifest) -> Self {
        Self {
            samples: m.samples,
            classes: m.classes,
            shape: m.shape,
            store: m.store,
        }
    }

    /// What is wrong with record `i` of a shard, if anything; encoded
    /// records are decoded (into `scratch`) as `load` would.
    fn check(
        &self,
        name: &str,
        i: usize,
        rec: &format::Record,
        scratch: &mut adapt_dataset::Sample,
    ) -> Option<String> {
        let at = format!("{name}: record {i} (source sample {})", rec.origin);
        if rec.origin >= self.samples as u64 {
            return Some(format!(
                "{at}: past the manifest's {} samples",
                self.samples
            ));
        }
        if let Some(c) = self.classes
            && !(0..c as i64).contains(&rec.label)
        {
            return Some(format!(
                "{at}: label {} outside the manifest's {c} classes",
                rec.label
            ));
        }
        let shape = match (&rec.body, self.store) {
            (
                format::Body::Raw {
                    height,
                    width,
                    channels,
                    pixels,
                    ..
                },
                crate::Payload::Raw,
            ) => {
                let want = u64::from(*height) * u64::from(*width) * u64::from(*channels);
                if pixels.len() as u64 != want {
                    return Some(format!(
                        "{at}: {} pixel bytes for {height}x{width}x{channels}",
                        pixels.len()
                    ));
                }
                [*height, *width, *channels]
            }
            (
                format::Body::Encoded {
                    bytes,
                    crop,
                    expect,
                },
                crate::Payload::Encoded,
            ) => {
                let steps = steps_of(crop, expect);
                if let Err(e) = adapt_formats::check_whole(Path::new(&at), bytes).and_then(|()| {
                    adapt_formats::decode_encoded_into(Path::new(&at), bytes, steps, scratch)
                }) {
                    return Some(e.to_string());
                }
                let s = scratch.shape;
                [s.height, s.width, s.channels]
            }
            _ => {
                return Some(format!(
                    "{at}: not stored as the manifest's {:?}",
                    self.store
                ));
            }
        };
        match self.shape {
            Some(want) if want != shape => {
                Some(format!("{at}: shape {shape:?}, the manifest says {want:?}"))
            }
            _ => None,
        }
    }
}

/// xxh3-64 of the whole shard, read in large pieces.
fn file_hash(path: &Path, file: &dyn ShardFile, len: u64) -> Result<u64, PackError> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; (len.min(8 << 20)) as usize];
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)
            .map_err(PackError::io(path))?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(h.digest())
}

/// Checks one shard completely; `expect` is (records, pack id). Returns
/// every problem found.
pub(crate) fn check_shard(
    path: &Path,
    file: &dyn ShardFile,
    expect: Option<(usize, u64)>,
    rules: Option<&RecordRules>,
) -> Result<ShardSummary, Vec<String>> {
    let name = path.display();
    file.read_whole_soon();
    let (header, frames, bytes) = open_shard(path, file).map_err(|e| vec![e.to_string()])?;
    let mut problems = Vec::new();
    if let Some((records, id)) = expect {
        if header.records as usize != records {
            problems.push(format!(
                "{name}: holds {} samples, expected {records}",
                header.records
            ));
        }
        if header.pack_id != id {
            problems.push(format!("{name}: belongs to another pack"));
        }
    }
    let mut origins = Vec::new();
    let mut scratch = adapt_dataset::Sample::default();
    let shown = name.to_string();
    for (k, f) in frames.iter().enumerate() {
        match read_frame(path, file, header.codec, k, f) {
            Err(e) => problems.push(e.to_string()),
            Ok(records) => {
                let Some(rules) = rules else { continue };
                for (j, rec) in records.iter().enumerate() {
                    origins.push(rec.origin);
                    let i = f.first as usize + j;
                    // One problem per record, at most 20 per shard named.
                    if let Some(p) = rules.check(&shown, i, rec, &mut scratch)
                        && problems.len() < 20
                    {
                        problems.push(p);
                    }
                }
            }
        }
    }
    let hash = file_hash(path, file, bytes).map_err(|e| vec![e.to_string()])?;
    if problems.is_empty() {
        Ok(ShardSummary {
            header,
            frames,
            bytes,
            hash,
            origins,
        })
    } else {
        Err(problems)
    }
}

/// Checks a local shard file.
pub(crate) fn check_local_shard(
    path: &Path,
    expect: Option<(usize, u64)>,
) -> Result<ShardSummary, Vec<String>> {
    let file = regular(path).map_err(|e| vec![e.to_string()])?;
    check_shard(path, &file, expect, None)
}

/// What the manifest's own counts get wrong: the shards' samples against
/// the total, and each shard against the shard size (every shard but the
/// last is full).
fn check_layout(m: &Manifest) -> Vec<String> {
    let mut problems = Vec::new();
    let total: usize = m.shards.iter().map(|s| s.samples).sum();
    if total != m.samples {
        problems.push(format!(
            "manifest: its shards list {total} samples, it says {}",
            m.samples
        ));
    }
    let last = m.shards.len().saturating_sub(1);
    for (k, s) in m.shards.iter().enumerate() {
        let full = s.samples == m.shard_size;
        if s.samples == 0 || s.samples > m.shard_size || (k < last && !full) {
            problems.push(format!(
                "manifest: shard {} lists {} samples, the shard size is {}",
                s.file, s.samples, m.shard_size
            ));
        }
    }
    problems
}

/// Every source index once: the pack holds the whole source, each sample
/// one time.
fn check_origins(mut origins: Vec<u64>, samples: usize, manifest: &Path) -> Vec<String> {
    origins.sort_unstable();
    let n = origins.len();
    if n != samples || origins.iter().enumerate().any(|(i, &o)| o != i as u64) {
        let dup = origins.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
        return vec![format!(
            "{}: the shards hold {n} records{}, not each of the {samples} source samples once",
            manifest.display(),
            dup.map_or(String::new(), |d| format!(" (source sample {d} twice)"))
        )];
    }
    Vec::new()
}

/// The result of a clean [`verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Shards checked.
    pub shards: usize,
    /// Frames checked.
    pub frames: usize,
    /// Samples found.
    pub samples: usize,
    /// Bytes read.
    pub bytes: u64,
}

/// Checks every shard of the pack in `dir` against its manifest: file
/// checksums and sizes, header, index, every frame's checksum and record
/// count. All problems are reported together, each naming its shard and
/// frame ([`PackError::Damaged`]).
pub fn verify(dir: &Path) -> Result<VerifyReport, PackError> {
    verify_storage(&LocalStorage::new(dir))
}

/// [`verify`] for a pack in any storage (a remote store reads each shard
/// whole, once).
pub fn verify_storage(storage: &dyn PackStorage) -> Result<VerifyReport, PackError> {
    let m = Manifest::load_from(storage)?;
    let manifest_path = storage.locate(crate::manifest::MANIFEST);
    let id = u64::from_str_radix(&m.pack_id, 16).map_err(|e| PackError::Manifest {
        path: manifest_path.clone(),
        message: format!("pack id: {e}"),
    })?;
    let rules = RecordRules::of(&m);
    let mut problems = check_layout(&m);
    let mut origins = Vec::new();
    let mut report = VerifyReport {
        shards: 0,
        frames: 0,
        samples: 0,
        bytes: 0,
    };
    for s in &m.shards {
        let path: PathBuf = storage.locate(&s.file);
        let checked = storage
            .open_shard(s)
            .map_err(|e| vec![e.to_string()])
            .and_then(|file| check_shard(&path, &*file, Some((s.samples, id)), Some(&rules)));
        match checked {
            Ok(sum) => {
                if format!("{:016x}", sum.hash) != s.xxh3 || sum.bytes != s.bytes {
                    problems.push(format!(
                        "{}: file checksum or size differs from the manifest",
                        path.display()
                    ));
                }
                if sum.header.codec != m.codec {
                    problems.push(format!(
                        "{}: compressed with {:?}, the manifest says {:?}",
                        path.display(),
                        sum.header.codec,
                        m.codec
                    ));
                }
                report.shards += 1;
                report.frames += sum.frames.len();
                report.samples += sum.header.records as usize;
                report.bytes += sum.bytes;
                origins.extend(sum.origins);
            }
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        problems.extend(check_origins(origins, m.samples, &manifest_path));
    }
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(PackError::Damaged {
            dir: storage.locate(""),
            problems,
        })
    }
}
