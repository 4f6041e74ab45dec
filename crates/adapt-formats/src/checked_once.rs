//! The JPEGs this process has already found whole, remembered by an xxh3 of
//! their bytes, so that each image's scans are read once and not on every
//! epoch.
//!
//! Reading a JPEG's Huffman codes to see that its data holds every block
//! (`jpeg_scan`) costs about what the decoder's own entropy decoding does.
//! A training run decodes the same files every epoch; the bytes are hashed
//! (xxh3, tens of GB/s, so microseconds against a decode's milliseconds)
//! and the scan runs only for bytes not seen whole before. A file changed
//! in place has another hash and is scanned again. Only images found whole
//! are remembered: a damaged one fails on every read.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// Most images remembered: 64-bit hashes in hash sets at most 7/8 full,
/// about 18 bytes each, so at most about 75 MiB. Past it, an image not yet
/// remembered is scanned on every read (correct, only slower).
pub(crate) const CAPACITY: usize = 1 << 22;

/// Locks the set is split over, so that decoding threads seldom wait.
const SHARDS: usize = 16;

struct Checked {
    shards: [Mutex<HashSet<u64>>; SHARDS],
    remembered: AtomicUsize,
}

static CHECKED: LazyLock<Checked> = LazyLock::new(|| Checked {
    shards: std::array::from_fn(|_| Mutex::new(HashSet::new())),
    remembered: AtomicUsize::new(0),
});

fn shard(key: u64) -> MutexGuard<'static, HashSet<u64>> {
    // A panic while the lock was held cannot leave a set of hashes half
    // changed in a way that matters: a lost insert only means a rescan.
    CHECKED.shards[(key % SHARDS as u64) as usize]
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Runs `scan` on `bytes` unless the same bytes were found whole before,
/// and remembers them when it passes.
pub(crate) fn once(bytes: &[u8], scan: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    let key = xxhash_rust::xxh3::xxh3_64(bytes);
    if shard(key).contains(&key) {
        return Ok(());
    }
    scan()?;
    if CHECKED.remembered.load(Ordering::Relaxed) < CAPACITY && shard(key).insert(key) {
        CHECKED.remembered.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn bytes_found_whole_are_scanned_once_and_damaged_ones_every_time() {
        let scans = Cell::new(0);
        let whole = b"checked_once whole test bytes".to_vec();
        for _ in 0..3 {
            once(&whole, || {
                scans.set(scans.get() + 1);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(scans.get(), 1);
        let cut = b"checked_once cut test bytes".to_vec();
        for _ in 0..3 {
            let e = once(&cut, || {
                scans.set(scans.get() + 1);
                Err("short".into())
            });
            assert_eq!(e, Err("short".into()));
        }
        assert_eq!(scans.get(), 4);
        let mut changed = whole.clone();
        changed[0] ^= 1;
        once(&changed, || {
            scans.set(scans.get() + 1);
            Ok(())
        })
        .unwrap();
        assert_eq!(scans.get(), 5, "bytes changed in place are scanned again");
    }
}
