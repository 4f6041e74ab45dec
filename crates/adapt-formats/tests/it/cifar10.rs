//! CIFAR-10 binary batches: the reader against the fixture and written files.

use crate::{fixture, pattern};
use adapt_dataset::{Dataset, Layout, Shape};
use adapt_formats::{Cifar10, FormatError, Split, write_batch, write_meta};
use std::path::Path;

fn write_split(dir: &Path, per_file: usize) -> Vec<(u8, Vec<u8>)> {
    let mut all = Vec::new();
    for (f, name) in Split::Train
        .file_names()
        .iter()
        .chain(&Split::Test.file_names())
        .enumerate()
    {
        let recs: Vec<(u8, Vec<u8>)> = (0..per_file)
            .map(|i| {
                (
                    ((f + i) % 10) as u8,
                    pattern(32, 32, 3, (f * 100 + i) as u32),
                )
            })
            .collect();
        write_batch(
            &dir.join(name),
            recs.iter().map(|(l, p)| (*l, p.as_slice())),
        )
        .unwrap();
        all.extend(recs);
    }
    write_meta(dir, &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]).unwrap();
    all
}

#[test]
fn write_then_read_gives_every_record_in_file_then_record_order() {
    let dir = tempfile::tempdir().unwrap();
    let all = write_split(dir.path(), 3);
    let train = Cifar10::open(dir.path(), Split::Train).unwrap();
    let test = Cifar10::open(dir.path(), Split::Test).unwrap();
    assert_eq!((train.len(), test.len()), (15, 3));
    assert_eq!(train.classes()[9], "j");
    for (i, (label, pixels)) in all.iter().take(15).enumerate() {
        let s = train.get(i).unwrap();
        assert_eq!((s.label as u8, &s.pixels), (*label, pixels), "record {i}");
        assert_eq!((s.shape, s.layout), (Shape::new(32, 32, 3), Layout::Planar));
    }
    assert_eq!(test.get(2).unwrap().pixels, all[17].1);
    assert!(
        train.source(4).ends_with("data_batch_2.bin#record=1"),
        "{}",
        train.source(4)
    );
    assert!(train.get(15).is_err());
}

#[test]
fn committed_fixture_decodes_planar_to_hwc() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("two_records.bin")).unwrap();
    for name in Split::Train.file_names() {
        std::fs::write(dir.path().join(name), &bytes).unwrap();
    }
    let ds = Cifar10::open(dir.path(), Split::Train).unwrap();
    assert_eq!(ds.len(), 10);
    let s = ds.get(0).unwrap();
    assert_eq!(s.label, 3);
    // Pixel (0, 1): R at byte 1, G at 1024 + 1, B at 2048 + 1 of the planes.
    assert_eq!(&s.hwc_bytes()[3..6], &[1, 1, 1]);
    assert_eq!(ds.get(1).unwrap().label, 9);
    // No meta file: the standard names.
    assert_eq!(ds.classes()[0], "airplane");
}

#[test]
fn a_parent_folder_with_cifar_10_batches_bin_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("cifar-10-batches-bin");
    std::fs::create_dir(&inner).unwrap();
    write_split(&inner, 1);
    assert_eq!(Cifar10::open(dir.path(), Split::Train).unwrap().len(), 5);
}

#[test]
fn truncated_file_is_named_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), 2);
    let victim = dir.path().join("data_batch_3.bin");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap();
    f.set_len(3073 * 2 - 10).unwrap();
    let err = Cifar10::open(dir.path(), Split::Train).err().unwrap();
    assert!(
        matches!(&err, FormatError::CifarSize { path, tail: 3063, .. } if path == &victim),
        "{err}"
    );
    assert!(err.to_string().contains("data_batch_3.bin"));
}

#[test]
fn label_over_9_is_named_with_its_record() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), 3);
    let victim = dir.path().join("data_batch_1.bin");
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[2 * 3073] = 10;
    std::fs::write(&victim, bytes).unwrap();
    let err = Cifar10::open(dir.path(), Split::Train).err().unwrap();
    assert!(
        matches!(
            err,
            FormatError::CifarLabel {
                record: 2,
                label: 10,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn missing_or_empty_batch_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), 1);
    std::fs::remove_file(dir.path().join("data_batch_5.bin")).unwrap();
    let err = Cifar10::open(dir.path(), Split::Train).err().unwrap();
    assert!(
        matches!(&err, FormatError::Missing { path, .. } if path.ends_with("data_batch_5.bin")),
        "{err}"
    );
    std::fs::write(dir.path().join("data_batch_5.bin"), b"").unwrap();
    let err = Cifar10::open(dir.path(), Split::Train).err().unwrap();
    assert!(matches!(err, FormatError::Empty { .. }), "{err}");
}

#[test]
fn writer_rejects_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.bin");
    let err = write_batch(&path, [(10u8, &[0u8; 3072][..])]).unwrap_err();
    assert!(matches!(err, FormatError::InvalidInput { .. }), "{err}");
    assert!(!path.exists());
}
