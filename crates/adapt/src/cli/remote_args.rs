//! Object-store flags shared by the verbs that read or write packs.

use crate::RemoteOptions;
use anyhow::Context;
use std::path::PathBuf;

/// Where `s3://` and `https://` packs are and how much of them to keep locally; unset
/// values come from the `AWS_*` and `ADAPT_CACHE_*` variables.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct RemoteArgs {
    /// Endpoint of an S3-compatible store (AWS_ENDPOINT), e.g.
    /// http://127.0.0.1:9000.
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// Region (AWS_REGION).
    #[arg(long)]
    s3_region: Option<String>,
    /// Folder of the shard cache (ADAPT_CACHE_DIR; ~/.cache/adapt).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Bound of the shard cache per pack, e.g. 8G (ADAPT_CACHE_BYTES); 0:
    /// range requests only.
    #[arg(long)]
    cache_bytes: Option<String>,
    /// Shards fetched ahead of a stream (2).
    #[arg(long)]
    prefetch_shards: Option<usize>,
}

impl RemoteArgs {
    /// The options these flags give, made the process default (a pipeline
    /// opening `s3://…` or `https://…` uses them).
    pub(crate) fn install(&self) -> anyhow::Result<RemoteOptions> {
        let mut o = RemoteOptions::from_env();
        if let Some(e) = &self.s3_endpoint {
            o.endpoint = Some(e.clone());
        }
        if let Some(r) = &self.s3_region {
            o.region = Some(r.clone());
        }
        if let Some(d) = &self.cache_dir {
            o.cache_dir = d.clone();
        }
        if let Some(b) = &self.cache_bytes {
            o.cache_bytes = crate::parse_bytes(b)
                .with_context(|| format!("--cache-bytes {b:?}: expected e.g. 512M or 8G"))?;
        }
        if let Some(n) = self.prefetch_shards {
            o.prefetch_shards = n;
        }
        crate::set_default_options(o.clone());
        Ok(o)
    }
}
