//! File lists as WebDataset and Hugging Face users write them: `::`-separated
//! paths, brace expansion (`shards-{000000..000999}.tar`, `{a,b}`,
//! `{1..9..2}`, nested, as the `braceexpand` package WebDataset uses), or a
//! folder whose files of the format's extension are taken in sorted order.

use crate::FormatError;
use std::path::{Path, PathBuf};

/// Most files one list may expand to (LAION-400M has 41,455 shards): a typo
/// such as `{0..999999999}` is an error, not an allocation of a billion
/// paths.
pub const MAX_SHARDS: usize = 10_000_000;

/// Where a folder's files are looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Folder {
    /// Its own files only (WebDataset shards).
    Flat,
    /// Its files and its sub-folders' (a Hugging Face `data/` tree).
    Recursive,
}

/// The files of `spec`: each `::`-separated part brace-expanded, and a part
/// that names a folder replaced by its files whose names end in one of
/// `suffixes` (`.tar`), in sorted order. `what` names the files in the
/// error for an empty list.
pub(crate) fn list_files(
    spec: &str,
    suffixes: &[&str],
    folder: Folder,
    what: &'static str,
) -> Result<Vec<PathBuf>, FormatError> {
    let bad = |reason: String| FormatError::InvalidInput {
        path: PathBuf::from(spec),
        reason,
    };
    let mut out = Vec::new();
    for part in spec.split("::").filter(|p| !p.is_empty()) {
        for name in expand_braces(part, MAX_SHARDS).map_err(bad)? {
            let path = PathBuf::from(name);
            if path.is_dir() {
                let start = out.len();
                files_in(&path, suffixes, folder, &mut out)?;
                out[start..].sort();
            } else {
                out.push(path);
            }
            if out.len() > MAX_SHARDS {
                return Err(bad(format!("more than {MAX_SHARDS} files")));
            }
        }
    }
    if out.is_empty() {
        return Err(FormatError::Empty {
            path: PathBuf::from(spec),
            what,
        });
    }
    Ok(out)
}

/// Whether `path`'s name ends in one of `suffixes`, in any case (a name
/// that is only the suffix, a hidden file, does not).
fn has_suffix(path: &Path, suffixes: &[&str]) -> bool {
    let name = path
        .file_name()
        .map(|n| n.as_encoded_bytes().to_ascii_lowercase())
        .unwrap_or_default();
    suffixes
        .iter()
        .any(|s| name.len() > s.len() && name.ends_with(s.as_bytes()))
}

/// Appends the files in `dir` (and below it, when recursive) whose names
/// end in one of `suffixes` to `out`, unsorted.
fn files_in(
    dir: &Path,
    suffixes: &[&str],
    folder: Folder,
    out: &mut Vec<PathBuf>,
) -> Result<(), FormatError> {
    let mut entries: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(FormatError::io(dir))? {
        entries.push(entry.map_err(FormatError::io(dir))?.path());
    }
    for path in entries {
        if path.is_file() && has_suffix(&path, suffixes) {
            out.push(path);
        } else if folder == Folder::Recursive && path.is_dir() {
            files_in(&path, suffixes, folder, out)?;
        }
        if out.len() > MAX_SHARDS {
            return Err(FormatError::InvalidInput {
                path: dir.to_owned(),
                reason: format!("more than {MAX_SHARDS} files"),
            });
        }
    }
    Ok(())
}

/// Brace expansion as Python's `braceexpand`: `{a,b}` alternatives,
/// `{0..10}` and `{000..999}` (zero-padded to the wider end) integer ranges
/// with an optional `..step`, `{a..e}` letter ranges, nesting, `\{` for a
/// literal brace. A brace with neither a comma nor a range stays as written.
/// At most `limit` results.
pub fn expand_braces(pattern: &str, limit: usize) -> Result<Vec<String>, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    expand_into(&chars, String::new(), &mut out, limit)?;
    Ok(out)
}

fn expand_into(
    rest: &[char],
    prefix: String,
    out: &mut Vec<String>,
    limit: usize,
) -> Result<(), String> {
    let mut prefix = prefix;
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            '\\' if i + 1 < rest.len() => {
                prefix.push(rest[i + 1]);
                i += 2;
            }
            '{' => {
                if let Some(close) = matching_brace(&rest[i..]) {
                    let inner = &rest[i + 1..i + close];
                    if let Some(choices) = alternatives(inner, limit)? {
                        for choice in choices {
                            let mut next = choice;
                            next.extend(&rest[i + close + 1..]);
                            let chars: Vec<char> = next.chars().collect();
                            expand_into(&chars, prefix.clone(), out, limit)?;
                        }
                        return Ok(());
                    }
                }
                prefix.push('{');
                i += 1;
            }
            c => {
                prefix.push(c);
                i += 1;
            }
        }
    }
    if out.len() >= limit {
        return Err(format!("the pattern expands to more than {limit} names"));
    }
    out.push(prefix);
    Ok(())
}

