//! The shard cache of a remote pack: frames by range request, whole shards
//! fetched (ahead of a stream, or after a first touch) in chunks into a
//! bounded on-disk cache evicted least recently used, so a second epoch
//! reads locally. [`crate::RemoteStorage`] is its face to `adapt-pack`.

use crate::Remote;
use object_store::ObjectStoreExt;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The cache of one connected pack, shared by its storage and its shard
/// files.
pub(crate) struct Inner {
    pub(crate) remote: Remote,
    pub(crate) dir: PathBuf,
    pub(crate) budget: u64,
    pub(crate) depth: usize,
    pub(crate) state: Mutex<State>,
    /// Woken when a chunk of a fetch lands or a fetch ends.
    pub(crate) landed: Condvar,
    /// Range requests of whole-shard fetches in flight, all shards together.
    pub(crate) requests: Arc<tokio::sync::Semaphore>,
    /// How long a reader waits for a chunk being fetched before asking for
    /// its bytes itself.
    pub(crate) wait: Duration,
    /// Shards are fetched in pieces of this size, several at once, and read
    /// while the rest arrive.
    pub(crate) chunk: u64,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) entries: HashMap<String, Entry>,
    /// Bytes of cached and reserved (being fetched) shards.
    pub(crate) used: u64,
    pub(crate) tick: u64,
    /// Shard names in manifest order (for stream plans).
    pub(crate) names: Vec<String>,
    /// This epoch's stream: position of each shard.
    pub(crate) plan: Vec<String>,
    pub(crate) plan_pos: HashMap<String, usize>,
    pub(crate) last_advanced: Option<String>,
    /// The shard being streamed and the next `depth`: never evicted.
    pub(crate) protected: HashSet<String>,
}

pub(crate) struct Entry {
    pub(crate) bytes: u64,
    pub(crate) xxh3: Option<String>,
    pub(crate) last: u64,
    pub(crate) slot: Slot,
}

pub(crate) enum Slot {
    Absent,
    Fetching(Arc<Partial>),
    Ready(Arc<File>),
}

/// A shard being fetched: its temporary file (full size from the start)
/// and which chunks have landed. Frames are checksummed on every read, so
/// reading a landed chunk before the whole file is checked is safe.
pub(crate) struct Partial {
    pub(crate) file: Arc<File>,
    pub(crate) chunk: u64,
    pub(crate) landed: Vec<AtomicBool>,
    pub(crate) failed: AtomicBool,
}

impl Partial {
    pub(crate) fn covers(&self, offset: u64, len: usize) -> bool {
        let first = (offset / self.chunk) as usize;
        let last = ((offset + len.max(1) as u64 - 1) / self.chunk) as usize;
        (first..=last).all(|c| {
            self.landed
                .get(c)
                .is_some_and(|l| l.load(Ordering::Acquire))
        })
    }
}

impl Inner {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn io_error(&self, name: &str, e: impl std::fmt::Display) -> std::io::Error {
        std::io::Error::other(format!("{}: {e}", self.remote.url_of(name)))
    }

    /// A stream is reading `name`: fetch it and the next shards of the plan.
    pub(crate) fn advance(self: &Arc<Self>, name: &str) {
        let ahead: Vec<String> = {
            let mut st = self.lock();
            if st.last_advanced.as_deref() == Some(name) {
                return;
            }
            let Some(&p) = st.plan_pos.get(name) else {
                return;
            };
            st.last_advanced = Some(name.to_owned());
            let end = (p + 1 + self.depth).min(st.plan.len());
            let ahead = st.plan[p..end].to_vec();
            st.protected = ahead.iter().cloned().collect();
            ahead
        };
        for n in ahead {
            self.want(&n);
        }
    }

    /// Starts fetching `name` whole in the background if the budget allows
    /// (evicting least recently used shards to make room).
    pub(crate) fn want(self: &Arc<Self>, name: &str) {
        if let Some(partial) = self.reserve(name) {
            let me = Arc::clone(self);
            let name = name.to_owned();
            self.remote.rt.spawn(async move {
                let result = me.download(&name, partial).await;
                me.finish(&name, result);
            });
        }
    }

    /// Fetches `name` now, unless cached or too large for the budget.
    pub(crate) fn fetch_now(self: &Arc<Self>, name: &str) {
        if let Some(partial) = self.reserve(name) {
            let result = self.remote.rt.block_on(self.download(name, partial));
            self.finish(name, result);
        }
    }

