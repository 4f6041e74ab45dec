//! Parquet files in the Hugging Face layout read in place: an image column
//! of `{bytes, path}` structs (the `datasets` `Image` feature; a row with
//! only a `path` is read from that file) or raw binary,
//! an integer label column (`ClassLabel`, its names taken from the
//! `huggingface` metadata), several files per split. Row groups are the unit
//! of reading: a sample's read decodes its row group's image column once
//! into a bounded cache shared by the worker threads, and
//! [`Parquet::row_group_ranges`] lets a row-group-by-row-group order stream
//! them.
//!
//! Labels are read at open (a small column), so a damaged label column or a
//! file without the named columns fails at once naming the file; a null
//! image or a value past the member bound fails the read of that sample
//! only, naming the file, row group and row. A text column (captions),
//! where one is named, is read at open too (`text`).

mod cache;
mod chunk;
mod text;
mod writer;

pub use writer::{ParquetWriter, ParquetWriterOptions};

use crate::file_list::{Folder, list_files};
use crate::image_io::{decode_rgb_into, image_beside, open_regular};
use crate::{FormatError, MAX_MEMBER_BYTES, ParquetOptions};
use adapt_dataset::{Dataset, Encoded, Error, FixedSteps, Read, Sample, check_index};
use cache::{Images, RowGroupCache};
use chunk::PositionedFile;
use parquet::basic::Type as Physical;
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::{ByteArray, DataType};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::schema::types::{ColumnDescriptor, SchemaDescriptor};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes of decoded image values kept in memory by default.
pub const PARQUET_CACHE_BYTES: usize = 512 << 20;

/// Most rows one row group may declare: the count sizes the label and
/// image buffers, so it is bounded before it does.
const MAX_GROUP_ROWS: i64 = 1 << 24;

/// One open file: its reader and the leaf columns read.
struct File {
    path: PathBuf,
    reader: SerializedFileReader<PositionedFile>,
    image: Arc<ColumnDescriptor>,
    image_leaf: usize,
    /// The image struct's `path` field, where it has one (read for rows
    /// whose bytes are null).
    path_leaf: Option<usize>,
    /// The text column, where one is read.
    text_leaf: Option<usize>,
}

/// One row group: its file, its number there and its first sample.
struct Group {
    file: u32,
    number: u32,
    first: usize,
    rows: usize,
}

/// Parquet files opened for reading by sample.
pub struct Parquet {
    files: Vec<File>,
    groups: Vec<Group>,
    labels: Vec<i64>,
    /// Each row's text, where a text column is read (null: `None`).
    texts: Option<text::Texts>,
    class_names: Option<Vec<String>>,
    classes: Option<usize>,
    cache: RowGroupCache,
}

impl Parquet {
    /// Opens the files `spec` names (`::`-separated, brace-expanded, or a
    /// folder searched for `.parquet` files — one split only).
    pub fn open(spec: &str, options: &ParquetOptions) -> Result<Self, FormatError> {
        let files = list_files(
            spec,
            &[".parquet"],
            Folder::Recursive,
            "no Parquet file (.parquet) named or found",
        )?;
        one_split(spec, &files)?;
        Self::open_files(files, options)
    }

    /// Opens the given files, in that order.
    pub fn open_files(paths: Vec<PathBuf>, options: &ParquetOptions) -> Result<Self, FormatError> {
        let mut files = Vec::with_capacity(paths.len());
        let mut groups = Vec::new();
        let mut labels = Vec::new();
        let mut texts = options.text.as_ref().map(|c| text::Texts::new(c));
        let mut class_names = None;
        for (number, path) in paths.into_iter().enumerate() {
            let file = open_file(path, options)?;
            let number = u32::try_from(number).map_err(|_| FormatError::Parquet {
                path: file.path.clone(),
                reason: "more files than a 32-bit count".into(),
            })?;
            add_groups(&file, number, options, &mut groups, &mut labels)?;
            if let Some(texts) = &mut texts {
                texts.add_file(&file, number, &groups)?;
            }
            if class_names.is_none() {
                class_names = options
                    .label
                    .as_deref()
                    .and_then(|l| hf_class_names(&file.reader, l));
            }
            files.push(file);
        }
        if labels.is_empty() {
            return Err(FormatError::Empty {
                path: files.first().map(|f| f.path.clone()).unwrap_or_default(),
                what: "the Parquet files hold no row",
            });
        }
        let classes = match &class_names {
            Some(names) => Some(names.len()),
            None if options.label.is_some() => {
                let max = labels.iter().copied().max().unwrap_or(-1);
                usize::try_from(max).ok().map(|m| m + 1)
            }
            None => None,
        };
        Ok(Self {
            files,
            groups,
            labels,
            texts,
            class_names,
            classes,
            cache: RowGroupCache::new(PARQUET_CACHE_BYTES),
        })
    }

