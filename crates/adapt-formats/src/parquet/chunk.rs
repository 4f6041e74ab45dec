//! A Parquet file read by position (`pread`), so several worker threads
//! decode row groups of one open file at once: the `parquet` crate's own
//! reader for `File` seeks a shared descriptor, which races between threads.

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// An open Parquet file and its length, read by position.
pub(crate) struct PositionedFile {
    file: Arc<File>,
    len: u64,
}

impl PositionedFile {
    /// Wraps `file`, `len` bytes long.
    pub(crate) fn new(file: File, len: u64) -> Self {
        Self {
            file: Arc::new(file),
            len,
        }
    }

    /// `length` bytes at `start`, an error when they run past the end (a
    /// length from the footer is checked before it sizes a buffer).
    fn bounded(&self, start: u64, length: u64) -> Result<(), ParquetError> {
        match start.checked_add(length) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(ParquetError::EOF(format!(
                "{length} bytes at {start} run past the file's end ({} bytes)",
                self.len
            ))),
        }
    }
}

impl Length for PositionedFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for PositionedFile {
    type T = PositionedRead;

    fn get_read(&self, start: u64) -> Result<PositionedRead, ParquetError> {
        self.bounded(start, 0)?;
        Ok(PositionedRead {
            file: Arc::clone(&self.file),
            at: start,
            end: self.len,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        self.bounded(start, length as u64)?;
        let mut buf = vec![0; length];
        self.file
            .read_exact_at(&mut buf, start)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        Ok(buf.into())
    }
}

/// A reader from one position of a [`PositionedFile`] to its end, with its
/// own position (no shared descriptor offset).
pub(crate) struct PositionedRead {
    file: Arc<File>,
    at: u64,
    end: u64,
}

impl Read for PositionedRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.end - self.at).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_by_position_and_bounds_lengths() {
        let mut f = tempfile::tempfile().expect("temp file");
        f.write_all(b"0123456789").expect("write");
        let file = PositionedFile::new(f, 10);
        assert_eq!(&file.get_bytes(2, 3).expect("in range")[..], b"234");
        assert!(file.get_bytes(8, 3).is_err());
        assert!(file.get_bytes(u64::MAX, 1).is_err());
        let (mut a, mut b) = (file.get_read(1).expect("a"), file.get_read(5).expect("b"));
        let mut two = [0; 2];
        a.read_exact(&mut two).expect("a reads");
        b.read_exact(&mut two).expect("b reads");
        assert_eq!(&two, b"56");
        a.read_exact(&mut two).expect("a keeps its own position");
        assert_eq!(&two, b"34");
        let mut rest = Vec::new();
        b.read_to_end(&mut rest).expect("to the end");
        assert_eq!(rest, b"789");
    }
}
