//! One sample: u8 pixels with their shape, layout and label, and views of it.

use crate::Error;
use std::fmt;

/// How the pixel bytes of a [`Sample`] are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Height × width × channels, as decoders and PIL produce (HWC).
    #[default]
    Interleaved,
    /// Channels × height × width, one plane per channel (CHW), as CIFAR-10's
    /// binary files store it. Kept as is so a CIFAR sample reaches the
    /// normaliser without a transpose.
    Planar,
}

/// Height, width and channel count of a decoded image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// Channels per pixel (3 for RGB).
    pub channels: u32,
}

impl Shape {
    /// A new shape.
    pub const fn new(height: u32, width: u32, channels: u32) -> Self {
        Self {
            height,
            width,
            channels,
        }
    }

    /// Number of values (bytes for u8 pixels) in an image of this shape.
    pub const fn len(&self) -> usize {
        self.height as usize * self.width as usize * self.channels as usize
    }

    /// `true` for a shape with no pixel.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.height, self.width, self.channels)
    }
}

/// One decoded sample: u8 pixels with an explicit shape and layout, and an
/// integer label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Pixel bytes, `shape.len()` of them, ordered by `layout`.
    pub pixels: Vec<u8>,
    /// Image shape.
    pub shape: Shape,
    /// Byte order of `pixels`.
    pub layout: Layout,
    /// Class label.
    pub label: i64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape::new(0, 0, 0)
    }
}

/// A sample borrowed from where it lives (a file read into memory), for
/// formats that store decoded pixels: normalising from it copies each byte
/// once, straight into the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleView<'a> {
    /// Pixel bytes, `shape.len()` of them, ordered by `layout`.
    pub pixels: &'a [u8],
    /// Image shape.
    pub shape: Shape,
    /// Byte order of `pixels`.
    pub layout: Layout,
    /// Class label.
    pub label: i64,
}

impl SampleView<'_> {
    /// Checks that the buffer length matches the shape.
    pub fn validate(&self) -> Result<(), Error> {
        check_len(self.pixels, self.shape)
    }
}

impl Sample {
    /// This sample as a borrowed view.
    pub fn view(&self) -> SampleView<'_> {
        SampleView {
            pixels: &self.pixels,
            shape: self.shape,
            layout: self.layout,
            label: self.label,
        }
    }

    /// A sample from interleaved (HWC) pixels; checks the length.
    pub fn hwc(
        pixels: Vec<u8>,
        height: u32,
        width: u32,
        channels: u32,
        label: i64,
    ) -> Result<Self, Error> {
        Self::with_layout(
            pixels,
            Shape::new(height, width, channels),
            Layout::Interleaved,
            label,
        )
    }

    /// A sample with an explicit layout; checks the length.
    pub fn with_layout(
        pixels: Vec<u8>,
        shape: Shape,
        layout: Layout,
        label: i64,
    ) -> Result<Self, Error> {
        check_len(&pixels, shape)?;
        Ok(Self {
            pixels,
            shape,
            layout,
            label,
        })
    }

    /// Checks that the buffer length matches the shape.
    pub fn validate(&self) -> Result<(), Error> {
        check_len(&self.pixels, self.shape)
    }

    /// Makes this sample a copy of `view`, reusing the pixel buffer.
    pub fn copy_from(&mut self, view: SampleView<'_>) {
        self.pixels.clear();
        self.pixels.extend_from_slice(view.pixels);
        self.shape = view.shape;
        self.layout = view.layout;
        self.label = view.label;
    }

    /// The pixels in HWC order (a copy only when the sample is planar).
    pub fn hwc_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self.layout {
            Layout::Interleaved => std::borrow::Cow::Borrowed(&self.pixels),
            Layout::Planar => {
                let mut out = Vec::new();
                planar_to_interleaved(&self.pixels, self.shape, &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }

    /// Turns a planar sample interleaved in place, using `scratch` as the
    /// temporary buffer (no allocation once `scratch` has grown).
    pub fn make_interleaved(&mut self, scratch: &mut Vec<u8>) {
        if self.layout == Layout::Planar {
            planar_to_interleaved(&self.pixels, self.shape, scratch);
            std::mem::swap(&mut self.pixels, scratch);
            self.layout = Layout::Interleaved;
        }
    }
}

fn check_len(pixels: &[u8], shape: Shape) -> Result<(), Error> {
    if pixels.len() == shape.len() {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            shape,
            expected: shape.len(),
            got: pixels.len(),
        })
    }
}

fn planar_to_interleaved(planar: &[u8], shape: Shape, out: &mut Vec<u8>) {
    let c = shape.channels as usize;
    let plane = shape.height as usize * shape.width as usize;
    out.clear();
    out.resize(planar.len(), 0);
    for ch in 0..c {
        let src = &planar[ch * plane..(ch + 1) * plane];
        for (px, &v) in out.chunks_exact_mut(c).zip(src) {
            px[ch] = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planar_to_interleaved_orders_channels_per_pixel() {
        // Two pixels, planes R=[1,2], G=[3,4], B=[5,6].
        let s = Sample::with_layout(
            vec![1, 2, 3, 4, 5, 6],
            Shape::new(1, 2, 3),
            Layout::Planar,
            0,
        )
        .unwrap();
        assert_eq!(&*s.hwc_bytes(), &[1, 3, 5, 2, 4, 6]);
        let mut s2 = s.clone();
        s2.make_interleaved(&mut Vec::new());
        assert_eq!(s2.pixels, vec![1, 3, 5, 2, 4, 6]);
        assert_eq!(s2.layout, Layout::Interleaved);
    }

    #[test]
    fn length_is_checked() {
        let err = Sample::hwc(vec![0; 5], 1, 2, 3, 0).unwrap_err();
        assert!(matches!(
            err,
            Error::ShapeMismatch {
                expected: 6,
                got: 5,
                ..
            }
        ));
    }
}
