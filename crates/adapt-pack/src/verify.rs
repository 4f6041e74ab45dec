//! Checking a pack: every checksum and count, every problem named.

use crate::format::{self, FOOTER_LEN, Footer, FrameEntry, HEADER_LEN, Header, xxh3};
use crate::storage::{LocalStorage, PackStorage, ShardFile, regular};
use crate::{Codec, Manifest, PackError};
use std::path::{Path, PathBuf};

/// What a shard holds, once checked.
pub(crate) struct ShardSummary {
    pub(crate) header: Header,
    pub(crate) frames: Vec<FrameEntry>,
    pub(crate) bytes: u64,
    pub(crate) hash: u64,
}

/// Reads a shard's header, footer and index (checking the index checksum
/// and that the frames tile the records). `path` names it in errors.
pub(crate) fn open_shard(
    path: &Path,
    file: &dyn ShardFile,
) -> Result<(Header, Vec<FrameEntry>, u64), PackError> {
    let len = file.len();
    let bad = |message: String| PackError::BadShard {
        path: path.to_owned(),
        message,
    };
    if len < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(bad(format!("truncated: {len} bytes")));
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_exact_at(&mut head, 0)
        .map_err(PackError::io(path))?;
    let header = Header::parse(path, &head)?;
    let mut foot = [0u8; FOOTER_LEN];
    file.read_exact_at(&mut foot, len - FOOTER_LEN as u64)
        .map_err(PackError::io(path))?;
    let footer = Footer::parse(path, &foot, len)?;
    // Bounded by the file's length (the footer was checked against it).
    let mut idx = vec![0u8; footer.index_len as usize];
    file.read_exact_at(&mut idx, footer.index_offset)
        .map_err(PackError::io(path))?;
    if xxh3(&idx) != footer.index_hash {
        return Err(bad("frame index checksum mismatch".into()));
    }
    let frames = format::decode_index(&idx).map_err(|e| bad(format!("frame index: {e}")))?;
    let mut next = 0u32;
    let mut offset = HEADER_LEN as u64;
    for (i, f) in frames.iter().enumerate() {
        if f.first != next || f.offset != offset || f.count == 0 {
            return Err(bad(format!(
                "frame index entry {i} does not follow the previous frame"
            )));
        }
        next += f.count;
        offset += u64::from(f.compressed);
    }
    if next != header.records || offset != footer.index_offset {
        return Err(bad(format!(
            "frames hold {next} records, the header says {}",
            header.records
        )));
    }
    Ok((header, frames, len))
}

thread_local! {
    /// One zstd context per thread: creating one per frame cost a sixth of
    /// a raw pack's read time.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn decompress(bytes: &[u8], capacity: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot {
            Some(d) => d.decompress(bytes, capacity),
            None => unreachable!("set above"),
        }
    })
}

/// Reads, checks and decodes frame `k`.
pub(crate) fn read_frame(
    path: &Path,
    file: &dyn ShardFile,
    codec: Codec,
    k: usize,
    f: &FrameEntry,
) -> Result<Vec<format::Record>, PackError> {
    let bad = |message: String| PackError::BadFrame {
        path: path.to_owned(),
        frame: k,
        message,
    };
    if f.raw > format::MAX_FRAME_RAW {
        return Err(bad(format!(
            "the index claims {} decompressed bytes (at most {} are accepted)",
            f.raw,
            format::MAX_FRAME_RAW
        )));
    }
    // `compressed` was checked against the file when the index was read
    // (the frames tile the file), so this allocation is bounded by it.
    let mut buf = vec![0u8; f.compressed as usize];
    file.read_exact_at(&mut buf, f.offset)
        .map_err(PackError::io(path))?;
    if xxh3(&buf) != f.hash {
        return Err(bad("checksum mismatch".into()));
    }
    let records = match codec {
        Codec::Zstd => {
            let raw = decompress(&buf, f.raw as usize).map_err(|e| bad(format!("zstd: {e}")))?;
            format::decode_records(&raw)
        }
        Codec::Lz4 => {
            let raw = lz4_flex::block::decompress(&buf, f.raw as usize)
                .map_err(|e| bad(format!("lz4: {e}")))?;
            format::decode_records(&raw)
        }
        Codec::None => {
            if f.compressed != f.raw {
                return Err(bad(format!(
                    "stored uncompressed, but the index says {} bytes hold {}",
                    f.compressed, f.raw
                )));
            }
            format::decode_records(&buf)
        }
    }
    .map_err(|e| bad(format!("records: {e}")))?;
    if records.len() != f.count as usize {
        return Err(bad(format!(
            "{} records, the index says {}",
            records.len(),
            f.count
        )));
    }
    Ok(records)
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
    for (k, f) in frames.iter().enumerate() {
        if let Err(e) = read_frame(path, file, header.codec, k, f) {
            problems.push(e.to_string());
        }
    }
    let hash = file_hash(path, file, bytes).map_err(|e| vec![e.to_string()])?;
    if problems.is_empty() {
        Ok(ShardSummary {
            header,
            frames,
            bytes,
            hash,
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
    check_shard(path, &file, expect)
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
    let mut problems = Vec::new();
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
            .and_then(|file| check_shard(&path, &*file, Some((s.samples, id))));
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
            }
            Err(p) => problems.extend(p),
        }
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
