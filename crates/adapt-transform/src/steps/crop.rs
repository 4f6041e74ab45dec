//! Crops, with torchvision's names and semantics: `Crop` to a fixed box,
//! `RandomCrop` (with padding modes) and `CenterCrop`; the last two defer
//! to collation as a [`Geometry`] window.

use crate::pixels::{PaddingMode, known};
use crate::{CropBox, Error, Geometry, Sample, SampleRng, Scratch, Shape, Transform};

/// Crops to a [`CropBox`], in place.
///
/// Unlike PIL, a box reaching outside the image is an error rather than a
/// silent black border: on a dataset with a fixed image size that is always
/// a configuration mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crop(pub CropBox);

impl Transform for Crop {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        let b = self.0;
        b.check(sample.shape)?;
        sample.make_interleaved(&mut scratch.bytes);
        let c = sample.shape.channels as usize;
        let src_row = sample.shape.width as usize * c;
        let dst_row = (b.right - b.left) as usize * c;
        // Rows move towards the start of the buffer, so copying them forward
        // in place never overwrites a row not yet moved.
        for r in 0..(b.bottom - b.top) as usize {
            let from = (b.top as usize + r) * src_row + b.left as usize * c;
            sample.pixels.copy_within(from..from + dst_row, r * dst_row);
        }
        sample.shape = Shape::new(b.bottom - b.top, b.right - b.left, sample.shape.channels);
        sample.pixels.truncate(sample.shape.len());
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if input.height > 0 && input.width > 0 {
            self.0.check(input)?;
        }
        Ok(Shape::new(
            self.0.bottom - self.0.top,
            self.0.right - self.0.left,
            input.channels,
        ))
    }
}

/// torchvision's `RandomCrop(size, padding, fill, padding_mode)`: pads by
/// `padding` (left, top, right, bottom), then crops `height × width` at a
/// uniformly drawn offset over the padded image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RandomCrop {
    /// Output rows.
    pub height: u32,
    /// Output columns.
    pub width: u32,
    /// Padding (left, top, right, bottom).
    pub padding: [u32; 4],
    /// Fill of constant padding: one value, or one per channel.
    pub fill: Vec<u8>,
    /// How padding is filled.
    pub mode: PaddingMode,
}

impl RandomCrop {
    /// A crop of `height × width` with no padding.
    pub fn new(height: u32, width: u32) -> Result<Self, Error> {
        if height == 0 || width == 0 {
            return Err(Error::InvalidParameter(format!(
                "random_crop to {height}x{width}"
            )));
        }
        Ok(Self {
            height,
            width,
            padding: [0; 4],
            fill: vec![0],
            mode: PaddingMode::Constant,
        })
    }

    fn padded(&self, s: Shape) -> (u64, u64) {
        let [l, t, r, b] = self.padding.map(u64::from);
        (u64::from(s.height) + t + b, u64::from(s.width) + l + r)
    }

    fn check(&self, s: Shape) -> Result<(), Error> {
        let (ph, pw) = self.padded(s);
        if ph < u64::from(self.height) || pw < u64::from(self.width) {
            return Err(Error::InvalidParameter(format!(
                "random_crop of {}x{} is larger than the padded {pw}x{ph} image",
                self.width, self.height
            )));
        }
        let reflect = matches!(self.mode, PaddingMode::Reflect | PaddingMode::Symmetric);
        let [l, t, r, b] = self.padding;
        if reflect && (l.max(r) >= s.width || t.max(b) >= s.height) {
            return Err(Error::InvalidParameter(format!(
                "random_crop: {:?} padding must be smaller than the {}x{} image",
                self.mode, s.width, s.height
            )));
        }
        Ok(())
    }
}

impl RandomCrop {
    /// The window, drawn as torchvision does (row offset, then column).
    fn window(&self, shape: Shape, rng: &mut SampleRng) -> Result<Geometry<'_>, Error> {
        self.check(shape)?;
        let (ph, pw) = self.padded(shape);
        let i = rng.below(ph - u64::from(self.height) + 1) as i64;
        let j = rng.below(pw - u64::from(self.width) + 1) as i64;
        let [l, t, ..] = self.padding.map(i64::from);
        Ok(Geometry {
            top: i - t,
            left: j - l,
            height: self.height,
            width: self.width,
            mode: self.mode,
            fill: &self.fill,
            hflip: false,
            vflip: false,
        })
    }
}

