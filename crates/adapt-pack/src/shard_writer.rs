//! Writing one shard: records built and compressed in parallel (rayon),
//! appended in order by one writer thread, the frame index and footer last,
//! through a temporary name that is synced and renamed.

use crate::format::{
    self, Body, FOOTER_LEN, FrameEntry, Header, Record, shard_name, written_by_us, xxh3,
};
use crate::{Codec, PackError, PackOptions, Payload, ShardInfo};
use adapt_dataset::{Dataset, Encoded, Layout};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

/// Counts and hashes every byte written.
struct Hashing<W> {
    inner: W,
    hasher: xxhash_rust::xxh3::Xxh3,
    written: u64,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(bytes)?;
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// Source sample `origin` as a pack record (its pixels or its encoded bytes).
pub(crate) fn record(ds: &dyn Dataset, origin: usize, store: Payload) -> Result<Record, PackError> {
    let src = |source| PackError::Source {
        index: origin,
        source,
    };
    match store {
        Payload::Raw => {
            let s = ds.get(origin).map_err(src)?;
            let body = Body::Raw {
                height: s.shape.height,
                width: s.shape.width,
                channels: s.shape.channels,
                planar: s.layout == Layout::Planar,
                pixels: s.pixels,
            };
            Ok(Record {
                origin: origin as u64,
                label: s.label,
                body,
            })
        }
        Payload::Encoded => {
            let e = ds
                .encoded(origin)
                .ok_or(PackError::NotEncoded { index: origin })?
                .map_err(src)?;
            check_decodes(ds, origin, &e)?;
            let body = Body::Encoded {
                bytes: e.bytes,
                crop: e.steps.crop.map(|c| [c.left, c.top, c.right, c.bottom]),
                expect: e.steps.expect.map(|s| [s.height, s.width, s.channels]),
            };
            Ok(Record {
                origin: origin as u64,
                label: e.label,
                body,
            })
        }
    }
}

thread_local! {
    /// The sample an encoded record is decoded into before it is packed.
    static DECODED: std::cell::RefCell<adapt_dataset::Sample> =
        std::cell::RefCell::new(adapt_dataset::Sample::default());
}

/// Decodes `e` (source sample `origin`) as `load` will, so an image that
/// cannot be read is refused when packing, naming its file, not found by
/// the first epoch; a JPEG whose data ends before its last block (which
/// the decoder would fill with grey) is refused too (`check_whole`).
fn check_decodes(ds: &dyn Dataset, origin: usize, e: &Encoded) -> Result<(), PackError> {
    let file = ds.source(origin);
    DECODED
        .with_borrow_mut(|s| {
            adapt_formats::check_whole(Path::new(&file), &e.bytes)?;
            adapt_formats::decode_encoded_into(Path::new(&file), &e.bytes, e.steps, s)
        })
        .map_err(|source| PackError::Undecodable {
            index: origin,
            source,
        })
}

thread_local! {
    /// One zstd context per thread, reused frame after frame.
    static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

fn compress(raw: &[u8], level: i32) -> Result<Vec<u8>, PackError> {
    let err = |source: std::io::Error| PackError::Compress { level, source };
    COMPRESSOR.with_borrow_mut(|slot| {
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            *slot = Some((level, zstd::bulk::Compressor::new(level).map_err(err)?));
        }
        match slot {
            Some((_, c)) => c.compress(raw).map_err(err),
            None => unreachable!("set above"),
        }
    })
}

/// One frame, compressed: `(bytes, uncompressed length, records)`.
fn build_frame(
    ds: &dyn Dataset,
    origins: &[usize],
    o: &PackOptions,
) -> Result<(Vec<u8>, usize, usize), PackError> {
    let records = origins
        .iter()
        .map(|&i| record(ds, i, o.store))
        .collect::<Result<Vec<_>, _>>()?;
    let raw = format::encode_records(&records);
    let len = raw.len();
    let bytes = match o.codec {
        Codec::Zstd => compress(&raw, o.zstd_level)?,
        Codec::Lz4 => lz4_flex::block::compress(&raw),
        Codec::None => raw,
    };
    Ok((bytes, len, records.len()))
}

/// One shard to write: which samples, how they are framed.
pub(crate) struct ShardJob<'a> {
    pub(crate) ds: &'a dyn Dataset,
    /// The shard's number.
    pub(crate) k: usize,
    /// Source indices, in the pack's order.
    pub(crate) origins: &'a [usize],
    pub(crate) o: &'a PackOptions,
    pub(crate) id: u64,
    pub(crate) per_frame: usize,
    /// Frames built in parallel per round.
    pub(crate) window: usize,
    pub(crate) progress: &'a (dyn Fn(u64) + Sync),
}

