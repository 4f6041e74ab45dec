//! WebDataset shards read in place: `.tar` files whose members sharing a key
//! (the name up to the first dot of its last component, as WebDataset's
//! `base_plus_ext`) form one sample, indexed once at open (member offsets,
//! as `wids` does) so samples are read by random access.
//!
//! The index lists every shard's headers (seeking past the data, so a shard
//! is never read whole) and keeps, per sample, the image member's offset and
//! size and its label (read from the small label member, `cls` by default).
//! Random access gives map-style shuffling, exact resume and any world size
//! exactly as for packs; `shard_ranges` lets a shard-by-shard order stream
//! them. Members are grouped as WebDataset groups them: consecutive members
//! of one key; a key met again apart from its members, a key split across
//! two shards, a sample without an image and a member past the end of its
//! file are errors naming the shard and the member. Gzip-compressed shards
//! (`.tar.gz`, `.tgz`) are decompressed once into
//! [`WebDatasetOptions::unpack_dir`] and read from there (`gunzip`).

mod gunzip;
mod index_cache;
mod lru;
mod writer;

pub use gunzip::{MAX_UNPACKED_SHARD_BYTES, is_gzip_shard};
pub use index_cache::MAX_INDEX_CACHE_BYTES;
pub use writer::WebDatasetWriter;

use crate::FormatError;
use crate::file_list::{Folder, list_files};
use crate::image_io::{decode_filled, open_regular};
use adapt_dataset::{Dataset, Encoded, Error, FixedSteps, Read, Sample, check_index};
use std::collections::HashSet;
use std::io::{BufReader, Read as _};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The image extensions tried in turn when none is named.
pub const WEBDATASET_IMAGE_EXTENSIONS: &str = "jpg;jpeg;png;webp";

/// Largest image member read (the pack frame bound): a header declaring more
/// is an error, not an allocation.
pub const MAX_MEMBER_BYTES: u64 = 256 << 20;

/// Largest label member read: an integer in ASCII is a few bytes.
const MAX_LABEL_BYTES: u64 = 64;

/// Which members of a sample are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebDatasetOptions {
    /// The image member's extension, or alternatives separated by `;` tried
    /// in turn (WebDataset's `to_tuple("jpg;png")`); compared lowercased, as
    /// WebDataset lowercases extensions.
    pub image: String,
    /// The label member's extension (an integer in ASCII, as WebDataset's
    /// `TarWriter` writes `cls`); `None` for unlabelled data (labels -1).
    pub label: Option<String>,
    /// Where gzip-compressed shards (`.tar.gz`, `.tgz`) are decompressed,
    /// once, to be indexed and read in place (gzip has no random access):
    /// the front crate puts it beside the shard cache. `None` refuses
    /// them, naming the shard.
    pub unpack_dir: Option<PathBuf>,
    /// The text member's extension (a caption: `txt`, or `json` read as
    /// its text), which every sample must then have; `None` reads none.
    pub text: Option<String>,
    /// Where each shard's member list is kept once listed, so the next
    /// open reads it instead of every header (`index_cache`; the front
    /// crate puts it beside the shard cache); `None` lists at every open.
    pub index_dir: Option<PathBuf>,
    /// Bytes `unpack_dir` may hold: an open removes other datasets' copies
    /// (and stale ones), least recently opened first, past it; its own are
    /// kept whatever their size (the front crate gives the shard cache's
    /// bound, `ADAPT_CACHE_BYTES`).
    pub unpack_bytes: u64,
}

/// Largest text member read: a caption or a JSON record, not a file.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;

/// The member extensions a sample is indexed by, lowercased.
struct Fields {
    images: Vec<String>,
    label: Option<String>,
    text: Option<String>,
}

impl Fields {
    fn of(options: &WebDatasetOptions) -> Self {
        Self {
            images: options
                .image
                .split(';')
                .filter(|e| !e.is_empty())
                .map(str::to_ascii_lowercase)
                .collect(),
            label: options.label.as_deref().map(str::to_ascii_lowercase),
            text: options.text.as_deref().map(str::to_ascii_lowercase),
        }
    }
}

impl Default for WebDatasetOptions {
    /// Images `jpg;jpeg;png;webp`, labels `cls`.
    fn default() -> Self {
        Self {
            image: WEBDATASET_IMAGE_EXTENSIONS.into(),
            label: Some("cls".into()),
            unpack_dir: None,
            text: None,
            index_dir: None,
            unpack_bytes: u64::MAX,
        }
    }
}