/// The offset of the `}` closing the `{` at `s[0]`, skipping nested pairs
/// and escaped characters.
fn matching_brace(s: &[char]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            '\\' => i += 1,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// What a brace's inside stands for: a range, or top-level comma-separated
/// alternatives (each still to expand); `None` when it is neither.
fn alternatives(inner: &[char], limit: usize) -> Result<Option<Vec<String>>, String> {
    let text: String = inner.iter().collect();
    if let Some(range) = range(&text, limit)? {
        return Ok(Some(range));
    }
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        match c {
            '\\' if i + 1 < inner.len() => {
                current.push(c);
                current.push(inner[i + 1]);
                i += 1;
            }
            '{' => {
                depth += 1;
                current.push(c);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
        i += 1;
    }
    if parts.is_empty() {
        return Ok(None);
    }
    parts.push(current);
    Ok(Some(parts))
}

/// `a..b` or `a..b..step` over integers (zero-padded when an end is written
/// with a leading zero) or single letters; `None` when `text` is not one.
fn range(text: &str, limit: usize) -> Result<Option<Vec<String>>, String> {
    let fields: Vec<&str> = text.split("..").collect();
    if !(2..=3).contains(&fields.len()) {
        return Ok(None);
    }
    let step: i64 = match fields.get(2) {
        Some(s) => match s.parse::<i64>() {
            Ok(0) => 1,
            Ok(n) => n.abs(),
            Err(_) => return Ok(None),
        },
        None => 1,
    };
    let (a, b) = (fields[0], fields[1]);
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let padded = |s: &str| {
            s.trim_start_matches('-').len() > 1 && s.trim_start_matches('-').starts_with('0')
        };
        let width = if padded(a) || padded(b) {
            a.len().max(b.len())
        } else {
            0
        };
        let count = (x.abs_diff(y) / step.unsigned_abs()).saturating_add(1);
        if count > limit as u64 {
            return Err(format!("{{{text}}} expands to more than {limit} names"));
        }
        let dir = if y >= x { step } else { -step };
        let values = (0..count as i64).map(|k| x + k * dir);
        return Ok(Some(values.map(|v| format!("{v:0width$}")).collect()));
    }
    let (mut ca, mut cb) = (a.chars(), b.chars());
    if let (Some(x), None, Some(y), None) = (ca.next(), ca.next(), cb.next(), cb.next())
        && x.is_ascii_alphabetic()
        && y.is_ascii_alphabetic()
    {
        let (lo, hi) = (x as u8, y as u8);
        let mut letters: Vec<String> = if lo <= hi {
            (lo..=hi)
                .step_by(step as usize)
                .map(|c| (c as char).to_string())
                .collect()
        } else {
            (hi..=lo)
                .rev()
                .step_by(step as usize)
                .map(|c| (c as char).to_string())
                .collect()
        };
        letters.truncate(limit);
        return Ok(Some(letters));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(p: &str) -> Vec<String> {
        expand_braces(p, 1000).unwrap()
    }

    #[test]
    fn expands_as_braceexpand() {
        assert_eq!(
            expand("s-{000..002}.tar"),
            ["s-000.tar", "s-001.tar", "s-002.tar"]
        );
        assert_eq!(expand("{1..3}"), ["1", "2", "3"]);
        assert_eq!(expand("{3..1}"), ["3", "2", "1"]);
        assert_eq!(expand("{1..10..4}"), ["1", "5", "9"]);
        assert_eq!(expand("{08..10}"), ["08", "09", "10"]);
        assert_eq!(expand("{a,b}-{x,y}"), ["a-x", "a-y", "b-x", "b-y"]);
        assert_eq!(expand("{a,{b,c}d}"), ["a", "bd", "cd"]);
        assert_eq!(expand("{a..c}"), ["a", "b", "c"]);
        assert_eq!(expand("plain.tar"), ["plain.tar"]);
        assert_eq!(expand("{x}"), ["{x}"]);
        assert_eq!(expand("\\{1,2}"), ["{1,2}"]);
        assert_eq!(expand("{1,2"), ["{1,2"]);
        assert_eq!(expand("a{,b}"), ["a", "ab"]);
    }

    #[test]
    fn bounds_the_count() {
        assert!(expand_braces("{0..999999999999}", 1000).is_err());
        assert!(expand_braces("{0..9}{0..9}{0..9}{0..9}", 1000).is_err());
        assert_eq!(
            expand_braces("{0..9}{0..9}{0..9}", 1000).unwrap().len(),
            1000
        );
    }
}
