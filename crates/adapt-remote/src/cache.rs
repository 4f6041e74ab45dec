//! The shard cache of a remote pack: frames by range request, whole shards
//! fetched (ahead of a stream, or after a first sample read) in chunks into
//! an on-disk cache folder, so a second epoch reads locally. The folder's
//! budget holds for every process using it ([`crate::folder`]), least
//! recently used shards evicted first; a shard another process fetched is
//! taken from the folder, checked once. [`crate::RemoteStorage`] is its
//! face to `adapt-pack`.

use crate::{Remote, folder};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
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
    /// Set once the pack's shards are open: from then on a read fetches its
    /// shard whole (the reads of opening, three per shard, do not).
    pub(crate) opened: AtomicBool,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) entries: HashMap<String, Entry>,
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
    pub(crate) slot: Slot,
    /// Whether the cached file is whole (its xxh3 the manifest's): known
    /// for a file this process fetched, found on the first read of one it
    /// took from the folder.
    pub(crate) whole: Arc<OnceLock<bool>>,
    /// When this process last marked the file used (its modification
    /// time).
    pub(crate) touched: Option<std::time::Instant>,
}

/// A cached shard's modification time is its last use, set at most this
/// often by one process.
const TOUCH_EVERY: Duration = Duration::from_secs(10);

impl Entry {
    /// An entry for a shard of `bytes`, not cached.
    pub(crate) fn absent(bytes: u64) -> Self {
        Self {
            bytes,
            xxh3: None,
            slot: Slot::Absent,
            whole: Arc::new(OnceLock::new()),
            touched: None,
        }
    }
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
    /// Its part file's path in the folder.
    pub(crate) tmp: PathBuf,
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

