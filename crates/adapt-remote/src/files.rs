//! Whole files from a store, kept in the cache folder: WebDataset tars and
//! Parquet files at `s3://…` or `https://…` are fetched once (as Hugging
//! Face's `load_dataset` downloads a dataset's files) and read in place
//! from there. A file is fetched in parallel range requests pinned to the
//! version its HEAD answered (`If-Match` on its ETag, else
//! `If-Unmodified-Since`), into a part file renamed only when whole; one
//! process fetches a file while the others sharing the folder wait for it;
//! a cached file whose version is still the store's is not fetched again.
//! The cache bound holds for the folder: files of other datasets are
//! evicted least recently used first, and a dataset larger than the bound
//! is an error before anything is fetched.

use crate::client::pinned_get;
use crate::{Remote, RemoteError, RemoteOptions, RemoteUrl, folder};
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectMeta, ObjectStoreExt};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One file to fetch: where it is, its name in its folder, its version.
struct Wanted {
    url: String,
    folder: usize,
    name: String,
    meta: ObjectMeta,
}

/// A folder of the store (the files' parent URL), connected, and its
/// cache folder.
struct Parent {
    remote: Remote,
    dir: PathBuf,
}

/// Local copies of the files at `urls` (`s3://bucket/key` or
/// `https://host/path/file`), in that order: each fetched unless the cache
/// holds its current version. The copies live in
/// `options.cache_dir/files/<hash of the folder's URL>/<file name>`.
///
/// With `options.offline`, nothing is asked of the store: each file is
/// the copy the cache holds whole (as its version sidecar records it), or
/// [`RemoteError::NotCached`].
pub fn fetch_files(urls: &[String], options: &RemoteOptions) -> Result<Vec<PathBuf>, RemoteError> {
    if options.offline {
        return urls.iter().map(|url| cached_copy(url, options)).collect();
    }
    let mut parents: Vec<Parent> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut wanted = Vec::with_capacity(urls.len());
    for url in urls {
        let (parent, name) = split_url(url)?;
        let folder = match index.get(&parent) {
            Some(&i) => i,
            None => {
                parents.push(connect(&parent, options)?);
                index.insert(parent, parents.len() - 1);
                parents.len() - 1
            }
        };
        let remote = &parents[folder].remote;
        let meta = remote
            .block_on(remote.store.head(&remote.key(&name)))
            .map_err(|e| remote.store_error(&name, e))?;
        wanted.push(Wanted {
            url: url.clone(),
            folder,
            name,
            meta,
        });
    }
    for (i, p) in parents.iter().enumerate() {
        let mine: Vec<&Wanted> = wanted.iter().filter(|w| w.folder == i).collect();
        make_room(p, &mine, options.cache_bytes)?;
    }
    wanted
        .iter()
        .map(|w| fetch(&parents[w.folder], w, options))
        .collect()
}

/// `(folder URL, file name)` of a file's URL.
fn split_url(url: &str) -> Result<(String, String), RemoteError> {
    let parsed = RemoteUrl::parse(url)?;
    let (parent, name) = match parsed.prefix.rsplit_once('/') {
        Some((p, n)) => (p.to_owned(), n.to_owned()),
        None => (String::new(), parsed.prefix.clone()),
    };
    if name.is_empty() || name.starts_with('.') {
        return Err(RemoteError::Config {
            url: url.to_owned(),
            message: "name a file (an HTTP server lists no folder; write the files as a \
                      list or a brace pattern, e.g. train-{000000..000099}.tar)"
                .into(),
        });
    }
    let folder = RemoteUrl {
        prefix: parent,
        ..parsed
    };
    Ok((folder.join(""), name))
}

/// The cache folder of the store's folder `url`.
fn cache_folder(url: &str, options: &RemoteOptions) -> PathBuf {
    options.cache_dir.join("files").join(format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(url.as_bytes())
    ))
}

