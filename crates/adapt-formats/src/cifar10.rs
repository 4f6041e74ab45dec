//! CIFAR-10, binary version: `data_batch_{1..5}.bin` (train) and
//! `test_batch.bin` (test), each a run of 3073-byte records (1 label byte,
//! then 1024 R, 1024 G, 1024 B bytes of a row-major 32×32 image), and
//! `batches.meta.txt` with one class name per line.
//!
//! Files are read into memory once at open (CIFAR-10 is 150 MB, as
//! torchvision's reader holds it) and shared by every thread: a sample is
//! lent straight from there, with no syscall. They are not memory-mapped: a
//! mapped file truncated while a loader runs kills the process with SIGBUS;
//! a read file cannot change underneath.

use crate::{FormatError, write_atomically};
use adapt_dataset::{Dataset, Error, Layout, Read, Sample, SampleView, Shape, check_index};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Bytes of one record: the label byte and the image.
pub const RECORD_BYTES: usize = 1 + IMAGE_BYTES;
/// Bytes of one 32×32 RGB image.
pub const IMAGE_BYTES: usize = 3 * 32 * 32;
/// The class names of `batches.meta.txt`, in label order.
pub const CIFAR10_CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];
const SHAPE: Shape = Shape::new(32, 32, 3);
const META: &str = "batches.meta.txt";

/// Which files of the dataset to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Split {
    /// `data_batch_1.bin` … `data_batch_5.bin` (50,000 records).
    #[default]
    Train,
    /// `test_batch.bin` (10,000 records).
    Test,
}

impl Split {
    /// The batch file names of this split, in reading order.
    pub fn file_names(self) -> Vec<String> {
        match self {
            Split::Train => (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
            Split::Test => vec!["test_batch.bin".to_owned()],
        }
    }
}

/// One batch file's records (label byte, 3072 planar bytes) in memory.
pub(crate) struct BatchFile {
    pub(crate) path: PathBuf,
    /// The file's bytes, read at open (for torchvision's pickles, their
    /// records in the binary layout).
    pub(crate) map: Vec<u8>,
}

/// The CIFAR-10 binary dataset, one split. Samples are in file order, then
/// record order; a sample is planar (CHW) as stored.
pub struct Cifar10 {
    files: Vec<BatchFile>,
    /// `ends[k]`: one past the last global index held by file `k`.
    ends: Vec<usize>,
    classes: Vec<String>,
}

impl Cifar10 {
    /// Opens `dir` (the folder holding the `.bin` files; a folder that holds
    /// `cifar-10-batches-bin/` is accepted too; or torchvision's download,
    /// `cifar-10-batches-py/` under or at `dir`, read without running its
    /// pickles). Checks every file's size and every label byte.
    pub fn open(dir: &Path, split: Split) -> Result<Self, FormatError> {
        let binary = |d: &Path| d.join(&split.file_names()[0]).exists();
        let py = crate::cifar_pickles::CIFAR10_PY.find(dir);
        if let Some(py) = py.filter(|_| !binary(dir) && !binary(&dir.join("cifar-10-batches-bin")))
        {
            return Self::from_pickles(&crate::cifar_pickles::CIFAR10_PY, &py, split);
        }
        let nested = dir.join("cifar-10-batches-bin");
        let dir = if !dir.join(&split.file_names()[0]).exists() && nested.is_dir() {
            &nested
        } else {
            dir
        };
        let mut files = Vec::new();
        let mut ends = Vec::new();
        let mut total = 0;
        for name in split.file_names() {
            let path = dir.join(name);
            if !path.exists() {
                return Err(FormatError::Missing {
                    path,
                    what: "CIFAR-10 batch file",
                });
            }
            let file = crate::open_regular(&path)?;
            let len = file.metadata().map_err(FormatError::io(&path))?.len();
            if len == 0 {
                return Err(FormatError::Empty {
                    path,
                    what: "CIFAR-10 batch file holds no record",
                });
            }
            let tail = len % RECORD_BYTES as u64;
            if tail != 0 {
                return Err(FormatError::CifarSize { path, len, tail });
            }
            let mut map = Vec::new();
            let size = usize::try_from(len).unwrap_or(usize::MAX);
            map.try_reserve_exact(size).map_err(|e| FormatError::Io {
                path: path.clone(),
                source: std::io::Error::other(e),
            })?;
            (&file)
                .take(len)
                .read_to_end(&mut map)
                .map_err(FormatError::io(&path))?;
            if map.len() as u64 != len {
                // Truncated between the size check and the read.
                let tail = map.len() as u64 % RECORD_BYTES as u64;
                return Err(FormatError::CifarSize {
                    path,
                    len: map.len() as u64,
                    tail,
                });
            }
            if let Some((record, rec)) = map
                .chunks_exact(RECORD_BYTES)
                .enumerate()
                .find(|(_, r)| r[0] > 9)
            {
                return Err(FormatError::CifarLabel {
                    path,
                    record,
                    label: rec[0],
                });
            }
            total += map.len() / RECORD_BYTES;
            ends.push(total);
            files.push(BatchFile { path, map });
        }
        let classes = read_meta(&dir.join(META))?;
        Ok(Self {
            files,
            ends,
            classes,
        })
    }

    /// A torchvision download's split, read through the safe unpickler.
    fn from_pickles(
        layout: &crate::cifar_pickles::PickleLayout,
        dir: &Path,
        split: Split,
    ) -> Result<Self, FormatError> {
        let (files, classes) = layout.read(dir, split == Split::Test)?;
        let mut ends = Vec::with_capacity(files.len());
        let mut total = 0;
        for f in &files {
            total += f.map.len() / RECORD_BYTES;
            ends.push(total);
        }
        Ok(Self {
            files,
            ends,
            classes,
        })
    }

