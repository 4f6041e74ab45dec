//! torchvision's CIFAR downloads, `cifar-10-batches-py/` and
//! `cifar-100-python/`: pickled dicts (`data`, a uint8 array of N × 3072
//! planar images; `labels` or `fine_labels`; a `meta` file of class names),
//! read with [`crate::pickle`], which runs nothing, into the binary
//! layout's records.

use crate::FormatError;
use crate::cifar10::{BatchFile, IMAGE_BYTES, RECORD_BYTES};
use crate::pickle::{self, Value};
use std::path::{Path, PathBuf};

/// The biggest pickle read: CIFAR-100's `train` is 158 MB.
const MAX_PICKLE_BYTES: u64 = 1 << 30;

/// What one download's files are called.
pub(crate) struct PickleLayout {
    /// The folder torchvision downloads into.
    pub folder: &'static str,
    /// The training and test files.
    pub train: &'static [&'static str],
    pub test: &'static [&'static str],
    /// The label key of a batch.
    pub labels: &'static str,
    /// The meta file and its class-name key.
    pub meta: &'static str,
    pub names: &'static str,
    /// Classes (labels are below it).
    pub classes: usize,
}

/// CIFAR-10's download.
pub(crate) const CIFAR10_PY: PickleLayout = PickleLayout {
    folder: "cifar-10-batches-py",
    train: &[
        "data_batch_1",
        "data_batch_2",
        "data_batch_3",
        "data_batch_4",
        "data_batch_5",
    ],
    test: &["test_batch"],
    labels: "labels",
    meta: "batches.meta",
    names: "label_names",
    classes: 10,
};

/// CIFAR-100's download (fine labels).
pub(crate) const CIFAR100_PY: PickleLayout = PickleLayout {
    folder: "cifar-100-python",
    train: &["train"],
    test: &["test"],
    labels: "fine_labels",
    meta: "meta",
    names: "fine_label_names",
    classes: 100,
};

impl PickleLayout {
    /// The folder under (or at) `root` that holds this download's first
    /// training file, if any.
    pub fn find(&self, root: &Path) -> Option<PathBuf> {
        [root.join(self.folder), root.to_owned()]
            .into_iter()
            .find(|d| d.join(self.train[0]).is_file())
    }

    /// The batch files of a split in `dir`, read as records, and the class
    /// names.
    pub fn read(
        &self,
        dir: &Path,
        test: bool,
    ) -> Result<(Vec<BatchFile>, Vec<String>), FormatError> {
        let names = if test { self.test } else { self.train };
        let files = names
            .iter()
            .map(|n| self.read_batch(&dir.join(n)))
            .collect::<Result<Vec<_>, _>>()?;
        let meta = dir.join(self.meta);
        let classes = match meta.is_file() {
            true => self.read_names(&meta)?,
            false => {
                return Err(FormatError::Missing {
                    path: meta,
                    what: "CIFAR meta pickle",
                });
            }
        };
        Ok((files, classes))
    }

    fn read_batch(&self, path: &Path) -> Result<BatchFile, FormatError> {
        let d = load(path)?;
        let bad = |reason: String| FormatError::Pickle {
            path: path.to_owned(),
            reason,
        };
        let Some(Value::Array { shape, data }) = d.get("data") else {
            return Err(bad(format!(
                "no uint8 array under 'data' (found {})",
                found(&d, "data")
            )));
        };
        let rows = match shape.as_slice() {
            [n, w] if *w == IMAGE_BYTES => *n,
            [n, 3, 32, 32] => *n,
            other => return Err(bad(format!("'data' of shape {other:?}, not (N, 3072)"))),
        };
        let Some(Value::List(labels)) = d.get(self.labels) else {
            return Err(bad(format!(
                "no list under '{}' (found {})",
                self.labels,
                found(&d, self.labels)
            )));
        };
        if labels.len() != rows {
            return Err(bad(format!("{} labels for {rows} images", labels.len())));
        }
        let mut map = Vec::with_capacity(rows * RECORD_BYTES);
        for (i, (label, image)) in labels
            .iter()
            .zip(data.chunks_exact(IMAGE_BYTES))
            .enumerate()
        {
            let l = match label {
                Value::Int(l) if (0..self.classes as i64).contains(l) => *l as u8,
                other => {
                    return Err(bad(format!(
                        "record {i}: label {other:?}, not an int below {}",
                        self.classes
                    )));
                }
            };
            map.push(l);
            map.extend_from_slice(image);
        }
        Ok(BatchFile {
            path: path.to_owned(),
            map,
        })
    }

