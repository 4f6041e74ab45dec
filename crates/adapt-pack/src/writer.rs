//! Writing a pack: shuffle, shard, frame, compress, checksum, rename, and
//! the manifest last. Resumable and refusing to clobber another pack.

use crate::format::{self, is_writer_name, shard_name, written_by_us, xxh3};
use crate::manifest::{FORMAT, MANIFEST, VERSION};
use crate::shard_writer::{ShardJob, record};
use crate::verify::check_local_shard;
use crate::{Codec, Manifest, PackError, Payload, ShardInfo};
use adapt_dataset::Dataset;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// How to pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackOptions {
    /// Samples per shard (the seed uses 10,000 per pickle).
    pub shard_size: usize,
    /// Seed of the shuffle before packing.
    pub seed: u64,
    /// Raw pixels or encoded bytes.
    pub store: Payload,
    /// How frames are compressed.
    pub codec: Codec,
    /// zstd level (with [`Codec::Zstd`]): 1–22, or negative for zstd's fast
    /// modes.
    pub zstd_level: i32,
    /// Target uncompressed bytes per frame: the unit of random access.
    pub frame_bytes: usize,
    /// Replace a different pack found in the output folder (only once the
    /// new one is complete).
    pub overwrite: bool,
}

impl PackOptions {
    /// The codec chosen by measurement for `store` when none is asked for
    /// (`docs/pack-format.md`): decoded pixels are stored uncompressed —
    /// zstd spent most of a raw pack's read time on noisy pixels for a
    /// ~1.2× size gain —, encoded images (already compressed) likewise.
    pub fn default_codec(_store: Payload) -> Codec {
        Codec::None
    }
}

impl Default for PackOptions {
    fn default() -> Self {
        Self {
            shard_size: 10_000,
            seed: 0,
            store: Payload::Raw,
            codec: Codec::None,
            zstd_level: 3,
            frame_bytes: 64 << 10,
            overwrite: false,
        }
    }
}

/// Where the samples come from (recorded in the manifest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceInfo {
    /// Format name.
    pub dataset: String,
    /// Path as given.
    pub path: String,
    /// Class names, when the format has them.
    pub class_names: Option<Vec<String>>,
}

fn check_options(ds: &dyn Dataset, o: &PackOptions) -> Result<(), PackError> {
    let bad = |m: String| Err(PackError::InvalidOption(m));
    if o.shard_size == 0 || o.shard_size > u32::MAX as usize {
        return bad(format!(
            "shard size {} (must be 1 ..= 2^32-1)",
            o.shard_size
        ));
    }
    let levels = zstd::compression_level_range();
    if o.zstd_level == 0 || !levels.contains(&o.zstd_level) {
        return bad(format!(
            "zstd level {} (must be {} ..= 22, not 0; negative levels are zstd's fast modes)",
            o.zstd_level,
            levels.start()
        ));
    }
    if o.frame_bytes < 1024 {
        return bad(format!(
            "frame size {} bytes (at least 1024)",
            o.frame_bytes
        ));
    }
    if ds.is_empty() {
        return bad("the source dataset is empty".into());
    }
    if o.store == Payload::Encoded && ds.encoded(0).is_none() {
        return bad(
            "this format stores decoded pixels, not encoded images: pack it with store raw".into(),
        );
    }
    Ok(())
}

/// The pack's identity: the source's content and every option that shapes
/// the shards — not the source's path (a moved source is the same data, a
/// regenerated one in the same place is not).
fn pack_id(ds: &dyn Dataset, source: &SourceInfo, digest: u64, o: &PackOptions) -> u64 {
    let text = format!(
        "{}|{digest:016x}|{}|{}|{}|{:?}|{:?}|{}|{}",
        source.dataset,
        ds.len(),
        o.seed,
        o.shard_size,
        o.store,
        o.codec,
        if o.codec == Codec::Zstd {
            o.zstd_level
        } else {
            0
        },
        o.frame_bytes
    );
    xxh3(text.as_bytes())
}

/// xxh3-64 over every sample's content in source order: the encoded file's
/// bytes and fixed steps where the format has them (decoding is a function
/// of those), the decoded pixels otherwise, and each label. Reads the
/// whole source once (in parallel); a pack records it as
/// [`Manifest::source_digest`], and `write_pack` uses it to tell a pack of
/// this source from a stale one.
pub fn source_digest(ds: &dyn Dataset) -> Result<u64, PackError> {
    let per_sample = (0..ds.len())
        .into_par_iter()
        .map(|i| sample_digest(ds, i))
        .collect::<Result<Vec<u64>, PackError>>()?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(ds.len() as u64).to_le_bytes());
    for d in per_sample {
        h.update(&d.to_le_bytes());
    }
    Ok(h.digest())
}

