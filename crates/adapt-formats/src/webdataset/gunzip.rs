//! Gzip-compressed WebDataset shards (`.tar.gz`, `.tgz`): decompressed once,
//! as a stream, into a folder beside the shard cache, then indexed and read
//! in place there like any `.tar`, so a compressed set gets random access,
//! exact resume and streaming as a plain one does.
//!
//! A copy is named by the source's path, size, inode and gzip trailer (the
//! CRC-32 and length of the data), so a rewritten shard is decompressed
//! again, while touching it (the shard cache marks use by modification
//! time) is not a change; one process decompresses each
//! shard (a lock file per copy, released when its holder ends however it
//! ends), others wait and read its copy. The copy is written as a part file
//! renamed when whole: a process killed mid-way leaves nothing another will
//! read as whole, and its part file is overwritten by the next holder.
//!
//! The folder is bounded ([`evict`]): opening a dataset removes other
//! datasets' copies (and copies of shards since rewritten), least recently
//! opened first, while the folder holds more than the bound; a dataset's
//! own copies are never removed by its own open. A reader whose copy
//! another process removed decompresses it again (`WebDataset::open_file`).

use crate::FormatError;
use crate::image_io::open_regular;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest size one shard may decompress to: a damaged or hostile file (a
/// gzip "bomb" reaches ~1,000× its size) is an error, not a full disk. A
/// smaller folder bound is the limit instead: one shard past the whole
/// folder's bound could never be kept.
pub const MAX_UNPACKED_SHARD_BYTES: u64 = 64 << 30;

/// The extensions of a gzip-compressed shard, as WebDataset names them.
const GZIP_SUFFIXES: [&str; 2] = [".tar.gz", ".tgz"];

/// Whether `path` names a gzip-compressed shard (`.tar.gz`, `.tgz`, any
/// case).
pub fn is_gzip_shard(path: &Path) -> bool {
    let name = path.as_os_str().as_bytes().to_ascii_lowercase();
    GZIP_SUFFIXES.iter().any(|s| name.ends_with(s.as_bytes()))
}

/// The files to read for `shards`: each shard itself, or a gzip-compressed
/// one's copy in `folder` ([`unpacked`]), decompressed on as many threads
/// as the machine has cores (one shard each at a time); after a failure
/// no further shard is started, and the error of the first shard in order
/// that failed is returned. Then the folder is brought within `bound`
/// bytes by removing other copies ([`evict`]).
pub(crate) fn unpacked_all(
    shards: &[PathBuf],
    folder: Option<&Path>,
    bound: u64,
) -> Result<Vec<PathBuf>, FormatError> {
    let compressed: Vec<usize> = (0..shards.len())
        .filter(|&i| is_gzip_shard(&shards[i]))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(compressed.len());
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Result<PathBuf, FormatError>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some(&i) = compressed.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let copy = unpacked(&shards[i], folder, bound);
                    let failed = copy.is_err();
                    done.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, copy));
                    if failed {
                        // The others finish the shard they are on, then stop.
                        next.store(compressed.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let mut files = shards.to_vec();
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    for (i, copy) in done {
        files[i] = copy?;
    }
    if let (Some(folder), false) = (folder, compressed.is_empty()) {
        let mine: Vec<PathBuf> = compressed.iter().map(|&i| files[i].clone()).collect();
        evict(folder, &mine, bound);
    }
    Ok(files)
}

/// Removes the decompressed copies in `folder` that `keep` does not name,
/// least recently opened first (a copy's modification time is set each
/// time a dataset opens it), while the folder's copies take more than
/// `bound` bytes. The copies in `keep` count toward the bound but are never
/// removed: a dataset larger than the bound keeps all of its own. A copy
/// whose lock another process holds (decompressing it) is left; taken
/// with its lock, a part file of a process that died decompressing it
/// goes too. What cannot be removed is left: a folder that cannot be
/// cleaned only keeps more.
pub(crate) fn evict(folder: &Path, keep: &[PathBuf], bound: u64) {
    super::lru::evict(folder, "tar", bound, |copy| {
        !keep.iter().any(|k| k == copy) && remove_copy(copy)
    });
}

/// Removes one copy (and a dead process's part file of it) under the
/// copy's lock, unless another process holds that lock; whether it went.
fn remove_copy(copy: &Path) -> bool {
    let name = copy.file_name().unwrap_or_default().to_string_lossy();
    let lock_path = copy.with_file_name(format!("{name}.lock"));
    let Ok(lock) = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
    else {
        return false;
    };
    if lock.try_lock().is_err() {
        return false;
    }
    let _ = std::fs::remove_file(copy.with_file_name(format!("{name}.part")));
    std::fs::remove_file(copy).is_ok()
}

/// The decompressed copy of the gzip-compressed shard `shard` in `folder`
/// (`None`: the caller gave none, an error naming the shard), made now
/// unless a whole one is there; a shard that decompresses past `bound`
/// (the folder's) or [`MAX_UNPACKED_SHARD_BYTES`] is an error naming it,
/// and nothing of it is left.
pub(crate) fn unpacked(
    shard: &Path,
    folder: Option<&Path>,
    bound: u64,
) -> Result<PathBuf, FormatError> {
    let bad = |reason: String| FormatError::Gunzip {
        shard: shard.to_owned(),
        reason,
    };
    let folder = folder.ok_or_else(|| {
        bad("gzip-compressed shards are decompressed into a folder, and none was given".into())
    })?;
    let source = open_regular(shard)?;
    let name = copy_name(shard, &source)?;
    std::fs::create_dir_all(folder).map_err(FormatError::io(folder))?;
    let copy = folder.join(&name);
    let lock_path = folder.join(format!("{name}.lock"));
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(FormatError::io(&lock_path))?;
    lock.lock().map_err(FormatError::io(&lock_path))?;
    if copy.is_file() {
        // Its modification time is its last use.
        let _ = File::options()
            .append(true)
            .open(&copy)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        return Ok(copy);
    }
    let part = folder.join(format!("{name}.part"));
    let limit = bound.min(MAX_UNPACKED_SHARD_BYTES);
    let written = decompress(source, &part, limit).map_err(|reason| {
        let _ = std::fs::remove_file(&part);
        bad(reason)
    })?;
    if written > limit {
        let _ = std::fs::remove_file(&part);
        let what = if limit < MAX_UNPACKED_SHARD_BYTES {
            "the bound of the folder it is decompressed into (ADAPT_CACHE_BYTES)"
        } else {
            "the largest shard decompressed"
        };
        return Err(bad(format!(
            "decompresses to more than {limit} bytes, {what} (a damaged or hostile file; \
             decompression stopped there)"
        )));
    }
    std::fs::rename(&part, &copy).map_err(FormatError::io(&copy))?;
    Ok(copy)
}

/// The copy's file name: the shard's stem and a hash of its absolute path,
/// device, inode, size and last 8 bytes (the gzip trailer: CRC-32 and
/// length of the data).
fn copy_name(shard: &Path, source: &File) -> Result<String, FormatError> {
    let meta = source.metadata().map_err(FormatError::io(shard))?;
    let absolute = std::path::absolute(shard).map_err(FormatError::io(shard))?;
    let mut key = absolute.as_os_str().as_bytes().to_vec();
    for n in [meta.len(), meta.dev(), meta.ino()] {
        key.extend_from_slice(&n.to_le_bytes());
    }
    let mut trailer = [0u8; 8];
    if let Some(at) = meta.len().checked_sub(8) {
        source
            .read_exact_at(&mut trailer, at)
            .map_err(FormatError::io(shard))?;
    }
    key.extend_from_slice(&trailer);
    let file = shard
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = GZIP_SUFFIXES
        .iter()
        .find_map(|s| {
            let cut = file.len().checked_sub(s.len())?;
            file.get(cut..)?
                .eq_ignore_ascii_case(s)
                .then(|| file.get(..cut))?
        })
        .unwrap_or(&file);
    Ok(format!(
        "{stem}-{:016x}.tar",
        xxhash_rust::xxh3::xxh3_64(&key)
    ))
}

/// Decompresses `source` (every gzip member, as `gzip -d` does) into a new
/// `part` file, at most `limit` + 1 bytes of it; returns the bytes
/// written, or what went wrong.
fn decompress(source: File, part: &Path, limit: u64) -> Result<u64, String> {
    let out = File::create(part).map_err(|e| format!("{}: {e}", part.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut decoder = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, source))
        .take(limit.saturating_add(1));
    let written = std::io::copy(&mut decoder, &mut out)
        .map_err(|e| format!("damaged or truncated gzip data: {e}"))?;
    out.flush()
        .and_then(|()| out.get_ref().sync_all())
        .map_err(|e| format!("{}: {e}", part.display()))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::is_gzip_shard;
    use std::path::Path;

    #[test]
    fn gzip_shards_are_known_by_their_extension() {
        for p in ["a/s-000.tar.gz", "s.TGZ", "x.Tar.Gz"] {
            assert!(is_gzip_shard(Path::new(p)), "{p}");
        }
        for p in ["s.tar", "s.gz", "s.tar.zst", "tgz"] {
            assert!(!is_gzip_shard(Path::new(p)), "{p}");
        }
    }
}