/// Offline: the cached copy of the file at `url`, whole as its sidecar
/// records it (size), marked used; else [`RemoteError::NotCached`].
fn cached_copy(url: &str, options: &RemoteOptions) -> Result<PathBuf, RemoteError> {
    let (parent, name) = split_url(url)?;
    let dir = cache_folder(&parent, options);
    let path = dir.join(&name);
    let recorded: Option<u64> = std::fs::read_to_string(sidecar(&dir, &name))
        .ok()
        .and_then(|v| v.split_whitespace().next()?.parse().ok());
    let size = std::fs::metadata(&path).ok().map(|m| m.len());
    match (recorded, size) {
        (Some(r), Some(s)) if r == s => {
            mark_used(&path);
            Ok(path)
        }
        _ => Err(RemoteError::NotCached {
            url: url.to_owned(),
            path,
        }),
    }
}

/// Marks a cached file used now, for eviction: its version sidecar's
/// modification time, not the file's own, which stays what it was when
/// fetched (readers key what they derive from a file, as WebDataset's
/// member lists, on it).
fn mark_used(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let _ = File::options()
        .append(true)
        .open(sidecar(dir, &name.to_string_lossy()))
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
}

/// When a cached file was last used: its sidecar's modification time
/// (`mark_used`), else the file's.
fn last_used(dir: &Path, file: &folder::Cached) -> std::time::SystemTime {
    std::fs::metadata(sidecar(dir, &file.name))
        .and_then(|m| m.modified())
        .unwrap_or(file.modified)
}

