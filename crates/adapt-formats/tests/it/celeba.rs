//! CelebA: the reader against files written in the real layout.

use crate::smooth;
use adapt_dataset::{CropBox, Dataset, Shape};
use adapt_formats::{CELEBA_CROP, CelebA, CelebAOptions, CelebAWriter, FormatError};
use std::path::Path;

fn write_set(root: &Path, n: usize) {
    let w = CelebAWriter::create(root).unwrap();
    let rgb = smooth(178, 218);
    let names: Vec<String> = (1..=n).map(CelebAWriter::image_name).collect();
    for name in &names {
        w.write_image(name, &rgb, 178, 218, 95).unwrap();
    }
    w.write_identities(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), 100 + i as i64)),
    )
    .unwrap();
}

#[test]
fn reads_in_identity_order_with_the_seed_crop() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 3);
    let ds = CelebA::open(dir.path(), CelebAOptions::default()).unwrap();
    assert_eq!(ds.len(), 3);
    assert_eq!(ds.sample_shape(), Some(Shape::new(128, 128, 3)));
    let s = ds.get(2).unwrap();
    assert_eq!((s.shape, s.label), (Shape::new(128, 128, 3), 102));
    // The crop starts at column 25, row 45 of the smooth ramp: R = x*255/178.
    let (r, g) = (i32::from(s.pixels[0]), i32::from(s.pixels[1]));
    assert!(
        (r - 25 * 255 / 178).abs() <= 3 && (g - 45 * 255 / 218).abs() <= 3,
        "{r} {g}"
    );
    assert!(ds.source(0).ends_with("img_align_celeba/000001.jpg"));
    assert_eq!(ds.num_classes(), Some(103));
}

#[test]
fn crop_is_configurable_or_off() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 1);
    let full = CelebA::open(dir.path(), CelebAOptions { crop: None }).unwrap();
    assert_eq!(full.get(0).unwrap().shape, Shape::new(218, 178, 3));
    let small = CelebA::open(
        dir.path(),
        CelebAOptions {
            crop: Some(CropBox::new(0, 0, 10, 20)),
        },
    )
    .unwrap();
    assert_eq!(small.get(0).unwrap().shape, Shape::new(20, 10, 3));
    let outside = CelebA::open(
        dir.path(),
        CelebAOptions {
            crop: Some(CropBox::new(0, 0, 500, 20)),
        },
    )
    .unwrap();
    let err = outside.get(0).unwrap_err();
    let inner = err.reader_error::<FormatError>().unwrap();
    assert!(matches!(inner, FormatError::Transform { .. }), "{inner}");
    assert_eq!(CELEBA_CROP, CropBox::new(25, 45, 153, 173));
}

#[test]
fn crlf_and_trailing_blank_lines_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 2);
    std::fs::write(
        dir.path().join("identity_CelebA.txt"),
        "000001.jpg 7\r\n000002.jpg 8\r\n\r\n",
    )
    .unwrap();
    let ds = CelebA::open(dir.path(), CelebAOptions::default()).unwrap();
    assert_eq!((ds.len(), ds.get(1).unwrap().label), (2, 8));
}

#[test]
fn malformed_line_is_named_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 2);
    for (text, reason) in [
        ("000001.jpg 7\n000002.jpg\n", "expected"),
        ("000001.jpg 7\n000002.jpg x\n", "not an integer"),
        ("000001.jpg 7\n000002.jpg 1 2\n", "expected"),
        ("000001.jpg 7\n\n000002.jpg 1\n", "expected"),
    ] {
        std::fs::write(dir.path().join("identity_CelebA.txt"), text).unwrap();
        let err = CelebA::open(dir.path(), CelebAOptions::default())
            .err()
            .unwrap();
        assert!(
            matches!(&err, FormatError::BadLine { line: 2, .. }),
            "{text:?}: {err}"
        );
        assert!(
            err.to_string().contains(reason) && err.to_string().contains("identity_CelebA.txt"),
            "{err}"
        );
    }
}

#[test]
fn listed_image_that_is_missing_is_named() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 2);
    std::fs::remove_file(dir.path().join("img_align_celeba/000002.jpg")).unwrap();
    let err = CelebA::open(dir.path(), CelebAOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(&err, FormatError::MissingImage { line: 2, image, .. } if image.ends_with("000002.jpg")),
        "{err}"
    );
}

#[test]
fn corrupt_and_truncated_jpegs_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 2);
    let images = dir.path().join("img_align_celeba");
    let jpeg = std::fs::read(images.join("000001.jpg")).unwrap();
    std::fs::write(images.join("000001.jpg"), &jpeg[..jpeg.len() / 3]).unwrap();
    std::fs::write(images.join("000002.jpg"), b"not an image at all").unwrap();
    let ds = CelebA::open(dir.path(), CelebAOptions::default()).unwrap();
    for i in 0..2 {
        let err = ds.get(i).unwrap_err();
        let inner = err.reader_error::<FormatError>().expect("a format error");
        assert!(
            matches!(inner, FormatError::Decode { path, .. } if path.ends_with(format!("00000{}.jpg", i + 1))),
            "{inner}"
        );
    }
}

#[test]
fn empty_or_absent_identity_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        CelebA::open(dir.path(), CelebAOptions::default()),
        Err(FormatError::Missing { .. })
    ));
    write_set(dir.path(), 1);
    std::fs::write(dir.path().join("identity_CelebA.txt"), "\n").unwrap();
    assert!(matches!(
        CelebA::open(dir.path(), CelebAOptions::default()),
        Err(FormatError::Empty { .. })
    ));
}

#[test]
fn grey_jpeg_is_converted_to_rgb() {
    let dir = tempfile::tempdir().unwrap();
    write_set(dir.path(), 1);
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 95)
        .encode(
            &vec![77u8; 178 * 218],
            178,
            218,
            image::ExtendedColorType::L8,
        )
        .unwrap();
    std::fs::write(dir.path().join("img_align_celeba/000001.jpg"), jpeg).unwrap();
    let s = CelebA::open(dir.path(), CelebAOptions::default())
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!(s.shape, Shape::new(128, 128, 3));
    assert!(s.pixels.iter().all(|&v| v.abs_diff(77) <= 1));
}
