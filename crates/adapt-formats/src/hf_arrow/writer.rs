//! Writes a `save_to_disk` folder as `datasets` does: the rows in
//! `data-00000-of-00001.arrow` (an Arrow IPC stream of record batches,
//! the `Image` feature's `{bytes, path}` struct and an int64 label, the
//! features in the schema's `huggingface` metadata), beside `state.json`
//! and `dataset_info.json`, so `datasets.load_from_disk` opens it.

use crate::FormatError;
use arrow_array::builder::{BinaryBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch, StructArray};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Fields, Schema};
use std::collections::HashMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The one data file a small `save_to_disk` writes.
const DATA_FILE: &str = "data-00000-of-00001.arrow";

/// Rows of images, written batch by batch into a `save_to_disk` folder.
pub struct ArrowWriter {
    dir: PathBuf,
    tmp: PathBuf,
    writer: StreamWriter<BufWriter<std::fs::File>>,
    schema: Arc<Schema>,
    features: serde_json::Value,
    rows_per_batch: usize,
    pending: Vec<(Vec<u8>, Option<String>, i64)>,
}

impl ArrowWriter {
    /// Starts the folder `dir` with batches of `rows_per_batch` (at least
    /// 1); `class_names` make the label a `ClassLabel` (else a plain int64
    /// feature).
    pub fn new(
        dir: &Path,
        rows_per_batch: usize,
        class_names: Option<Vec<String>>,
    ) -> Result<Self, FormatError> {
        std::fs::create_dir_all(dir).map_err(FormatError::io(dir))?;
        let label = match &class_names {
            Some(names) => serde_json::json!({"names": names, "_type": "ClassLabel"}),
            None => serde_json::json!({"dtype": "int64", "_type": "Value"}),
        };
        let features = serde_json::json!({
            "image": {"_type": "Image"},
            "label": label,
        });
        let metadata = serde_json::json!({"info": {"features": features}}).to_string();
        let schema = Arc::new(Schema::new_with_metadata(
            vec![
                Field::new("image", DataType::Struct(image_fields()), true),
                Field::new("label", DataType::Int64, true),
            ],
            HashMap::from([("huggingface".to_owned(), metadata)]),
        ));
        let tmp = dir.join(format!(".{DATA_FILE}.partial"));
        let file = std::fs::File::create(&tmp).map_err(FormatError::io(&tmp))?;
        let writer = StreamWriter::try_new(BufWriter::new(file), &schema).map_err(|e| {
            FormatError::Arrow {
                path: tmp.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(Self {
            dir: dir.to_owned(),
            tmp,
            writer,
            schema,
            features,
            rows_per_batch: rows_per_batch.max(1),
            pending: Vec::new(),
        })
    }

    /// Adds one row: the encoded image, the name `datasets` keeps as its
    /// `path`, the label.
    pub fn write(
        &mut self,
        image: &[u8],
        name: Option<&str>,
        label: i64,
    ) -> Result<(), FormatError> {
        self.pending
            .push((image.to_vec(), name.map(str::to_owned), label));
        if self.pending.len() >= self.rows_per_batch {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending rows as one record batch.
    fn flush(&mut self) -> Result<(), FormatError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (mut bytes, mut paths, mut labels) = (
            BinaryBuilder::new(),
            StringBuilder::new(),
            Int64Builder::new(),
        );
        for (image, name, label) in self.pending.drain(..) {
            bytes.append_value(image);
            paths.append_option(name);
            labels.append_value(label);
        }
        let image = StructArray::new(
            image_fields(),
            vec![
                Arc::new(bytes.finish()) as ArrayRef,
                Arc::new(paths.finish()),
            ],
            None,
        );
        let columns: Vec<ArrayRef> = vec![Arc::new(image), Arc::new(labels.finish())];
        let bad = |e: arrow_schema::ArrowError| FormatError::Arrow {
            path: self.tmp.clone(),
            reason: e.to_string(),
        };
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns).map_err(bad)?;
        self.writer.write(&batch).map_err(bad)
    }

    /// Ends the stream, renames it into place and writes `state.json` and
    /// `dataset_info.json`; returns the data file's path.
    pub fn finish(mut self) -> Result<PathBuf, FormatError> {
        self.flush()?;
        let tmp = self.tmp.clone();
        let bad = |e: arrow_schema::ArrowError| FormatError::Arrow {
            path: tmp.clone(),
            reason: e.to_string(),
        };
        self.writer.finish().map_err(bad)?;
        let file = self.writer.into_inner().map_err(bad)?;
        file.into_inner()
            .map_err(|e| FormatError::io(&tmp)(e.into_error()))?
            .sync_all()
            .map_err(FormatError::io(&tmp))?;
        let data = self.dir.join(DATA_FILE);
        std::fs::rename(&tmp, &data).map_err(FormatError::io(&data))?;
        let state = serde_json::json!({
            "_data_files": [{"filename": DATA_FILE}],
            "_fingerprint": "adapt-synthetic",
            "_format_columns": null,
            "_format_kwargs": {},
            "_format_type": null,
            "_output_all_columns": false,
            "_split": null,
        });
        let info =
            serde_json::json!({"features": self.features, "citation": "", "description": ""});
        for (name, value) in [("state.json", state), ("dataset_info.json", info)] {
            let path = self.dir.join(name);
            crate::write_atomically(&path, |w| {
                w.write_all(
                    serde_json::to_string_pretty(&value)
                        .unwrap_or_default()
                        .as_bytes(),
                )
            })?;
        }
        Ok(data)
    }
}

/// The `Image` feature's storage: `{bytes: binary, path: string}`.
fn image_fields() -> Fields {
    Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ])
}