    /// The bytes at `offset` from the cache: a cached shard (marked used),
    /// or a fetch in progress — waiting for the chunk when the shard is
    /// being streamed (it is on its way); `None` when the caller must ask
    /// the store itself.
    pub(crate) fn read_local(
        &self,
        name: &str,
        buf: &mut [u8],
        offset: u64,
    ) -> Option<std::io::Result<()>> {
        let mut st = self.lock();
        st.tick += 1;
        let tick = st.tick;
        if let Some(e) = st.entries.get_mut(name) {
            e.last = tick;
        }
        let deadline = std::time::Instant::now() + self.wait;
        loop {
            let partial = match st.entries.get(name).map(|e| &e.slot) {
                Some(Slot::Fetching(p)) => Arc::clone(p),
                Some(Slot::Ready(f)) => {
                    let f = Arc::clone(f);
                    drop(st);
                    return Some(FileExt::read_exact_at(&*f, buf, offset));
                }
                _ => return None,
            };
            if partial.covers(offset, buf.len()) {
                drop(st);
                return Some(FileExt::read_exact_at(&*partial.file, buf, offset));
            }
            let now = std::time::Instant::now();
            if partial.failed.load(Ordering::Acquire)
                || !st.protected.contains(name)
                || now >= deadline
            {
                return None;
            }
            st = self
                .landed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Marks `name` as being fetched, reserves its bytes and creates its
    /// temporary file; `None` when it is cached or fetching already, or
    /// cannot fit.
    pub(crate) fn reserve(&self, name: &str) -> Option<Arc<Partial>> {
        let mut st = self.lock();
        let e = st.entries.get(name)?;
        if !matches!(e.slot, Slot::Absent) || e.bytes > self.budget {
            return None;
        }
        let need = e.bytes;
        while st.used + need > self.budget {
            let victim = st
                .entries
                .iter()
                .filter(|(n, e)| matches!(e.slot, Slot::Ready(_)) && !st.protected.contains(*n))
                .min_by_key(|(_, e)| e.last)
                .map(|(n, _)| n.clone());
            let v = victim?;
            if let Some(e) = st.entries.get_mut(&v) {
                e.slot = Slot::Absent;
                st.used -= e.bytes;
            }
            // Readers holding the file keep reading it; the name goes now.
            let _ = std::fs::remove_file(self.dir.join(&v));
        }
        let tmp = self
            .dir
            .join(format!(".{name}.part-{}", std::process::id()));
        let file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&tmp)
            .and_then(|f| f.set_len(need).map(|()| f))
            .ok()?;
        let partial = Arc::new(Partial {
            file: Arc::new(file),
            chunk: self.chunk,
            landed: (0..need.div_ceil(self.chunk))
                .map(|_| AtomicBool::new(false))
                .collect(),
            failed: AtomicBool::new(false),
        });
        st.used += need;
        if let Some(e) = st.entries.get_mut(name) {
            e.slot = Slot::Fetching(Arc::clone(&partial));
        }
        Some(partial)
    }

    pub(crate) fn finish(&self, name: &str, result: Result<Arc<File>, String>) {
        let mut st = self.lock();
        let bytes = st.entries.get(name).map_or(0, |e| e.bytes);
        match result {
            Ok(f) => {
                if let Some(e) = st.entries.get_mut(name) {
                    e.slot = Slot::Ready(f);
                }
            }
            Err(_) => {
                // Reads fall back to range requests, which report the error
                // with the shard's name if the store is really gone.
                st.used = st.used.saturating_sub(bytes);
                if let Some(e) = st.entries.get_mut(name) {
                    e.slot = Slot::Absent;
                }
            }
        }
        drop(st);
        self.landed.notify_all();
    }

    /// Fetches object `name` into its temporary file in chunks, several
    /// range requests at once (each chunk readable as soon as it lands),
    /// checks the whole file's size and xxh3 against the manifest, then
    /// renames it into place.
    async fn download(&self, name: &str, partial: Arc<Partial>) -> Result<Arc<File>, String> {
        let (bytes, xxh3) = {
            let st = self.lock();
            let e = st.entries.get(name).ok_or("not a shard of this pack")?;
            (e.bytes, e.xxh3.clone())
        };
        let tmp = self
            .dir
            .join(format!(".{name}.part-{}", std::process::id()));
        let key = self.remote.key(name);
        let mut tasks = tokio::task::JoinSet::new();
        for (c, _) in partial.landed.iter().enumerate() {
            let start = c as u64 * self.chunk;
            let end = (start + self.chunk).min(bytes);
            let store = Arc::clone(&self.remote.store);
            let key = key.clone();
            let partial = Arc::clone(&partial);
            let requests = Arc::clone(&self.requests);
            tasks.spawn(async move {
                // In chunk order: the semaphore is fair, so a stream's next
                // bytes are asked for first.
                let _permit = requests.acquire_owned().await.map_err(|e| e.to_string())?;
                if partial.failed.load(Ordering::Acquire) {
                    return Err("an earlier chunk failed".to_string());
                }
                let got = store
                    .get_range(&key, start..end)
                    .await
                    .map_err(|e| e.to_string())?;
                if got.len() as u64 != end - start {
                    return Err(format!(
                        "chunk at {start}: {} bytes, expected {}",
                        got.len(),
                        end - start
                    ));
                }
                partial
                    .file
                    .write_all_at(&got, start)
                    .map_err(|e| e.to_string())?;
                partial.landed[c].store(true, Ordering::Release);
                Ok::<(), String>(())
            });
        }
        let mut result = Ok(());
        while let Some(r) = tasks.join_next().await {
            let r = r.map_err(|e| e.to_string()).and_then(|r| r);
            if let Err(e) = r {
                partial.failed.store(true, Ordering::Release);
                if result.is_ok() {
                    result = Err(e);
                }
            }
            // Taken and released so a reader between its check and its
            // wait (it holds the lock) cannot miss this wake-up.
            drop(self.lock());
            self.landed.notify_all();
        }
        let checked = result.and_then(|()| {
            check_whole(&partial.file, bytes, xxh3.as_deref())?;
            std::fs::rename(&tmp, self.dir.join(name)).map_err(|e| e.to_string())
        });
        match checked {
            Ok(()) => Ok(Arc::clone(&partial.file)),
            Err(e) => {
                partial.failed.store(true, Ordering::Release);
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// Checks a downloaded file's `bytes` against the manifest's xxh3 (when it
/// records one), reading it back in 8 MiB pieces.
fn check_whole(file: &File, bytes: u64, xxh3: Option<&str>) -> Result<(), String> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; (bytes.min(8 << 20)) as usize];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(buf.len() as u64) as usize;
        FileExt::read_exact_at(file, &mut buf[..n], at).map_err(|e| e.to_string())?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    match xxh3 {
        Some(x) if format!("{:016x}", h.digest()) != x => {
            Err("checksum differs from the manifest".into())
        }
        _ => Ok(()),
    }
}
