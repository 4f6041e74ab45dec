//! The store client: one `object_store` S3 client per URL, and the small
//! runtime its requests run on.

use crate::{RemoteError, RemoteOptions};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The store a [`RemoteUrl`] is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// An S3 bucket (or an S3-compatible store's).
    S3 {
        /// The bucket.
        bucket: String,
    },
    /// A plain HTTP(S) server answering GET with `Range` (a CDN, the
    /// Hugging Face Hub, nginx): read-only.
    Http {
        /// `https://host[:port]` (or `http://`), no trailing `/`.
        origin: String,
    },
}

/// `s3://bucket/prefix` or `https://host/prefix`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    /// Where the objects are.
    pub store: StoreKind,
    /// The key prefix, or the URL's path (no leading or trailing `/`; may
    /// be empty). An HTTP path is kept as written, percent-escapes and
    /// all (`resolve/refs%2Fconvert%2Fparquet`).
    pub prefix: String,
}

impl RemoteUrl {
    /// Parses `s3://bucket[/prefix]` or `http(s)://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Self, RemoteError> {
        let bad = |m: &str| RemoteError::Config {
            url: url.to_owned(),
            message: m.to_owned(),
        };
        let (store, prefix) = if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty()
                || !bucket
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            {
                return Err(bad(
                    "the bucket name must be lowercase letters, digits, '-' or '.'",
                ));
            }
            let bucket = bucket.to_owned();
            (StoreKind::S3 { bucket }, prefix)
        } else if let Some((scheme, rest)) = http_scheme(url) {
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            if host.is_empty() || host.contains('@') {
                return Err(bad(
                    "expected http(s)://host[:port]/path (no user in the URL)",
                ));
            }
            if path.contains(['?', '#']) {
                return Err(bad(
                    "a pack's URL is a folder: no query or fragment (signed URLs name \
                     one object, not a pack's files)",
                ));
            }
            let origin = format!("{scheme}://{host}");
            (StoreKind::Http { origin }, path)
        } else {
            return Err(bad("expected s3://bucket/prefix or https://host/path"));
        };
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == ".." || p == ".") || prefix.contains("//") {
            return Err(bad("the prefix may not hold '.', '..' or empty parts"));
        }
        Ok(Self {
            store,
            prefix: prefix.to_owned(),
        })
    }

    /// The URL of the store's root: `s3://bucket` or the origin.
    fn root(&self) -> String {
        match &self.store {
            StoreKind::S3 { bucket } => format!("s3://{bucket}"),
            StoreKind::Http { origin } => origin.clone(),
        }
    }

    /// The URL of file `name` under the prefix.
    pub fn join(&self, name: &str) -> String {
        let root = self.root();
        match (self.prefix.is_empty(), name.is_empty()) {
            (true, true) => root,
            (true, false) => format!("{root}/{name}"),
            (false, true) => format!("{root}/{}", self.prefix),
            (false, false) => format!("{root}/{}/{name}", self.prefix),
        }
    }

    /// Whether objects can be written there (S3 can; an HTTP server is
    /// read from only).
    pub fn writable(&self) -> bool {
        matches!(self.store, StoreKind::S3 { .. })
    }
}

/// `("https", rest)` for `https://rest`, the same for `http://`.
fn http_scheme(url: &str) -> Option<(&'static str, &str)> {
    if let Some(rest) = url.strip_prefix("https://") {
        return Some(("https", rest));
    }
    url.strip_prefix("http://").map(|rest| ("http", rest))
}

/// The runtime every request runs on (two threads are plenty for I/O),
/// started by the first connection. It fails only when the process cannot
/// start threads; every later connection then gets the same error.
fn runtime(url: &str) -> Result<&'static tokio::runtime::Runtime, RemoteError> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("adapt-remote")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|message| RemoteError::Runtime {
        url: url.to_owned(),
        message: message.clone(),
    })
}

/// Makes ring the process's TLS crypto provider, once, unless the program
/// installed one of its own: reqwest is built without a provider of its own
/// (aws-lc-rs is the default, and by far the slowest part of the build).
fn install_crypto() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // An error means a provider is already installed: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A pack location in a store, connected.
#[derive(Clone, Debug)]
pub struct Remote {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) url: RemoteUrl,
    /// The I/O runtime its requests run on.
    pub(crate) rt: &'static tokio::runtime::Runtime,
    /// Retries of a request (object_store's, and [`Self::get_exact`]'s of
    /// a short body).
    pub(crate) retries: usize,
}

impl Remote {
    /// A client for `url` with `options` (and, for `s3://`, the `AWS_*`
    /// variables for whatever the options leave unset).
    pub fn connect(url: &str, options: &RemoteOptions) -> Result<Self, RemoteError> {
        install_crypto();
        let parsed = RemoteUrl::parse(url)?;
        let rt = runtime(url)?;
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: options.retries,
            retry_timeout: options.retry_timeout,
        };
        let client = ClientOptions::new()
            .with_timeout(options.request_timeout)
            .with_connect_timeout(Duration::from_secs(5));
        let built = match &parsed.store {
            StoreKind::S3 { bucket } => s3_store(bucket, options, client, retry),
            StoreKind::Http { origin } => {
                let token = http_token(origin, options);
                http_store(&parsed.join(""), origin, token, client, retry)
            }
        };
        let store = built.map_err(|e| RemoteError::Config {
            url: url.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self {
            store,
            url: parsed,
            rt,
            retries: options.retries,
        })
    }

