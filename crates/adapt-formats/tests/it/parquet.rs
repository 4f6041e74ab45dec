//! Parquet in the Hugging Face layout: written by our writer, read back
//! equal (pixels, labels, class names, row groups) from several threads
//! and through a cache smaller than one file, and damaged in each way the
//! reader must name. Files written by pyarrow and `datasets`' layout are
//! read in the Python tests.

use crate::pattern;
use adapt_dataset::Dataset;
use adapt_formats::{
    FormatError, Parquet, ParquetOptions, ParquetWriter, ParquetWriterOptions, encode_png,
};
use std::path::{Path, PathBuf};

fn png(salt: u32) -> Vec<u8> {
    encode_png(Path::new("x.png"), &pattern(6, 4, 3, salt), 6, 4, 3).unwrap()
}

/// `n` rows of split `split` in `dir`: PNG `i`, label `i % 3`, files of 7
/// rows in row groups of 3.
fn write(dir: &Path, split: &str, n: usize) -> Vec<PathBuf> {
    let options = ParquetWriterOptions {
        rows_per_file: 7,
        rows_per_group: 3,
        class_names: Some(vec!["cat".into(), "dog".into(), "eel".into()]),
    };
    let mut w = ParquetWriter::new(dir, split, options).unwrap();
    for i in 0..n {
        w.write(&png(i as u32), Some(&format!("{i}.png")), (i % 3) as i64)
            .unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn reads_back_what_was_written_by_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path(), "train", 17);
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "train-00000-of-00003.parquet",
            "train-00001-of-00003.parquet",
            "train-00002-of-00003.parquet"
        ]
    );
    let pattern_spec = format!(
        "{}/train-{{00000..00002}}-of-00003.parquet",
        dir.path().display()
    );
    for spec in [dir.path().display().to_string(), pattern_spec] {
        let ds = Parquet::open(&spec, &ParquetOptions::default()).unwrap();
        assert_eq!(ds.len(), 17);
        assert_eq!(ds.num_classes(), Some(3));
        assert_eq!(ds.class_names().unwrap(), ["cat", "dog", "eel"]);
        // Files of 7 rows in groups of 3: 3+3+1, 3+3+1, 3.
        let starts: Vec<usize> = ds.row_group_ranges().iter().map(|r| r.start).collect();
        assert_eq!(starts, [0, 3, 6, 7, 10, 13, 14]);
        for i in 0..17 {
            let s = ds.get(i).unwrap();
            assert_eq!(s.pixels, pattern(6, 4, 3, i as u32), "sample {i}");
            assert_eq!(s.label, (i % 3) as i64);
            assert_eq!(ds.label(i), Some((i % 3) as i64));
            assert_eq!(ds.encoded(i).unwrap().unwrap().bytes, png(i as u32));
        }
        assert!(
            ds.source(8)
                .ends_with("train-00001-of-00003.parquet (row group 0, row 1)"),
            "{}",
            ds.source(8)
        );
    }
    // One file, unlabelled.
    let options = ParquetOptions {
        label: None,
        ..ParquetOptions::default()
    };
    let ds = Parquet::open(&files[2].display().to_string(), &options).unwrap();
    assert_eq!((ds.len(), ds.num_classes()), (3, None));
    assert_eq!(ds.get(0).unwrap().label, -1);
}

#[test]
fn threads_and_a_small_cache_read_the_same_samples() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "train", 40);
    let spec = dir.path().display().to_string();
    let whole = Parquet::open(&spec, &ParquetOptions::default()).unwrap();
    // A budget below one row group: every group is decoded when read.
    let small = Parquet::open(&spec, &ParquetOptions::default())
        .unwrap()
        .with_cache_bytes(1);
    let expected: Vec<Vec<u8>> = (0..40).map(|i| whole.get(i).unwrap().pixels).collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (small, expected) = (&small, &expected);
            s.spawn(move || {
                for k in 0..40 {
                    let i = (k * 7 + t * 11) % 40;
                    assert_eq!(small.get(i).unwrap().pixels, expected[i], "sample {i}");
                }
            });
        }
    });
}

