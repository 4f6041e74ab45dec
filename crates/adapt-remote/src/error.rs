//! The object-store crate's error type: every remote error names the object's
//! URL.

use crate::options::OFFLINE_VARIABLES;

/// Errors of publishing a pack to object storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// Not an `s3://bucket/prefix` or `https://host/path` URL, a write to
    /// an HTTP server, or an option the store refused.
    #[error("{url}: {message}")]
    Config {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// A request failed (after the configured retries).
    #[cfg(feature = "s3")]
    #[error("{url}: {source}")]
    Store {
        /// The object.
        url: String,
        /// The store's error.
        source: object_store::Error,
    },
    /// The I/O runtime could not start (the process cannot start threads).
    #[cfg(feature = "s3")]
    #[error("{url}: cannot start the I/O runtime: {message}")]
    Runtime {
        /// The URL being connected.
        url: String,
        /// The runtime's error.
        message: String,
    },
    /// The cache folder is not this user's alone: what it holds could
    /// have been planted by another user.
    #[error(
        "{}: the cache folder is refused: {reason} (give a folder of your own: ADAPT_CACHE_DIR)",
        path.display()
    )]
    UnsafeCacheDir {
        /// The cache folder.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// The destination holds another pack.
    #[error("{url}: {message} (pass overwrite to replace it)")]
    Exists {
        /// The pack's URL.
        url: String,
        /// What is there.
        message: String,
    },
    /// A file could not be fetched whole (after the configured retries):
    /// the store's error, or answers shorter than asked for.
    #[error("{url}: {message}")]
    Fetch {
        /// The file's URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// Offline, a file the cache folder does not hold whole.
    #[error(
        "{url}: not in the cache folder ({}) and offline ({OFFLINE_VARIABLES} is set): \
         open it once with the network, or unset the variable",
        path.display()
    )]
    NotCached {
        /// The file's URL.
        url: String,
        /// Where its copy would be.
        path: std::path::PathBuf,
    },
    /// The local pack could not be read.
    #[error(transparent)]
    Pack(#[from] adapt_pack::PackError),
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
}
