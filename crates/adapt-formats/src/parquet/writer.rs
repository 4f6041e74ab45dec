//! Writes Parquet files in the Hugging Face layout, as `datasets`'
//! `push_to_hub` writes an image dataset: `SPLIT-00000-of-0000N.parquet`
//! with an `image` column of `{bytes, path}` structs, an int64 `label`, row
//! groups of [`ParquetWriterOptions::rows_per_group`] rows, snappy pages and
//! the `huggingface` metadata naming the features (`ClassLabel` names).
//! Files are written under temporary names and renamed when the last is
//! complete, so an interrupted writer leaves no whole-looking file.

use crate::FormatError;
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnPath, Type};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The schema pyarrow gives a `datasets` `Image` column and a label.
const SCHEMA: &str = "message schema {
  optional group image {
    optional binary bytes;
    optional binary path (STRING);
  }
  optional int64 label;
}";

/// How rows are laid out in files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParquetWriterOptions {
    /// Rows per file (at least 1).
    pub rows_per_file: usize,
    /// Rows per row group (at least 1): `datasets` writes 100 for images.
    pub rows_per_group: usize,
    /// The label's `ClassLabel` names, written into the `huggingface`
    /// metadata; `None` writes the label as a plain integer feature.
    pub class_names: Option<Vec<String>>,
}

impl Default for ParquetWriterOptions {
    fn default() -> Self {
        Self {
            rows_per_file: 10_000,
            rows_per_group: 100,
            class_names: None,
        }
    }
}

/// One row group's rows, buffered.
#[derive(Default)]
struct Rows {
    images: Vec<ByteArray>,
    paths: Vec<Option<ByteArray>>,
    labels: Vec<i64>,
}

/// A file being written and its temporary name.
struct Open {
    writer: SerializedFileWriter<BufWriter<File>>,
    tmp: PathBuf,
    rows: usize,
}

/// Writes rows into numbered Parquet files of one split.
pub struct ParquetWriter {
    dir: PathBuf,
    split: String,
    options: ParquetWriterOptions,
    schema: Arc<Type>,
    properties: Arc<WriterProperties>,
    rows: Rows,
    open: Option<Open>,
    done: Vec<PathBuf>,
}