    fn read_names(&self, path: &Path) -> Result<Vec<String>, FormatError> {
        let d = load(path)?;
        let bad = |reason: String| FormatError::Pickle {
            path: path.to_owned(),
            reason,
        };
        let Some(Value::List(names)) = d.get(self.names) else {
            return Err(bad(format!(
                "no list under '{}' (found {})",
                self.names,
                found(&d, self.names)
            )));
        };
        let names: Vec<String> = names
            .iter()
            .map(|n| {
                n.text()
                    .ok_or_else(|| bad(format!("a class name that is {}", n.kind())))
            })
            .collect::<Result<_, _>>()?;
        if names.len() != self.classes {
            return Err(bad(format!(
                "{} class names, expected {}",
                names.len(),
                self.classes
            )));
        }
        Ok(names)
    }
}

/// What a dict holds under `key`, for errors.
fn found(d: &Value, key: &str) -> &'static str {
    match (d, d.get(key)) {
        (Value::Dict(_), Some(v)) => v.kind(),
        (Value::Dict(_), None) => "no such key",
        (other, _) => other.kind(),
    }
}

/// The pickle at `path`, read (bounded in size) and interpreted.
fn load(path: &Path) -> Result<Value, FormatError> {
    use std::io::Read as _;
    let file = crate::open_regular(path)?;
    let mut bytes = Vec::new();
    (&file)
        .take(MAX_PICKLE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(FormatError::io(path))?;
    if bytes.len() as u64 > MAX_PICKLE_BYTES {
        return Err(FormatError::Pickle {
            path: path.to_owned(),
            reason: format!("larger than {MAX_PICKLE_BYTES} bytes, more than a CIFAR batch"),
        });
    }
    pickle::load(&bytes).map_err(|e| FormatError::Pickle {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Writes a batch pickle as torchvision's download holds one (protocol 2,
/// the images a numpy uint8 array of N × 3072 as numpy pickles it, the
/// labels a list under `layout`'s key), atomically.
pub fn write_batch_pickle(
    path: &Path,
    cifar100: bool,
    records: &[(u8, &[u8])],
) -> Result<(), FormatError> {
    let layout = if cifar100 { &CIFAR100_PY } else { &CIFAR10_PY };
    let mut p = vec![0x80, 2, b'}', b'('];
    text(&mut p, layout.labels);
    p.extend([b']', b'(']);
    for (label, _) in records {
        p.extend([b'K', *label]);
    }
    p.push(b'e');
    text(&mut p, "data");
    p.extend_from_slice(
        b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85U\x01b\x87R",
    );
    p.extend([b'(', b'K', 1, b'J']);
    let rows = i32::try_from(records.len()).map_err(|_| FormatError::InvalidInput {
        path: path.to_owned(),
        reason: format!("{} records in one batch", records.len()),
    })?;
    p.extend(rows.to_le_bytes());
    p.extend_from_slice(b"M\x00\x0c\x86cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T");
    let data: Vec<u8> = records
        .iter()
        .flat_map(|(_, img)| img.iter().copied())
        .collect();
    p.extend((data.len() as u32).to_le_bytes());
    p.extend_from_slice(&data);
    p.extend([b't', b'b', b'u', b'.']);
    crate::write_atomically(path, |w| w.write_all(&p))
}

/// Writes the meta pickle of class names (`label_names` or
/// `fine_label_names`).
pub fn write_meta_pickle(dir: &Path, cifar100: bool, names: &[&str]) -> Result<(), FormatError> {
    let layout = if cifar100 { &CIFAR100_PY } else { &CIFAR10_PY };
    let mut p = vec![0x80, 2, b'}'];
    text(&mut p, layout.names);
    p.extend([b']', b'(']);
    for n in names {
        text(&mut p, n);
    }
    p.extend([b'e', b's', b'.']);
    crate::write_atomically(&dir.join(layout.meta), |w| w.write_all(&p))
}

/// A BINUNICODE text.
fn text(p: &mut Vec<u8>, s: &str) {
    p.push(b'X');
    p.extend((s.len() as u32).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}
