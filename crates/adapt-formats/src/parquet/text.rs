//! A Parquet text column (captions) read at open, as the labels are: each
//! row's string held in memory, checked as UTF-8, bounded in total; a null
//! fails only the read of that row's text.

use super::{File, Group, binary_rows};
use crate::FormatError;
use std::path::PathBuf;

/// Most text bytes one dataset holds in memory: past it the open is an
/// error naming the file, not an allocation.
pub const MAX_TEXT_TOTAL_BYTES: u64 = 8 << 30;

/// The texts of every row read so far.
pub(super) struct Texts {
    column: String,
    rows: Vec<Option<Box<str>>>,
    bytes: u64,
}

impl Texts {
    /// None yet, of column `column`.
    pub(super) fn new(column: &str) -> Self {
        Self {
            column: column.to_owned(),
            rows: Vec::new(),
            bytes: 0,
        }
    }

    /// Reads the text column of file `number`'s row groups in `groups`
    /// (the column `open_file` found).
    pub(super) fn add_file(
        &mut self,
        file: &File,
        number: u32,
        groups: &[Group],
    ) -> Result<(), FormatError> {
        let Some(leaf) = file.text_leaf else {
            return Ok(());
        };
        for g in groups.iter().filter(|g| g.file == number) {
            let bad = |reason: String| FormatError::Parquet {
                path: PathBuf::from(format!("{} (row group {})", file.path.display(), g.number)),
                reason,
            };
            let rows = binary_rows(file, g, leaf, "text").map_err(bad)?;
            for (row, value) in rows.into_iter().enumerate() {
                let text = match value {
                    None => None,
                    Some(v) => {
                        self.bytes += v.len() as u64;
                        if self.bytes > MAX_TEXT_TOTAL_BYTES {
                            return Err(bad(format!(
                                "the text column holds more than {MAX_TEXT_TOTAL_BYTES} bytes \
                                 in all (texts are held in memory)"
                            )));
                        }
                        let t = std::str::from_utf8(v.data())
                            .map_err(|e| bad(format!("row {row}: text is not UTF-8: {e}")))?;
                        Some(Box::from(t))
                    }
                };
                self.rows.push(text);
            }
        }
        Ok(())
    }

    /// Row `index`'s text (`place` names it when it is null).
    pub(super) fn get(
        &self,
        index: usize,
        place: impl FnOnce() -> PathBuf,
    ) -> Result<String, FormatError> {
        match self.rows.get(index) {
            Some(Some(t)) => Ok(t.to_string()),
            _ => Err(FormatError::Parquet {
                path: place(),
                reason: format!("the text column {} is null", self.column),
            }),
        }
    }
}
