//! Random access to a pack through its frame index.

use crate::format::{Body, FrameEntry, Record};
use crate::frame::{open_shard, read_frame, steps_of};
use crate::storage::{LocalStorage, PackStorage, ShardFile};
use crate::{Codec, Manifest, PackError};
use adapt_dataset::{
    Dataset, Encoded, Error, FixedSteps, Layout, Read, Sample, Shape, check_index,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct Shard {
    path: PathBuf,
    file: Arc<dyn ShardFile>,
    codec: Codec,
    frames: Vec<FrameEntry>,
}

type Frame = Arc<Vec<Record>>;

/// A pack read as a map-style dataset, in pack order (the shuffled order it
/// was written in). A sample is found through the frame index and read by
/// decompressing its frame only; a small cache keeps the most recently used
/// decompressed frames, shared by every worker.
pub struct PackDataset {
    dir: PathBuf,
    storage: Arc<dyn PackStorage>,
    manifest: Manifest,
    shards: Vec<Shard>,
    /// `ends[k]`: one past the last pack index held by shard `k`.
    ends: Vec<usize>,
    cache: Mutex<FrameCache>,
    cache_frames: AtomicUsize,
}

impl PackDataset {
    /// Opens the pack in `dir`: reads the manifest and every shard's header
    /// and frame index, and checks that they agree (counts, sizes, pack id,
    /// record kind). Frame checksums are checked as frames are read.
    pub fn open(dir: &Path) -> Result<Self, PackError> {
        Self::open_in(Arc::new(LocalStorage::new(dir)))
    }

    /// Opens the pack held by `storage` (a local folder, or an object store
    /// through `adapt-remote`).
    pub fn open_in(storage: Arc<dyn PackStorage>) -> Result<Self, PackError> {
        let manifest = Manifest::load_from(&*storage)?;
        let dir = storage.locate("");
        let mut shards = Vec::new();
        let mut ends = Vec::new();
        let mut total = 0;
        for info in &manifest.shards {
            let path = storage.locate(&info.file);
            let file = storage.open_shard(info)?;
            let (header, frames, len) = open_shard(&path, &*file)?;
            let mismatch = |what: String| PackError::Manifest {
                path: storage.locate(crate::manifest::MANIFEST),
                message: format!("{} {what}", info.file),
            };
            if len != info.bytes {
                return Err(mismatch(format!(
                    "is {len} bytes, the manifest says {}",
                    info.bytes
                )));
            }
            if header.records as usize != info.samples {
                return Err(mismatch(format!(
                    "holds {} samples, the manifest says {}",
                    header.records, info.samples
                )));
            }
            if format!("{:016x}", header.pack_id) != manifest.pack_id
                || header.store != manifest.store
                || header.codec != manifest.codec
            {
                return Err(mismatch("belongs to another pack".into()));
            }
            total += info.samples;
            ends.push(total);
            shards.push(Shard {
                path,
                file,
                codec: header.codec,
                frames,
            });
        }
        storage.shards_opened();
        Ok(Self {
            dir,
            storage,
            manifest,
            shards,
            ends,
            cache: Mutex::new(FrameCache::default()),
            cache_frames: AtomicUsize::new(16),
        })
    }

    /// Keeps up to `frames` decompressed frames (at least 1; 16 by default).
    /// Random access needs about two per worker; streaming needs the shuffle
    /// buffer and the batches in flight covered ([`Self::frames_for`]).
    pub fn set_cache_frames(&self, frames: usize) {
        self.cache_frames.store(frames.max(1), Ordering::Relaxed);
    }

    /// Frames that hold `samples` consecutive records, on average, plus a
    /// margin of 4.
    pub fn frames_for(&self, samples: usize) -> usize {
        let frames: usize = self.shards.iter().map(|s| s.frames.len()).sum();
        let per_frame = self.len() as f64 / frames.max(1) as f64;
        (samples as f64 / per_frame).ceil() as usize + 4
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The pack folder (or its URL).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Tells the storage the order in which shards will be streamed (a
    /// remote store fetches them ahead of the reader).
    pub fn stream_order(&self, shards: &[usize]) {
        self.storage.stream_order(shards);
    }

    /// Pack index ranges of each shard, in order.
    pub fn shard_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let r = start..e;
                start = e;
                r
            })
            .collect()
    }

    fn locate(&self, index: usize) -> Result<(usize, usize, usize), Error> {
        check_index(index, self.len())?;
        let s = self.ends.partition_point(|&e| e <= index);
        let local = index - if s == 0 { 0 } else { self.ends[s - 1] };
        let f = self.shards[s]
            .frames
            .partition_point(|fe| (fe.first + fe.count) as usize <= local);
        Ok((s, f, local - self.shards[s].frames[f].first as usize))
    }

    fn frame(&self, s: usize, f: usize) -> Result<Frame, PackError> {
        let key = (s, f);
        if let Some(frame) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map
            .get(&key)
        {
            return Ok(Arc::clone(frame));
        }
        // Decompress outside the lock: other workers keep reading.
        let shard = &self.shards[s];
        let frame = Arc::new(read_frame(
            &shard.path,
            &*shard.file,
            shard.codec,
            f,
            &shard.frames[f],
        )?);
        let capacity = self.cache_frames.load(Ordering::Relaxed);
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(
            key,
            Arc::clone(&frame),
            capacity,
        );
        Ok(frame)
    }

    /// Runs `f` on record `index`; `f` gets the record and a way to name it
    /// (shard, frame, record) for errors, built only when asked for.
    fn with_record<T>(
        &self,
        index: usize,
        f: impl FnOnce(&Record, &dyn Fn() -> String) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let (s, fr, r) = self.locate(index)?;
        let frame = self.frame(s, fr)?;
        let name = || format!("{}#frame={fr},record={r}", self.shards[s].path.display());
        f(&frame[r], &name)
    }

    /// The sample's index in the source dataset.
    pub fn origin(&self, index: usize) -> Result<usize, Error> {
        self.with_record(index, |rec, _| Ok(rec.origin as usize))
    }
}