    /// Keeps at most `bytes` of decoded image values (at least the row
    /// group being read); the default is [`PARQUET_CACHE_BYTES`].
    pub fn with_cache_bytes(mut self, bytes: usize) -> Self {
        self.cache = RowGroupCache::new(bytes);
        self
    }

    /// The files, in sample order.
    pub fn files(&self) -> Vec<&Path> {
        self.files.iter().map(|f| f.path.as_path()).collect()
    }

    /// The class names of a `ClassLabel` label column, from the files'
    /// `huggingface` metadata, when they carry them.
    pub fn class_names(&self) -> Option<&[String]> {
        self.class_names.as_deref()
    }

    /// The samples of each row group, as index ranges: the unit a
    /// group-by-group order streams.
    pub fn row_group_ranges(&self) -> Vec<Range<usize>> {
        self.groups
            .iter()
            .map(|g| g.first..g.first + g.rows)
            .collect()
    }

    /// The row group holding sample `index` (which is in range).
    fn group_of(&self, index: usize) -> usize {
        self.groups.partition_point(|g| g.first + g.rows <= index)
    }

    /// Sample `index` as errors and `source` name it.
    fn place(&self, index: usize) -> PathBuf {
        let g = &self.groups[self.group_of(index)];
        let file = &self.files[g.file as usize];
        PathBuf::from(format!(
            "{} (row group {}, row {})",
            file.path.display(),
            g.number,
            index - g.first
        ))
    }

    /// Sample `index`'s encoded image bytes.
    fn image_bytes(&self, index: usize) -> Result<ByteArray, FormatError> {
        let group = self.group_of(index);
        let images = self.cache.get(group, || self.decode_group(group))?;
        let g = &self.groups[group];
        let row = index - g.first;
        let value = images.rows.get(row).cloned().flatten();
        let bad = |reason: String| FormatError::Parquet {
            path: self.place(index),
            reason,
        };
        let file = &self.files[g.file as usize];
        let value = match (value, images.paths.get(row).cloned().flatten()) {
            (Some(v), _) => v,
            (None, Some(p)) => image_beside(&file.path, p.data())
                .map(ByteArray::from)
                .map_err(bad)?,
            (None, None) => {
                return Err(bad(format!(
                    "the image column {} is null (no embedded image bytes and no path)",
                    file.image.path().string()
                )));
            }
        };
        if value.len() as u64 > MAX_MEMBER_BYTES {
            return Err(bad(format!(
                "an image of {} bytes, past the {MAX_MEMBER_BYTES}-byte bound",
                value.len()
            )));
        }
        Ok(value)
    }

    /// Decodes row group `group`'s image column.
    fn decode_group(&self, group: usize) -> Result<Images, FormatError> {
        let g = &self.groups[group];
        let file = &self.files[g.file as usize];
        let bad = |reason: String| FormatError::Parquet {
            path: PathBuf::from(format!("{} (row group {})", file.path.display(), g.number)),
            reason,
        };
        let rows = binary_rows(file, g, file.image_leaf, "image").map_err(bad)?;
        let paths = match file.path_leaf {
            Some(leaf) if rows.iter().any(Option::is_none) => {
                let paths = binary_rows(file, g, leaf, "image path").map_err(bad)?;
                rows.iter()
                    .zip(paths)
                    .map(|(r, p)| if r.is_none() { p } else { None })
                    .collect()
            }
            _ => Vec::new(),
        };
        let bytes = rows
            .iter()
            .chain(&paths)
            .flatten()
            .map(ByteArray::len)
            .sum();
        Ok(Images { rows, paths, bytes })
    }
}

