//! A cache folder bounded least recently used first: the files with one
//! extension, oldest modification time first, removed while they take more
//! than a bound (the member lists of `index_cache`, the decompressed copies
//! of `gunzip`).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Removes the files of `dir` named `*.ext`, least recently used first
/// (their modification time marks use), while they take more than `bound`
/// bytes. `remove` removes one and says whether it went: it may refuse (a
/// file to keep, or one another process holds). What cannot be read or
/// removed is left: a folder that cannot be cleaned only keeps more.
pub(super) fn evict(dir: &Path, ext: &str, bound: u64, mut remove: impl FnMut(&Path) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let path = e.path();
            let meta = e.metadata().ok()?;
            let used = meta.modified().unwrap_or(UNIX_EPOCH);
            (path.extension()? == ext && meta.is_file()).then_some((used, meta.len(), path))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= bound {
            break;
        }
        if remove(&path) {
            total = total.saturating_sub(len);
        }
    }
}
