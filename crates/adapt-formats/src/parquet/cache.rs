//! The decoded image columns of the row groups a Parquet dataset read last,
//! bounded in bytes (least recently used dropped first). A row group is
//! decoded once however many threads want it at the same moment: the first
//! decodes, the others wait for it.

use parquet::data_type::ByteArray;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One row group's image values, row by row (`None`: a null image).
pub(crate) struct Images {
    /// Each row's encoded image, sharing the decoded page buffers.
    pub(crate) rows: Vec<Option<ByteArray>>,
    /// Where a row without embedded bytes has its image (the `path`
    /// field of a `{bytes, path}` struct), for those rows; empty when
    /// every row has its bytes.
    pub(crate) paths: Vec<Option<ByteArray>>,
    /// What the values hold, counted against the budget.
    pub(crate) bytes: usize,
}

type Cell = Arc<Mutex<Option<Arc<Images>>>>;

/// One cached (or being decoded) row group.
struct Slot {
    cell: Cell,
    used: u64,
    bytes: usize,
}

#[derive(Default)]
struct Slots {
    slots: HashMap<usize, Slot>,
    clock: u64,
    bytes: usize,
}

/// Decoded row groups by number, within a byte budget.
pub(crate) struct RowGroupCache {
    budget: usize,
    inner: Mutex<Slots>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent state behind (every
    // update is a single assignment), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RowGroupCache {
    /// An empty cache keeping at most `budget` bytes of values (always at
    /// least the row group being read).
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::new(Slots::default()),
        }
    }

    /// Row group `group`'s images: cached, or decoded by `decode` (once,
    /// while other threads wanting the same group wait).
    pub(crate) fn get<E>(
        &self,
        group: usize,
        decode: impl FnOnce() -> Result<Images, E>,
    ) -> Result<Arc<Images>, E> {
        let cell = {
            let mut inner = lock(&self.inner);
            inner.clock += 1;
            let now = inner.clock;
            let slot = inner.slots.entry(group).or_insert_with(|| Slot {
                cell: Cell::default(),
                used: 0,
                bytes: 0,
            });
            slot.used = now;
            Arc::clone(&slot.cell)
        };
        let mut filled = lock(&cell);
        if let Some(images) = &*filled {
            return Ok(Arc::clone(images));
        }
        let images = match decode() {
            Ok(images) => Arc::new(images),
            Err(e) => {
                drop(filled);
                self.forget(group, &cell);
                return Err(e);
            }
        };
        *filled = Some(Arc::clone(&images));
        drop(filled);
        self.account(group, &cell, images.bytes);
        Ok(images)
    }

    /// Counts a filled slot's bytes and drops the least recently used
    /// others until the budget holds.
    fn account(&self, group: usize, cell: &Cell, bytes: usize) {
        let mut inner = lock(&self.inner);
        match inner.slots.get_mut(&group) {
            Some(slot) if Arc::ptr_eq(&slot.cell, cell) => slot.bytes = bytes,
            _ => return,
        }
        inner.bytes += bytes;
        while inner.bytes > self.budget {
            let oldest = inner
                .slots
                .iter()
                .filter(|(g, s)| **g != group && s.bytes > 0)
                .min_by_key(|(_, s)| s.used)
                .map(|(g, _)| *g);
            let Some(oldest) = oldest else { break };
            if let Some(slot) = inner.slots.remove(&oldest) {
                inner.bytes -= slot.bytes;
            }
        }
    }

    /// Drops a slot whose decode failed (the next reader tries again).
    fn forget(&self, group: usize, cell: &Cell) {
        let mut inner = lock(&self.inner);
        if inner
            .slots
            .get(&group)
            .is_some_and(|s| Arc::ptr_eq(&s.cell, cell) && s.bytes == 0)
        {
            inner.slots.remove(&group);
        }
    }

    /// Bytes of values held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        lock(&self.inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn images(n: usize) -> Images {
        Images {
            rows: vec![Some(ByteArray::from(vec![7; n]))],
            paths: Vec::new(),
            bytes: n,
        }
    }

    #[test]
    fn keeps_the_budget_dropping_the_least_recently_used() {
        let cache = RowGroupCache::new(250);
        let decodes = AtomicUsize::new(0);
        let get = |g| {
            cache
                .get(g, || {
                    decodes.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, ()>(images(100))
                })
                .expect("decodes")
        };
        get(0);
        get(1);
        get(0); // 0 is now the most recent
        get(2); // over budget: 1 goes
        assert_eq!(cache.held(), 200);
        assert_eq!(decodes.load(Ordering::Relaxed), 3);
        get(0);
        assert_eq!(decodes.load(Ordering::Relaxed), 3, "0 was kept");
        get(1);
        assert_eq!(decodes.load(Ordering::Relaxed), 4, "1 was dropped");
        // A group larger than the budget is still returned.
        let big = cache.get(9, || Ok::<_, ()>(images(1000))).expect("big");
        assert_eq!(big.bytes, 1000);
    }

    #[test]
    fn a_failed_decode_is_tried_again_and_threads_decode_once() {
        let cache = RowGroupCache::new(1 << 20);
        assert!(cache.get(0, || Err::<Images, _>("bad")).is_err());
        let decodes = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    cache
                        .get(0, || {
                            decodes.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok::<_, ()>(images(10))
                        })
                        .expect("decodes")
                });
            }
        });
        assert_eq!(decodes.load(Ordering::Relaxed), 1);
    }
}
