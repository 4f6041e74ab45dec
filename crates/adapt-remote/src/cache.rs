//! A pack read from a store: frames by range request, whole shards fetched
//! (ahead of a stream, or after a first touch) into a bounded on-disk
//! cache evicted least recently used, so a second epoch reads locally.

use crate::{Remote, RemoteOptions};
use adapt_pack::{PackError, PackStorage, ShardFile, ShardInfo};
use object_store::ObjectStoreExt;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A pack in an object store, as `adapt-pack` reads it.
pub struct RemoteStorage {
    inner: Arc<Inner>,
}

struct Inner {
    remote: Remote,
    dir: PathBuf,
    budget: u64,
    depth: usize,
    state: Mutex<State>,
    /// Woken when a chunk of a fetch lands or a fetch ends.
    landed: Condvar,
    /// Range requests of whole-shard fetches in flight, all shards together.
    requests: Arc<tokio::sync::Semaphore>,
    /// How long a reader waits for a chunk being fetched before asking for
    /// its bytes itself.
    wait: Duration,
    /// Shards are fetched in pieces of this size, several at once, and read
    /// while the rest arrive.
    chunk: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// Bytes of cached and reserved (being fetched) shards.
    used: u64,
    tick: u64,
    /// Shard names in manifest order (for stream plans).
    names: Vec<String>,
    /// This epoch's stream: position of each shard.
    plan: Vec<String>,
    plan_pos: HashMap<String, usize>,
    last_advanced: Option<String>,
    /// The shard being streamed and the next `depth`: never evicted.
    protected: HashSet<String>,
}

struct Entry {
    bytes: u64,
    xxh3: Option<String>,
    last: u64,
    slot: Slot,
}

enum Slot {
    Absent,
    Fetching(Arc<Partial>),
    Ready(Arc<File>),
}

/// A shard being fetched: its temporary file (full size from the start)
/// and which chunks have landed. Frames are checksummed on every read, so
/// reading a landed chunk before the whole file is checked is safe.
struct Partial {
    file: Arc<File>,
    chunk: u64,
    landed: Vec<AtomicBool>,
    failed: AtomicBool,
}

impl Partial {
    fn covers(&self, offset: u64, len: usize) -> bool {
        let first = (offset / self.chunk) as usize;
        let last = ((offset + len.max(1) as u64 - 1) / self.chunk) as usize;
        (first..=last).all(|c| {
            self.landed
                .get(c)
                .is_some_and(|l| l.load(Ordering::Acquire))
        })
    }
}

impl RemoteStorage {
    /// Connects to the pack at `url`; its cache folder is
    /// `options.cache_dir/remote/<hash of the URL>`.
    pub fn connect(url: &str, options: &RemoteOptions) -> Result<Self, PackError> {
        let remote = Remote::connect(url, options).map_err(|e| PackError::Storage {
            path: PathBuf::from(url),
            source: Box::new(e),
        })?;
        let dir = options.cache_dir.join("remote").join(format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(remote.url_of("").as_bytes())
        ));
        std::fs::create_dir_all(&dir).map_err(|source| PackError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut state = State::default();
        // Shards cached by earlier runs count against the budget, oldest
        // first in line for eviction; temporary files of runs that died
        // more than an hour ago are removed.
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Ok(meta) = e.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                if name.starts_with('.') {
                    let old = meta
                        .modified()
                        .ok()
                        .and_then(|m| m.elapsed().ok())
                        .is_some_and(|a| a.as_secs() > 3600);
                    if old && name.contains(".part-") {
                        let _ = std::fs::remove_file(e.path());
                    }
                    continue;
                }
                let file = File::open(e.path()).ok().map(Arc::new);
                state.used += meta.len();
                state.entries.insert(
                    name,
                    Entry {
                        bytes: meta.len(),
                        xxh3: None,
                        last: 0,
                        slot: file.map_or(Slot::Absent, Slot::Ready),
                    },
                );
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                remote,
                dir,
                budget: options.cache_bytes,
                depth: options.prefetch_shards,
                state: Mutex::new(state),
                landed: Condvar::new(),
                requests: Arc::new(tokio::sync::Semaphore::new(
                    options.parallel_requests.max(1),
                )),
                wait: options.request_timeout,
                chunk: options.chunk_bytes.max(1),
            }),
        })
    }

    /// Bytes of shards held in the cache now.
    pub fn cached_bytes(&self) -> u64 {
        let st = self.inner.lock();
        st.entries
            .values()
            .filter(|e| matches!(e.slot, Slot::Ready(_)))
            .map(|e| e.bytes)
            .sum()
    }

    /// The cache folder.
    pub fn cache_dir(&self) -> &Path {
        &self.inner.dir
    }
}