    /// Class names from `batches.meta.txt` (the standard names when the file
    /// is absent).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The batch file and record number that hold global `index`.
    pub fn locate(&self, index: usize) -> Result<(usize, usize), Error> {
        check_index(index, self.len())?;
        let file = self.ends.partition_point(|&e| e <= index);
        let start = if file == 0 { 0 } else { self.ends[file - 1] };
        Ok((file, index - start))
    }

    /// The label and the 3072 planar image bytes of record `index`, borrowed
    /// from the file read at open.
    pub fn record(&self, index: usize) -> Result<(u8, &[u8]), Error> {
        let (f, r) = self.locate(index)?;
        let rec = &self.files[f].map[r * RECORD_BYTES..(r + 1) * RECORD_BYTES];
        Ok((rec[0], &rec[1..]))
    }
}

fn read_meta(path: &Path) -> Result<Vec<String>, FormatError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let names: Vec<String> = text
                .lines()
                .map(|l| l.trim().to_owned())
                .filter(|l| !l.is_empty())
                .collect();
            if names.len() != 10 {
                return Err(FormatError::InvalidInput {
                    path: path.to_owned(),
                    reason: format!("expected 10 class names, found {}", names.len()),
                });
            }
            Ok(names)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(CIFAR10_CLASSES.iter().map(|s| (*s).to_owned()).collect())
        }
        Err(source) => Err(FormatError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

impl Dataset for Cifar10 {
    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }
    fn prefetch(&self, index: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Ok((f, r)) = self.locate(index) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let rec = &self.files[f].map[r * RECORD_BYTES..(r + 1) * RECORD_BYTES];
            for line in rec.chunks(64) {
                // SAFETY: a prefetch is a hint that never faults or writes;
                // the address is inside the live map anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
            }
        }
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.record(index).ok().map(|(label, _)| i64::from(label))
    }
    fn read<'a>(&'a self, index: usize, _buf: &mut Sample) -> Result<Read<'a>, Error> {
        // Lent from the file in memory: the loader collates straight from it.
        let (label, pixels) = self.record(index)?;
        Ok(Read::Lent(SampleView {
            pixels,
            shape: SHAPE,
            layout: Layout::Planar,
            label: i64::from(label),
        }))
    }
    fn source(&self, index: usize) -> String {
        match self.locate(index) {
            Ok((f, r)) => format!("{}#record={r}", self.files[f].path.display()),
            Err(e) => e.to_string(),
        }
    }
    fn sample_shape(&self) -> Option<Shape> {
        Some(SHAPE)
    }
    fn num_classes(&self) -> Option<usize> {
        Some(self.classes.len())
    }
}

/// CIFAR-100 as torchvision downloads it (`cifar-100-python/`: `train`,
/// `test`, `meta`), fine labels (100 classes), read without running its
/// pickles; samples planar (CHW) as stored.
pub struct Cifar100(Cifar10);

impl Cifar100 {
    /// Opens `cifar-100-python/` under or at `dir`.
    pub fn open(dir: &Path, split: Split) -> Result<Self, FormatError> {
        let layout = &crate::cifar_pickles::CIFAR100_PY;
        let Some(py) = layout.find(dir) else {
            return Err(FormatError::Missing {
                path: dir.join(layout.folder).join(layout.train[0]),
                what: "CIFAR-100 training pickle (torchvision's cifar-100-python layout)",
            });
        };
        Cifar10::from_pickles(layout, &py, split).map(Self)
    }

    /// The 100 fine class names, in label order.
    pub fn classes(&self) -> &[String] {
        self.0.classes()
    }
}

impl Dataset for Cifar100 {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn prefetch(&self, index: usize) {
        self.0.prefetch(index);
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.0.label(index)
    }
    fn read<'a>(&'a self, index: usize, buf: &mut Sample) -> Result<Read<'a>, Error> {
        self.0.read(index, buf)
    }
    fn source(&self, index: usize) -> String {
        self.0.source(index)
    }
    fn sample_shape(&self) -> Option<Shape> {
        self.0.sample_shape()
    }
    fn num_classes(&self) -> Option<usize> {
        self.0.num_classes()
    }
}

/// Writes one batch file of `(label, 3072 planar bytes)` records, atomically.
pub fn write_batch<'a>(
    path: &Path,
    records: impl IntoIterator<Item = (u8, &'a [u8])>,
) -> Result<(), FormatError> {
    let mut bad = None;
    write_atomically(path, |w| {
        for (i, (label, image)) in records.into_iter().enumerate() {
            if label > 9 || image.len() != IMAGE_BYTES {
                bad = Some(format!(
                    "record {i}: label {label}, {} image bytes",
                    image.len()
                ));
                return Err(std::io::Error::other("invalid record"));
            }
            w.write_all(&[label])?;
            w.write_all(image)?;
        }
        Ok(())
    })
    .map_err(|e| match bad.take() {
        Some(reason) => FormatError::InvalidInput {
            path: path.to_owned(),
            reason,
        },
        None => e,
    })
}

/// Writes `batches.meta.txt` with the given class names into `dir`.
pub fn write_meta(dir: &Path, classes: &[&str]) -> Result<(), FormatError> {
    write_atomically(&dir.join(META), |w| {
        for c in classes {
            writeln!(w, "{c}")?;
        }
        // The real file ends with a blank line.
        writeln!(w)
    })
}
