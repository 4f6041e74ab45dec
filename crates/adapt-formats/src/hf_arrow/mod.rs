//! Hugging Face `datasets`' Arrow files read in place: the IPC streams a
//! `Dataset` keeps in its cache (`ds.cache_files`) or `save_to_disk`
//! writes (`data-00000-of-00001.arrow`), memory-mapped and read without a
//! copy. The image column is the `Image` feature's `{bytes, path}` struct
//! (a row with null bytes is read from the file its `path` names) or raw
//! binary; the label an integer column (`ClassLabel`, its names from the
//! schema's `huggingface` metadata); an optional string column is each
//! sample's text.
//!
//! Labels and texts are read at open (small columns), so a file without
//! the named columns, or with a mistyped one, fails at once naming it; a
//! null image or one past the member bound fails the read of that sample
//! only, naming the file, record batch and row. Record batches are the
//! streamable shards.

mod writer;

pub use writer::ArrowWriter;

use crate::image_io::{decode_rgb_into, image_beside, open_regular};
use crate::{FormatError, MAX_MEMBER_BYTES, MAX_TEXT_BYTES, ParquetOptions};
use adapt_dataset::{Dataset, Encoded, Error, FixedSteps, Read, Sample, check_index};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int8Type, Int16Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One record batch: its file, its number there, its first sample and its
/// image column (`bytes` values, and `path` where the struct has one).
struct Chunk {
    file: u32,
    number: u32,
    first: usize,
    rows: usize,
    bytes: ArrayRef,
    paths: Option<ArrayRef>,
}

/// Hugging Face Arrow files opened for reading by sample.
pub struct ArrowFiles {
    files: Vec<PathBuf>,
    chunks: Vec<Chunk>,
    labels: Vec<i64>,
    texts: Option<Vec<Option<String>>>,
    class_names: Option<Vec<String>>,
    classes: Option<usize>,
}

impl ArrowFiles {
    /// Opens the files `spec` names (`::`-separated, brace-expanded, or a
    /// `save_to_disk` folder searched for `.arrow` files; a `DatasetDict`'s
    /// folder is refused, naming its splits). `options` names the columns,
    /// as for Parquet.
    pub fn open(spec: &str, options: &ParquetOptions) -> Result<Self, FormatError> {
        for part in spec.split("::").map(Path::new).filter(|p| p.is_dir()) {
            refuse_dataset_dict(part)?;
        }
        let files = crate::file_list::list_files(
            spec,
            &[".arrow"],
            crate::file_list::Folder::Recursive,
            "no Arrow file (.arrow) named or found",
        )?;
        Self::open_files(files, options)
    }

    /// Opens the given files, in that order.
    pub fn open_files(paths: Vec<PathBuf>, options: &ParquetOptions) -> Result<Self, FormatError> {
        let mut out = Self {
            files: Vec::with_capacity(paths.len()),
            chunks: Vec::new(),
            labels: Vec::new(),
            texts: options.text.as_ref().map(|_| Vec::new()),
            class_names: None,
            classes: None,
        };
        for path in paths {
            out.add_file(path, options)?;
        }
        if out.labels.is_empty() {
            return Err(FormatError::Empty {
                path: out.files.first().cloned().unwrap_or_default(),
                what: "the Arrow files hold no row",
            });
        }
        out.classes = match &out.class_names {
            Some(names) => Some(names.len()),
            None if options.label.is_some() => {
                let max = out.labels.iter().copied().max().unwrap_or(-1);
                usize::try_from(max).ok().map(|m| m + 1)
            }
            None => None,
        };
        Ok(out)
    }

    /// The `ClassLabel` names of the label column, where the files say.
    pub fn class_names(&self) -> Option<&[String]> {
        self.class_names.as_deref()
    }

    /// The files read, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Each record batch's samples, in order: the shards a stream reads.
    pub fn record_batch_ranges(&self) -> Vec<Range<usize>> {
        self.chunks
            .iter()
            .map(|c| c.first..c.first + c.rows)
            .collect()
    }

    /// Maps `path` and reads its record batches' columns.
    fn add_file(&mut self, path: PathBuf, options: &ParquetOptions) -> Result<(), FormatError> {
        let number = u32::try_from(self.files.len()).map_err(|_| FormatError::Arrow {
            path: path.clone(),
            reason: "more files than a 32-bit count".into(),
        })?;
        let bad = |reason: String| FormatError::Arrow {
            path: path.clone(),
            reason,
        };
        let mut buffer = map_file(&path)?;
        let mut decoder = StreamDecoder::new();
        let mut batch_number = 0u32;
        loop {
            let batch = decoder
                .decode(&mut buffer)
                .map_err(|e| bad(format!("not an Arrow IPC stream as datasets writes: {e}")))?;
            if self.class_names.is_none()
                && let (Some(schema), Some(label)) = (decoder.schema(), options.label.as_deref())
            {
                self.class_names = schema
                    .metadata()
                    .get("huggingface")
                    .and_then(|m| crate::hf_class_names(m, label));
            }
            let Some(batch) = batch else { break };
            self.add_batch(&batch, (number, batch_number), options)
                .map_err(|reason| FormatError::Arrow {
                    path: PathBuf::from(format!(
                        "{} (record batch {batch_number})",
                        path.display()
                    )),
                    reason,
                })?;
            batch_number = batch_number.saturating_add(1);
        }
        decoder
            .finish()
            .map_err(|e| bad(format!("the stream ends mid-message: {e}")))?;
        self.files.push(path);
        Ok(())
    }