/// The shard files of `spec`: `::`-separated paths, each brace-expanded (as
/// the `braceexpand` package WebDataset uses), a folder standing for its
/// `.tar`, `.tar.gz` and `.tgz` files in sorted name order.
pub fn shard_list(spec: &str) -> Result<Vec<PathBuf>, FormatError> {
    list_files(
        spec,
        &[".tar", ".tar.gz", ".tgz"],
        Folder::Flat,
        "no WebDataset shard (.tar) named or found",
    )
}

/// One sample of the index: where its image is and its label.
struct Entry {
    shard: u32,
    offset: u64,
    len: u32,
    label: i64,
    /// The image member's name inside its shard.
    member: Box<str>,
    /// The text member's offset and size, where one is read.
    text: Option<(u64, u32)>,
}

/// WebDataset shards opened for random access.
pub struct WebDataset {
    /// The shards as named (in messages and `source`).
    shards: Vec<PathBuf>,
    /// The files read: the shards, or a compressed one's decompressed copy.
    files: Vec<PathBuf>,
    /// Where compressed shards' copies are (to decompress one again that
    /// another process's open removed), and that folder's bound.
    unpack_dir: Option<PathBuf>,
    unpack_bytes: u64,
    entries: Vec<Entry>,
    ranges: Vec<Range<usize>>,
    classes: Option<usize>,
    /// The text member's extension, where one is read.
    text: Option<String>,
}

impl WebDataset {
    /// Opens the shards `spec` names (`::`-separated, brace-expanded, or a
    /// folder of `.tar` files) and indexes them.
    pub fn open(spec: &str, options: &WebDatasetOptions) -> Result<Self, FormatError> {
        Self::open_shards(shard_list(spec)?, options)
    }

    /// Indexes the given shard files, in that order (a gzip-compressed one
    /// decompressed first, unless its copy is in `options.unpack_dir`).
    pub fn open_shards(
        shards: Vec<PathBuf>,
        options: &WebDatasetOptions,
    ) -> Result<Self, FormatError> {
        let fields = Fields::of(options);
        let mut entries = Vec::new();
        let mut ranges = Vec::with_capacity(shards.len());
        let mut last_key: Option<(String, usize)> = None;
        let files =
            gunzip::unpacked_all(&shards, options.unpack_dir.as_deref(), options.unpack_bytes)?;
        for (number, path) in shards.iter().enumerate() {
            let shard = u32::try_from(number).map_err(|_| FormatError::InvalidInput {
                path: path.clone(),
                reason: "more shards than a 32-bit count".into(),
            })?;
            let label = fields.label.as_deref();
            let members =
                index_cache::members(options.index_dir.as_deref(), &files[number], label, || {
                    list_members(&files[number], path, label)
                })?;
            let first = members.iter().find_map(|m| split_name(&m.name));
            if let (Some((previous, at)), Some((key, _))) = (&last_key, first)
                && previous == key
            {
                return Err(FormatError::SplitKey {
                    key: key.to_owned(),
                    first: shards[*at].clone(),
                    second: path.clone(),
                });
            }
            let start = entries.len();
            if let Some(last) = group(path, shard, &members, &fields, &mut entries)? {
                last_key = Some((last, number));
            }
            ranges.push(start..entries.len());
        }
        if entries.is_empty() {
            return Err(FormatError::Empty {
                path: shards.first().cloned().unwrap_or_default(),
                what: "the WebDataset shards hold no sample with an image",
            });
        }
        let classes = fields.label.as_ref().and_then(|_| {
            let max = entries.iter().map(|e| e.label).max()?;
            usize::try_from(max).ok().map(|m| m + 1)
        });
        Ok(Self {
            shards,
            files,
            unpack_dir: options.unpack_dir.clone(),
            unpack_bytes: options.unpack_bytes,
            entries,
            ranges,
            classes,
            text: fields.text,
        })
    }

    /// The shard files, in index order.
    pub fn shards(&self) -> &[PathBuf] {
        &self.shards
    }

    /// The samples of each shard, as index ranges (empty for a shard
    /// without samples): the unit a shard-by-shard order streams.
    pub fn shard_ranges(&self) -> Vec<Range<usize>> {
        self.ranges.clone()
    }

    /// Sample `index`'s WebDataset key (`__key__`).
    pub fn key(&self, index: usize) -> Option<&str> {
        let member = &self.entries.get(index)?.member;
        Some(split_name(member).map_or(&**member, |(key, _)| key))
    }

