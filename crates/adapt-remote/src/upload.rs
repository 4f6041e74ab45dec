//! Publishing a local pack to a store: shards first (skipping those already
//! there and identical, so an interrupted upload resumes), the manifest
//! last (a reader never sees half a pack), then the replaced pack's shards
//! removed.

use crate::UploadReport;
use crate::{Remote, RemoteError, RemoteOptions};
use adapt_pack::Manifest;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MANIFEST: &str = "manifest.json";

/// Uploads the pack in `local` (complete: it has its manifest) to `url`.
/// Another pack at `url` is refused unless `overwrite`; with it, the old
/// pack stays readable until the new manifest replaces its manifest, and
/// only then are its shards (and shard objects this writer left from
/// interrupted uploads) deleted — never any other object. `progress` gets
/// bytes sent.
pub fn upload_pack(
    local: &Path,
    url: &str,
    options: &RemoteOptions,
    overwrite: bool,
    progress: &dyn Fn(u64),
) -> Result<UploadReport, RemoteError> {
    let m = Manifest::load(local)?;
    let remote = Remote::connect_writable(url, options)?;
    let old = existing(&remote, &m, overwrite)?;
    let mut report = UploadReport::default();
    for s in &m.shards {
        let path = local.join(&s.file);
        if same_shard(&remote, &s.file, &path, s.bytes)? {
            report.skipped += 1;
            progress(s.bytes);
            continue;
        }
        put_file(&remote, &s.file, &path, s.bytes, options, progress)?;
        report.uploaded += 1;
        report.bytes += s.bytes;
    }
    let text = std::fs::read(local.join(MANIFEST)).map_err(|source| RemoteError::Io {
        path: local.join(MANIFEST),
        source,
    })?;
    remote
        .block_on(
            remote
                .store
                .put(&remote.key(MANIFEST), PutPayload::from(text)),
        )
        .map_err(|e| remote.store_error(MANIFEST, e))?;
    report.removed = clean_up(&remote, &m, old.as_ref())?;
    Ok(report)
}

/// Writes `ds` as a pack into a staging folder under the cache, uploads
/// it to `url`, and removes the staging copy once published. A rerun after
/// an interruption resumes both halves (staged shards are kept and
/// verified, uploaded ones skipped).
pub fn publish(
    ds: &dyn adapt_dataset::Dataset,
    source: &adapt_pack::SourceInfo,
    url: &str,
    pack: &adapt_pack::PackOptions,
    options: &RemoteOptions,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Manifest, UploadReport), RemoteError> {
    let stage = options.cache_dir.join("staging").join(format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(url.as_bytes())
    ));
    // Refuse early, before packing, when the destination holds a pack
    // that would not be replaced.
    let remote = Remote::connect_writable(url, options)?;
    if !pack.overwrite
        && let Some(there) = remote_manifest(&remote)?
        && there.source_digest != Some(format!("{:016x}", adapt_pack::source_digest(ds)?))
    {
        return Err(RemoteError::Exists {
            url: url.to_owned(),
            message: "holds another pack, or one made from other source content".into(),
        });
    }
    let staged = adapt_pack::PackOptions {
        // The staging folder is this function's own.
        overwrite: true,
        ..pack.clone()
    };
    let m = adapt_pack::write_pack(ds, source, &stage, &staged, progress)?;
    let report = upload_pack(&stage, url, options, pack.overwrite, &|_| {})?;
    std::fs::remove_dir_all(&stage).map_err(|source| RemoteError::Io {
        path: stage.clone(),
        source,
    })?;
    Ok((m, report))
}

fn remote_manifest(remote: &Remote) -> Result<Option<Manifest>, RemoteError> {
    match remote.get_optional(MANIFEST, adapt_pack::MAX_MANIFEST_BYTES)? {
        None => Ok(None),
        Some(b) => Ok(Some(Manifest::parse(
            Path::new(&remote.url_of(MANIFEST)),
            &b,
        )?)),
    }
}

/// The pack already at the destination, if it is to be replaced; an
/// error if it may not be.
fn existing(
    remote: &Remote,
    m: &Manifest,
    overwrite: bool,
) -> Result<Option<Manifest>, RemoteError> {
    let there = match remote.get_optional(MANIFEST, adapt_pack::MAX_MANIFEST_BYTES)? {
        None => return Ok(None),
        Some(b) => Manifest::parse(Path::new(&remote.url_of(MANIFEST)), &b),
    };
    match there {
        Ok(t) if t.pack_id == m.pack_id => Ok(None),
        Ok(t) if overwrite => Ok(Some(t)),
        Ok(t) => Err(RemoteError::Exists {
            url: remote.url_of(""),
            message: if t.source_dataset == m.source_dataset
                && t.source_digest.is_some()
                && t.source_digest != m.source_digest
            {
                "holds a pack made from other content (the source has changed)".into()
            } else {
                format!(
                    "holds another pack ({} from {}, seed {})",
                    t.source_dataset, t.source_path, t.seed
                )
            },
        }),
        Err(_) if overwrite => Ok(None),
        Err(e) => Err(RemoteError::Exists {
            url: remote.url_of(""),
            message: format!("holds an unreadable manifest ({e})"),
        }),
    }
}

