//! Writes WebDataset shards as WebDataset's `ShardWriter` does: samples of
//! members `KEY.EXT` in `PREFIX-000000.tar`, `PREFIX-000001.tar`, … with at
//! most `max_count` samples each. Headers are deterministic (mode 0644,
//! time 0), so the same samples give the same bytes; each shard is written
//! under a temporary name and renamed when complete, so an interrupted
//! writer never leaves a whole-looking shard.

use crate::FormatError;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A shard being written: the builder over its temporary file.
struct Open {
    builder: tar::Builder<BufWriter<File>>,
    tmp: PathBuf,
    path: PathBuf,
}

/// Writes samples into numbered tar shards.
pub struct WebDatasetWriter {
    dir: PathBuf,
    prefix: String,
    max_count: usize,
    count: usize,
    next_shard: usize,
    open: Option<Open>,
    written: Vec<PathBuf>,
}

impl WebDatasetWriter {
    /// Writes shards `dir/PREFIX-NNNNNN.tar` of at most `max_count` samples
    /// (at least 1) each; `dir` is created when missing.
    pub fn new(dir: &Path, prefix: &str, max_count: usize) -> Result<Self, FormatError> {
        std::fs::create_dir_all(dir).map_err(FormatError::io(dir))?;
        Ok(Self {
            dir: dir.to_owned(),
            prefix: prefix.to_owned(),
            max_count: max_count.max(1),
            count: 0,
            next_shard: 0,
            open: None,
            written: Vec::new(),
        })
    }

    /// Appends one sample: members `key.ext` in the order given (WebDataset
    /// keys hold no dot in their last component; extensions may).
    pub fn write(&mut self, key: &str, members: &[(&str, &[u8])]) -> Result<(), FormatError> {
        let base = key.rsplit('/').next().unwrap_or(key);
        if base.is_empty() || base.contains('.') {
            return Err(FormatError::InvalidInput {
                path: self.dir.clone(),
                reason: format!("WebDataset key {key:?}: empty or with a dot in its last part"),
            });
        }
        if self.open.is_none() || self.count >= self.max_count {
            self.finish_shard()?;
            self.start_shard()?;
        }
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        for (ext, bytes) in members {
            let mut header = tar::Header::new_ustar();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_entry_type(tar::EntryType::Regular);
            let name = format!("{key}.{ext}");
            open.builder
                .append_data(&mut header, &name, *bytes)
                .map_err(FormatError::io(&open.tmp))?;
        }
        self.count += 1;
        Ok(())
    }

    /// Completes the last shard and returns every shard written, in order.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, FormatError> {
        self.finish_shard()?;
        Ok(std::mem::take(&mut self.written))
    }

    fn start_shard(&mut self) -> Result<(), FormatError> {
        let path = self
            .dir
            .join(format!("{}-{:06}.tar", self.prefix, self.next_shard));
        let tmp = path.with_extension("tar.partial");
        let file = File::create(&tmp).map_err(FormatError::io(&tmp))?;
        let mut builder = tar::Builder::new(BufWriter::with_capacity(1 << 20, file));
        builder.mode(tar::HeaderMode::Deterministic);
        self.open = Some(Open { builder, tmp, path });
        self.next_shard += 1;
        self.count = 0;
        Ok(())
    }

    fn finish_shard(&mut self) -> Result<(), FormatError> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let Open { builder, tmp, path } = open;
        let done = (|| {
            let mut w = builder.into_inner()?;
            w.flush()?;
            w.get_ref().sync_data()?;
            drop(w);
            std::fs::rename(&tmp, &path)
        })();
        done.map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            FormatError::Io {
                path: path.clone(),
                source,
            }
        })?;
        self.written.push(path);
        Ok(())
    }
}

impl Drop for WebDatasetWriter {
    /// A writer dropped without `finish` leaves no partial shard behind.
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            drop(open.builder);
            let _ = std::fs::remove_file(&open.tmp);
        }
    }
}
