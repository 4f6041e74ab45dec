//! Sharded packs: a dataset shuffled once and packed into a few large shard
//! files of bincode records in zstd frames, with checksums, an index of
//! frames and a JSON manifest written last. The second seed's trick (reading
//! many small image files is slow; reading a few big files is not) done so
//! that damage is detected and named, interrupted writes never look
//! complete, and a pack reads back as a [`adapt_dataset::Dataset`].
//!
//! Not for augmentation or decoding policy: `raw` packs hold the pixels a
//! reader produced (after the format's fixed steps), `encoded` packs the
//! original file bytes plus those steps, which [`PackDataset`] replays with
//! `adapt-formats`' decoder. The on-disk format is `docs/pack-format.md`;
//! bincode stays behind this crate's own types ([`Manifest`], the record
//! types are private), so the encoding can change without touching users.
//!
//! Two ways to read: random access (`Dataset::get` through the frame index,
//! with a small cache of decompressed frames), and a shard-streaming order
//! ([`ShardStream`], a loader sampler) that reads whole shards in turn for
//! throughput.

mod error;
mod format;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod manifest;
mod reader;
mod shard_writer;
mod storage;
mod stream;
mod verify;
mod writer;

pub use error::PackError;
pub use manifest::{Codec, MAX_MANIFEST_BYTES, Manifest, Payload, ShardInfo};
pub use reader::PackDataset;
pub use storage::{LocalStorage, PackStorage, ShardFile};
pub use stream::ShardStream;
pub use verify::{VerifyReport, verify, verify_storage};
pub use writer::{PackOptions, SourceInfo, check_source, source_digest, write_pack};

/// Whether `name` is a shard file name this crate's writer gives (any
/// pack id, complete or temporary): what an uploader may clean up.
pub fn is_writer_file_name(name: &str) -> bool {
    format::is_writer_name(name)
}

/// Whether `bytes` (a file's first bytes) begin as a shard written by this
/// crate does.
pub fn starts_like_shard(bytes: &[u8]) -> bool {
    bytes.starts_with(format::MAGIC)
}