    /// Takes one record batch's image column, labels and texts.
    fn add_batch(
        &mut self,
        batch: &RecordBatch,
        (file, number): (u32, u32),
        options: &ParquetOptions,
    ) -> Result<(), String> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let (bytes, paths) = image_column(batch, &options.image)?;
        match options.label.as_deref() {
            Some(label) => self.labels.extend(label_column(batch, label)?),
            None => self.labels.extend(std::iter::repeat_n(-1, rows)),
        }
        if let (Some(texts), Some(text)) = (&mut self.texts, options.text.as_deref()) {
            texts.extend(text_column(batch, text)?);
        }
        self.chunks.push(Chunk {
            file,
            number,
            first: self.labels.len() - rows,
            rows,
            bytes,
            paths,
        });
        Ok(())
    }

    /// The record batch holding sample `index` (which is in range).
    fn chunk_of(&self, index: usize) -> &Chunk {
        let i = self.chunks.partition_point(|c| c.first + c.rows <= index);
        &self.chunks[i]
    }

    /// Sample `index` as errors and `source` name it.
    fn place(&self, index: usize) -> PathBuf {
        let c = self.chunk_of(index);
        PathBuf::from(format!(
            "{} (record batch {}, row {})",
            self.files[c.file as usize].display(),
            c.number,
            index - c.first
        ))
    }

    /// Sample `index`'s encoded image: the bytes in the file (borrowed),
    /// or the file its path names (read).
    fn with_image<T>(
        &self,
        index: usize,
        then: impl FnOnce(&[u8]) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let c = self.chunk_of(index);
        let row = index - c.first;
        let file = &self.files[c.file as usize];
        let bad = |reason: String| -> Error {
            FormatError::Arrow {
                path: self.place(index),
                reason,
            }
            .into()
        };
        let value = binary_value(&c.bytes, row);
        let owned;
        let value = match (value, &c.paths) {
            (Some(v), _) => v,
            (None, Some(paths)) if paths.is_valid(row) => {
                owned = image_beside(file, string_value(paths, row).as_bytes()).map_err(bad)?;
                &owned[..]
            }
            _ => {
                return Err(bad(
                    "the image is null (no embedded image bytes and no path)".into(),
                ));
            }
        };
        if value.len() as u64 > MAX_MEMBER_BYTES {
            return Err(bad(format!(
                "an image of {} bytes, past the {MAX_MEMBER_BYTES}-byte bound",
                value.len()
            )));
        }
        then(value)
    }
}

/// A memory map of `path` as an Arrow buffer (the arrays read from it
/// borrow the map, which lives as long as they do).
fn map_file(path: &Path) -> Result<Buffer, FormatError> {
    let file = open_regular(path)?;
    // SAFETY: the map is read only; a file changed under a running loader
    // is outside what any reader of mapped files (datasets included) can
    // guard against, as for `datasets`' own memory-mapped tables.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(FormatError::io(path))?;
    Ok(Buffer::from(bytes::Bytes::from_owner(map)))
}

/// Refuses a `DatasetDict`'s `save_to_disk` folder (its splits read as one
/// dataset is never what was meant), naming the splits.
fn refuse_dataset_dict(dir: &Path) -> Result<(), FormatError> {
    let dict = dir.join("dataset_dict.json");
    if !dict.is_file() {
        return Ok(());
    }
    let splits = std::fs::read_to_string(&dict)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|j| {
            let names = j.get("splits")?.as_array()?;
            Some(
                names
                    .iter()
                    .filter_map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })
        .unwrap_or_default();
    Err(FormatError::InvalidInput {
        path: dir.to_owned(),
        reason: format!(
            "a DatasetDict's folder (splits: {splits}): name one split's folder, such as {}",
            dir.join(splits.split(", ").next().unwrap_or("train"))
                .display()
        ),
    })
}

