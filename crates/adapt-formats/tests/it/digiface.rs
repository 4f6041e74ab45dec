//! DigiFace1M: folders per class, RGBA to RGB, class offsets.

use crate::{fixture, pattern};
use adapt_dataset::{Dataset, Shape};
use adapt_formats::{DigiFace, DigiFaceOptions, FormatError, write_digiface_image};

fn rgba(salt: u32) -> Vec<u8> {
    pattern(112, 112, 4, salt)
}

fn drop_alpha(rgba: &[u8]) -> Vec<u8> {
    rgba.chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect()
}

#[test]
fn numeric_order_rgb_output_and_class_offset() {
    let dir = tempfile::tempdir().unwrap();
    // Written out of order, with names that sort differently as text.
    for (class, n) in [(10, 2), (2, 10), (2, 2), (10, 0)] {
        write_digiface_image(dir.path(), class, n, &rgba((class * 100 + n) as u32), 112).unwrap();
    }
    std::fs::write(dir.path().join("2/notes.txt"), "ignored").unwrap();
    let ds = DigiFace::open(dir.path(), DigiFaceOptions { class_offset: 1000 }).unwrap();
    assert_eq!(ds.len(), 4);
    let order: Vec<String> = (0..4).map(|i| ds.source(i)).collect();
    for (got, want) in order
        .iter()
        .zip(["2/2.png", "2/10.png", "10/0.png", "10/2.png"])
    {
        assert!(got.ends_with(want), "{order:?}");
    }
    let s = ds.get(1).unwrap();
    assert_eq!((s.shape, s.label), (Shape::new(112, 112, 3), 1002));
    // PNG is lossless: RGB out is exactly the written RGBA without alpha.
    assert_eq!(s.pixels, drop_alpha(&rgba(210)));
    assert_eq!(ds.num_classes(), Some(1011));
}

#[test]
fn non_numeric_class_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_digiface_image(dir.path(), 0, 0, &rgba(0), 112).unwrap();
    std::fs::create_dir(dir.path().join("cats")).unwrap();
    let err = DigiFace::open(dir.path(), DigiFaceOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(&err, FormatError::BadName { path, .. } if path.ends_with("cats")),
        "{err}"
    );
}

#[test]
fn non_numeric_image_name_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_digiface_image(dir.path(), 0, 0, &rgba(0), 112).unwrap();
    std::fs::copy(dir.path().join("0/0.png"), dir.path().join("0/a.png")).unwrap();
    let err = DigiFace::open(dir.path(), DigiFaceOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(&err, FormatError::BadName { path, .. } if path.ends_with("a.png")),
        "{err}"
    );
}

#[test]
fn empty_or_missing_root_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = DigiFace::open(dir.path(), DigiFaceOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, FormatError::Empty { .. }), "{err}");
    let err = DigiFace::open(&dir.path().join("nope"), DigiFaceOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, FormatError::Missing { .. }), "{err}");
}

#[test]
fn truncated_png_and_wrong_size_are_named() {
    let dir = tempfile::tempdir().unwrap();
    write_digiface_image(dir.path(), 0, 0, &rgba(0), 112).unwrap();
    write_digiface_image(dir.path(), 0, 1, &pattern(50, 50, 4, 1), 50).unwrap();
    let p = dir.path().join("0/0.png");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let ds = DigiFace::open(dir.path(), DigiFaceOptions::default()).unwrap();
    let err = ds.get(0).unwrap_err();
    assert!(
        matches!(err.reader_error::<FormatError>(), Some(FormatError::Decode { path, .. }) if path == &p),
        "{err}"
    );
    let err = ds.get(1).unwrap_err();
    assert!(
        matches!(
            err.reader_error::<FormatError>(),
            Some(FormatError::UnexpectedShape { .. })
        ),
        "{err}"
    );
}

#[test]
fn palette_and_grey_pngs_become_rgb() {
    let mut s = adapt_dataset::Sample::default();
    let p = fixture("palette_4x3.png");
    adapt_formats::decode_rgb_into(&p, &std::fs::read(&p).unwrap(), &mut s).unwrap();
    assert_eq!(s.shape, Shape::new(3, 4, 3));
    // Pixel (x=1, y=0) is palette entry 1, green; (x=1, y=1) entry 2, blue.
    assert_eq!(&s.pixels[3..6], &[0, 255, 0]);
    assert_eq!(&s.pixels[(4 + 1) * 3..(4 + 1) * 3 + 3], &[0, 0, 255]);
    let p = fixture("grey_2x2.png");
    adapt_formats::decode_rgb_into(&p, &std::fs::read(&p).unwrap(), &mut s).unwrap();
    assert_eq!(
        s.pixels,
        vec![0, 0, 0, 85, 85, 85, 170, 170, 170, 255, 255, 255]
    );
}

/// CRC-32 (IEEE) of a PNG chunk's type and data.
fn png_crc(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_png_whose_image_data_is_short_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write_digiface_image(dir.path(), 0, 0, &rgba(0), 112).unwrap();
    let p = dir.path().join("0/0.png");
    let bytes = std::fs::read(&p).unwrap();
    // Rebuild the file with the IDAT chunk's data cut to a third (its CRC
    // valid), IEND after it: well-formed chunks, short pixel data.
    let mut out = bytes[..8].to_vec();
    let mut at = 8;
    while at + 12 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let kind = &bytes[at + 4..at + 8];
        let mut data = bytes[at + 8..at + 8 + len].to_vec();
        if kind == b"IDAT" {
            data.truncate(len / 3);
        }
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(&data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&png_crc(&body).to_be_bytes());
        at += 12 + len;
    }
    std::fs::write(&p, &out).unwrap();
    let ds = DigiFace::open(dir.path(), DigiFaceOptions::default()).unwrap();
    let err = ds.get(0).unwrap_err();
    assert!(
        matches!(err.reader_error::<FormatError>(), Some(FormatError::Decode { path, .. }) if path == &p),
        "{err}"
    );
}