impl ParquetWriter {
    /// Writes split `split`'s files into `dir` (created when missing).
    pub fn new(
        dir: &Path,
        split: &str,
        options: ParquetWriterOptions,
    ) -> Result<Self, FormatError> {
        std::fs::create_dir_all(dir).map_err(FormatError::io(dir))?;
        let bad = |reason: String| FormatError::Parquet {
            path: dir.to_owned(),
            reason,
        };
        let schema = Arc::new(parse_message_type(SCHEMA).map_err(|e| bad(e.to_string()))?);
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_column_dictionary_enabled(
                ColumnPath::from(vec!["image".into(), "bytes".into()]),
                false,
            )
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "huggingface".into(),
                features(options.class_names.as_deref()),
            )]))
            .build();
        Ok(Self {
            dir: dir.to_owned(),
            split: split.to_owned(),
            options: ParquetWriterOptions {
                rows_per_file: options.rows_per_file.max(1),
                rows_per_group: options.rows_per_group.max(1),
                ..options
            },
            schema,
            properties: Arc::new(properties),
            rows: Rows::default(),
            open: None,
            done: Vec::new(),
        })
    }

    /// Appends one row: an encoded image, its file name (`path` of the
    /// struct; `None` writes null) and its label.
    pub fn write(
        &mut self,
        image: &[u8],
        path: Option<&str>,
        label: i64,
    ) -> Result<(), FormatError> {
        self.rows.images.push(ByteArray::from(image.to_vec()));
        self.rows
            .paths
            .push(path.map(|p| ByteArray::from(p.as_bytes().to_vec())));
        self.rows.labels.push(label);
        let in_file = self.open.as_ref().map_or(0, |o| o.rows) + self.rows.labels.len();
        if self.rows.labels.len() >= self.options.rows_per_group
            || in_file >= self.options.rows_per_file
        {
            self.flush_group()?;
        }
        if self
            .open
            .as_ref()
            .is_some_and(|o| o.rows >= self.options.rows_per_file)
        {
            self.close_file()?;
        }
        Ok(())
    }

    /// Completes the last file, names every file `SPLIT-IIIII-of-NNNNN`
    /// and returns them in order.
    pub fn finish(mut self) -> Result<Vec<PathBuf>, FormatError> {
        self.flush_group()?;
        self.close_file()?;
        let total = self.done.len();
        let mut out = Vec::with_capacity(total);
        for (i, tmp) in std::mem::take(&mut self.done).into_iter().enumerate() {
            let path = self
                .dir
                .join(format!("{}-{i:05}-of-{total:05}.parquet", self.split));
            std::fs::rename(&tmp, &path).map_err(FormatError::io(&path))?;
            out.push(path);
        }
        Ok(out)
    }

    /// Writes the buffered rows as one row group.
    fn flush_group(&mut self) -> Result<(), FormatError> {
        if self.rows.labels.is_empty() {
            return Ok(());
        }
        if self.open.is_none() {
            self.open_file()?;
        }
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        let rows = std::mem::take(&mut self.rows);
        let tmp = open.tmp.clone();
        let err = |e: parquet::errors::ParquetError| FormatError::Parquet {
            path: tmp.clone(),
            reason: e.to_string(),
        };
        let n = rows.labels.len();
        let mut group = open.writer.next_row_group().map_err(err)?;
        // Definition levels: 2 for a present struct field, 1 for a null one
        // in a present struct; 1 for a present label.
        let (fields, labels) = (vec![2i16; n], vec![1i16; n]);
        let paths: Vec<ByteArray> = rows.paths.iter().flatten().cloned().collect();
        let path_defs: Vec<i16> = rows
            .paths
            .iter()
            .map(|p| if p.is_some() { 2 } else { 1 })
            .collect();
        let mut column = 0;
        while let Some(mut writer) = group.next_column().map_err(err)? {
            match column {
                0 => writer
                    .typed::<ByteArrayType>()
                    .write_batch(&rows.images, Some(&fields), None),
                1 => writer
                    .typed::<ByteArrayType>()
                    .write_batch(&paths, Some(&path_defs), None),
                _ => writer
                    .typed::<Int64Type>()
                    .write_batch(&rows.labels, Some(&labels), None),
            }
            .map_err(err)?;
            writer.close().map_err(err)?;
            column += 1;
        }
        group.close().map_err(err)?;
        open.rows += n;
        Ok(())
    }

    fn open_file(&mut self) -> Result<(), FormatError> {
        let tmp = self.dir.join(format!(
            "{}-{:05}.parquet.partial",
            self.split,
            self.done.len()
        ));
        let file = File::create(&tmp).map_err(FormatError::io(&tmp))?;
        let writer = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            Arc::clone(&self.schema),
            Arc::clone(&self.properties),
        )
        .map_err(|e| FormatError::Parquet {
            path: tmp.clone(),
            reason: e.to_string(),
        })?;
        self.open = Some(Open {
            writer,
            tmp,
            rows: 0,
        });
        Ok(())
    }

    fn close_file(&mut self) -> Result<(), FormatError> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let tmp = open.tmp.clone();
        let done = (|| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            let mut w = open.writer.into_inner()?;
            w.flush()?;
            w.get_ref().sync_data()?;
            Ok(())
        })();
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(FormatError::Parquet {
                path: tmp,
                reason: e.to_string(),
            });
        }
        self.done.push(tmp);
        Ok(())
    }
}

impl Drop for ParquetWriter {
    /// A writer dropped without `finish` leaves no file behind.
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            drop(open.writer);
            let _ = std::fs::remove_file(&open.tmp);
        }
        for tmp in &self.done {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The `huggingface` metadata: an `Image` feature and the label's.
fn features(class_names: Option<&[String]>) -> Option<String> {
    let label = match class_names {
        Some(names) => serde_json::json!({"names": names, "_type": "ClassLabel"}),
        None => serde_json::json!({"dtype": "int64", "_type": "Value"}),
    };
    let info = serde_json::json!({
        "info": {"features": {"image": {"_type": "Image"}, "label": label}}
    });
    Some(info.to_string())
}
