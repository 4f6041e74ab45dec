//! Packs in object storage: `s3://bucket/prefix` read as a pack (frames by
//! range request, whole shards fetched ahead of a stream into a bounded
//! on-disk cache), packs published there (shards first, the manifest
//! last, resumable), and checked there. Any S3-compatible endpoint, through
//! the `object_store` crate; endpoint, region and credentials from the
//! standard `AWS_*` variables or [`RemoteOptions`].
//!
//! Not for the pack format (`adapt-pack`) or for other data layouts: only
//! packs go to and come from object storage. The calls block (a small
//! runtime of this crate's own runs the requests): call them from plain
//! threads, not from inside an async runtime.

mod cache;
mod client;
mod error;
mod options;
#[cfg(feature = "test-server")]
pub mod testing;
mod upload;

pub use cache::RemoteStorage;
pub use client::{Remote, RemoteUrl, is_remote};
pub use error::RemoteError;
pub use options::{RemoteOptions, default_options, parse_bytes, set_default_options};
pub use upload::{UploadReport, publish, upload_pack};

use adapt_pack::{PackDataset, PackError, VerifyReport};
use std::sync::Arc;

/// Opens the pack at `url` (`s3://bucket/prefix`).
pub fn open_pack(url: &str, options: &RemoteOptions) -> Result<PackDataset, PackError> {
    let storage = RemoteStorage::connect(url, options)?;
    PackDataset::open_in(Arc::new(storage))
}

/// Checks every shard of the pack at `url` against its manifest, as
/// `adapt_pack::verify` does locally (each shard is read whole once).
pub fn verify_pack(url: &str, options: &RemoteOptions) -> Result<VerifyReport, PackError> {
    let storage = RemoteStorage::connect(url, options)?;
    adapt_pack::verify_storage(&storage)
}