/// Checks that the pack described by `m` (at `dir`, for messages) was made
/// from `ds` as it is now: the same content digest (a source regenerated
/// or edited since packing is [`PackError::Stale`]).
pub fn check_source(m: &Manifest, dir: &Path, ds: &dyn Dataset) -> Result<(), PackError> {
    let stale = |message: String| PackError::Stale {
        dir: dir.to_owned(),
        message,
    };
    let Some(recorded) = &m.source_digest else {
        return Err(stale(
            "a version 1 pack records no source digest: rewrite it to tie it to its source".into(),
        ));
    };
    if ds.len() != m.samples {
        return Err(stale(format!(
            "the source holds {} samples, the pack {}",
            ds.len(),
            m.samples
        )));
    }
    let now = format!("{:016x}", source_digest(ds)?);
    if &now != recorded {
        return Err(stale(format!(
            "the source's content has changed since it was packed (digest {now}, the pack \
             was made from {recorded}): rerun shard with --overwrite"
        )));
    }
    Ok(())
}

fn sample_digest(ds: &dyn Dataset, i: usize) -> Result<u64, PackError> {
    let src = |source| PackError::Source { index: i, source };
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    match ds.encoded(i) {
        Some(e) => {
            let e = e.map_err(src)?;
            h.update(b"encoded");
            h.update(&e.label.to_le_bytes());
            h.update(format!("{:?}", e.steps).as_bytes());
            h.update(&e.bytes);
        }
        None => {
            let s = ds.get(i).map_err(src)?;
            h.update(b"pixels");
            h.update(&s.label.to_le_bytes());
            h.update(format!("{:?}{:?}", s.shape, s.layout).as_bytes());
            h.update(&s.pixels);
        }
    }
    Ok(h.digest())
}

