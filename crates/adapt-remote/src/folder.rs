//! A cache folder as every process using it sees it (eight ranks of one
//! node reading one pack into one cache): its lock, the shards in it with
//! their sizes and last use, and the part files of fetches in flight,
//! named `.{shard}.part-{pid}-{n}` — those of dead processes removed, never
//! read as shards.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// The folder's lock, held (an exclusive `flock` of `.lock`) while a
/// process counts the folder and makes room in it; released when dropped.
pub(crate) struct Held {
    _file: File,
}

/// Takes the folder's lock, waiting for the process holding it (which
/// holds it for a listing and a few removals).
pub(crate) fn lock(dir: &Path) -> std::io::Result<Held> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))?;
    file.lock()?;
    Ok(Held { _file: file })
}

/// A whole shard in the folder.
pub(crate) struct Cached {
    pub(crate) name: String,
    pub(crate) bytes: u64,
    pub(crate) modified: SystemTime,
}

/// What the folder holds now, all processes together.
#[derive(Default)]
pub(crate) struct Listing {
    pub(crate) shards: Vec<Cached>,
    /// Shards a live process is fetching.
    pub(crate) fetching: HashSet<String>,
    /// Bytes of the part files of live processes (their reservations).
    pub(crate) part_bytes: u64,
}

impl Listing {
    /// Bytes of whole shards and reservations.
    pub(crate) fn used(&self) -> u64 {
        self.part_bytes + self.shards.iter().map(|s| s.bytes).sum::<u64>()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Cached> {
        self.shards.iter().find(|s| s.name == name)
    }
}

/// Lists the folder (call it holding the lock); part files of processes
/// that are gone are removed on the way.
pub(crate) fn scan(dir: &Path) -> Listing {
    let mut out = Listing::default();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(meta) = e.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        if let Some((shard, pid)) = part_owner(&name) {
            if alive(pid) {
                out.fetching.insert(shard.to_owned());
                out.part_bytes += meta.len();
            } else {
                let _ = std::fs::remove_file(e.path());
            }
        } else if !name.starts_with('.') {
            out.shards.push(Cached {
                name,
                bytes: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
    }
    out
}

/// A part file's name for a fetch of `shard` by this process, unique
/// among this process's fetches (two connections to one pack in one
/// process share its folder too).
pub(crate) fn part_name(shard: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(".{shard}.part-{}-{n}", std::process::id())
}

/// The shard and process of a part file's name.
fn part_owner(file: &str) -> Option<(&str, u32)> {
    let rest = file.strip_prefix('.')?;
    let (shard, tail) = rest.rsplit_once(".part-")?;
    let pid = tail.split('-').next()?.parse().ok()?;
    Some((shard, pid))
}

/// Whether process `pid` is running (where `/proc` says; elsewhere every
/// process is taken as running, and its part files stay).
fn alive(pid: u32) -> bool {
    pid == std::process::id()
        || !Path::new("/proc/self").exists()
        || Path::new("/proc").join(pid.to_string()).exists()
}

/// Checks that shards can be written into `dir`: a read-only folder, or a
/// disk without room for a 64 KiB file, is an error now rather than fetches
/// that fail all epoch long.
pub(crate) fn probe(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(part_name("probe"));
    let result = File::create_new(&path)
        .and_then(|mut f| f.write_all(&[0u8; 64 << 10]).and_then(|()| f.sync_data()));
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_files_name_their_shard_and_process() {
        let p = part_name("shard-00001.adpk");
        let (shard, pid) = part_owner(&p).unwrap_or_else(|| panic!("{p}"));
        assert_eq!(shard, "shard-00001.adpk");
        assert_eq!(pid, std::process::id());
        assert_eq!(part_owner("shard-00001.adpk"), None);
        assert_eq!(part_owner(".lock"), None);
        assert_ne!(part_name("a"), part_name("a"));
    }

    #[test]
    fn a_dead_processs_part_file_is_removed_and_a_live_ones_counts() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |n: &str, len: usize| {
            std::fs::write(t.path().join(n), vec![1u8; len]).unwrap_or_else(|e| panic!("{e}"))
        };
        write("a.adpk", 10);
        write(&part_name("b.adpk"), 20);
        // No process has pid 4194305 (above Linux's pid_max).
        write(".c.adpk.part-4194305-0", 30);
        let l = scan(t.path());
        assert_eq!(l.shards.len(), 1);
        assert_eq!(l.used(), 30);
        assert!(l.fetching.contains("b.adpk"));
        assert!(!t.path().join(".c.adpk.part-4194305-0").exists());
    }
}
