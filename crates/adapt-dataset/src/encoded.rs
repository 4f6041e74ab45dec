//! A sample's encoded form (the file's bytes) and the fixed steps a reader
//! applies after decoding it, for reduced-scale decoding.

use crate::{CropBox, Shape};

/// What a reader still does to a decoded image to produce the sample: the
/// format's fixed steps (every image is converted to RGB first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixedSteps {
    /// Crop box (CelebA's).
    pub crop: Option<CropBox>,
    /// The shape the decoded RGB image must have (DigiFace1M: 112×112×3),
    /// checked before cropping.
    pub expect: Option<Shape>,
}

/// A sample as its encoded file: the bytes, its label and its fixed steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The file's bytes (JPEG or PNG).
    pub bytes: Vec<u8>,
    /// Class label.
    pub label: i64,
    /// Steps after decoding.
    pub steps: FixedSteps,
}
