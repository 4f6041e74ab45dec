//! Where a format's files are: a local folder checked to exist, or a file
//! list (local, or fetched from a store into the cache folder).

use crate::PipelineError;
use std::path::{Path, PathBuf};

/// `path` as a layout read from local files only: refused when it names a
/// store, or when it does not exist.
pub(super) fn local_folder(path: &Path, name: &str) -> Result<(), PipelineError> {
    if path.to_str().is_some_and(adapt_remote::is_remote) {
        // Packs are named first: they are what the message recommends.
        let remote: Vec<&str> = super::FORMATS
            .iter()
            .filter(|f| f.remote() && f.name() != "pack")
            .map(|f| f.name())
            .collect();
        return Err(PipelineError::Option(format!(
            "{}: --dataset {name} reads local files; only packs and {} files are read from object storage \
             (pack the source with `pack --out s3://…` and open it as --dataset pack)",
            path.display(),
            super::or_list(&remote)
        )));
    }
    if !path.exists() {
        return Err(PipelineError::MissingPath(path.to_owned()));
    }
    Ok(())
}

/// The files `path` names: a local list (`::`-separated, brace patterns,
/// folders) left to the reader, or a list of `s3://…`/`https://…` files
/// (brace patterns expanded here) fetched into the cache folder.
pub(super) enum FileList<'a> {
    Local(&'a str),
    Fetched(Vec<PathBuf>),
}

/// The file list in `path`; a remote one is fetched now (`what` names the
/// files in messages).
pub(super) fn file_list<'a>(path: &'a Path, what: &str) -> Result<FileList<'a>, PipelineError> {
    let spec = path.to_str().ok_or_else(|| {
        PipelineError::Option(format!("{}: file list is not UTF-8", path.display()))
    })?;
    let parts: Vec<&str> = spec.split("::").filter(|p| !p.is_empty()).collect();
    let remote = parts.iter().filter(|p| adapt_remote::is_remote(p)).count();
    if remote == 0 {
        return Ok(FileList::Local(spec));
    }
    if remote < parts.len() {
        return Err(PipelineError::Option(format!(
            "{spec}: {what} are either all local or all in a store (s3://, https://), not both"
        )));
    }
    let mut urls = Vec::new();
    for part in parts {
        let expanded = adapt_formats::expand_braces(part, adapt_formats::MAX_SHARDS)
            .map_err(|reason| PipelineError::Option(format!("{part}: {reason}")))?;
        urls.extend(expanded);
        if urls.len() > adapt_formats::MAX_SHARDS {
            return Err(PipelineError::Option(format!(
                "{spec}: more than {} files",
                adapt_formats::MAX_SHARDS
            )));
        }
    }
    Ok(FileList::Fetched(fetch(&urls)?))
}

/// Local copies of the files at `urls`, with the process's options.
#[cfg(feature = "s3")]
fn fetch(urls: &[String]) -> Result<Vec<PathBuf>, PipelineError> {
    Ok(adapt_remote::fetch_files(
        urls,
        &adapt_remote::default_options(),
    )?)
}

/// Without the client: an error that says how to get it.
#[cfg(not(feature = "s3"))]
fn fetch(urls: &[String]) -> Result<Vec<PathBuf>, PipelineError> {
    Err(PipelineError::NoS3(
        urls.first().cloned().unwrap_or_default(),
    ))
}

/// The shard cache folder (`ADAPT_CACHE_DIR`), checked
/// ([`adapt_remote::check_cache_dir`]): one another user could write into
/// is an error; one that cannot be made (a read-only home) is `None`, the
/// data read without it.
pub(super) fn cache_root() -> Result<Option<PathBuf>, PipelineError> {
    let root = adapt_remote::default_options().cache_dir;
    match adapt_remote::check_cache_dir(&root) {
        Ok(()) => Ok(Some(root)),
        Err(adapt_remote::RemoteError::Io { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