/// Connects to folder `url` and makes its cache folder, refused when the
/// cache may hold nothing.
fn connect(url: &str, options: &RemoteOptions) -> Result<Parent, RemoteError> {
    let remote = Remote::connect(url, options)?;
    crate::check_cache_dir(&options.cache_dir)?;
    let dir = cache_folder(url, options);
    let io = |source| RemoteError::Io {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    folder::probe(&dir).map_err(io)?;
    // Which URL the folder holds, for whoever looks into the cache.
    std::fs::write(dir.join(".url"), format!("{url}\n")).map_err(io)?;
    Ok(Parent { remote, dir })
}

/// A cached file's version as its sidecar records it.
fn version_of(meta: &ObjectMeta) -> String {
    format!(
        "{} {} {}\n",
        meta.size,
        meta.e_tag.as_deref().unwrap_or("-"),
        meta.last_modified.to_rfc3339()
    )
}

fn sidecar(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.version"))
}

/// Whether the cache holds `w`'s current version whole.
fn cached(dir: &Path, w: &Wanted) -> bool {
    let path = dir.join(&w.name);
    let same_size = std::fs::metadata(&path).is_ok_and(|m| m.len() == w.meta.size);
    same_size
        && std::fs::read_to_string(sidecar(dir, &w.name)).is_ok_and(|v| v == version_of(&w.meta))
}

/// Evicts the least recently used files of other datasets from `p`'s
/// folder until `files` fit within `budget`; an error naming the sizes
/// when they cannot.
fn make_room(p: &Parent, files: &[&Wanted], budget: u64) -> Result<(), RemoteError> {
    let total: u64 = files.iter().map(|w| w.meta.size).sum();
    let url = p.remote.url_of("");
    if total > budget {
        return Err(RemoteError::Config {
            url,
            message: format!(
                "{} files of {total} bytes are read from a local copy, more than the cache's \
                 bound of {budget} bytes; give a larger one (--cache-bytes, ADAPT_CACHE_BYTES)",
                files.len()
            ),
        });
    }
    let io = |source| RemoteError::Io {
        path: p.dir.clone(),
        source,
    };
    let _held = folder::lock(&p.dir).map_err(io)?;
    let mut listing = folder::scan(&p.dir);
    let ours: HashSet<&str> = files.iter().map(|w| w.name.as_str()).collect();
    let missing: u64 = files
        .iter()
        .filter(|w| !cached(&p.dir, w))
        .map(|w| w.meta.size)
        .sum();
    let kept = |l: &folder::Listing| {
        l.used()
            - l.shards
                .iter()
                .filter(|s| ours.contains(s.name.as_str()))
                .map(|s| s.bytes)
                .sum::<u64>()
    };
    listing.shards.sort_by_key(|s| last_used(&p.dir, s));
    let mut used = kept(&listing);
    for s in &listing.shards {
        if used + total <= budget || missing == 0 {
            break;
        }
        if ours.contains(s.name.as_str()) {
            continue;
        }
        std::fs::remove_file(p.dir.join(&s.name)).map_err(io)?;
        let _ = std::fs::remove_file(sidecar(&p.dir, &s.name));
        used -= s.bytes;
    }
    Ok(())
}

/// The local copy of `w`, fetched unless cached. Holds `.{name}.lock`
/// while it looks and fetches, so a process sharing the folder waits for
/// this fetch and then finds the file whole.
fn fetch(p: &Parent, w: &Wanted, options: &RemoteOptions) -> Result<PathBuf, RemoteError> {
    let path = p.dir.join(&w.name);
    let io = |source| RemoteError::Io {
        path: path.clone(),
        source,
    };
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(p.dir.join(format!(".{}.lock", w.name)))
        .map_err(io)?;
    lock.lock().map_err(io)?;
    if cached(&p.dir, w) {
        mark_used(&path);
        return Ok(path);
    }
    let part = p.dir.join(folder::part_name(&w.name));
    let result = download(&p.remote, w, &part, options).and_then(|()| {
        std::fs::write(sidecar(&p.dir, &w.name), version_of(&w.meta)).map_err(io)?;
        std::fs::rename(&part, &path).map_err(io)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    result.map(|()| path)
}

/// Fetches `w` into `part` in `chunk_bytes` range requests,
/// `parallel_requests` at a time, each pinned to `w`'s version; from a
/// server that answers no `Range` (Python's `http.server`), in one GET.
fn download(
    remote: &Remote,
    w: &Wanted,
    part: &Path,
    options: &RemoteOptions,
) -> Result<(), RemoteError> {
    let io = |source| RemoteError::Io {
        path: part.to_owned(),
        source,
    };
    let file = File::create_new(part).map_err(io)?;
    let chunk = options.chunk_bytes.max(1);
    let key = remote.key(&w.name);
    // One byte first: a server that ignores Range answers 200 to it.
    let probe = remote.block_on(async {
        let get = pinned_get(Some(&w.meta), Some(0..1));
        remote.store.get_opts(&key, get).await.map(|_| ())
    });
    if w.meta.size > 0 && matches!(probe, Err(object_store::Error::NotSupported { .. })) {
        return whole(remote, w, &file, part);
    }
    let starts: Vec<u64> = (0..w.meta.size).step_by(chunk as usize).collect();
    let fetch_one = |start: u64| async move {
        let end = (start + chunk).min(w.meta.size);
        let body = remote
            .get_exact_of(&w.name, start..end, Some(&w.meta))
            .await;
        body.map(|b| (start, b))
    };
    remote.block_on(async {
        futures::stream::iter(starts)
            .map(fetch_one)
            .buffer_unordered(options.parallel_requests.max(1))
            .map_err(|message| RemoteError::Fetch {
                url: w.url.clone(),
                message,
            })
            .try_for_each(|(start, body)| {
                futures::future::ready(file.write_all_at(&body, start).map_err(io))
            })
            .await
    })?;
    file.sync_data().map_err(io)
}

/// Fetches `w` into `file` with one GET of the whole object, streamed.
fn whole(remote: &Remote, w: &Wanted, file: &File, part: &Path) -> Result<(), RemoteError> {
    let io = |source| RemoteError::Io {
        path: part.to_owned(),
        source,
    };
    let key = remote.key(&w.name);
    let written = remote.block_on(async {
        let got = remote
            .store
            .get_opts(&key, pinned_get(Some(&w.meta), None))
            .await;
        let mut body = got
            .map_err(|e| remote.store_error(&w.name, e))?
            .into_stream();
        let mut at = 0u64;
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|e| remote.store_error(&w.name, e))?;
            if at + piece.len() as u64 > w.meta.size {
                return Err(RemoteError::Fetch {
                    url: w.url.clone(),
                    message: format!(
                        "the server sent more than the {} bytes it announced (a body that does \
                         not end); the download stopped there",
                        w.meta.size
                    ),
                });
            }
            file.write_all_at(&piece, at).map_err(io)?;
            at += piece.len() as u64;
        }
        Ok::<_, RemoteError>(at)
    })?;
    if written != w.meta.size {
        return Err(RemoteError::Fetch {
            url: w.url.clone(),
            message: format!("{written} bytes received of {}", w.meta.size),
        });
    }
    file.sync_data().map_err(io)
}