#[test]
fn names_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path(), "train", 7);
    let one = files[0].display().to_string();
    // A missing column lists the file's columns.
    let missing = ParquetOptions {
        image: "img".into(),
        ..ParquetOptions::default()
    };
    let e = Parquet::open(&one, &missing).err().unwrap().to_string();
    assert!(e.contains("no image column \"img\""), "{e}");
    assert!(e.contains("image.bytes, image.path, label"), "{e}");
    // The image as a label, the label as an image.
    let crossed = ParquetOptions {
        image: "label".into(),
        label: Some("image".into()),
        text: None,
    };
    let e = Parquet::open(&one, &crossed).err().unwrap().to_string();
    assert!(e.contains("is INT64, not binary"), "{e}");
    // A file cut short, and one that is not Parquet at all.
    let bytes = std::fs::read(&files[0]).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = Parquet::open(&cut.display().to_string(), &ParquetOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, FormatError::Parquet { .. }), "{e}");
    assert!(e.to_string().contains("cut.parquet"), "{e}");
    let text = dir.path().join("text.parquet");
    std::fs::write(&text, b"not parquet at all").unwrap();
    let e = Parquet::open(&text.display().to_string(), &ParquetOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a readable Parquet file"), "{e}");
    // A non-image blob fails its own read only, naming the row.
    let blobs = tempfile::tempdir().unwrap();
    let mut w = ParquetWriter::new(blobs.path(), "train", ParquetWriterOptions::default()).unwrap();
    w.write(&png(1), None, 0).unwrap();
    w.write(b"not an image", None, 1).unwrap();
    w.finish().unwrap();
    let ds = Parquet::open(
        &blobs.path().display().to_string(),
        &ParquetOptions::default(),
    )
    .unwrap();
    assert!(ds.get(0).is_ok());
    let e = ds.get(1).err().unwrap().to_string();
    assert!(e.contains("(row group 0, row 1)"), "{e}");
}

#[test]
fn a_folder_of_several_splits_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write(&data, "train", 7);
    write(&data, "test", 3);
    let e = Parquet::open(
        &dir.path().display().to_string(),
        &ParquetOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("the splits test, train"), "{e}");
    // One split's files by pattern, or a refs/convert/parquet folder.
    let test = format!("{}/test-00000-of-00001.parquet", data.display());
    assert_eq!(
        Parquet::open(&test, &ParquetOptions::default())
            .unwrap()
            .len(),
        3
    );
    let convert = dir.path().join("default/validation");
    std::fs::create_dir_all(&convert).unwrap();
    std::fs::copy(
        data.join("test-00000-of-00001.parquet"),
        convert.join("0000.parquet"),
    )
    .unwrap();
    let ds = Parquet::open(&convert.display().to_string(), &ParquetOptions::default()).unwrap();
    assert_eq!(ds.len(), 3);
}

/// A PNG of a few hundred bytes whose header declares `w`×`h` pixels.
fn png_declaring(w: u32, h: u32) -> Vec<u8> {
    let mut bytes = png(0);
    // IHDR data starts at byte 16: width, height (big-endian), then its CRC.
    bytes[16..20].copy_from_slice(&w.to_be_bytes());
    bytes[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crate::hostile::crc32(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[test]
fn hostile_files_are_errors_naming_the_file_or_row() {
    let dir = tempfile::tempdir().unwrap();
    // A footer length past the file's start.
    let files = write(&dir.path().join("ok"), "train", 3);
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let at = bytes.len() - 8;
    bytes[at..at + 4].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let long = dir.path().join("long-footer.parquet");
    std::fs::write(&long, &bytes).unwrap();
    let e = Parquet::open(&long.display().to_string(), &ParquetOptions::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("long-footer.parquet"), "{e}");
    // An image declaring 60,000 × 60,000 pixels in its header: its row's
    // read is an error naming the row, decoded into nothing.
    let bomb = dir.path().join("bomb");
    let mut w = ParquetWriter::new(&bomb, "train", ParquetWriterOptions::default()).unwrap();
    w.write(&png(1), None, 0).unwrap();
    w.write(&png_declaring(60_000, 60_000), None, 1).unwrap();
    w.finish().unwrap();
    let ds = Parquet::open(&bomb.display().to_string(), &ParquetOptions::default()).unwrap();
    assert!(ds.get(0).is_ok());
    let e = ds.get(1).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("(row group 0, row 1)"), "{e}");
}

#[test]
fn a_row_group_claiming_2_pow_31_rows_is_refused_naming_it() {
    use parquet::file::metadata::{ParquetMetaDataReader, ParquetMetaDataWriter};
    let dir = tempfile::tempdir().unwrap();
    let files = write(&dir.path().join("ok"), "train", 3);
    let bytes = std::fs::read(&files[0]).unwrap();
    // The footer rewritten with row group 0 claiming 2^31 rows.
    let n = bytes.len();
    let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let start = n - 8 - footer;
    let meta = ParquetMetaDataReader::decode_metadata(&bytes[start..n - 8]).unwrap();
    let mut builder = meta.into_builder();
    let groups = builder
        .take_row_groups()
        .into_iter()
        .enumerate()
        .map(|(i, g)| match i {
            0 => g.into_builder().set_num_rows(1 << 31).build().unwrap(),
            _ => g,
        })
        .collect();
    let meta = builder.set_row_groups(groups).build();
    let mut out = bytes[..start].to_vec();
    ParquetMetaDataWriter::new(&mut out, &meta)
        .finish()
        .unwrap();
    let liar = dir.path().join("liar.parquet");
    std::fs::write(&liar, &out).unwrap();
    let e = Parquet::open(&liar.display().to_string(), &ParquetOptions::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("liar.parquet (row group 0)") && e.contains("declares 2147483648 rows"),
        "{e}"
    );
}
