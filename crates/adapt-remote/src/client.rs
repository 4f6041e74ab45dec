//! The store client: one `object_store` S3 client per URL, and the small
//! runtime its requests run on.

use crate::{RemoteError, RemoteOptions};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// `s3://bucket/prefix`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    /// The bucket.
    pub bucket: String,
    /// The key prefix (no leading or trailing `/`; may be empty).
    pub prefix: String,
}

impl RemoteUrl {
    /// Parses `s3://bucket[/prefix]`.
    pub fn parse(url: &str) -> Result<Self, RemoteError> {
        let bad = |m: &str| RemoteError::Config {
            url: url.to_owned(),
            message: m.to_owned(),
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("expected s3://bucket/prefix"))?;
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
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == ".." || p == ".") || prefix.contains("//") {
            return Err(bad("the prefix may not hold '.', '..' or empty parts"));
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    /// The URL of file `name` under the prefix.
    pub fn join(&self, name: &str) -> String {
        match (self.prefix.is_empty(), name.is_empty()) {
            (true, true) => format!("s3://{}", self.bucket),
            (true, false) => format!("s3://{}/{name}", self.bucket),
            (false, true) => format!("s3://{}/{}", self.bucket, self.prefix),
            (false, false) => format!("s3://{}/{}/{name}", self.bucket, self.prefix),
        }
    }
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
    /// A client for `url` with `options` (and the `AWS_*` variables for
    /// whatever the options leave unset).
    pub fn connect(url: &str, options: &RemoteOptions) -> Result<Self, RemoteError> {
        install_crypto();
        let parsed = RemoteUrl::parse(url)?;
        let rt = runtime(url)?;
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&parsed.bucket);
        if let Some(e) = &options.endpoint {
            b = b.with_endpoint(e);
        }
        let endpoint = options
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        let mut client = ClientOptions::new()
            .with_timeout(options.request_timeout)
            .with_connect_timeout(Duration::from_secs(5));
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
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: options.retries,
            retry_timeout: options.retry_timeout,
        };
        let store = b
            .with_retry(retry)
            .with_client_options(client)
            .build()
            .map_err(|e| RemoteError::Config {
                url: url.to_owned(),
                message: e.to_string(),
            })?;
        Ok(Self {
            store: Arc::new(store),
            url: parsed,
            rt,
            retries: options.retries,
        })
    }

    /// The object key of file `name`.
    pub(crate) fn key(&self, name: &str) -> ObjPath {
        if self.url.prefix.is_empty() {
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
    /// which object_store passes on) is asked for again, with the same
    /// backoff as object_store's retries of everything else.
    pub(crate) async fn get_exact(
        &self,
        name: &str,
        range: std::ops::Range<u64>,
    ) -> Result<bytes::Bytes, String> {
        use object_store::ObjectStoreExt;
        let key = self.key(name);
        let want = range.end - range.start;
        let mut backoff = Duration::from_millis(100);
        for attempt in 0..=self.retries {
            let got = self
                .store
                .get_range(&key, range.clone())
                .await
                .map_err(|e| e.to_string())?;
            if got.len() as u64 == want {
                return Ok(got);
            }
            if attempt == self.retries {
                return Err(format!(
                    "asked for {want} bytes at {}, got {} ({} tries)",
                    range.start,
                    got.len(),
                    attempt + 1
                ));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        Err("no request made".into())
    }

    /// The whole object `name`, or `None` when there is none.
    pub fn get_optional(&self, name: &str) -> Result<Option<bytes::Bytes>, RemoteError> {
        use object_store::ObjectStoreExt;
        let key = self.key(name);
        self.block_on(async {
            match self.store.get(&key).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .map_err(|e| self.store_error(name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::RemoteUrl;

    #[test]
    fn urls_parse_and_join() {
        let u = RemoteUrl::parse("s3://data/packs/cifar/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(u.bucket, "data");
        assert_eq!(u.prefix, "packs/cifar");
        assert_eq!(
            u.join("manifest.json"),
            "s3://data/packs/cifar/manifest.json"
        );
        let b = RemoteUrl::parse("s3://data").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.join("x"), "s3://data/x");
        for bad in [
            "http://x/y",
            "s3://",
            "s3://UP/x",
            "s3://b/../x",
            "s3://b/a//c",
        ] {
            assert!(RemoteUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