/// Leaf column `leaf`'s maximum definition level (0: never null).
fn max_def_level(file: &File, leaf: usize) -> i16 {
    file.reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .column(leaf)
        .max_def_level()
}

/// Row group `g`'s binary column `leaf` (the `what` column in messages),
/// one value per row (`None` for a null).
fn binary_rows(
    file: &File,
    g: &Group,
    leaf: usize,
    what: &str,
) -> Result<Vec<Option<ByteArray>>, String> {
    let reader = column_of(file, g.number as usize, leaf)?;
    let ColumnReader::ByteArrayColumnReader(reader) = reader else {
        return Err(format!("the {what} column is not binary"));
    };
    let (values, defs) =
        read_column(reader, g.rows).map_err(|e| format!("the {what} column: {e}"))?;
    let max_def = max_def_level(file, leaf);
    let count = if max_def == 0 {
        values.len()
    } else {
        defs.len()
    };
    if count != g.rows {
        return Err(format!(
            "the row group declares {} rows, its {what} column holds {count}",
            g.rows
        ));
    }
    let mut values = values.into_iter();
    Ok(if max_def == 0 {
        (0..g.rows).map(|_| values.next()).collect()
    } else {
        defs.iter()
            .map(|&d| if d == max_def { values.next() } else { None })
            .collect()
    })
}

/// Opens one file and finds its image column.
fn open_file(path: PathBuf, options: &ParquetOptions) -> Result<File, FormatError> {
    let handle = open_regular(&path)?;
    let len = handle.metadata().map_err(FormatError::io(&path))?.len();
    let bad = |reason: String| FormatError::Parquet {
        path: path.clone(),
        reason,
    };
    let reader = guarded(|| {
        SerializedFileReader::new(PositionedFile::new(handle, len)).map_err(|e| e.to_string())
    })
    .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
    let schema = reader.metadata().file_metadata().schema_descr();
    let image_leaf = leaf(schema, &options.image, Column::Image).map_err(bad)?;
    if let Some(label) = &options.label {
        leaf(schema, label, Column::Label).map_err(bad)?;
    }
    let text_leaf = match &options.text {
        Some(text) => Some(leaf(schema, text, Column::Text).map_err(bad)?),
        None => None,
    };
    let image = schema.column(image_leaf);
    let path_leaf = schema.columns().iter().position(|c| {
        c.path().parts() == [options.image.as_str(), "path"]
            && c.physical_type() == Physical::BYTE_ARRAY
            && c.max_rep_level() == 0
    });
    Ok(File {
        path,
        reader,
        image,
        image_leaf,
        path_leaf,
        text_leaf,
    })
}

/// What a column is read as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Column {
    /// Encoded images: a `{bytes, path}` struct or binary.
    Image,
    /// An integer label.
    Label,
    /// A string (UTF-8 binary).
    Text,
}

/// The leaf column read for `column`: an image column's `bytes` field (or
/// the column itself when binary), a label column itself (an integer), a
/// text column itself (binary).
fn leaf(schema: &SchemaDescriptor, column: &str, kind: Column) -> Result<usize, String> {
    let leaves = schema.columns();
    let named = |parts: &[&str]| leaves.iter().position(|c| c.path().parts() == parts);
    let found = if kind == Column::Image {
        named(&[column, "bytes"]).or_else(|| named(&[column]))
    } else {
        named(&[column])
    };
    let what = match kind {
        Column::Image => "image",
        Column::Label => "label",
        Column::Text => "text",
    };
    let Some(at) = found else {
        let names: Vec<String> = leaves.iter().map(|c| c.path().string()).collect();
        return Err(format!(
            "no {what} column {column:?} (the file's columns: {})",
            names.join(", ")
        ));
    };
    let c = &leaves[at];
    let physical = c.physical_type();
    let fits = match kind {
        Column::Image | Column::Text => physical == Physical::BYTE_ARRAY,
        Column::Label => matches!(physical, Physical::INT32 | Physical::INT64),
    };
    if !fits {
        let want = match kind {
            Column::Image => "binary",
            Column::Label => "an integer",
            Column::Text => "a string",
        };
        return Err(format!(
            "the {what} column {} is {physical}, not {want}",
            c.path().string()
        ));
    }
    if c.max_rep_level() > 0 {
        return Err(format!(
            "the {what} column {} is a list, not one value per row",
            c.path().string()
        ));
    }
    Ok(at)
}

