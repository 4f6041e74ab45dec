//! Integration tests of the format readers: each writes a small layout with
//! the format's own writer into a temp dir, reads it back, and damages it.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

mod celeba;
mod cifar10;
mod digiface;
#[cfg(feature = "parquet")]
mod hf_arrow;
mod hostile;
mod imagefolder;
#[cfg(feature = "parquet")]
mod parquet;
mod webdataset;

use std::path::PathBuf;

/// A committed fixture under `datasets/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../datasets/fixtures")
        .join(name)
}

/// A deterministic RGB test pattern.
pub fn pattern(width: u32, height: u32, channels: u32, salt: u32) -> Vec<u8> {
    (0..width * height * channels)
        .map(|i| ((i * 7 + salt * 13) % 251) as u8)
        .collect()
}

/// A smooth RGB image that survives JPEG nearly unchanged.
pub fn smooth(width: u32, height: u32) -> Vec<u8> {
    let mut v = Vec::new();
    for y in 0..height {
        for x in 0..width {
            v.extend_from_slice(&[(x * 255 / width) as u8, (y * 255 / height) as u8, 128]);
        }
    }
    v
}
