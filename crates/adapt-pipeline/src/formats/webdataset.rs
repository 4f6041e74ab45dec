//! WebDataset `.tar` shards as a format: a shard list as its users write
//! it, local or in a store, with the members chosen by `fields`.

use super::files::{FileList, cache_root, file_list};
use super::{Format, imagenet, normalize_of};
use crate::{DatasetSpec, OpenedDataset, PipelineError, SampleFields, Shards};
use adapt_formats::{WebDataset, WebDatasetOptions};
use std::sync::Arc;

/// WebDataset shards a stream reads at once: reading a member is one
/// positioned read, so open shards cost nothing, and 64 mix a class-sorted
/// set's batches five times more than one shard at a time
/// (`docs/benchmarks.md`, shuffle quality).
pub const WEBDATASET_STREAM_INTERLEAVE: usize = 64;

/// WebDataset `.tar` (and `.tar.gz`) shards.
pub struct WebDatasetFormat;

impl Format for WebDatasetFormat {
    fn name(&self) -> &'static str {
        "webdataset"
    }

    fn describe(&self) -> &'static str {
        "WebDataset .tar shards: a folder, '::'-separated files or brace patterns, local, s3:// or https://"
    }

    fn statistics(&self) -> ([f32; 3], [f32; 3]) {
        imagenet()
    }

    fn fields(&self) -> Option<SampleFields> {
        Some(default_members())
    }

    fn remote(&self) -> bool {
        true
    }

    fn open(&self, spec: &DatasetSpec) -> Result<OpenedDataset, PipelineError> {
        let members = spec.fields.clone().unwrap_or_else(default_members);
        // `unpacked/` where gzip-compressed shards are decompressed,
        // `index/` where shards' member lists are kept.
        let cache = cache_root()?;
        let options = WebDatasetOptions {
            image: members.image,
            label: members.label,
            unpack_dir: cache.as_ref().map(|c| c.join("unpacked")),
            text: members.text,
            index_dir: cache.as_ref().map(|c| c.join("index")),
            unpack_bytes: adapt_remote::default_options().cache_bytes,
        };
        let dataset = match file_list(&spec.path, "WebDataset shards")? {
            FileList::Local(list) => WebDataset::open(list, &options)?,
            FileList::Fetched(files) => WebDataset::open_shards(files, &options)?,
        };
        Ok(OpenedDataset {
            shards: Some(Shards {
                ranges: dataset.shard_ranges(),
                interleave: WEBDATASET_STREAM_INTERLEAVE,
            }),
            ..OpenedDataset::plain(Arc::new(dataset), normalize_of(self))
        })
    }
}

/// WebDataset's default members: `jpg;jpeg;png;webp` images, `cls` labels.
fn default_members() -> SampleFields {
    let o = WebDatasetOptions::default();
    SampleFields {
        image: o.image,
        label: o.label,
        text: o.text,
    }
}