/// Appends `file`'s row groups to `groups` and their labels to `labels`.
fn add_groups(
    file: &File,
    number: u32,
    options: &ParquetOptions,
    groups: &mut Vec<Group>,
    labels: &mut Vec<i64>,
) -> Result<(), FormatError> {
    let meta = file.reader.metadata();
    let schema = meta.file_metadata().schema_descr();
    let label_leaf = match &options.label {
        Some(l) => Some(
            leaf(schema, l, Column::Label).map_err(|reason| FormatError::Parquet {
                path: file.path.clone(),
                reason,
            })?,
        ),
        None => None,
    };
    for (i, rg) in meta.row_groups().iter().enumerate() {
        let bad = |reason: String| FormatError::Parquet {
            path: PathBuf::from(format!("{} (row group {i})", file.path.display())),
            reason,
        };
        let rows = rg.num_rows();
        if !(0..=MAX_GROUP_ROWS).contains(&rows) {
            return Err(bad(format!(
                "declares {rows} rows (at most {MAX_GROUP_ROWS} per row group are read)"
            )));
        }
        let rows = rows as usize;
        let first = labels.len();
        match label_leaf {
            None => labels.resize(first + rows, -1),
            Some(leaf) => read_labels(file, i, leaf, rows, labels).map_err(bad)?,
        }
        groups.push(Group {
            file: number,
            number: u32::try_from(i).map_err(|_| bad("past 2^32 row groups".into()))?,
            first,
            rows,
        });
    }
    Ok(())
}

/// Reads row group `group`'s label column (null: -1) onto `out`.
fn read_labels(
    file: &File,
    group: usize,
    leaf: usize,
    rows: usize,
    out: &mut Vec<i64>,
) -> Result<(), String> {
    let column = column_of(file, group, leaf)?;
    let max_def = max_def_level(file, leaf);
    let (values, defs): (Vec<i64>, Vec<i16>) = match column {
        ColumnReader::Int64ColumnReader(r) => read_column(r, rows)?,
        ColumnReader::Int32ColumnReader(r) => {
            let (v, d) = read_column(r, rows)?;
            (v.into_iter().map(i64::from).collect(), d)
        }
        _ => return Err("the label column is not an integer".into()),
    };
    let present = |count: usize| {
        if count == rows {
            Ok(())
        } else {
            Err(format!(
                "the row group declares {rows} rows, its label column holds {count}"
            ))
        }
    };
    if max_def == 0 {
        present(values.len())?;
        out.extend(values);
    } else {
        present(defs.len())?;
        let mut values = values.into_iter();
        out.extend(defs.iter().map(|&d| {
            if d == max_def {
                values.next().unwrap_or(-1)
            } else {
                -1
            }
        }));
    }
    Ok(())
}

/// Row group `group`'s reader of leaf column `leaf`.
fn column_of(file: &File, group: usize, leaf: usize) -> Result<ColumnReader, String> {
    guarded(|| {
        file.reader
            .get_row_group(group)
            .and_then(|r| r.get_column_reader(leaf))
            .map_err(|e| e.to_string())
    })
}

/// Reads `rows` records of a column: its non-null values and (for an
/// optional column) its definition levels.
fn read_column<T: DataType>(
    mut reader: ColumnReaderImpl<T>,
    rows: usize,
) -> Result<(Vec<T::T>, Vec<i16>), String> {
    guarded(move || {
        let (mut values, mut defs) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
        let mut read = 0;
        while read < rows {
            let (records, _, _) = reader
                .read_records(rows - read, Some(&mut defs), None, &mut values)
                .map_err(|e| e.to_string())?;
            if records == 0 {
                break;
            }
            read += records;
        }
        Ok((values, defs))
    })
}

/// Runs a call into the `parquet` crate, which asserts on some damaged
/// pages and footers instead of returning an error (found by fuzzing):
/// such a panic becomes an error naming what stopped it, so a damaged file
/// is an error like any other, never a crash of the worker.
fn guarded<T>(call: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(format!("damaged data (the parquet reader stopped: {what})"))
    })
}

