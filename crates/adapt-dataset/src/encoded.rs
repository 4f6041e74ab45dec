//! A sample's encoded form (the file's bytes) and the fixed steps a reader
//! applies after decoding it, for reduced-scale decoding.

use crate::{Error, Shape};

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

/// A crop box as PIL takes it: left and top inclusive, right and bottom
/// exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CropBox {
    /// First column kept.
    pub left: u32,
    /// First row kept.
    pub top: u32,
    /// One past the last column kept.
    pub right: u32,
    /// One past the last row kept.
    pub bottom: u32,
}

impl CropBox {
    /// A box from PIL's `(left, top, right, bottom)`.
    pub const fn new(left: u32, top: u32, right: u32, bottom: u32) -> Self {
        Self {
            left,
            top,
            right,
            bottom,
        }
    }

    /// Checks that the box is non-empty and inside an image of `shape`.
    pub fn check(&self, shape: Shape) -> Result<(), Error> {
        let ok = self.left < self.right
            && self.top < self.bottom
            && self.right <= shape.width
            && self.bottom <= shape.height;
        if ok {
            Ok(())
        } else {
            Err(Error::CropOutOfBounds {
                left: self.left,
                top: self.top,
                right: self.right,
                bottom: self.bottom,
                width: shape.width,
                height: shape.height,
            })
        }
    }
}