    /// A client for writing at `url`: refused for an HTTP server, which is
    /// read from only.
    pub fn connect_writable(url: &str, options: &RemoteOptions) -> Result<Self, RemoteError> {
        let r = Self::connect(url, options)?;
        if !r.url.writable() {
            return Err(RemoteError::Config {
                url: url.to_owned(),
                message: "packs are read from HTTP(S) servers, not written to them: publish \
                          to s3://… (or a folder), then serve that"
                    .into(),
            });
        }
        Ok(r)
    }

    /// The object key of file `name` (on an HTTP server the prefix is in
    /// the store's base URL already).
    pub(crate) fn key(&self, name: &str) -> ObjPath {
        if self.url.prefix.is_empty() || !self.url.writable() {
            ObjPath::from(name)
        } else {
            ObjPath::from(format!("{}/{name}", self.url.prefix))
        }
    }

    /// The URL of file `name`.
    pub fn url_of(&self, name: &str) -> String {
        self.url.join(name)
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub(crate) fn store_error(&self, name: &str, e: object_store::Error) -> RemoteError {
        RemoteError::Store {
            url: self.url_of(name),
            source: e,
        }
    }

    /// Bytes `range` of object `name`, exactly: a body shorter than asked
    /// for (a `Content-Length` that disagrees with its `Content-Range`,
    /// which object_store passes on), longer (a `Range` ignored, a body
    /// that does not end: read no further than asked) or cut is asked for
    /// again, with the same backoff as object_store's retries of
    /// everything else.
    pub(crate) async fn get_exact(
        &self,
        name: &str,
        range: std::ops::Range<u64>,
    ) -> Result<bytes::Bytes, String> {
        self.get_exact_of(name, range, None).await
    }

    /// [`Self::get_exact`] of the object's version `pinned` (its HEAD):
    /// `If-Match` on its ETag, else `If-Unmodified-Since` its time, so a
    /// file replaced mid-fetch is an error, not a mix of two versions.
    pub(crate) async fn get_exact_of(
        &self,
        name: &str,
        range: std::ops::Range<u64>,
        pinned: Option<&object_store::ObjectMeta>,
    ) -> Result<bytes::Bytes, String> {
        let key = self.key(name);
        let want = range.end - range.start;
        let mut backoff = Duration::from_millis(100);
        for attempt in 0..=self.retries {
            let get = pinned_get(pinned, Some(range.clone()));
            let got = match self.store.get_opts(&key, get).await {
                Ok(got) => {
                    read_within(got, want, || {
                        format!(
                            "the server sent more than the {want} bytes asked for at {} (it \
                             ignored the Range, or its body does not end)",
                            range.start
                        )
                    })
                    .await
                }
                // object_store retried it already.
                Err(e) => return Err(e.to_string()),
            };
            let problem = match got {
                Ok(body) if body.len() as u64 == want => return Ok(body),
                Ok(body) => format!(
                    "asked for {want} bytes at {}, got {}",
                    range.start,
                    body.len()
                ),
                Err(e) => e,
            };
            if attempt == self.retries {
                return Err(format!("{problem} ({} tries)", attempt + 1));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        Err("no request made".into())
    }

    /// The whole object `name`, or `None` when there is none; a body past
    /// `limit` bytes is an error (read no further), as is any answer of a
    /// server that sends more than its object holds.
    pub fn get_optional(
        &self,
        name: &str,
        limit: u64,
    ) -> Result<Option<bytes::Bytes>, RemoteError> {
        use object_store::ObjectStoreExt;
        let key = self.key(name);
        let too_much = || format!("more than the {limit} bytes read of it came");
        self.block_on(async {
            match self.store.get(&key).await {
                Ok(got) => read_within(got, limit, too_much).await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        })
        .map_err(|message| RemoteError::Fetch {
            url: self.url_of(name),
            message,
        })
    }
}

/// The body of `got`, read as it comes and cut off past `limit` bytes
/// (`too_much` says why): a server that sends more than was asked for (a
/// `Range` ignored, a body that never ends) is an error, never unbounded
/// memory.
async fn read_within(
    got: object_store::GetResult,
    limit: u64,
    too_much: impl FnOnce() -> String,
) -> Result<bytes::Bytes, String> {
    use futures::StreamExt;
    let mut stream = got.into_stream();
    let (mut pieces, mut total) = (Vec::new(), 0u64);
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|e| e.to_string())?;
        total += piece.len() as u64;
        if total > limit {
            return Err(too_much());
        }
        pieces.push(piece);
    }
    // One piece is the body as it came; several are joined once (as
    // object_store's own `bytes()` does).
    Ok(match pieces.len() {
        0 => bytes::Bytes::new(),
        1 => pieces.swap_remove(0),
        _ => {
            let mut body = bytes::BytesMut::with_capacity(total as usize);
            pieces.iter().for_each(|p| body.extend_from_slice(p));
            body.freeze()
        }
    })
}

/// A GET of `range` (all of it: `None`) of the object's version `pinned`:
/// `If-Match` on its ETag, else `If-Unmodified-Since` its time.
pub(crate) fn pinned_get(
    pinned: Option<&object_store::ObjectMeta>,
    range: Option<std::ops::Range<u64>>,
) -> object_store::GetOptions {
    object_store::GetOptions {
        range: range.map(object_store::GetRange::Bounded),
        if_match: pinned.and_then(|m| m.e_tag.clone()),
        if_unmodified_since: pinned
            .filter(|m| m.e_tag.is_none())
            .map(|m| m.last_modified),
        ..object_store::GetOptions::default()
    }
}

/// The S3 client for `bucket`.
fn s3_store(
    bucket: &str,
    options: &RemoteOptions,
    mut client: ClientOptions,
    retry: RetryConfig,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
    if let Some(e) = &options.endpoint {
        b = b.with_endpoint(e);
    }
    let endpoint = options
        .endpoint
        .clone()
        .or_else(|| std::env::var("AWS_ENDPOINT").ok())
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
    if std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v == "true") {
        client = client.with_allow_http(true);
    }
    if let Some(e) = endpoint {
        // A custom endpoint is an S3-compatible server: path-style
        // requests, and plain HTTP when its URL says so.
        b = b.with_virtual_hosted_style_request(false);
        if e.starts_with("http://") {
            client = client.with_allow_http(true);
        }
    }
    if let Some(r) = &options.region {
        b = b.with_region(r);
    }
    if let Some((k, s)) = &options.credentials {
        b = b.with_access_key_id(k).with_secret_access_key(s);
    }
    let store = b.with_retry(retry).with_client_options(client).build()?;
    Ok(Arc::new(store))
}

/// The bearer token for `origin`: the options' own, else
/// `ADAPT_HTTP_TOKEN`, else `HF_TOKEN` when `origin` is the Hub; an empty
/// one is none.
fn http_token(origin: &str, options: &RemoteOptions) -> Option<String> {
    let hub = origin == "https://huggingface.co";
    options
        .http_token
        .clone()
        .or_else(|| std::env::var("ADAPT_HTTP_TOKEN").ok())
        .or_else(|| hub.then(|| std::env::var("HF_TOKEN").ok()).flatten())
        .filter(|t| !t.is_empty())
}

/// The HTTP client for the folder at `base` on `origin`: GET with `Range`
/// and HEAD, redirects followed (the Hub answers with one to its CDN; at
/// most 10 in a row), `token` sent as a bearer token with each request to
/// `origin` (reqwest drops it on a redirect to another host or port).
fn http_store(
    base: &str,
    origin: &str,
    token: Option<String>,
    mut client: ClientOptions,
    retry: RetryConfig,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    if origin.starts_with("http://") {
        client = client.with_allow_http(true);
    }
    if let Some(t) = token {
        let mut headers = reqwest::header::HeaderMap::new();
        let value =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {t}")).map_err(|e| {
                object_store::Error::Generic {
                    store: "HTTP",
                    source: format!("the token is not a header value: {e}").into(),
                }
            })?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
        client = client.with_default_headers(headers);
    }
    let store = object_store::http::HttpBuilder::new()
        .with_url(base)
        .with_retry(retry)
        .with_client_options(client)
        .build()?;
    Ok(Arc::new(store))
}

