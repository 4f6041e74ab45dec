//! Hostile inputs (issue 14): each must be a clear error naming the file,
//! never an abort, a hang or a silently wrong dataset.

use adapt_dataset::Dataset;
use adapt_formats::{
    Cifar10, DigiFace, DigiFaceOptions, FormatError, ImageFolder, Split, encode_png,
};
use std::path::Path;

fn png(path: &Path, w: u32, h: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let px = vec![90u8; (w * h * 3) as usize];
    std::fs::write(path, encode_png(path, &px, w, h, 3).unwrap()).unwrap();
}

pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn format_error(e: adapt_dataset::Error) -> String {
    e.reader_error::<FormatError>()
        .map_or_else(|| e.to_string(), |f| format!("{f:?}"))
}

/// A PNG of a few hundred bytes that declares 100000×100000 pixels.
#[test]
fn a_decompression_bomb_is_refused_before_it_is_decoded() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("a").join("bomb.png");
    png(&path, 1, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    // IHDR data starts at byte 16: width, height (big-endian), then its CRC.
    bytes[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    bytes[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert!(bytes.len() < 1000);
    let ds = ImageFolder::open(t.path()).unwrap();
    let err = format_error(ds.get(0).unwrap_err());
    assert!(err.contains("bomb.png"), "{err}");
    assert!(err.contains("TooLarge") || err.contains("limit"), "{err}");
}

#[test]
fn a_fifo_or_folder_in_place_of_a_file_is_refused_without_hanging() {
    let t = tempfile::tempdir().unwrap();
    // An image folder whose second "image" is a FIFO.
    png(&t.path().join("a").join("1.png"), 4, 4);
    let fifo = t.path().join("a").join("2.png");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let ds = ImageFolder::open(t.path()).unwrap();
    assert!(ds.get(0).is_ok());
    let err = format_error(ds.get(1).unwrap_err());
    assert!(err.contains("NotAFile") && err.contains("FIFO"), "{err}");
    // A folder in place of a CIFAR-10 batch file.
    let c = t.path().join("cifar");
    adapt_synth_free_cifar(&c);
    std::fs::remove_file(c.join("data_batch_3.bin")).unwrap();
    std::fs::create_dir(c.join("data_batch_3.bin")).unwrap();
    match Cifar10::open(&c, Split::Train) {
        Err(FormatError::NotAFile { path, kind }) => {
            assert!(path.ends_with("data_batch_3.bin") && kind == "a folder");
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a folder was read as a batch file"),
    }
}

/// Five one-record batch files and a test batch, by hand.
fn adapt_synth_free_cifar(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let record: Vec<u8> = std::iter::once(3u8)
        .chain((0..3072).map(|i| (i % 251) as u8))
        .collect();
    for name in [
        "data_batch_1.bin",
        "data_batch_2.bin",
        "data_batch_3.bin",
        "data_batch_4.bin",
        "data_batch_5.bin",
        "test_batch.bin",
    ] {
        std::fs::write(dir.join(name), &record).unwrap();
    }
}

#[test]
fn an_image_folder_refuses_link_loops_and_empty_classes() {
    let t = tempfile::tempdir().unwrap();
    png(&t.path().join("a").join("x.png"), 4, 4);
    png(&t.path().join("b").join("y.png"), 4, 4);
    std::os::unix::fs::symlink(t.path().join("a"), t.path().join("a").join("again")).unwrap();
    match ImageFolder::open(t.path()) {
        Err(FormatError::LinkLoop { path }) => assert!(path.ends_with("again"), "{path:?}"),
        Err(other) => panic!("unexpected error {other}"),
        Ok(ds) => panic!("a loop read as {} samples", ds.len()),
    }
    let t = tempfile::tempdir().unwrap();
    png(&t.path().join("a").join("x.png"), 4, 4);
    std::fs::create_dir(t.path().join("b")).unwrap();
    png(&t.path().join("c").join("z.png"), 4, 4);
    match ImageFolder::open(t.path()) {
        Err(FormatError::Empty { path, .. }) => assert!(path.ends_with("b")),
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("an empty class folder shifted the labels silently"),
    }
    // A link to a sibling class (no loop) is followed, as torchvision does.
    let t = tempfile::tempdir().unwrap();
    png(&t.path().join("a").join("x.png"), 4, 4);
    png(&t.path().join("b").join("y.png"), 4, 4);
    std::os::unix::fs::symlink(t.path().join("b"), t.path().join("a").join("more")).unwrap();
    assert_eq!(ImageFolder::open(t.path()).unwrap().len(), 3);
}

#[test]
fn digiface_folders_naming_the_same_number_are_refused() {
    let t = tempfile::tempdir().unwrap();
    for class in ["0", "00"] {
        let path = t.path().join(class).join("0.png");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let px = vec![9u8; 112 * 112 * 4];
        std::fs::write(&path, encode_png(&path, &px, 112, 112, 4).unwrap()).unwrap();
    }
    match DigiFace::open(t.path(), DigiFaceOptions::default()) {
        Err(FormatError::BadName { reason, .. }) => assert!(reason.contains("same number")),
        Err(other) => panic!("unexpected error {other}"),
        Ok(ds) => panic!("merged into {} samples", ds.len()),
    }
    // Label arithmetic: class 5 plus an offset near i64::MAX does not wrap.
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("5").join("0.png");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let px = vec![9u8; 112 * 112 * 4];
    std::fs::write(&path, encode_png(&path, &px, 112, 112, 4).unwrap()).unwrap();
    assert!(
        DigiFace::open(
            t.path(),
            DigiFaceOptions {
                class_offset: i64::MAX - 2
            }
        )
        .is_err()
    );
    assert!(DigiFace::open(t.path(), DigiFaceOptions { class_offset: 7 }).is_ok());
}

/// #26: a JPEG cut short and closed with its end marker, which the decoder
/// would fill with grey blocks and no error, is refused by `check_whole`
/// (what packing runs) and by a reader's decode (`strict_decode`, the
/// default), naming the file, on every read; the whole file is read again
/// once it is put back.
#[test]
fn a_jpeg_cut_and_closed_with_its_end_marker_is_refused_when_read() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("a").join("cut.jpg");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let pixels: Vec<u8> = (0..64 * 48 * 3).map(|i| (i * 7 % 251) as u8).collect();
    let whole = adapt_formats::encode_jpeg(&path, &pixels, 64, 48, 90).unwrap();
    adapt_formats::check_whole(&path, &whole).unwrap();
    let sos = whole.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    let mut cut = whole[..sos + (whole.len() - sos) / 2].to_vec();
    cut.extend([0xFF, 0xD9]);
    std::fs::write(&path, &cut).unwrap();
    let e = adapt_formats::check_whole(&path, &cut)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cut.jpg") && e.contains("truncated JPEG"), "{e}");
    assert!(adapt_formats::strict_decode());
    let folder = ImageFolder::open(t.path()).unwrap();
    for _ in 0..2 {
        let e = format_error(
            folder
                .read(0, &mut adapt_dataset::Sample::default())
                .unwrap_err(),
        );
        assert!(e.contains("cut.jpg") && e.contains("truncated JPEG"), "{e}");
    }
    std::fs::write(&path, &whole).unwrap();
    for _ in 0..2 {
        folder
            .read(0, &mut adapt_dataset::Sample::default())
            .unwrap();
    }
}