/// The image column's bytes (and paths, for the `{bytes, path}` struct).
fn image_column(batch: &RecordBatch, name: &str) -> Result<(ArrayRef, Option<ArrayRef>), String> {
    let column = named(batch, name, "image")?;
    if let Some(s) = column.as_any().downcast_ref::<StructArray>() {
        let bytes = s.column_by_name("bytes").ok_or_else(|| {
            format!("the image column {name:?} is a struct without a \"bytes\" field")
        })?;
        check_binary(bytes, name)?;
        let paths = s.column_by_name("path").cloned();
        if let Some(p) = &paths
            && p.as_string_opt::<i32>().is_none()
            && p.as_string_opt::<i64>().is_none()
        {
            return Err(format!(
                "the image column {name:?}'s \"path\" is {}, not a string",
                p.data_type()
            ));
        }
        // A null struct row has null children as far as reads go.
        let bytes = match s.nulls() {
            Some(n) if n.null_count() > 0 => with_nulls(bytes, n)?,
            _ => bytes.clone(),
        };
        return Ok((bytes, paths));
    }
    check_binary(column, name)?;
    Ok((column.clone(), None))
}

/// `values` with the struct's nulls added to its own.
fn with_nulls(values: &ArrayRef, nulls: &arrow_buffer::NullBuffer) -> Result<ArrayRef, String> {
    let merged = arrow_buffer::NullBuffer::union(values.nulls(), Some(nulls));
    let data = values
        .to_data()
        .into_builder()
        .nulls(merged)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(arrow_array::make_array(data))
}

fn check_binary(column: &ArrayRef, name: &str) -> Result<(), String> {
    if column.as_binary_opt::<i32>().is_some() || column.as_binary_opt::<i64>().is_some() {
        return Ok(());
    }
    Err(format!(
        "the image column {name:?} is {}, not image bytes (binary, or the Image feature's {{bytes, path}})",
        column.data_type()
    ))
}

/// Row `row` of a binary column, `None` where null.
fn binary_value(column: &ArrayRef, row: usize) -> Option<&[u8]> {
    if column.is_null(row) {
        return None;
    }
    match column.as_binary_opt::<i32>() {
        Some(a) => Some(a.value(row)),
        None => column.as_binary_opt::<i64>().map(|a| a.value(row)),
    }
}

/// Row `row` of a (checked) string column.
fn string_value(column: &ArrayRef, row: usize) -> &str {
    match column.as_string_opt::<i32>() {
        Some(a) => a.value(row),
        None => column.as_string_opt::<i64>().map_or("", |a| a.value(row)),
    }
}

fn named<'a>(batch: &'a RecordBatch, name: &str, what: &str) -> Result<&'a ArrayRef, String> {
    batch.column_by_name(name).ok_or_else(|| {
        let columns: Vec<_> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        format!(
            "no {what} column {name:?} (the file's columns: {})",
            columns.join(", ")
        )
    })
}

/// The label column as i64 (any integer width; null is -1, as `datasets`
/// marks a missing `ClassLabel`).
fn label_column(batch: &RecordBatch, name: &str) -> Result<Vec<i64>, String> {
    let column = named(batch, name, "label")?;
    macro_rules! ints {
        ($t:ty) => {
            if let Some(a) = column.as_primitive_opt::<$t>() {
                return Ok(a.iter().map(|v| v.map_or(-1, i64::from)).collect());
            }
        };
    }
    ints!(Int64Type);
    ints!(Int32Type);
    ints!(Int16Type);
    ints!(Int8Type);
    Err(format!(
        "the label column {name:?} is {}, not integers",
        column.data_type()
    ))
}

/// The text column's values (null: `None`), each at most
/// [`MAX_TEXT_BYTES`].
fn text_column(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>, String> {
    let column = named(batch, name, "text")?;
    if column.as_string_opt::<i32>().is_none() && column.as_string_opt::<i64>().is_none() {
        return Err(format!(
            "the text column {name:?} is {}, not strings",
            column.data_type()
        ));
    }
    (0..column.len())
        .map(|row| {
            if column.is_null(row) {
                return Ok(None);
            }
            let text = string_value(column, row);
            if text.len() as u64 > MAX_TEXT_BYTES {
                return Err(format!(
                    "row {row}: a text of {} bytes, past the {MAX_TEXT_BYTES}-byte bound",
                    text.len()
                ));
            }
            Ok(Some(text.to_owned()))
        })
        .collect()
}

impl Dataset for ArrowFiles {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.labels.get(index).copied()
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        check_index(index, self.labels.len())?;
        let file = &self.files[self.chunk_of(index).file as usize];
        self.with_image(index, |bytes| {
            // The file names the image unless decoding fails: then the row
            // does (no path is formatted per sample).
            decode_rgb_into(file, bytes, out).map_err(|e| e.naming(|| self.place(index)).into())
        })?;
        out.label = self.labels[index];
        Ok(Read::Filled)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        let read = || -> Result<Encoded, Error> {
            check_index(index, self.labels.len())?;
            Ok(Encoded {
                bytes: self.with_image(index, |b| Ok(b.to_vec()))?,
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
        let read = || -> Result<String, Error> {
            check_index(index, self.labels.len())?;
            texts[index].clone().ok_or_else(|| {
                FormatError::Arrow {
                    path: self.place(index),
                    reason: "the text is null".into(),
                }
                .into()
            })
        };
        Some(read())
    }
}
