//! A shard's frames as the readers and the checker both read them: the
//! header, footer and frame index checked, one frame read, verified and
//! decoded, and a record's fixed steps.

use crate::format::{self, FOOTER_LEN, Footer, FrameEntry, HEADER_LEN, Header, xxh3};
use crate::storage::ShardFile;
use crate::{Codec, PackError};
use adapt_dataset::{CropBox, FixedSteps, Shape};
use std::path::Path;

/// Reads a shard's header, footer and index (checking the index checksum
/// and that the frames tile the records). `path` names it in errors.
pub(crate) fn open_shard(
    path: &Path,
    file: &dyn ShardFile,
) -> Result<(Header, Vec<FrameEntry>, u64), PackError> {
    let len = file.len();
    let bad = |message: String| PackError::BadShard {
        path: path.to_owned(),
        message,
    };
    if len < (HEADER_LEN + FOOTER_LEN) as u64 {
        return Err(bad(format!("truncated: {len} bytes")));
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_exact_at(&mut head, 0)
        .map_err(PackError::io(path))?;
    let header = Header::parse(path, &head)?;
    let mut foot = [0u8; FOOTER_LEN];
    file.read_exact_at(&mut foot, len - FOOTER_LEN as u64)
        .map_err(PackError::io(path))?;
    let footer = Footer::parse(path, &foot, len)?;
    // Bounded by the file's length (the footer was checked against it).
    let mut idx = vec![0u8; footer.index_len as usize];
    file.read_exact_at(&mut idx, footer.index_offset)
        .map_err(PackError::io(path))?;
    if xxh3(&idx) != footer.index_hash {
        return Err(bad("frame index checksum mismatch".into()));
    }
    let frames = format::decode_index(&idx).map_err(|e| bad(format!("frame index: {e}")))?;
    let mut next = 0u32;
    let mut offset = HEADER_LEN as u64;
    for (i, f) in frames.iter().enumerate() {
        if f.first != next || f.offset != offset || f.count == 0 {
            return Err(bad(format!(
                "frame index entry {i} does not follow the previous frame"
            )));
        }
        next += f.count;
        offset += u64::from(f.compressed);
    }
    if next != header.records || offset != footer.index_offset {
        return Err(bad(format!(
            "frames hold {next} records, the header says {}",
            header.records
        )));
    }
    Ok((header, frames, len))
}

thread_local! {
    /// One zstd context per thread: creating one per frame cost a sixth of
    /// a raw pack's read time.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn decompress(bytes: &[u8], capacity: usize) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot {
            Some(d) => d.decompress(bytes, capacity),
            None => unreachable!("set above"),
        }
    })
}

/// Reads, checks and decodes frame `k`.
pub(crate) fn read_frame(
    path: &Path,
    file: &dyn ShardFile,
    codec: Codec,
    k: usize,
    f: &FrameEntry,
) -> Result<Vec<format::Record>, PackError> {
    let bad = |message: String| PackError::BadFrame {
        path: path.to_owned(),
        frame: k,
        message,
    };
    if f.raw > format::MAX_FRAME_RAW {
        return Err(bad(format!(
            "the index claims {} decompressed bytes (at most {} are accepted)",
            f.raw,
            format::MAX_FRAME_RAW
        )));
    }
    // `compressed` was checked against the file when the index was read
    // (the frames tile the file), so this allocation is bounded by it.
    let mut buf = vec![0u8; f.compressed as usize];
    file.read_exact_at(&mut buf, f.offset)
        .map_err(PackError::io(path))?;
    if xxh3(&buf) != f.hash {
        return Err(bad("checksum mismatch".into()));
    }
    let records = match codec {
        Codec::Zstd => {
            let raw = decompress(&buf, f.raw as usize).map_err(|e| bad(format!("zstd: {e}")))?;
            format::decode_records(&raw)
        }
        Codec::Lz4 => {
            let raw = lz4_flex::block::decompress(&buf, f.raw as usize)
                .map_err(|e| bad(format!("lz4: {e}")))?;
            format::decode_records(&raw)
        }
        Codec::None => {
            if f.compressed != f.raw {
                return Err(bad(format!(
                    "stored uncompressed, but the index says {} bytes hold {}",
                    f.compressed, f.raw
                )));
            }
            format::decode_records(&buf)
        }
    }
    .map_err(|e| bad(format!("records: {e}")))?;
    if records.len() != f.count as usize {
        return Err(bad(format!(
            "{} records, the index says {}",
            records.len(),
            f.count
        )));
    }
    Ok(records)
}

/// The fixed steps a record's crop and expected shape say.
pub(crate) fn steps_of(crop: &Option<[u32; 4]>, expect: &Option<[u32; 3]>) -> FixedSteps {
    FixedSteps {
        crop: crop.map(|[l, t, r, b]| CropBox::new(l, t, r, b)),
        expect: expect.map(|[h, w, c]| Shape::new(h, w, c)),
    }
}
