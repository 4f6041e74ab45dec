//! Which Parquet columns are a sample's image and label, and whether this
//! build reads Parquet at all (the `parquet` feature): the options exist in
//! every build so a dataset description names its columns either way.

/// Whether this build reads and writes Parquet (the `parquet` feature). A
/// build without it refuses `parquet` datasets with
/// [`FormatError::NotBuilt`](crate::FormatError::NotBuilt).
pub const PARQUET_ENABLED: bool = cfg!(feature = "parquet");

impl crate::FormatError {
    /// The refusal of a build without the `parquet` feature, for `path`.
    pub fn not_built_parquet(path: &std::path::Path) -> Self {
        Self::NotBuilt {
            path: path.to_owned(),
            format: "Parquet",
            feature: "parquet",
        }
    }
}

/// Which columns are the image and the label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParquetOptions {
    /// The image column: a `{bytes, path}` struct (its `bytes` field is
    /// read, or the file its `path` names where the bytes are null) or a
    /// binary column.
    pub image: String,
    /// The integer label column; `None` for unlabelled data (labels -1).
    /// A null label reads as -1, as `datasets` marks a missing `ClassLabel`.
    pub label: Option<String>,
    /// A string column read as each sample's text (a caption), held in
    /// memory from the open; `None` reads none.
    pub text: Option<String>,
}

impl Default for ParquetOptions {
    /// `image` and `label`, as the Hugging Face Hub's image datasets name
    /// them.
    fn default() -> Self {
        Self {
            image: "image".into(),
            label: Some("label".into()),
            text: None,
        }
    }
}

/// The `ClassLabel` names of column `label` in `datasets`' `huggingface`
/// metadata (`info.features.LABEL.names`), as it writes it into Parquet
/// footers and Arrow schemas alike.
#[cfg(feature = "parquet")]
pub(crate) fn hf_class_names(metadata: &str, label: &str) -> Option<Vec<String>> {
    let json: serde_json::Value = serde_json::from_str(metadata).ok()?;
    let feature = json.get("info")?.get("features")?.get(label)?;
    if feature.get("_type")?.as_str()? != "ClassLabel" {
        return None;
    }
    feature
        .get("names")?
        .as_array()?
        .iter()
        .map(|n| n.as_str().map(str::to_owned))
        .collect()
}