    /// The image member's path as errors and `source` name it:
    /// `shard.tar/member`.
    fn member_path(&self, entry: &Entry) -> PathBuf {
        self.shards[entry.shard as usize].join(&*entry.member)
    }

    /// Shard `shard`'s file, opened. A compressed shard's copy that another
    /// process's open removed (the folder's bound) is decompressed again:
    /// the same bytes, unless the shard changed since this open, which is
    /// an error naming it.
    fn open_file(&self, shard: usize) -> Result<std::fs::File, FormatError> {
        let (file, source) = (&self.files[shard], &self.shards[shard]);
        match open_regular(file) {
            Err(FormatError::Missing { .. }) if file != source => {
                let copy = gunzip::unpacked(source, self.unpack_dir.as_deref(), self.unpack_bytes)?;
                if copy != *file {
                    return Err(FormatError::Gunzip {
                        shard: source.clone(),
                        reason: "the shard changed since the dataset was opened: open it again"
                            .into(),
                    });
                }
                open_regular(&copy)
            }
            opened => opened,
        }
    }

    /// Reads sample `index`'s image bytes into `buf` (resized to fit).
    fn read_member(&self, entry: &Entry, buf: &mut Vec<u8>) -> Result<(), FormatError> {
        let file = self.open_file(entry.shard as usize)?;
        buf.resize(entry.len as usize, 0);
        file.read_exact_at(buf, entry.offset)
            .map_err(|source| FormatError::Io {
                path: self.member_path(entry),
                source,
            })
    }

    /// Sample `index`'s text member (`KEY.ext`) as UTF-8.
    fn read_text(&self, index: usize, ext: &str) -> Result<String, Error> {
        check_index(index, self.entries.len())?;
        let entry = &self.entries[index];
        let (offset, len) = entry.text.unwrap_or_default();
        let shard = &self.shards[entry.shard as usize];
        let member = format!("{}.{ext}", self.key(index).unwrap_or_default());
        let file = self.open_file(entry.shard as usize)?;
        let mut bytes = vec![0; len as usize];
        file.read_exact_at(&mut bytes, offset)
            .map_err(|e| tar_member(shard, &member, format!("cannot read the text: {e}")))?;
        Ok(String::from_utf8(bytes)
            .map_err(|e| tar_member(shard, &member, format!("text is not UTF-8: {e}")))?)
    }
}

/// A regular member of a shard: its name, data offset and size, and its
/// bytes when it is a label member (stored as is by `index_cache`).
#[derive(bincode::Encode, bincode::Decode)]
struct Member {
    name: String,
    offset: u64,
    size: u64,
    label: Option<Vec<u8>>,
}

/// The regular members of the tar at `path` (shard `shard`, as messages
/// name it), in order, without reading their data (except label members, a
/// few bytes each). Metadata members (`__…__`) are skipped as WebDataset
/// skips them.
fn list_members(
    path: &Path,
    shard: &Path,
    label: Option<&str>,
) -> Result<Vec<Member>, FormatError> {
    let file = open_regular(path)?;
    let file_len = file.metadata().map_err(FormatError::io(path))?.len();
    let bad = |member: &str, reason: String| tar_member(shard, member, reason);
    // A small buffer: each header is one read; seeking past the data
    // discards the buffer, so a large one would read the data anyway.
    let mut archive = tar::Archive::new(BufReader::with_capacity(4096, file));
    let mut members = Vec::new();
    let entries = archive.entries_with_seek().map_err(FormatError::io(path))?;
    for entry in entries {
        let after = members
            .last()
            .map_or("(the first header)".to_owned(), |m: &Member| {
                format!("(the header after {})", m.name)
            });
        let mut entry =
            entry.map_err(|e| bad(&after, format!("truncated or damaged tar header: {e}")))?;
        let name = String::from_utf8(entry.path_bytes().into_owned())
            .map_err(|_| bad(&after, "member name is not UTF-8".into()))?;
        let kind = entry.header().entry_type();
        if let Some(what) = refused_kind(kind) {
            return Err(bad(
                &name,
                format!(
                    "a {what} member is not read (shards hold regular files; links are never followed)"
                ),
            ));
        }
        if !kind.is_file() || is_metadata(&name) {
            continue;
        }
        if let Some(why) = unsafe_name(&name) {
            return Err(bad(&name, why.into()));
        }
        let (offset, size) = (entry.raw_file_position(), entry.size());
        // Members are padded to whole 512-byte blocks: a file cut inside
        // the padding is truncated too (what follows is lost).
        if offset
            .checked_add(size.next_multiple_of(512))
            .is_none_or(|end| end > file_len)
        {
            return Err(bad(
                &name,
                format!(
                    "truncated tar: the member's {size} bytes at {offset} run past the file's end ({file_len} bytes)"
                ),
            ));
        }
        let is_label = label
            .is_some_and(|l| split_name(&name).is_some_and(|(_, e)| e.eq_ignore_ascii_case(l)));
        let label = if is_label {
            if size > MAX_LABEL_BYTES {
                return Err(bad(
                    &name,
                    format!("a label member of {size} bytes is not an integer"),
                ));
            }
            let mut bytes = Vec::with_capacity(size as usize);
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| bad(&name, format!("cannot read the label: {e}")))?;
            Some(bytes)
        } else {
            None
        };
        members.push(Member {
            name,
            offset,
            size,
            label,
        });
    }
    Ok(members)
}