/// The `ClassLabel` names of column `label` in the file's `huggingface`
/// metadata.
fn hf_class_names(
    reader: &SerializedFileReader<PositionedFile>,
    label: &str,
) -> Option<Vec<String>> {
    let kv = reader.metadata().file_metadata().key_value_metadata()?;
    let text = kv
        .iter()
        .find(|kv| kv.key == "huggingface")?
        .value
        .as_deref()?;
    crate::hf_class_names(text, label)
}

/// The Hugging Face split a file belongs to, by its name:
/// `SPLIT-00000-of-00004.parquet` (`data/` of a dataset repository) or
/// `SPLIT/0000.parquet` (`refs/convert/parquet`).
fn split_of(path: &Path) -> Option<&str> {
    let stem = path.file_stem()?.to_str()?;
    fn sharded(s: &str) -> Option<&str> {
        let mut parts = s.rsplitn(4, '-');
        let (total, of, index, split) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        (of == "of" && digits(total) && digits(index)).then_some(split)
    }
    if let Some(split) = sharded(stem) {
        return Some(split.rsplit('/').next().unwrap_or(split));
    }
    if stem.bytes().all(|b| b.is_ascii_digit()) {
        return path.parent()?.file_name()?.to_str();
    }
    None
}

/// Refuses a folder holding files of several splits (train and test read
/// as one dataset is never what was meant).
fn one_split(spec: &str, files: &[PathBuf]) -> Result<(), FormatError> {
    if !spec.split("::").any(|p| Path::new(p).is_dir()) {
        return Ok(());
    }
    let mut splits: Vec<&str> = files.iter().filter_map(|f| split_of(f)).collect();
    splits.sort_unstable();
    splits.dedup();
    if splits.len() > 1 {
        return Err(FormatError::InvalidInput {
            path: PathBuf::from(spec),
            reason: format!(
                "the folder holds the splits {}: name one split's files (its folder, or a \
                 pattern such as data/{}-{{00000..00003}}-of-00004.parquet)",
                splits.join(", "),
                splits[0]
            ),
        });
    }
    Ok(())
}

impl Dataset for Parquet {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.labels.get(index).copied()
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        check_index(index, self.labels.len())?;
        let bytes = self.image_bytes(index)?;
        let file = &self.files[self.groups[self.group_of(index)].file as usize];
        // The file names the image unless decoding fails: then the row
        // does (no path is formatted per sample).
        decode_rgb_into(&file.path, bytes.data(), out)
            .map_err(|e| e.naming(|| self.place(index)))?;
        out.label = self.labels[index];
        Ok(Read::Filled)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        let read = || -> Result<Encoded, Error> {
            check_index(index, self.labels.len())?;
            Ok(Encoded {
                bytes: self.image_bytes(index)?.data().to_vec(),
                label: self.labels[index],
                steps: FixedSteps::default(),
            })
        };
        Some(read())
    }
    fn source(&self, index: usize) -> String {
        match check_index(index, self.labels.len()) {
            Ok(()) => self.place(index).display().to_string(),
            Err(e) => e.to_string(),
        }
    }
    fn num_classes(&self) -> Option<usize> {
        self.classes
    }
    fn text(&self, index: usize) -> Option<Result<String, Error>> {
        let texts = self.texts.as_ref()?;
        Some(
            check_index(index, self.labels.len())
                .and_then(|()| texts.get(index, || self.place(index)).map_err(Error::from)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_splits_as_the_hub_does() {
        let split = |p: &str| split_of(Path::new(p)).map(str::to_owned);
        assert_eq!(
            split("data/train-00000-of-00004.parquet").as_deref(),
            Some("train")
        );
        assert_eq!(
            split("data/test-00001-of-00002.parquet").as_deref(),
            Some("test")
        );
        assert_eq!(
            split("default/validation/0000.parquet").as_deref(),
            Some("validation")
        );
        assert_eq!(
            split("my-set-00000-of-00001.parquet").as_deref(),
            Some("my-set")
        );
        assert_eq!(split("images.parquet"), None);
        assert_eq!(split("a-1-of.parquet"), None);
    }
}