/// Files in `dir` with the names this writer gives shards (any pack id),
/// complete or temporary.
fn writer_files(dir: &Path) -> Result<Vec<PathBuf>, PackError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(PackError::io(dir))? {
        let p = e.map_err(PackError::io(dir))?.path();
        if p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_writer_name)
        {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

fn remove(path: &Path) -> Result<(), PackError> {
    std::fs::remove_file(path).map_err(PackError::io(path))
}

/// What `write_pack` found in the output folder before writing.
enum Existing {
    /// Nothing (or no manifest).
    None,
    /// This very pack, complete and verified.
    Complete(Box<Manifest>),
    /// A pack to replace once the new one is complete (the files its
    /// manifest lists).
    Replace(Vec<String>),
}

/// Packs `ds` into `out`. Digests the source (a pack is tied to its
/// content, not its path), shuffles the whole dataset from the seed, writes
/// shards in parallel (rayon, a bounded window of frames at a time: memory
/// stays a few frames per thread whatever the dataset's size), each to a
/// temporary name that is flushed, synced and renamed; the manifest goes
/// last. A rerun with the same source content and options keeps the shards
/// already complete (after verifying them) and writes the rest.
///
/// Another pack in `out` (other options, or a source whose content has
/// changed) is refused unless `overwrite`; with it, the old pack stays
/// whole and readable until the new manifest replaces its manifest, and
/// only then are the old pack's shards deleted. A failure (a bad source
/// image) leaves the old pack as it was. Only files this writer names and
/// writes are ever deleted. `progress` is called with samples done.
pub fn write_pack(
    ds: &dyn Dataset,
    source: &SourceInfo,
    out: &Path,
    o: &PackOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Manifest, PackError> {
    check_options(ds, o)?;
    let digest = source_digest(ds)?;
    let id = pack_id(ds, source, digest, o);
    std::fs::create_dir_all(out).map_err(PackError::io(out))?;
    let existing = existing_pack(out, id, digest, source, o)?;
    if let Existing::Complete(m) = existing {
        progress(m.samples as u64);
        return Ok(*m);
    }
    let shards = write_shards(ds, out, id, o, progress)?;
    let m = Manifest {
        format: FORMAT.into(),
        version: VERSION,
        pack_id: format!("{id:016x}"),
        source_digest: Some(format!("{digest:016x}")),
        source_dataset: source.dataset.clone(),
        source_path: source.path.clone(),
        samples: ds.len(),
        shard_size: o.shard_size,
        store: o.store,
        seed: o.seed,
        codec: o.codec,
        zstd_level: o.zstd_level,
        frame_bytes: o.frame_bytes,
        classes: ds.num_classes(),
        class_names: source.class_names.clone(),
        shape: ds.sample_shape().map(|s| [s.height, s.width, s.channels]),
        shards,
    };
    publish_manifest(out, &m, id)?;
    replace_old(out, &m, existing)?;
    Ok(m)
}

/// What `out` holds before writing: this pack complete, nothing (or this
/// pack damaged: rewritten under the same names), or another pack — refused
/// unless `overwrite`, with the files its manifest lists otherwise.
fn existing_pack(
    out: &Path,
    id: u64,
    digest: u64,
    source: &SourceInfo,
    o: &PackOptions,
) -> Result<Existing, PackError> {
    if !out.join(MANIFEST).exists() {
        return Ok(Existing::None);
    }
    let other = match Manifest::load(out) {
        Ok(m) if m.pack_id == format!("{id:016x}") => {
            // Damaged: its shards are rewritten under the same names; the
            // manifest is replaced last.
            return Ok(if crate::verify(out).is_ok() {
                Existing::Complete(Box::new(m))
            } else {
                Existing::None
            });
        }
        other => other,
    };
    if o.overwrite {
        return Ok(Existing::Replace(match other {
            Ok(m) => m.shards.into_iter().map(|s| s.file).collect(),
            Err(_) => Vec::new(),
        }));
    }
    let message = match other {
        Ok(m)
            if m.source_dataset == source.dataset
                && m.source_digest.is_some()
                && m.source_digest != Some(format!("{digest:016x}")) =>
        {
            format!(
                "holds a pack of {} made from other content (the source has \
                 changed since it was packed)",
                m.source_dataset
            )
        }
        Ok(m) => format!(
            "holds another pack ({} from {}, seed {}, store {:?}, codec {})",
            m.source_dataset, m.source_path, m.seed, m.store, m.codec
        ),
        Err(e) => format!("holds an unreadable manifest ({e})"),
    };
    Err(PackError::Exists {
        dir: out.to_owned(),
        message,
    })
}

/// Shuffles `ds` from the seed and writes its shards into `out`, keeping
/// those of this pack already complete.
fn write_shards(
    ds: &dyn Dataset,
    out: &Path,
    id: u64,
    o: &PackOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<ShardInfo>, PackError> {
    let order = adapt_dataset::permutation(ds.len(), o.seed, 0);
    let est = format::encode_records(&[record(ds, order[0], o.store)?])
        .len()
        .max(1);
    let per_frame = (o.frame_bytes / est).clamp(1, 1 << 16);
    // Frames built in parallel per round: enough to keep every thread busy
    // while the previous round is written, few enough to bound memory.
    let window = 8 * rayon::current_num_threads().max(1);
    let mut shards = Vec::new();
    for (k, origins) in order.chunks(o.shard_size).enumerate() {
        let name = shard_name(id, k);
        let path = out.join(&name);
        // A shard of this pack already complete is kept; one named so but
        // damaged is rewritten (the rename replaces it).
        if path.exists()
            && let Ok(s) = check_local_shard(&path, Some((origins.len(), id)))
        {
            progress(origins.len() as u64);
            shards.push(ShardInfo {
                file: name,
                samples: origins.len(),
                bytes: s.bytes,
                xxh3: format!("{:016x}", s.hash),
            });
            continue;
        }
        let job = ShardJob {
            ds,
            k,
            origins,
            o,
            id,
            per_frame,
            window,
            progress,
        };
        shards.push(job.write(&path)?);
    }
    Ok(shards)
}

/// Writes the manifest through a temporary name, synced, then renamed over
/// the old one: from now on readers see the new pack.
fn publish_manifest(out: &Path, m: &Manifest, id: u64) -> Result<(), PackError> {
    let manifest_path = out.join(MANIFEST);
    let text = serde_json::to_string_pretty(m).map_err(|e| PackError::Manifest {
        path: manifest_path.clone(),
        message: e.to_string(),
    })?;
    let tmp = out.join(format!("manifest-{id:016x}.json.partial"));
    std::fs::write(&tmp, text).map_err(PackError::io(&tmp))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(PackError::io(&tmp))?;
    std::fs::rename(&tmp, &manifest_path).map_err(PackError::io(&manifest_path))
}

/// The new pack is complete: now, and only now, the old one goes — the
/// files its manifest listed and shards this writer left from other runs,
/// never a file it did not write.
fn replace_old(out: &Path, m: &Manifest, existing: Existing) -> Result<(), PackError> {
    let keep: std::collections::HashSet<&str> = m.shards.iter().map(|s| s.file.as_str()).collect();
    let old = match existing {
        Existing::Replace(files) => files,
        _ => Vec::new(),
    };
    for name in old {
        let p = out.join(&name);
        if !keep.contains(name.as_str())
            && crate::manifest::safe_file_name(&name)
            && written_by_us(&p)
        {
            remove(&p)?;
        }
    }
    for p in writer_files(out)? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !keep.contains(name) && written_by_us(&p) {
            remove(&p)?;
        }
    }
    Ok(())
}