#[cfg(test)]
mod tests {
    use super::{RemoteUrl, StoreKind};

    #[test]
    fn urls_parse_and_join() {
        let u = RemoteUrl::parse("s3://data/packs/cifar/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            u.store,
            StoreKind::S3 {
                bucket: "data".into()
            }
        );
        assert_eq!(u.prefix, "packs/cifar");
        assert_eq!(
            u.join("manifest.json"),
            "s3://data/packs/cifar/manifest.json"
        );
        let b = RemoteUrl::parse("s3://data").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.join("x"), "s3://data/x");
        let h = RemoteUrl::parse(
            "https://huggingface.co/datasets/x/resolve/refs%2Fconvert%2Fparquet/default/",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            h.store,
            StoreKind::Http {
                origin: "https://huggingface.co".into()
            }
        );
        assert_eq!(
            h.join("0000.parquet"),
            "https://huggingface.co/datasets/x/resolve/refs%2Fconvert%2Fparquet/default/0000.parquet"
        );
        assert!(!h.writable());
        let local = RemoteUrl::parse("http://127.0.0.1:8080").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(local.join("m"), "http://127.0.0.1:8080/m");
        for bad in [
            "ftp://x/y",
            "https://",
            "https://u:p@h/x",
            "https://h/x?sig=1",
            "https://h/a/../b",
            "s3://",
            "s3://UP/x",
            "s3://b/../x",
            "s3://b/a//c",
        ] {
            assert!(RemoteUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