impl Transform for RandomCrop {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        self.window(sample.shape, &mut scratch.rng)?
            .materialize(sample, scratch);
        Ok(())
    }
    fn defer<'t>(
        &'t self,
        shape: Shape,
        pending: Option<Geometry<'t>>,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        // A crop of a crop is not composed: the first is materialised.
        match pending {
            Some(_) => Ok(None),
            None => self.window(shape, &mut scratch.rng).map(Some),
        }
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if known(input) {
            self.check(input)?;
        }
        Ok(Shape::new(self.height, self.width, input.channels))
    }
}

/// Python's `round` (half to even), which torchvision's centre crop uses.
fn round_half_even(x: f64) -> i64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && (r as i64) % 2 != 0 {
        (r - x.signum()) as i64
    } else {
        r as i64
    }
}

/// torchvision's `CenterCrop(size)`: the centred `height × width` window,
/// offsets `round((h - height) / 2)`; an image smaller than the window is
/// padded with zeros first, as torchvision does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CenterCrop {
    /// Output rows.
    pub height: u32,
    /// Output columns.
    pub width: u32,
}

impl CenterCrop {
    /// The offset along one axis of `n` pixels for a window of `m`.
    fn offset(n: u32, m: u32) -> i64 {
        if m > n {
            // torchvision pads (m - n) / 2 before, then crops at 0.
            -i64::from((m - n) / 2)
        } else {
            round_half_even(f64::from(n - m) / 2.0)
        }
    }
}

impl CenterCrop {
    fn window(&self, s: Shape) -> Geometry<'static> {
        Geometry {
            top: Self::offset(s.height, self.height),
            left: Self::offset(s.width, self.width),
            height: self.height,
            width: self.width,
            mode: PaddingMode::Constant,
            fill: &[0],
            hflip: false,
            vflip: false,
        }
    }
}

