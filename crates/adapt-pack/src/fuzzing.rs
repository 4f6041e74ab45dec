//! Shards built around a given frame payload, for fuzzing the record
//! decoder behind valid checksums (a crafted shard whose checksums are
//! right but whose lengths are absurd). Not for packs anyone reads.

use crate::Codec;
use crate::format::{self, FOOTER_LEN, Footer, FrameEntry, HEADER_LEN, Header, xxh3};
use std::path::Path;

/// The decompressed payload (encoded records) of a one-frame shard.
pub fn payload_of(shard: &[u8]) -> Option<Vec<u8>> {
    let len = shard.len() as u64;
    let footer = Footer::parse(
        Path::new("shard"),
        shard.get(shard.len().checked_sub(FOOTER_LEN)?..)?,
        len,
    )
    .ok()?;
    let idx = shard
        .get(footer.index_offset as usize..(footer.index_offset + footer.index_len) as usize)?;
    let frames = format::decode_index(idx).ok()?;
    let f = frames.first()?;
    let bytes = shard.get(f.offset as usize..f.offset as usize + f.compressed as usize)?;
    let header = Header::parse(Path::new("shard"), shard.get(..HEADER_LEN)?).ok()?;
    match header.codec {
        Codec::Zstd => zstd::bulk::decompress(bytes, f.raw as usize).ok(),
        Codec::Lz4 => lz4_flex::block::decompress(bytes, f.raw as usize).ok(),
        Codec::None => Some(bytes.to_vec()),
    }
}

/// A one-frame shard with `template`'s header whose frame holds `payload`
/// (compressed, hashed, indexed and footed as the writer would), claiming
/// `count` records; the checksums are all valid.
pub fn shard_with_payload(template: &[u8], payload: &[u8], count: u32) -> Option<Vec<u8>> {
    let header = Header::parse(Path::new("shard"), template.get(..HEADER_LEN)?).ok()?;
    let header = Header {
        records: count,
        ..header
    };
    let compressed = match header.codec {
        Codec::Zstd => zstd::bulk::compress(payload, 1).ok()?,
        Codec::Lz4 => lz4_flex::block::compress(payload),
        Codec::None => payload.to_vec(),
    };
    let entry = FrameEntry {
        offset: HEADER_LEN as u64,
        compressed: u32::try_from(compressed.len()).ok()?,
        raw: u32::try_from(payload.len()).ok()?,
        first: 0,
        count,
        hash: xxh3(&compressed),
    };
    let index = format::encode_index(&[entry]);
    let mut out = header.to_bytes().to_vec();
    out.extend_from_slice(&compressed);
    let footer = Footer {
        index_offset: out.len() as u64,
        index_len: index.len() as u64,
        index_hash: xxh3(&index),
    };
    out.extend_from_slice(&index);
    out.extend_from_slice(&footer.to_bytes());
    Some(out)
}

/// xxh3-64 of a whole file, as the manifest records it (hex).
pub fn file_hash(bytes: &[u8]) -> String {
    format!("{:016x}", xxh3(bytes))
}
