//! Where `s3://` and `https://` packs are and how much of them to keep locally: endpoint,
//! region, credentials, cache; and the one size grammar.

use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Duration;

/// How to reach the store and how much to keep locally. Endpoint, region
/// and credentials left `None` come from the `AWS_*` variables
/// (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP` …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Endpoint URL (`http://127.0.0.1:9000`) of an S3-compatible store.
    pub endpoint: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Access key and secret.
    pub credentials: Option<(String, String)>,
    /// The bearer token sent with every request to an `https://` folder's
    /// own host (`None`: `ADAPT_HTTP_TOKEN`, or `HF_TOKEN` for
    /// huggingface.co). Never sent on to another host a redirect leads to.
    pub http_token: Option<String>,
    /// Where fetched shards (and packs staged for upload) are kept
    /// (`ADAPT_CACHE_DIR`, else `$XDG_CACHE_HOME/adapt`, else
    /// `~/.cache/adapt`).
    pub cache_dir: PathBuf,
    /// At most this many bytes of shards in the cache of one opened pack
    /// (`ADAPT_CACHE_BYTES`; 8 GiB). 0 keeps nothing: every read is a range
    /// request.
    pub cache_bytes: u64,
    /// Shards fetched ahead of the one a stream reads (2).
    pub prefetch_shards: usize,
    /// A shard is fetched in range requests of this many bytes (8 MiB),
    /// each readable as soon as it lands.
    pub chunk_bytes: u64,
    /// Range requests in flight for shard fetches, all shards together (4).
    pub parallel_requests: usize,
    /// Retries of a failed request, with exponential backoff (5).
    pub retries: usize,
    /// No retry starts later than this after the first attempt (30 s).
    pub retry_timeout: Duration,
    /// One request's limit (60 s; a whole shard's download included).
    pub request_timeout: Duration,
    /// Upload objects larger than this in parts (16 MiB).
    pub multipart_threshold: u64,
    /// Use the network for nothing the cache holds (`ADAPT_OFFLINE=1`, or
    /// Hugging Face's `HF_HUB_OFFLINE=1` / `HF_DATASETS_OFFLINE=1`):
    /// WebDataset tars and Parquet files fetched before are read from the
    /// cache folder without asking the store for their version, and one it
    /// does not hold is [`RemoteError::NotCached`](crate::RemoteError).
    /// Packs in a store still use the network.
    pub offline: bool,
}

/// The variables that turn [`RemoteOptions::offline`] on, as messages name
/// them.
pub const OFFLINE_VARIABLES: &str = "ADAPT_OFFLINE, HF_HUB_OFFLINE or HF_DATASETS_OFFLINE";

/// Whether the environment asks for offline use: any of the variables set
/// to `1`, `true`, `yes` or `on` (any case), as `huggingface_hub` reads
/// them.
fn offline_from_env() -> bool {
    ["ADAPT_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .any(|v| truthy(&v))
}

/// `1`, `true`, `yes` or `on`, in any case and spacing.
fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            credentials: None,
            http_token: None,
            cache_dir: default_cache_dir(),
            cache_bytes: 8 << 30,
            prefetch_shards: 2,
            chunk_bytes: 8 << 20,
            parallel_requests: 4,
            retries: 5,
            retry_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            multipart_threshold: 16 << 20,
            offline: false,
        }
    }
}

impl RemoteOptions {
    /// The defaults, with `ADAPT_CACHE_DIR`, `ADAPT_CACHE_BYTES` (an
    /// unparsable size is ignored, with the default kept) and the offline
    /// variables applied.
    pub fn from_env() -> Self {
        let mut o = Self {
            offline: offline_from_env(),
            ..Self::default()
        };
        if let Some(b) = std::env::var("ADAPT_CACHE_BYTES")
            .ok()
            .and_then(|v| parse_bytes(&v))
        {
            o.cache_bytes = b;
        }
        o
    }
}

/// A size in bytes, the one grammar every flag and variable uses: a whole
/// or decimal number, then an optional binary unit `K`, `M`, `G` or `T`
/// (either case), then optionally `B` or `iB`: `123`, `64K`,
/// `512M`, `1.5G`, `8GiB`. `None` for anything else, a negative number or
/// a size past `u64::MAX`.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, shift) = match t.char_indices().last()? {
        (i, 'K' | 'k') => (&t[..i], 10),
        (i, 'M' | 'm') => (&t[..i], 20),
        (i, 'G' | 'g') => (&t[..i], 30),
        (i, 'T' | 't') => (&t[..i], 40),
        _ => (t, 0),
    };
    let num = num.trim();
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(1u64 << shift);
    }
    let x: f64 = num.parse().ok()?;
    let bytes = x * (1u64 << shift) as f64;
    // 2^64 itself is not representable: stay strictly below it.
    (x.is_finite() && x >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ADAPT_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("adapt");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache/adapt"),
        None => std::env::temp_dir().join("adapt-cache"),
    }
}

/// Whether `path` names an object in a store (`s3://…`, `https://…`,
/// `http://…`) rather than a local file.
pub fn is_remote(path: &str) -> bool {
    ["s3://", "https://", "http://"]
        .iter()
        .any(|p| path.starts_with(p))
}

/// Whether this build has the object-store client (the `s3` feature, which
/// holds the HTTP(S) client too); without it, opening or writing `s3://…`
/// or `https://…` is an error that says so.
pub const S3_ENABLED: bool = cfg!(feature = "s3");

static DEFAULT: RwLock<Option<RemoteOptions>> = RwLock::new(None);

/// Options used where a caller names only a URL (a dataset path
/// `s3://…` in a pipeline): what [`set_default_options`] set, else
/// [`RemoteOptions::from_env`].
pub fn default_options() -> RemoteOptions {
    DEFAULT
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_else(RemoteOptions::from_env)
}

/// Sets the process-wide options (command-line flags do).
pub fn set_default_options(options: RemoteOptions) {
    swap_default_options(Some(options));
}

/// Replaces what [`set_default_options`] set (`None`: back to the
/// environment's, read at each use) and returns what was set before: a
/// process that runs the command line and goes on (the Python module's
/// `python -m adapt`) restores it afterwards, so the command's flags and
/// the environment as it was then do not outlive the command.
pub fn swap_default_options(options: Option<RemoteOptions>) -> Option<RemoteOptions> {
    std::mem::replace(
        &mut *DEFAULT.write().unwrap_or_else(|p| p.into_inner()),
        options,
    )
}

#[cfg(test)]
mod tests {
    use super::{parse_bytes, truthy};

    #[test]
    fn offline_values_are_read_as_huggingface_hub_reads_them() {
        for v in ["1", "true", "TRUE", " yes ", "On"] {
            assert!(truthy(v), "{v}");
        }
        for v in ["", "0", "false", "no", "off", "2"] {
            assert!(!truthy(v), "{v}");
        }
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("123"), Some(123));
        assert_eq!(parse_bytes("64K"), Some(64 << 10));
        assert_eq!(parse_bytes("8G"), Some(8 << 30));
        assert_eq!(parse_bytes("1.5G"), Some(3 << 29));
        assert_eq!(parse_bytes("8GiB"), Some(8 << 30));
        assert_eq!(parse_bytes("512MB"), Some(512 << 20));
        assert_eq!(parse_bytes("0"), Some(0));
        assert_eq!(parse_bytes("-1G"), None);
        assert_eq!(parse_bytes("1B"), Some(1));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("99999999999T"), None);
    }
}