    /// The bytes at `offset` from the cache: a cached shard (marked used,
    /// checked whole on its first read),
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
        let deadline = std::time::Instant::now() + self.wait;
        loop {
            let partial = match st.entries.get(name).map(|e| &e.slot) {
                Some(Slot::Fetching(p)) => Arc::clone(p),
                Some(Slot::Ready(f)) => {
                    let f = Arc::clone(f);
                    return self.read_cached(st, name, f, buf, offset);
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

    /// Reads a cached shard's file `f` (its entry locked in `st`): checked
    /// whole on its first read here; every [`TOUCH_EVERY`] marked used for
    /// every process's eviction order, and given up when another process
    /// evicted it (its name gone or another file's: `None`, the caller asks
    /// the store, and the shard is fetched or taken from the folder again).
    fn read_cached(
        &self,
        mut st: std::sync::MutexGuard<'_, State>,
        name: &str,
        f: Arc<File>,
        buf: &mut [u8],
        offset: u64,
    ) -> Option<std::io::Result<()>> {
        let e = st.entries.get_mut(name)?;
        let (bytes, xxh3, whole) = (e.bytes, e.xxh3.clone(), Arc::clone(&e.whole));
        let touch = e.touched.is_none_or(|t| t.elapsed() > TOUCH_EVERY);
        if touch {
            if !still_named(&f, &self.dir.join(name)) {
                e.slot = Slot::Absent;
                return None;
            }
            e.touched = Some(std::time::Instant::now());
        }
        drop(st);
        if touch {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        let ok = *whole.get_or_init(|| check_whole(&f, bytes, xxh3.as_deref()).is_ok());
        if !ok {
            self.drop_damaged(name, &whole);
            return None;
        }
        Some(FileExt::read_exact_at(&*f, buf, offset))
    }

    /// Marks `name` as being fetched, reserves its bytes in the folder
    /// (evicting the least recently used shards of any process to make
    /// room) and creates its part file; `None` when it is cached, fetching
    /// here or in another process, or cannot fit. A shard another process
    /// finished is taken from the folder instead.
    pub(crate) fn reserve(&self, name: &str) -> Option<Arc<Partial>> {
        let mut st = self.lock();
        let e = st.entries.get(name)?;
        if !matches!(e.slot, Slot::Absent) || e.bytes > self.budget {
            return None;
        }
        let need = e.bytes;
        let _held = folder::lock(&self.dir).ok()?;
        let mut listing = folder::scan(&self.dir);
        forget_evicted(&mut st, &listing);
        if self.adopt(&mut st, name, &listing) || listing.fetching.contains(name) {
            return None;
        }
        listing.shards.sort_by_key(|c| c.modified);
        let mut used = listing.used();
        let mut victims = listing
            .shards
            .iter()
            .filter(|c| c.name != name && !st.protected.contains(&c.name))
            .map(|c| folder::Cached {
                name: c.name.clone(),
                ..*c
            })
            .collect::<Vec<_>>()
            .into_iter();
        while used + need > self.budget {
            let v = victims.next()?;
            // Readers holding the file keep reading it; the name goes now.
            let _ = std::fs::remove_file(self.dir.join(&v.name));
            used -= v.bytes;
            if let Some(e) = st.entries.get_mut(&v.name) {
                e.slot = Slot::Absent;
            }
        }
        let tmp = self.dir.join(folder::part_name(name));
        let file = File::options()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&tmp)
            .and_then(|f| f.set_len(need).map(|()| f))
            .ok()?;
        let partial = Arc::new(Partial {
            file: Arc::new(file),
            tmp,
            chunk: self.chunk,
            landed: (0..need.div_ceil(self.chunk))
                .map(|_| AtomicBool::new(false))
                .collect(),
            failed: AtomicBool::new(false),
        });
        if let Some(e) = st.entries.get_mut(name) {
            e.slot = Slot::Fetching(Arc::clone(&partial));
        }
        Some(partial)
    }

    /// Takes `name` from the folder when a process has put it there whole
    /// (the size the manifest says); it is checked on its first read.
    fn adopt(&self, st: &mut State, name: &str, listing: &folder::Listing) -> bool {
        let Some(e) = st.entries.get_mut(name) else {
            return false;
        };
        if listing.get(name).is_none_or(|c| c.bytes != e.bytes) {
            return false;
        }
        let Ok(f) = File::open(self.dir.join(name)) else {
            return false;
        };
        e.slot = Slot::Ready(Arc::new(f));
        e.whole = Arc::new(OnceLock::new());
        e.touched = None;
        true
    }

    /// A cached file found damaged (`whole` is its check): removed, so the
    /// next read asks the store and fetches the shard again.
    fn drop_damaged(&self, name: &str, whole: &Arc<OnceLock<bool>>) {
        let mut st = self.lock();
        if let Some(e) = st.entries.get_mut(name)
            && Arc::ptr_eq(&e.whole, whole)
        {
            e.slot = Slot::Absent;
            e.whole = Arc::new(OnceLock::new());
            if let Ok(_held) = folder::lock(&self.dir) {
                let _ = std::fs::remove_file(self.dir.join(name));
            }
        }
    }

    /// Ends the fetch of `name`: its file cached, or (failed) absent. A
    /// shard evicted between its rename into the folder and this call (a
    /// `reserve` of another shard took it as a victim, its slot made
    /// absent) stays absent: its file is gone from the folder, so it no
    /// longer counts as cached.
    pub(crate) fn finish(&self, name: &str, result: Result<Arc<File>, String>) {
        let mut st = self.lock();
        if let Some(e) = st.entries.get_mut(name)
            && matches!(e.slot, Slot::Fetching(_))
        {
            match result {
                Ok(f) => {
                    e.slot = Slot::Ready(f);
                    e.whole = Arc::new(OnceLock::from(true));
                    e.touched = None;
                }
                // Reads fall back to range requests, which report the error
                // with the shard's name if the store is really gone.
                Err(_) => e.slot = Slot::Absent,
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
        let tmp = partial.tmp.clone();
        let mut tasks = tokio::task::JoinSet::new();
        for (c, _) in partial.landed.iter().enumerate() {
            let start = c as u64 * self.chunk;
            let end = (start + self.chunk).min(bytes);
            let remote = self.remote.clone();
            let name = name.to_owned();
            let partial = Arc::clone(&partial);
            let requests = Arc::clone(&self.requests);
            tasks.spawn(async move {
                // In chunk order: the semaphore is fair, so a stream's next
                // bytes are asked for first.
                let _permit = requests.acquire_owned().await.map_err(|e| e.to_string())?;
                if partial.failed.load(Ordering::Acquire) {
                    return Err("an earlier chunk failed".to_string());
                }
                let got = remote.get_exact(&name, start..end).await?;
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
            let _held = folder::lock(&self.dir).map_err(|e| e.to_string())?;
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

/// Whether `path` still names the open file `f` (not removed, nor
/// replaced by another file).
fn still_named(f: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Our cached shards another process evicted (gone from the folder): no
/// longer ours to read, so their space is freed once reads in flight end.
fn forget_evicted(st: &mut State, listing: &folder::Listing) {
    for (name, e) in st.entries.iter_mut() {
        if matches!(e.slot, Slot::Ready(_)) && listing.get(name).is_none() {
            e.slot = Slot::Absent;
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
