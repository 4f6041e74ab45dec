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

/// torchvision's download, as our writer writes it (the pickles numpy and
/// pickle write at protocol 2): read into the same records as the binary
/// layout, without running anything; a label past the classes or a
/// damaged file is refused naming the file.
#[test]
fn torchvisions_pickles_read_as_the_binary_records() {
    let binary = tempfile::tempdir().unwrap();
    let all = write_split(binary.path(), 3);
    let root = tempfile::tempdir().unwrap();
    let py = root.path().join("cifar-10-batches-py");
    std::fs::create_dir(&py).unwrap();
    let names = [
        "data_batch_1",
        "data_batch_2",
        "data_batch_3",
        "data_batch_4",
        "data_batch_5",
        "test_batch",
    ];
    for (k, name) in names.iter().enumerate() {
        let recs: Vec<(u8, &[u8])> = all[k * 3..k * 3 + 3]
            .iter()
            .map(|(l, p)| (*l, p.as_slice()))
            .collect();
        adapt_formats::write_batch_pickle(&py.join(name), false, &recs).unwrap();
    }
    let classes = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    adapt_formats::write_meta_pickle(&py, false, &classes).unwrap();
    for split in [Split::Train, Split::Test] {
        let (a, b) = (
            Cifar10::open(root.path(), split).unwrap(),
            Cifar10::open(binary.path(), split).unwrap(),
        );
        assert_eq!(a.len(), b.len());
        assert_eq!(a.classes(), b.classes());
        for i in 0..a.len() {
            assert_eq!(a.get(i).unwrap().pixels, b.get(i).unwrap().pixels, "{i}");
            assert_eq!(a.label(i), b.label(i));
        }
        assert!(
            a.source(1).contains("cifar-10-batches-py"),
            "{}",
            a.source(1)
        );
    }
    // A label of 10 in a CIFAR-10 batch.
    let image = vec![0u8; 3072];
    adapt_formats::write_batch_pickle(&py.join("data_batch_2"), false, &[(10, &image)]).unwrap();
    let e = Cifar10::open(root.path(), Split::Train).err().unwrap();
    assert!(matches!(e, FormatError::Pickle { .. }), "{e}");
    assert!(
        e.to_string().contains("data_batch_2") && e.to_string().contains("record 0"),
        "{e}"
    );
    // Truncated.
    let bytes = std::fs::read(py.join("data_batch_1")).unwrap();
    std::fs::write(py.join("data_batch_2"), &bytes[..bytes.len() / 2]).unwrap();
    let e = Cifar10::open(root.path(), Split::Train)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("data_batch_2") && e.contains("claimed"), "{e}");
    // CIFAR-100 from its own writer.
    let c100 = tempfile::tempdir().unwrap();
    let py = c100.path().join("cifar-100-python");
    std::fs::create_dir(&py).unwrap();
    let recs: Vec<(u8, &[u8])> = vec![(99, &image), (42, &image)];
    adapt_formats::write_batch_pickle(&py.join("train"), true, &recs).unwrap();
    adapt_formats::write_batch_pickle(&py.join("test"), true, &recs[..1]).unwrap();
    let names: Vec<String> = (0..100).map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    adapt_formats::write_meta_pickle(&py, true, &names).unwrap();
    let ds = adapt_formats::Cifar100::open(c100.path(), Split::Train).unwrap();
    assert_eq!(
        (ds.len(), ds.label(0), ds.label(1), ds.num_classes()),
        (2, Some(99), Some(42), Some(100))
    );
    assert_eq!(
        adapt_formats::Cifar100::open(c100.path(), Split::Test)
            .unwrap()
            .len(),
        1
    );
}
