//! Packs in object storage: `s3://bucket/prefix` or `https://host/path`
//! read as a pack (frames by range request, whole shards fetched ahead of
//! a stream into a bounded on-disk cache), packs published to S3 (shards
//! first, the manifest last, resumable), and checked in either. Any
//! S3-compatible endpoint, or any HTTP(S) server that answers `Range`
//! requests, through the `object_store` crate; endpoint, region and
//! credentials from the standard `AWS_*` variables or [`RemoteOptions`],
//! an HTTP bearer token from `ADAPT_HTTP_TOKEN` (`HF_TOKEN` for the Hub).
//! The client is the `s3` feature; without it the crate holds its options
//! and names only.
//!
//! Not for the pack format (`adapt-pack`) or for other data layouts: only
//! packs go to and come from object storage. The calls block (a small
//! runtime of this crate's own runs the requests): call them from plain
//! threads, not from inside an async runtime.

#[cfg(feature = "s3")]
mod cache;
mod cache_dir;
#[cfg(feature = "s3")]
mod client;
mod error;
#[cfg(feature = "s3")]
mod files;
#[cfg(feature = "s3")]
mod folder;
mod options;
#[cfg(feature = "s3")]
mod storage;
#[cfg(feature = "test-server")]
pub mod testing;
#[cfg(feature = "s3")]
mod upload;
mod upload_report;

pub use cache_dir::check_cache_dir;
#[cfg(feature = "s3")]
pub use client::{Remote, RemoteUrl, StoreKind};
pub use error::RemoteError;
#[cfg(feature = "s3")]
pub use files::fetch_files;
pub use options::{
    OFFLINE_VARIABLES, RemoteOptions, S3_ENABLED, default_options, is_remote, parse_bytes,
    set_default_options, swap_default_options,
};
#[cfg(feature = "s3")]
pub use storage::RemoteStorage;
#[cfg(feature = "s3")]
pub use upload::{publish, upload_pack};
pub use upload_report::UploadReport;

#[cfg(feature = "s3")]
use adapt_pack::{PackDataset, PackError, VerifyReport};
#[cfg(feature = "s3")]
use std::sync::Arc;

/// Opens the pack at `url` (`s3://bucket/prefix` or `https://host/path`).
#[cfg(feature = "s3")]
pub fn open_pack(url: &str, options: &RemoteOptions) -> Result<PackDataset, PackError> {
    let storage = RemoteStorage::connect(url, options)?;
    PackDataset::open_in(Arc::new(storage))
}

/// Checks every shard of the pack at `url` against its manifest, as
/// `adapt_pack::verify` does locally (each shard is read whole once).
#[cfg(feature = "s3")]
pub fn verify_pack(url: &str, options: &RemoteOptions) -> Result<VerifyReport, PackError> {
    let storage = RemoteStorage::connect(url, options)?;
    adapt_pack::verify_storage(&storage)
}