impl Drop for RemoteStorage {
    /// Lets fetches whose bytes have all arrived finish (checksum and
    /// rename, a fraction of a second), so a run that ends right after its
    /// last read still leaves the shard in the cache for the next run.
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut st = self.inner.lock();
        loop {
            let finishing = st.entries.values().any(|e| match &e.slot {
                Slot::Fetching(p) => {
                    !p.failed.load(Ordering::Acquire)
                        && p.landed.iter().all(|l| l.load(Ordering::Acquire))
                }
                _ => false,
            });
            let now = std::time::Instant::now();
            if !finishing || now >= deadline {
                return;
            }
            st = self
                .inner
                .landed
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn io_error(&self, name: &str, e: impl std::fmt::Display) -> std::io::Error {
        std::io::Error::other(format!("{}: {e}", self.remote.url_of(name)))
    }

    /// A stream is reading `name`: fetch it and the next shards of the plan.
    fn advance(self: &Arc<Self>, name: &str) {
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
    fn want(self: &Arc<Self>, name: &str) {
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
    fn fetch_now(self: &Arc<Self>, name: &str) {
        if let Some(partial) = self.reserve(name) {
            let result = self.remote.rt.block_on(self.download(name, partial));
            self.finish(name, result);
        }
    }

    /// The bytes at `offset` from the cache: a cached shard (marked used),
    /// or a fetch in progress — waiting for the chunk when the shard is
    /// being streamed (it is on its way); `None` when the caller must ask
    /// the store itself.
    fn read_local(&self, name: &str, buf: &mut [u8], offset: u64) -> Option<std::io::Result<()>> {
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
    fn reserve(&self, name: &str) -> Option<Arc<Partial>> {
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

    fn finish(&self, name: &str, result: Result<Arc<File>, String>) {
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

struct RemoteShard {
    inner: Arc<Inner>,
    name: String,
    len: u64,
}

impl ShardFile for RemoteShard {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.advance(&self.name);
        if let Some(r) = self.inner.read_local(&self.name, buf, offset) {
            return r;
        }
        let end = offset + buf.len() as u64;
        let key = self.inner.remote.key(&self.name);
        let got = self
            .inner
            .remote
            .rt
            .block_on(self.inner.remote.store.get_range(&key, offset..end))
            .map_err(|e| self.inner.io_error(&self.name, e))?;
        if got.len() != buf.len() {
            return Err(self.inner.io_error(
                &self.name,
                format!(
                    "asked for {} bytes at {offset}, got {}",
                    buf.len(),
                    got.len()
                ),
            ));
        }
        buf.copy_from_slice(&got);
        // Touched: fetch it whole so later reads (and epochs) are local.
        self.inner.want(&self.name);
        Ok(())
    }

    fn read_whole_soon(&self) {
        self.inner.fetch_now(&self.name);
    }
}

impl PackStorage for RemoteStorage {
    fn locate(&self, file: &str) -> PathBuf {
        PathBuf::from(self.inner.remote.url_of(file))
    }

    fn read_small(&self, file: &str, limit: u64) -> Result<Option<Vec<u8>>, PackError> {
        let got = self
            .inner
            .remote
            .get_optional(file)
            .map_err(|e| PackError::Storage {
                path: self.locate(file),
                source: Box::new(e),
            })?;
        let Some(got) = got else {
            return Ok(None);
        };
        if got.len() as u64 > limit {
            return Err(PackError::TooLarge {
                path: self.locate(file),
                limit,
            });
        }
        if file == "manifest.json"
            && let Ok(m) = adapt_pack::Manifest::parse(&self.locate(file), &got)
        {
            self.inner.lock().names = m.shards.iter().map(|s| s.file.clone()).collect();
        }
        Ok(Some(got.to_vec()))
    }

    fn open_shard(&self, info: &ShardInfo) -> Result<Arc<dyn ShardFile>, PackError> {
        {
            let mut st = self.inner.lock();
            let stale = st
                .entries
                .get(&info.file)
                .is_some_and(|e| e.bytes != info.bytes);
            if stale {
                // A cached file of another size is not this shard.
                if let Some(e) = st.entries.remove(&info.file)
                    && matches!(e.slot, Slot::Ready(_))
                {
                    st.used = st.used.saturating_sub(e.bytes);
                }
                let _ = std::fs::remove_file(self.inner.dir.join(&info.file));
            }
            st.entries
                .entry(info.file.clone())
                .or_insert(Entry {
                    bytes: info.bytes,
                    xxh3: None,
                    last: 0,
                    slot: Slot::Absent,
                })
                .xxh3 = Some(info.xxh3.clone());
        }
        Ok(Arc::new(RemoteShard {
            inner: Arc::clone(&self.inner),
            name: info.file.clone(),
            len: info.bytes,
        }))
    }

    fn stream_order(&self, shards: &[usize]) {
        let first = {
            let mut st = self.inner.lock();
            let plan: Vec<String> = shards
                .iter()
                .filter_map(|&i| st.names.get(i).cloned())
                .collect();
            st.plan_pos = plan
                .iter()
                .enumerate()
                .map(|(p, n)| (n.clone(), p))
                .collect();
            st.plan = plan;
            st.last_advanced = None;
            st.plan.first().cloned()
        };
        if let Some(f) = first {
            self.inner.advance(&f);
        }
    }
}