/// What a member of `kind` is when a shard must not hold one: links and
/// special files (a reader that followed or opened them could reach
/// outside the shard) and sparse files. Folders and the tar's own
/// extension headers are skipped, as WebDataset skips them.
fn refused_kind(kind: tar::EntryType) -> Option<&'static str> {
    use tar::EntryType as T;
    match kind {
        T::Symlink => Some("symbolic link"),
        T::Link => Some("hard link"),
        T::Char => Some("character device"),
        T::Block => Some("block device"),
        T::Fifo => Some("FIFO"),
        T::GNUSparse => Some("sparse"),
        _ => None,
    }
}

/// Why a member name is refused: absolute, or climbing out of the shard
/// through `..` (nothing is extracted, but a key is a name other tools
/// write files by).
fn unsafe_name(name: &str) -> Option<&'static str> {
    if name.starts_with('/') {
        Some("an absolute member name (members are named relative to the shard)")
    } else if name.split('/').any(|c| c == "..") {
        Some("a member name that climbs out of the shard (`..`)")
    } else {
        None
    }
}

/// WebDataset's metadata members, skipped: `__…__` at the top or as a
/// folder (its `skip_meta`).
fn is_metadata(name: &str) -> bool {
    let first = name.split('/').next().unwrap_or(name);
    first.len() >= 4 && first.starts_with("__") && first.ends_with("__")
}

/// `(key, extension)` as WebDataset's `base_plus_ext`: the extension starts
/// at the first dot of the last path component, which must not be its first
/// character. `None` for a name without one (skipped, as WebDataset does).
pub fn split_name(name: &str) -> Option<(&str, &str)> {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base_start..].find('.')? + base_start;
    (dot > base_start).then(|| (&name[..dot], &name[dot + 1..]))
}

/// Groups `members` (one shard's) into samples appended to `out`; returns
/// the shard's last key (for the split-key check).
fn group(
    path: &Path,
    shard: u32,
    members: &[Member],
    fields: &Fields,
    out: &mut Vec<Entry>,
) -> Result<Option<String>, FormatError> {
    let mut seen = HashSet::new();
    let mut last = None;
    let mut start = 0;
    while start < members.len() {
        let Some((key, _)) = split_name(&members[start].name) else {
            start += 1;
            continue;
        };
        let mut end = start + 1;
        while end < members.len() && split_name(&members[end].name).is_none_or(|(k, _)| k == key) {
            end += 1;
        }
        if !seen.insert(key) {
            return Err(tar_member(
                path,
                &members[start].name,
                format!(
                    "key {key:?} appears again apart from its other members (WebDataset groups \
                     consecutive members of a key)"
                ),
            ));
        }
        out.push(sample_entry(
            path,
            shard,
            key,
            &members[start..end],
            fields,
        )?);
        last = Some(key);
        start = end;
    }
    Ok(last.map(str::to_owned))
}

/// The index entry of the sample `key` made of `members`.
fn sample_entry(
    path: &Path,
    shard: u32,
    key: &str,
    members: &[Member],
    fields: &Fields,
) -> Result<Entry, FormatError> {
    let images = &fields.images;
    let mut exts = HashSet::new();
    for m in members {
        if let Some(e) = member_ext(m)
            && !exts.insert(e.clone())
        {
            return Err(tar_member(
                path,
                &m.name,
                format!("a second .{e} member of key {key:?}"),
            ));
        }
    }
    let image = images
        .iter()
        .find_map(|want| with_ext(members, want))
        .ok_or_else(|| {
            tar_member(
                path,
                key,
                format!(
                    "sample without an image member (looked for .{})",
                    images.join(", .")
                ),
            )
        })?;
    if image.size > MAX_MEMBER_BYTES {
        return Err(tar_member(
            path,
            &image.name,
            format!(
                "{} bytes, past the {MAX_MEMBER_BYTES}-byte member bound",
                image.size
            ),
        ));
    }
    let label = match fields.label.as_deref() {
        None => -1,
        Some(ext) => label_of(path, key, ext, members)?,
    };
    let text = match fields.text.as_deref() {
        None => None,
        Some(ext) => Some(text_place(path, key, ext, members)?),
    };
    Ok(Entry {
        shard,
        offset: image.offset,
        len: image.size as u32,
        label,
        member: image.name.clone().into_boxed_str(),
        text,
    })
}

