//! The shard file layout (see `docs/pack-format.md`): header, zstd frames of
//! bincode records, a bincode frame index, a footer.

use crate::{Codec, PackError, Payload};
use bincode::{Decode, Encode};
use std::path::Path;

pub(crate) const MAGIC: &[u8; 8] = b"ADAPTPK\0";
pub(crate) const END_MAGIC: &[u8; 8] = b"ADPKEND\0";
/// Version 2 adds the codec byte (version 1 shards are zstd).
pub(crate) const VERSION: u32 = 2;
pub(crate) const HEADER_LEN: usize = 40;
pub(crate) const FOOTER_LEN: usize = 32;

/// The largest decompressed frame a reader accepts: frames are written at
/// tens of KiB; a crafted index claiming more is refused before anything
/// is allocated for it.
pub(crate) const MAX_FRAME_RAW: u32 = 1 << 28;

/// bincode's standard layout, with a bound on what one decode may allocate
/// (lengths inside a crafted frame are claimed against it first, so an
/// absurd length is an error, never an allocation).
fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<{ 1 << 30 }>()
}

/// One sample as stored.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub(crate) struct Record {
    /// Index in the source dataset.
    pub(crate) origin: u64,
    pub(crate) label: i64,
    pub(crate) body: Body,
}

#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub(crate) enum Body {
    Raw {
        height: u32,
        width: u32,
        channels: u32,
        planar: bool,
        pixels: Vec<u8>,
    },
    Encoded {
        bytes: Vec<u8>,
        crop: Option<[u32; 4]>,
        expect: Option<[u32; 3]>,
    },
}

/// Where a frame lives in its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub(crate) struct FrameEntry {
    pub(crate) offset: u64,
    pub(crate) compressed: u32,
    pub(crate) raw: u32,
    /// Shard-local number of its first record.
    pub(crate) first: u32,
    pub(crate) count: u32,
    /// xxh3-64 of the compressed bytes.
    pub(crate) hash: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) store: Payload,
    pub(crate) codec: Codec,
    pub(crate) shard: u32,
    pub(crate) records: u32,
    pub(crate) pack_id: u64,
}

impl Header {
    pub(crate) fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12] = match self.store {
            Payload::Raw => 0,
            Payload::Encoded => 1,
        };
        b[13] = match self.codec {
            Codec::Zstd => 0,
            Codec::Lz4 => 1,
            Codec::None => 2,
        };
        b[16..20].copy_from_slice(&self.shard.to_le_bytes());
        b[20..24].copy_from_slice(&self.records.to_le_bytes());
        b[24..32].copy_from_slice(&self.pack_id.to_le_bytes());
        b
    }

    pub(crate) fn parse(path: &Path, b: &[u8]) -> Result<Self, PackError> {
        let bad = |message: String| PackError::BadShard {
            path: path.to_owned(),
            message,
        };
        if b.len() < HEADER_LEN {
            return Err(bad(format!(
                "truncated: {} bytes, shorter than the header",
                b.len()
            )));
        }
        if &b[..8] != MAGIC {
            return Err(bad("wrong magic: not an adapt pack shard".into()));
        }
        let version = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if !(1..=VERSION).contains(&version) {
            return Err(bad(format!(
                "shard format version {version}, this reader reads 1 to {VERSION}"
            )));
        }
        let store = match b[12] {
            0 => Payload::Raw,
            1 => Payload::Encoded,
            k => return Err(bad(format!("unknown record kind {k}"))),
        };
        let codec = match (version, b[13]) {
            (_, 0) => Codec::Zstd,
            (2.., 1) => Codec::Lz4,
            (2.., 2) => Codec::None,
            (_, k) => return Err(bad(format!("unknown codec {k}"))),
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[24..32]);
        Ok(Self {
            store,
            codec,
            shard: u32_at(16),
            records: u32_at(20),
            pack_id: u64::from_le_bytes(id),
        })
    }
}

/// The footer: where the index is and its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) index_offset: u64,
    pub(crate) index_len: u64,
    pub(crate) index_hash: u64,
}

impl Footer {
    pub(crate) fn to_bytes(self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[..8].copy_from_slice(&self.index_offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.index_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.index_hash.to_le_bytes());
        b[24..].copy_from_slice(END_MAGIC);
        b
    }

    pub(crate) fn parse(path: &Path, b: &[u8], file_len: u64) -> Result<Self, PackError> {
        let bad = |message: &str| PackError::BadShard {
            path: path.to_owned(),
            message: message.into(),
        };
        if b.len() != FOOTER_LEN || &b[24..] != END_MAGIC {
            return Err(bad("truncated or damaged: no end marker"));
        }
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let f = Self {
            index_offset: u64_at(0),
            index_len: u64_at(8),
            index_hash: u64_at(16),
        };
        let end = f.index_offset.checked_add(f.index_len);
        if f.index_offset < HEADER_LEN as u64 || end != Some(file_len - FOOTER_LEN as u64) {
            return Err(bad("damaged footer: index position does not fit the file"));
        }
        Ok(f)
    }
}

pub(crate) fn encode_records(records: &[Record]) -> Vec<u8> {
    // Encoding plain owned data into a Vec cannot fail.
    bincode::encode_to_vec(records, config()).unwrap_or_default()
}

pub(crate) fn decode_records(bytes: &[u8]) -> Result<Vec<Record>, String> {
    let (v, used) =
        bincode::decode_from_slice::<Vec<Record>, _>(bytes, config()).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!(
            "{} trailing bytes after the records",
            bytes.len() - used
        ));
    }
    Ok(v)
}

pub(crate) fn encode_index(index: &[FrameEntry]) -> Vec<u8> {
    bincode::encode_to_vec(index, config()).unwrap_or_default()
}

pub(crate) fn decode_index(bytes: &[u8]) -> Result<Vec<FrameEntry>, String> {
    bincode::decode_from_slice::<Vec<FrameEntry>, _>(bytes, config())
        .map(|(v, _)| v)
        .map_err(|e| e.to_string())
}

pub(crate) fn xxh3(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The shard file name for shard number `k` of pack `id`: the pack id in
/// the name keeps a new pack's shards apart from an old one's in the same
/// folder until the new manifest replaces the old.
pub(crate) fn shard_name(id: u64, k: usize) -> String {
    format!("shard-{id:016x}-{k:05}.adpk")
}

/// Whether `name` is a shard file name this writer gives (any pack id), or
/// its temporary form.
pub(crate) fn is_writer_name(name: &str) -> bool {
    let stem = name
        .strip_suffix(".adpk.partial")
        .or_else(|| name.strip_suffix(".adpk"));
    let Some(rest) = stem.and_then(|s| s.strip_prefix("shard-")) else {
        return false;
    };
    let mut parts = rest.split('-');
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some(id), Some(k), None)
            if id.len() == 16
                && id.bytes().all(|b| b.is_ascii_hexdigit())
                && k.len() >= 5
                && k.bytes().all(|b| b.is_ascii_digit())
    )
}

/// Whether the file at `path` was written by this writer: a shard header,
/// or (a temporary file cut short before its header) nothing at all.
pub(crate) fn written_by_us(path: &Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let mut b = [0u8; 8];
    match std::fs::File::open(path).and_then(|mut f| f.read(&mut b)) {
        Ok(0) => true,
        Ok(n) => n == 8 && &b == MAGIC,
        Err(_) => false,
    }
}
