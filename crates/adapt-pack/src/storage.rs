//! Where a pack's files live. The reader and the verifier see a pack
//! through [`PackStorage`]: a local folder ([`LocalStorage`]) here, an
//! object store in `adapt-remote`. Only reading goes through it; writing is
//! always to a local folder (an upload publishes that folder).

use crate::{PackError, ShardInfo};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One shard file, read by byte ranges.
pub trait ShardFile: Send + Sync {
    /// Its size in bytes.
    fn len(&self) -> u64;
    /// Whether it holds nothing (never a valid shard).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` from `offset`; an error names what failed (the storage
    /// wraps it with the shard's name).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    /// A hint that the whole shard is about to be read (verification, or
    /// streaming): a remote shard is fetched in one request instead of one
    /// per frame. Local files ignore it.
    fn read_whole_soon(&self) {}
}

/// A folder of pack files: the manifest and the shards it names.
pub trait PackStorage: Send + Sync {
    /// How `file` is named in messages: a path, or a URL.
    fn locate(&self, file: &str) -> PathBuf;
    /// The whole of a small file (the manifest), at most `limit` bytes;
    /// `None` when there is no such file.
    fn read_small(&self, file: &str, limit: u64) -> Result<Option<Vec<u8>>, PackError>;
    /// Opens shard `info` for reading.
    fn open_shard(&self, info: &ShardInfo) -> Result<Arc<dyn ShardFile>, PackError>;
    /// The shards (indices into the manifest's list) in the order a stream
    /// will read them this epoch: a remote store fetches them ahead.
    fn stream_order(&self, _shards: &[usize]) {}
    /// Every shard's header and index has been read: the reads that follow
    /// are the samples'. A remote store fetches a shard whole once a
    /// sample of it is read, not for the reads of opening it.
    fn shards_opened(&self) {}
}

/// A pack in a local folder.
#[derive(Clone, Debug)]
pub struct LocalStorage {
    dir: PathBuf,
}

impl LocalStorage {
    /// The pack folder `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
        }
    }
}

impl ShardFile for File {
    fn len(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl PackStorage for LocalStorage {
    fn locate(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }
    fn read_small(&self, file: &str, limit: u64) -> Result<Option<Vec<u8>>, PackError> {
        use std::io::Read;
        let path = self.dir.join(file);
        if !path.exists() {
            return Ok(None);
        }
        let f = regular(&path)?;
        let mut out = Vec::new();
        f.take(limit + 1)
            .read_to_end(&mut out)
            .map_err(PackError::io(&path))?;
        if out.len() as u64 > limit {
            return Err(PackError::TooLarge { path, limit });
        }
        Ok(Some(out))
    }
    fn open_shard(&self, info: &ShardInfo) -> Result<Arc<dyn ShardFile>, PackError> {
        Ok(Arc::new(regular(&self.dir.join(&info.file))?))
    }
}

/// Opens `path` only if it is a regular file: a FIFO in a shard's place
/// would block the reader forever.
pub(crate) fn regular(path: &Path) -> Result<File, PackError> {
    let meta = std::fs::metadata(path).map_err(PackError::io(path))?;
    if !meta.is_file() {
        return Err(PackError::BadShard {
            path: path.to_owned(),
            message: "not a regular file".into(),
        });
    }
    File::open(path).map_err(PackError::io(path))
}