/// A shard file being written: its bytes hashed as they go.
type ShardWriter = Hashing<std::io::BufWriter<std::fs::File>>;

impl ShardJob<'_> {
    /// Writes the shard to a temporary name next to `path`, synced, then
    /// renamed to `path`; on failure the temporary file is removed.
    pub(crate) fn write(&self, path: &Path) -> Result<ShardInfo, PackError> {
        let tmp = path.with_extension("adpk.partial");
        let result = self.write_to(&tmp, path);
        if result.is_err() && written_by_us(&tmp) {
            // Leave nothing that could be taken for a shard.
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn write_to(&self, tmp: &Path, path: &Path) -> Result<ShardInfo, PackError> {
        // A file already at the temporary name is ours (left by an
        // interrupted run) only if it looks like it; anything else is a
        // user's, and is not clobbered.
        if tmp.exists() && !written_by_us(tmp) {
            return Err(PackError::Exists {
                dir: tmp.to_owned(),
                message: "a file not written by the pack writer has the name of a shard's \
                          temporary file"
                    .into(),
            });
        }
        let file = std::fs::File::create(tmp).map_err(PackError::io(tmp))?;
        let mut w = Hashing {
            inner: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            written: 0,
        };
        let header = Header {
            store: self.o.store,
            codec: self.o.codec,
            shard: self.k as u32,
            records: self.origins.len() as u32,
            pack_id: self.id,
        };
        w.put(&header.to_bytes()).map_err(PackError::io(tmp))?;
        let (index, mut w) = self.frames(w, tmp)?;
        let idx = format::encode_index(&index);
        let footer = format::Footer {
            index_offset: w.written,
            index_len: idx.len() as u64,
            index_hash: xxh3(&idx),
        };
        w.put(&idx).map_err(PackError::io(tmp))?;
        w.put(&footer.to_bytes()).map_err(PackError::io(tmp))?;
        debug_assert_eq!(
            footer.index_offset + footer.index_len + FOOTER_LEN as u64,
            w.written
        );
        let (hash, bytes) = (w.hasher.digest(), w.written);
        let file = w
            .inner
            .into_inner()
            .map_err(|e| PackError::io(tmp)(e.into_error()))?;
        file.sync_all().map_err(PackError::io(tmp))?;
        std::fs::rename(tmp, path).map_err(PackError::io(path))?;
        Ok(ShardInfo {
            file: shard_name(self.id, self.k),
            samples: self.origins.len(),
            bytes,
            xxh3: format!("{hash:016x}"),
        })
    }

    /// Builds and appends the frames: rayon builds (reads, encodes,
    /// compresses) round n + 1 while this scope's writer thread appends
    /// round n, so the file is written in order and at most two rounds of
    /// frames are in memory. Returns the frame index and the writer.
    fn frames(
        &self,
        mut w: ShardWriter,
        tmp: &Path,
    ) -> Result<(Vec<FrameEntry>, ShardWriter), PackError> {
        let frames: Vec<&[usize]> = self.origins.chunks(self.per_frame).collect();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(Vec<u8>, usize, usize)>>(1);
            let progress = self.progress;
            let writer = scope.spawn(move || -> Result<_, PackError> {
                let mut index = Vec::new();
                let mut first = 0u32;
                for round in rx {
                    for (bytes, raw, n) in round {
                        index.push(FrameEntry {
                            offset: w.written,
                            compressed: bytes.len() as u32,
                            raw: raw as u32,
                            first,
                            count: n as u32,
                            hash: xxh3(&bytes),
                        });
                        w.put(&bytes).map_err(PackError::io(tmp))?;
                        first += n as u32;
                        progress(n as u64);
                    }
                }
                Ok((index, w))
            });
            let mut failed = None;
            for group in frames.chunks(self.window) {
                match group
                    .par_iter()
                    .map(|f| build_frame(self.ds, f, self.o))
                    .collect::<Result<Vec<_>, _>>()
                {
                    // A closed channel means the writer failed: its error wins.
                    Ok(round) => {
                        if tx.send(round).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            drop(tx);
            let written = writer.join().unwrap_or_else(|_| {
                Err(PackError::WriterPanicked {
                    shard: tmp.to_owned(),
                })
            });
            match failed {
                Some(e) => Err(e),
                None => written,
            }
        })
    }
}
