//! WebDataset shards' member lists kept on disk, so a shard's headers are
//! listed once, not at every open (as `wids` keeps its index): one file per
//! shard in [`super::WebDatasetOptions::index_dir`] (the front crate puts it
//! beside the shard cache), named by the shard file's identity — its path,
//! device, inode, size and modification time — and the label member's
//! extension (label members' bytes are in the list), so a changed shard is
//! listed again and never read through a stale list.
//!
//! A list is written as a part file renamed when whole and carries the
//! xxh3 of its body: a damaged, cut or foreign file is listed again, never
//! trusted. A folder that takes no file (read-only, full) leaves the open
//! as it was without the cache. The folder is bounded at
//! [`MAX_INDEX_CACHE_BYTES`]: writing a list evicts the least recently used
//! (by modification time, which a hit refreshes) until it fits.

use super::Member;
use crate::FormatError;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Most bytes the folder's lists take together.
pub const MAX_INDEX_CACHE_BYTES: u64 = 1 << 30;

/// Largest list file read: a header per member of a shard of up to 10
/// million members.
const MAX_LIST_BYTES: u64 = 2 << 30;

/// The file's first bytes, then the version of its layout (2: lists made
/// since member names and kinds are checked; a version-1 list may hold a
/// name the listing now refuses, so it is listed again).
const MAGIC: &[u8; 8] = b"ADAPTWDI";
const LAYOUT: u32 = 2;

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<{ 2 << 30 }>()
}

/// The members of `file` from the folder `dir` when it holds the list of
/// this version of the file, else listed by `list` and stored there.
pub(super) fn members(
    dir: Option<&Path>,
    file: &Path,
    label: Option<&str>,
    list: impl FnOnce() -> Result<Vec<Member>, FormatError>,
) -> Result<Vec<Member>, FormatError> {
    let Some((dir, key)) = dir.and_then(|d| Some((d, key_of(file, label)?))) else {
        return list();
    };
    let path = dir.join(format!("{:032x}.idx", xxhash_rust::xxh3::xxh3_128(&key)));
    if let Some(members) = load(&path, &key) {
        let _ = std::fs::File::options()
            .append(true)
            .open(&path)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        return Ok(members);
    }
    let members = list()?;
    if std::fs::create_dir_all(dir).is_ok() && store(&path, &key, &members).is_ok() {
        evict(dir, MAX_INDEX_CACHE_BYTES, &path);
    }
    Ok(members)
}

/// What names this version of `file` and the members listed from it;
/// `None` when the file cannot be looked at (the listing will say why).
fn key_of(file: &Path, label: Option<&str>) -> Option<Vec<u8>> {
    let path = std::fs::canonicalize(file).ok()?;
    let meta = std::fs::metadata(&path).ok()?;
    let mut key = path.as_os_str().as_bytes().to_vec();
    key.push(0);
    for n in [
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        u64::from(LAYOUT),
    ] {
        key.extend(n.to_le_bytes());
    }
    key.extend(label.unwrap_or("").as_bytes());
    Some(key)
}

/// The list at `path` when it is whole and was listed for `key`.
fn load(path: &Path, key: &[u8]) -> Option<Vec<Member>> {
    if std::fs::metadata(path).ok()?.len() > MAX_LIST_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let body = bytes.strip_prefix(MAGIC.as_slice())?;
    let (sum, body) = body.split_first_chunk::<8>()?;
    if u64::from_le_bytes(*sum) != xxhash_rust::xxh3::xxh3_64(body) {
        return None;
    }
    // What it was listed from, then the members.
    let ((stored_key, members), _): ((Vec<u8>, Vec<Member>), _) =
        bincode::decode_from_slice(body, config()).ok()?;
    (stored_key == key).then_some(members)
}

/// Writes the list at `path`: a part file of this process, renamed.
fn store(path: &Path, key: &[u8], members: &[Member]) -> std::io::Result<()> {
    let body = bincode::encode_to_vec((key, members), config()).map_err(std::io::Error::other)?;
    let mut bytes = Vec::with_capacity(16 + body.len());
    bytes.extend(MAGIC);
    bytes.extend(xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
    bytes.extend(&body);
    let part = PathBuf::from(format!("{}.{}.part", path.display(), std::process::id()));
    let result = std::fs::write(&part, &bytes).and_then(|()| std::fs::rename(&part, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result
}

/// Removes the least recently used lists of `dir` (never `keep`) until
/// they take at most `bound` bytes.
fn evict(dir: &Path, bound: u64, keep: &Path) {
    super::lru::evict(dir, "idx", bound, |list| {
        list != keep && std::fs::remove_file(list).is_ok()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, offset: u64) -> Member {
        Member {
            name: name.into(),
            offset,
            size: 10,
            label: Some(b"3".to_vec()),
        }
    }

    #[test]
    fn a_list_is_kept_until_its_file_changes() {
        let t = tempfile::tempdir().unwrap();
        let (dir, shard) = (t.path().join("index"), t.path().join("a.tar"));
        std::fs::write(&shard, b"x").unwrap();
        let listed = std::cell::Cell::new(0);
        let list = || {
            listed.set(listed.get() + 1);
            Ok(vec![member("k.jpg", 512), member("k.cls", 1536)])
        };
        let first = members(Some(&dir), &shard, Some("cls"), list).unwrap();
        let again = members(Some(&dir), &shard, Some("cls"), list).unwrap();
        assert_eq!(listed.get(), 1, "the second open reads the stored list");
        assert_eq!(again[1].name, first[1].name);
        assert_eq!(again[1].label, Some(b"3".to_vec()));
        // Another label extension is another list.
        members(Some(&dir), &shard, None, list).unwrap();
        assert_eq!(listed.get(), 2);
        // A rewritten shard (another size) is listed again.
        std::fs::write(&shard, b"xy").unwrap();
        members(Some(&dir), &shard, Some("cls"), list).unwrap();
        assert_eq!(listed.get(), 3);
        // A damaged list is listed again, then whole.
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let mut b = std::fs::read(&p).unwrap();
            let last = b.len() - 1;
            b[last] ^= 1;
            std::fs::write(&p, b).unwrap();
        }
        members(Some(&dir), &shard, Some("cls"), list).unwrap();
        members(Some(&dir), &shard, Some("cls"), list).unwrap();
        assert_eq!(listed.get(), 4);
    }

    #[test]
    fn the_folder_stays_within_its_bound_least_recently_used_first() {
        let t = tempfile::tempdir().unwrap();
        for (i, age) in [(0, 30), (1, 20), (2, 10)] {
            let p = t.path().join(format!("{i}.idx"));
            std::fs::write(&p, [0u8; 100]).unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
            std::fs::File::options()
                .append(true)
                .open(&p)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        evict(t.path(), 200, &t.path().join("0.idx"));
        let left: Vec<bool> = (0..3)
            .map(|i| t.path().join(format!("{i}.idx")).exists())
            .collect();
        assert_eq!(
            left,
            [true, false, true],
            "the oldest other than the new one goes"
        );
    }
}