/// A member's extension, lowercased (as WebDataset compares them).
fn member_ext(m: &Member) -> Option<String> {
    split_name(&m.name).map(|(_, e)| e.to_ascii_lowercase())
}

/// The member of extension `ext` (lowercased) among a sample's `members`.
fn with_ext<'m>(members: &'m [Member], ext: &str) -> Option<&'m Member> {
    members
        .iter()
        .find(|m| member_ext(m).as_deref() == Some(ext))
}

/// The error for `member` of `shard`.
fn tar_member(shard: &Path, member: &str, reason: String) -> FormatError {
    FormatError::TarMember {
        shard: shard.to_owned(),
        member: member.to_owned(),
        reason,
    }
}

/// Sample `key`'s label: its `.ext` member (read while listing) as an
/// integer.
fn label_of(path: &Path, key: &str, ext: &str, members: &[Member]) -> Result<i64, FormatError> {
    let m = members
        .iter()
        .find(|m| m.label.is_some())
        .ok_or_else(|| tar_member(path, key, format!("sample without a .{ext} label member")))?;
    let text = m.label.as_deref().unwrap_or_default();
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .ok_or_else(|| {
            tar_member(
                path,
                &m.name,
                format!(
                    "label {:?} is not an integer",
                    String::from_utf8_lossy(text)
                ),
            )
        })
}

/// Where sample `key`'s `.ext` text member is: offset and size, bounded.
fn text_place(
    path: &Path,
    key: &str,
    ext: &str,
    members: &[Member],
) -> Result<(u64, u32), FormatError> {
    let m = with_ext(members, ext)
        .ok_or_else(|| tar_member(path, key, format!("sample without a .{ext} text member")))?;
    if m.size > MAX_TEXT_BYTES {
        return Err(tar_member(
            path,
            &m.name,
            format!(
                "a text member of {} bytes, past the {MAX_TEXT_BYTES}-byte bound",
                m.size
            ),
        ));
    }
    Ok((m.offset, m.size as u32))
}

impl Dataset for WebDataset {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.entries.get(index).map(|e| e.label)
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        check_index(index, self.entries.len())?;
        let entry = &self.entries[index];
        // The shard names the image unless decoding fails: then the member
        // does (no path is built per sample).
        let shard = &self.shards[entry.shard as usize];
        decode_filled(shard, out, |bytes| self.read_member(entry, bytes))
            .map_err(|e| e.naming(|| self.member_path(entry)))?;
        out.label = entry.label;
        Ok(Read::Filled)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        let read = || -> Result<Encoded, Error> {
            check_index(index, self.entries.len())?;
            let entry = &self.entries[index];
            let mut bytes = Vec::new();
            self.read_member(entry, &mut bytes)?;
            Ok(Encoded {
                bytes,
                label: entry.label,
                steps: FixedSteps::default(),
            })
        };
        Some(read())
    }
    fn source(&self, index: usize) -> String {
        match check_index(index, self.entries.len()) {
            Ok(()) => self.member_path(&self.entries[index]).display().to_string(),
            Err(e) => e.to_string(),
        }
    }
    fn num_classes(&self) -> Option<usize> {
        self.classes
    }
    fn text(&self, index: usize) -> Option<Result<String, Error>> {
        let ext = self.text.as_deref()?;
        Some(self.read_text(index, ext))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_names_as_base_plus_ext() {
        assert_eq!(split_name("a/b/000123.jpg"), Some(("a/b/000123", "jpg")));
        assert_eq!(split_name("x.seg.png"), Some(("x", "seg.png")));
        assert_eq!(split_name("dir.v2/x.cls"), Some(("dir.v2/x", "cls")));
        assert_eq!(split_name("noext"), None);
        assert_eq!(split_name(".hidden"), None);
        assert!(is_metadata("__index__"));
        assert!(is_metadata("__meta__/x.json"));
        assert!(!is_metadata("__x.jpg"));
    }
}