impl Dataset for PackDataset {
    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        self.with_record(index, |rec, name| match &rec.body {
            Body::Raw {
                height,
                width,
                channels,
                planar,
                pixels,
            } => {
                out.pixels.clear();
                out.pixels.extend_from_slice(pixels);
                out.shape = Shape::new(*height, *width, *channels);
                out.layout = if *planar {
                    Layout::Planar
                } else {
                    Layout::Interleaved
                };
                out.label = rec.label;
                out.validate()?;
                Ok(Read::Filled)
            }
            Body::Encoded {
                bytes,
                crop,
                expect,
            } => {
                // Decoded from the cached frame's bytes, without a copy.
                let steps = steps_of(crop, expect);
                adapt_formats::decode_encoded_into(Path::new(&name()), bytes, steps, out)?;
                out.label = rec.label;
                Ok(Read::Filled)
            }
        })
    }
    fn draw_key(&self, index: usize) -> u64 {
        // The source's index: a pack augments as the loose files it was
        // made from.
        self.origin(index).map_or(index as u64, |o| o as u64)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        (self.manifest.store == crate::Payload::Encoded)
            .then(|| self.with_record(index, |rec, _| Ok(encoded_of(rec))))
    }
    fn source(&self, index: usize) -> String {
        self.with_record(index, |rec, name| {
            Ok(format!("{} (origin {})", name(), rec.origin))
        })
        .unwrap_or_else(|e| e.to_string())
    }
    fn sample_shape(&self) -> Option<Shape> {
        self.manifest.shape.map(|[h, w, c]| Shape::new(h, w, c))
    }
    fn num_classes(&self) -> Option<usize> {
        self.manifest.classes
    }
}

/// Decompressed frames, evicted first in, first out: O(1) per access, and
/// for the streaming order (each frame used for a while, then never again
/// this epoch) as good as least-recently-used.
#[derive(Default)]
struct FrameCache {
    map: std::collections::HashMap<(usize, usize), Frame>,
    order: std::collections::VecDeque<(usize, usize)>,
}

impl FrameCache {
    fn insert(&mut self, key: (usize, usize), frame: Frame, capacity: usize) {
        if self.map.insert(key, frame).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

fn encoded_of(rec: &Record) -> Encoded {
    match &rec.body {
        Body::Encoded {
            bytes,
            crop,
            expect,
        } => Encoded {
            bytes: bytes.clone(),
            label: rec.label,
            steps: steps_of(crop, expect),
        },
        Body::Raw { .. } => Encoded {
            bytes: Vec::new(),
            label: rec.label,
            steps: FixedSteps::default(),
        },
    }
}
