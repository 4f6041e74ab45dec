//! A pack read from a store: frames by range request, whole shards fetched
//! (ahead of a stream, or after a first touch) into a bounded on-disk
//! cache evicted least recently used, so a second epoch reads locally.

use crate::client::runtime;
use crate::{Remote, RemoteOptions};
use adapt_pack::{PackError, PackStorage, ShardFile, ShardInfo};
use object_store::ObjectStoreExt;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
    fetches: Arc<tokio::sync::Semaphore>,
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
    Fetching,
    Ready(Arc<File>),
}

impl RemoteStorage {
    /// Connects to the pack at `url`; its cache folder is
    /// `options.cache_dir/remote/<hash of the URL>`.
    pub fn connect(url: &str, options: &RemoteOptions) -> Result<Self, PackError> {
        let remote = Remote::connect(url, options).map_err(|e| PackError::Io {
            path: PathBuf::from(url),
            source: std::io::Error::other(e.to_string()),
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
                fetches: Arc::new(tokio::sync::Semaphore::new(options.prefetch_shards.max(1))),
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

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn io_error(&self, name: &str, e: impl std::fmt::Display) -> std::io::Error {
        std::io::Error::other(format!("{}: {e}", self.remote.url_of(name)))
    }

    /// The cached file of `name`, if complete (and marks it used).
    fn ready(&self, name: &str) -> Option<Arc<File>> {
        let mut st = self.lock();
        st.tick += 1;
        let tick = st.tick;
        let e = st.entries.get_mut(name)?;
        e.last = tick;
        match &e.slot {
            Slot::Ready(f) => Some(Arc::clone(f)),
            _ => None,
        }
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
        if self.reserve(name) {
            let me = Arc::clone(self);
            let name = name.to_owned();
            runtime().spawn(async move {
                let permit = me.fetches.clone().acquire_owned().await;
                let result = me.download(&name).await;
                drop(permit);
                me.finish(&name, result);
            });
        }
    }

    /// Fetches `name` now, unless cached or too large for the budget.
    fn fetch_now(self: &Arc<Self>, name: &str) {
        if self.reserve(name) {
            let result = runtime().block_on(self.download(name));
            self.finish(name, result);
        }
    }

    /// Marks `name` as being fetched and reserves its bytes; false when it
    /// is cached or fetching already, or cannot fit.
    fn reserve(&self, name: &str) -> bool {
        let mut st = self.lock();
        let Some(e) = st.entries.get(name) else {
            return false;
        };
        if !matches!(e.slot, Slot::Absent) || e.bytes > self.budget {
            return false;
        }
        let need = e.bytes;
        while st.used + need > self.budget {
            let victim = st
                .entries
                .iter()
                .filter(|(n, e)| matches!(e.slot, Slot::Ready(_)) && !st.protected.contains(*n))
                .min_by_key(|(_, e)| e.last)
                .map(|(n, _)| n.clone());
            let Some(v) = victim else {
                return false;
            };
            if let Some(e) = st.entries.get_mut(&v) {
                e.slot = Slot::Absent;
                st.used -= e.bytes;
            }
            // Readers holding the file keep reading it; the name goes now.
            let _ = std::fs::remove_file(self.dir.join(&v));
        }
        st.used += need;
        if let Some(e) = st.entries.get_mut(name) {
            e.slot = Slot::Fetching;
        }
        true
    }

    fn finish(&self, name: &str, result: Result<File, String>) {
        let mut st = self.lock();
        let bytes = st.entries.get(name).map_or(0, |e| e.bytes);
        match result {
            Ok(f) => {
                if let Some(e) = st.entries.get_mut(name) {
                    e.slot = Slot::Ready(Arc::new(f));
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
    }

    /// Streams object `name` into the cache, checking its size and xxh3
    /// against the manifest before it is renamed into place.
    async fn download(&self, name: &str) -> Result<File, String> {
        use futures::StreamExt;
        let (bytes, xxh3) = {
            let st = self.lock();
            let e = st.entries.get(name).ok_or("not a shard of this pack")?;
            (e.bytes, e.xxh3.clone())
        };
        let tmp = self.dir.join(format!(
            ".{name}.part-{}-{:x}",
            std::process::id(),
            xxhash_rust::xxh3::xxh3_64(format!("{:?}", std::time::Instant::now()).as_bytes())
        ));
        let result = async {
            let got = self
                .remote
                .store
                .get(&self.remote.key(name))
                .await
                .map_err(|e| e.to_string())?;
            let mut stream = got.into_stream();
            let mut out = File::create(&tmp).map_err(|e| e.to_string())?;
            let mut h = xxhash_rust::xxh3::Xxh3::new();
            let mut n = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| e.to_string())?;
                n += chunk.len() as u64;
                if n > bytes {
                    return Err(format!("larger than the manifest's {bytes} bytes"));
                }
                h.update(&chunk);
                out.write_all(&chunk).map_err(|e| e.to_string())?;
            }
            if n != bytes {
                return Err(format!("{n} bytes, the manifest says {bytes}"));
            }
            if let Some(x) = xxh3
                && format!("{:016x}", h.digest()) != x
            {
                return Err("checksum differs from the manifest".into());
            }
            drop(out);
            let path = self.dir.join(name);
            std::fs::rename(&tmp, &path).map_err(|e| e.to_string())?;
            File::open(&path).map_err(|e| e.to_string())
        }
        .await;
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
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
        if let Some(f) = self.inner.ready(&self.name) {
            return FileExt::read_exact_at(&*f, buf, offset);
        }
        let end = offset + buf.len() as u64;
        let key = self.inner.remote.key(&self.name);
        let got = runtime()
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

    fn read_small(&self, file: &str, limit: u64) -> std::io::Result<Vec<u8>> {
        let got = self
            .inner
            .remote
            .get_optional(file)
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        if got.len() as u64 > limit {
            return Err(std::io::Error::other(format!("larger than {limit} bytes")));
        }
        if file == "manifest.json"
            && let Ok(m) = adapt_pack::Manifest::parse(&self.locate(file), &got)
        {
            self.inner.lock().names = m.shards.iter().map(|s| s.file.clone()).collect();
        }
        Ok(got.to_vec())
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
