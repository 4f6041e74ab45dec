//! The remote pack as `adapt-pack` reads it: `RemoteStorage` (connect,
//! the cache folder's accounting at start, `PackStorage`) and its shard
//! files, whose reads go through the cache ([`crate::cache`]).

use crate::cache::{Entry, Inner, Slot, State};
use crate::{Remote, RemoteOptions, folder};
use adapt_pack::{PackError, PackStorage, ShardFile, ShardInfo};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A pack in an object store, as `adapt-pack` reads it.
pub struct RemoteStorage {
    inner: Arc<Inner>,
}
impl RemoteStorage {
    /// Connects to the pack at `url`; its cache folder is
    /// `options.cache_dir/remote/<hash of the URL>`.
    pub fn connect(url: &str, options: &RemoteOptions) -> Result<Self, PackError> {
        let remote = Remote::connect(url, options).map_err(|e| PackError::Storage {
            path: PathBuf::from(url),
            source: Box::new(e),
        })?;
        crate::check_cache_dir(&options.cache_dir).map_err(|e| PackError::Storage {
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
        if options.cache_bytes > 0 {
            folder::probe(&dir).map_err(|source| PackError::Io {
                path: dir.clone(),
                source: std::io::Error::new(
                    source.kind(),
                    format!(
                        "the cache folder takes no shards ({source}); give another \
                         cache folder (ADAPT_CACHE_DIR), or a cache of 0 bytes \
                         (ADAPT_CACHE_BYTES=0) to read by range requests only"
                    ),
                ),
            })?;
        }
        // Shards cached by this and other processes count against the
        // budget; part files of processes that died are removed.
        let mut state = State::default();
        let listing = folder::lock(&dir)
            .map(|_held| folder::scan(&dir))
            .unwrap_or_default();
        for c in listing.shards {
            let mut e = Entry::absent(c.bytes);
            if let Ok(f) = File::open(dir.join(&c.name)) {
                e.slot = Slot::Ready(Arc::new(f));
            }
            state.entries.insert(c.name, e);
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
                opened: AtomicBool::new(false),
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
        let remote = &self.inner.remote;
        let got = remote
            .rt
            .block_on(remote.get_exact(&self.name, offset..end))
            .map_err(std::io::Error::other)?;
        buf.copy_from_slice(&got);
        // A sample read: fetch it whole so later reads (and epochs) are
        // local.
        if self.inner.opened.load(Ordering::Acquire) {
            self.inner.want(&self.name);
        }
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
            .get_optional(file, limit.saturating_add(1))
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
                st.entries.remove(&info.file);
                if let Ok(_held) = folder::lock(&self.inner.dir) {
                    let _ = std::fs::remove_file(self.inner.dir.join(&info.file));
                }
            }
            st.entries
                .entry(info.file.clone())
                .or_insert_with(|| Entry::absent(info.bytes))
                .xxh3 = Some(info.xxh3.clone());
        }
        Ok(Arc::new(RemoteShard {
            inner: Arc::clone(&self.inner),
            name: info.file.clone(),
            len: info.bytes,
        }))
    }

    fn shards_opened(&self) {
        self.inner.opened.store(true, Ordering::Release);
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