/// Whether object `name` is already the local shard: same size, and the
/// same header and footer (the footer holds the checksum of the frame
/// index, which holds every frame's checksum).
fn same_shard(remote: &Remote, name: &str, path: &Path, bytes: u64) -> Result<bool, RemoteError> {
    let key = remote.key(name);
    let meta = match remote.block_on(remote.store.head(&key)) {
        Ok(m) => m,
        Err(object_store::Error::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(remote.store_error(name, e)),
    };
    if meta.size != bytes || bytes < 128 {
        return Ok(false);
    }
    let io = |source| RemoteError::Io {
        path: path.to_owned(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut head = [0u8; 64];
    let mut foot = [0u8; 64];
    f.read_exact_at(&mut head, 0).map_err(io)?;
    f.read_exact_at(&mut foot, bytes - 64).map_err(io)?;
    let ranges = [0..64, bytes - 64..bytes];
    let got = remote
        .block_on(remote.store.get_ranges(&key, &ranges))
        .map_err(|e| remote.store_error(name, e))?;
    Ok(got.len() == 2 && got[0][..] == head[..] && got[1][..] == foot[..])
}

fn put_file(
    remote: &Remote,
    name: &str,
    path: &Path,
    bytes: u64,
    options: &RemoteOptions,
    progress: &dyn Fn(u64),
) -> Result<(), RemoteError> {
    let io = |source| RemoteError::Io {
        path: path.to_owned(),
        source,
    };
    let key = remote.key(name);
    let mut f = std::fs::File::open(path).map_err(io)?;
    if bytes <= options.multipart_threshold {
        let mut buf = Vec::with_capacity(bytes as usize);
        f.read_to_end(&mut buf).map_err(io)?;
        remote
            .block_on(remote.store.put(&key, PutPayload::from(buf)))
            .map_err(|e| remote.store_error(name, e))?;
        progress(bytes);
        return Ok(());
    }
    // In parts of 8 MiB, at most four in flight: memory stays ~40 MiB
    // whatever the shard's size. An interrupted multipart upload is never
    // visible as an object (S3 completes it or nothing).
    const PART: usize = 8 << 20;
    remote
        .block_on(async {
            let upload = remote.store.put_multipart(&key).await?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
            let mut buf = vec![0u8; PART];
            loop {
                let n = f.read(&mut buf).map_err(|e| object_store::Error::Generic {
                    store: "local file",
                    source: Box::new(e),
                })?;
                if n == 0 {
                    break;
                }
                w.wait_for_capacity(4).await?;
                w.write(&buf[..n]);
                progress(n as u64);
            }
            w.finish().await.map(|_| ())
        })
        .map_err(|e| remote.store_error(name, e))
}

/// After the new manifest is up: deletes the replaced pack's shards, and
/// shard objects under the prefix that this writer named and wrote but the
/// new manifest does not list (interrupted uploads). Nothing else.
fn clean_up(remote: &Remote, m: &Manifest, old: Option<&Manifest>) -> Result<usize, RemoteError> {
    use futures::TryStreamExt;
    let keep: std::collections::HashSet<&str> = m.shards.iter().map(|s| s.file.as_str()).collect();
    let mut doomed: Vec<String> = old
        .map(|o| {
            o.shards
                .iter()
                .map(|s| s.file.clone())
                .filter(|f| !keep.contains(f.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let prefix = remote.key("");
    let prefix = if remote.url.prefix.is_empty() {
        None
    } else {
        Some(&prefix)
    };
    let listed: Vec<object_store::ObjectMeta> = remote
        .block_on(remote.store.list(prefix).try_collect())
        .map_err(|e| remote.store_error("", e))?;
    for o in listed {
        let Some(name) = o.location.filename() else {
            continue;
        };
        let direct = remote.key(name) == o.location;
        if direct
            && adapt_pack::is_writer_file_name(name)
            && !keep.contains(name)
            && !doomed.iter().any(|d| d == name)
        {
            doomed.push(name.to_owned());
        }
    }
    let mut removed = 0;
    for name in doomed {
        let key = remote.key(&name);
        // Only what starts as our shards do.
        let head = match remote.block_on(remote.store.get_range(&key, 0..8)) {
            Ok(b) => b,
            Err(object_store::Error::NotFound { .. }) => continue,
            Err(e) => return Err(remote.store_error(&name, e)),
        };
        if !adapt_pack::starts_like_shard(&head) {
            continue;
        }
        match remote.block_on(remote.store.delete(&key)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => removed += 1,
            Err(e) => return Err(remote.store_error(&name, e)),
        }
    }
    Ok(removed)
}
