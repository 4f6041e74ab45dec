//! Hugging Face Arrow files (`save_to_disk` folders): written by our
//! writer, read back equal (pixels, labels, class names, record batches),
//! path-only rows read from their files, and damaged in each way the
//! reader must name. Files written by `datasets` itself are read in the
//! Python tests.

use crate::pattern;
use adapt_dataset::{Dataset, Sample};
use adapt_formats::{ArrowFiles, ArrowWriter, FormatError, ParquetOptions, encode_png};
use std::path::Path;

fn png(salt: u32) -> Vec<u8> {
    encode_png(Path::new("x.png"), &pattern(6, 4, 3, salt), 6, 4, 3).unwrap()
}

/// `n` rows in `dir`: PNG `i`, label `i % 3`, batches of 4.
fn write(dir: &Path, n: usize) {
    let mut w =
        ArrowWriter::new(dir, 4, Some(vec!["cat".into(), "dog".into(), "eel".into()])).unwrap();
    for i in 0..n {
        w.write(&png(i as u32), Some(&format!("{i}.png")), (i % 3) as i64)
            .unwrap();
    }
    w.finish().unwrap();
}

fn read(ds: &ArrowFiles, i: usize) -> Result<Sample, adapt_dataset::Error> {
    let mut s = Sample::default();
    ds.read(i, &mut s).map(|_| s)
}

#[test]
fn reads_back_what_was_written_by_record_batch() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 10);
    for name in [
        "state.json",
        "dataset_info.json",
        "data-00000-of-00001.arrow",
    ] {
        assert!(dir.path().join(name).is_file(), "{name}");
    }
    let ds = ArrowFiles::open(
        &dir.path().display().to_string(),
        &ParquetOptions::default(),
    )
    .unwrap();
    assert_eq!(ds.len(), 10);
    assert_eq!(ds.class_names().unwrap(), ["cat", "dog", "eel"]);
    assert_eq!(ds.num_classes(), Some(3));
    let starts: Vec<usize> = ds.record_batch_ranges().iter().map(|r| r.start).collect();
    assert_eq!(starts, [0, 4, 8]);
    for i in 0..10 {
        let s = read(&ds, i).unwrap();
        assert_eq!(s.pixels, pattern(6, 4, 3, i as u32), "row {i}");
        assert_eq!(
            (s.label, ds.label(i)),
            ((i % 3) as i64, Some((i % 3) as i64))
        );
    }
    // From several threads at once, the same.
    std::thread::scope(|scope| {
        for t in 0..3 {
            let ds = &ds;
            scope.spawn(move || {
                for i in (t..10).step_by(3) {
                    assert_eq!(read(ds, i).unwrap().pixels, pattern(6, 4, 3, i as u32));
                }
            });
        }
    });
    assert!(
        ds.source(9).contains("record batch 2, row 1"),
        "{}",
        ds.source(9)
    );
}

#[test]
fn names_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 5);
    let spec = dir.path().display().to_string();
    let columns = |image: &str, label: Option<&str>| ParquetOptions {
        image: image.into(),
        label: label.map(str::to_owned),
        text: None,
    };
    let text = ArrowFiles::open(&spec, &columns("img", Some("label")))
        .err()
        .unwrap()
        .to_string();
    assert!(
        text.contains("no image column \"img\"") && text.contains("image, label"),
        "{text}"
    );
    let text = ArrowFiles::open(&spec, &columns("label", Some("label")))
        .err()
        .unwrap()
        .to_string();
    assert!(text.contains("not image bytes"), "{text}");
    let text = ArrowFiles::open(&spec, &columns("image", Some("image")))
        .err()
        .unwrap()
        .to_string();
    assert!(text.contains("not integers"), "{text}");
    // Unlabelled: labels -1, no classes.
    let ds = ArrowFiles::open(&spec, &columns("image", None)).unwrap();
    assert_eq!((ds.label(0), ds.num_classes()), (Some(-1), None));
    // A file cut short, and one that is not an Arrow stream at all.
    let data = dir.path().join("data-00000-of-00001.arrow");
    let bytes = std::fs::read(&data).unwrap();
    for (what, damaged) in [
        ("cut", &bytes[..bytes.len() / 2]),
        ("not arrow", &b"PAR1 hello"[..]),
    ] {
        std::fs::write(&data, damaged).unwrap();
        let e = ArrowFiles::open(&spec, &ParquetOptions::default())
            .err()
            .unwrap();
        assert!(
            matches!(&e, FormatError::Arrow { path, .. } if path.starts_with(&data)),
            "{what}: {e}"
        );
    }
    // A DatasetDict's folder: refused, naming its splits.
    let dict = tempfile::tempdir().unwrap();
    write(&dict.path().join("train"), 3);
    write(&dict.path().join("test"), 3);
    std::fs::write(
        dict.path().join("dataset_dict.json"),
        r#"{"splits": ["train", "test"]}"#,
    )
    .unwrap();
    let text = ArrowFiles::open(
        &dict.path().display().to_string(),
        &ParquetOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        text.contains("DatasetDict") && text.contains("train, test"),
        "{text}"
    );
    let train = dict.path().join("train").display().to_string();
    assert_eq!(
        ArrowFiles::open(&train, &ParquetOptions::default())
            .unwrap()
            .len(),
        3
    );
}