impl Transform for CenterCrop {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        self.window(sample.shape).materialize(sample, scratch);
        Ok(())
    }
    fn defer<'t>(
        &'t self,
        shape: Shape,
        pending: Option<Geometry<'t>>,
        _scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        Ok(pending.is_none().then(|| self.window(shape)))
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if self.height == 0 || self.width == 0 {
            return Err(Error::InvalidParameter(
                "center_crop to an empty size".into(),
            ));
        }
        Ok(Shape::new(self.height, self.width, input.channels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;
    use crate::testing::{ramp, ramp_hwc};
    use proptest::prelude::*;

    #[test]
    fn center_crop_offsets_follow_torchvision() {
        // round((h - th) / 2) with Python's half-to-even rounding.
        assert_eq!(CenterCrop::offset(10, 4), 3);
        assert_eq!(CenterCrop::offset(11, 4), 4); // round(3.5) = 4
        assert_eq!(CenterCrop::offset(9, 4), 2); // round(2.5) = 2
        assert_eq!(CenterCrop::offset(256, 224), 16);
        assert_eq!(
            CenterCrop::offset(4, 7),
            -1,
            "smaller images are padded (7 - 4) / 2 before"
        );
        let mut s = ramp(4, 5, 1, Layout::Interleaved);
        CenterCrop {
            height: 2,
            width: 3,
        }
        .apply(&mut s, &mut Scratch::default())
        .unwrap();
        assert_eq!(s.pixels, vec![6, 7, 8, 11, 12, 13]);
        let mut small = ramp(2, 2, 1, Layout::Interleaved);
        CenterCrop {
            height: 4,
            width: 4,
        }
        .apply(&mut small, &mut Scratch::default())
        .unwrap();
        assert_eq!(
            small.pixels,
            vec![0, 0, 0, 0, 0, 0, 1, 0, 0, 2, 3, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn random_crop_offsets_are_uniform_over_the_padded_range() {
        // A 4x4 image padded by 2 and cropped to 4x4: offsets 0..=4 on each
        // axis, 25 cells, each 1/25. Pixel (0, 0) of the crop tells the offset.
        let mut t = RandomCrop::new(4, 4).unwrap();
        t.padding = [2; 4];
        t.fill = vec![0];
        let marks: Vec<u8> = (1..=16).collect();
        let mut counts = [[0u32; 5]; 5];
        let mut scratch = Scratch::default();
        let n = 25_000;
        for key in 0..n {
            let mut s = Sample::hwc(marks.clone(), 4, 4, 1, 0).unwrap();
            scratch.rng = SampleRng::new(3, 7, key);
            t.apply(&mut s, &mut scratch).unwrap();
            assert_eq!(s.shape, Shape::new(4, 4, 1));
            // Find where mark 1 (source (0, 0)) landed: at (2 - i, 2 - j).
            let (mut i, mut j) = (None, None);
            for y in 0..4 {
                for x in 0..4 {
                    let v = s.pixels[y * 4 + x];
                    if v != 0 {
                        let (sy, sx) = (((v - 1) / 4) as i64, ((v - 1) % 4) as i64);
                        i = Some(sy - y as i64 + 2);
                        j = Some(sx - x as i64 + 2);
                    }
                }
            }
            counts[i.unwrap() as usize][j.unwrap() as usize] += 1;
        }
        // Each cell expects 1,000 ± 31 (1 sd): chi-square over 24 dof.
        let chi2: f64 = counts
            .iter()
            .flatten()
            .map(|&c| (f64::from(c) - 1000.0).powi(2) / 1000.0)
            .sum();
        assert!(
            chi2 < 51.2,
            "chi-square {chi2} (p < 0.001 threshold 51.2) {counts:?}"
        );
    }

    #[test]
    fn a_crop_larger_than_the_padded_image_is_an_error() {
        let mut t = RandomCrop::new(41, 40).unwrap();
        t.padding = [4; 4];
        assert!(t.output_shape(Shape::new(32, 32, 3)).is_err());
        assert!(
            t.apply(
                &mut ramp(32, 32, 3, Layout::Planar),
                &mut Scratch::default()
            )
            .is_err()
        );
        t.padding = [0; 4];
        t.mode = PaddingMode::Reflect;
        t.height = 8;
        t.width = 8;
        t.padding = [40; 4];
        assert!(
            t.output_shape(Shape::new(32, 32, 3)).is_err(),
            "reflect padding needs pad < size"
        );
    }

    #[test]
    fn crop_matches_pil_box_semantics() {
        let mut s = ramp_hwc(4, 5, 1);
        Crop(CropBox::new(1, 2, 4, 4))
            .apply(&mut s, &mut Scratch::default())
            .unwrap();
        // Rows 2..4, columns 1..4 of a 5-wide ramp.
        assert_eq!(s.shape, Shape::new(2, 3, 1));
        assert_eq!(s.pixels, vec![11, 12, 13, 16, 17, 18]);
    }

    #[test]
    fn crop_outside_is_an_error() {
        let mut s = ramp_hwc(4, 5, 3);
        let err = Crop(CropBox::new(0, 0, 6, 4))
            .apply(&mut s, &mut Scratch::default())
            .unwrap_err();
        assert!(matches!(
            err,
            Error::CropOutOfBounds {
                right: 6,
                width: 5,
                ..
            }
        ));
        let err = Crop(CropBox::new(2, 0, 2, 4))
            .output_shape(s.shape)
            .unwrap_err();
        assert!(matches!(err, Error::CropOutOfBounds { .. }));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn crop_in_place_equals_naive(h in 1u32..12, w in 1u32..12, c in 1u32..5,
                                      a in 0u32..12, b in 0u32..12, d in 0u32..12, e in 0u32..12) {
            let (left, right) = (a.min(b) % w, (a.max(b) % w) + 1);
            let (top, bottom) = (d.min(e) % h, (d.max(e) % h) + 1);
            prop_assume!(left < right && top < bottom);
            let s = ramp_hwc(h, w, c);
            let mut naive = Vec::new();
            for y in top..bottom {
                for x in left..right {
                    let i = ((y * w + x) * c) as usize;
                    naive.extend_from_slice(&s.pixels[i..i + c as usize]);
                }
            }
            let mut got = s.clone();
            Crop(CropBox::new(left, top, right, bottom)).apply(&mut got, &mut Scratch::default()).unwrap();
            prop_assert_eq!(got.pixels, naive);
        }
    }
}
