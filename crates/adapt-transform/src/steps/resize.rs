//! Resizing steps, with torchvision's names and semantics: `Resize` to W×H,
//! `ResizeShorter` (`Resize(size)` with one number) and `RandomResizedCrop`
//! (ten attempts, then the centre-crop fallback); the last two decode at a
//! reduced scale when they come first over an encoded image.

use crate::pixels::{known, pixel_type, resize_u8, scale_of};
use crate::{Encoded, Error, Layout, Sample, SampleRng, ScaledDecode, Scratch, Shape, Transform};
use fast_image_resize as fr;

/// Resampling filter for [`Resize`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResizeFilter {
    /// Nearest neighbour.
    Nearest,
    /// Bilinear (torchvision's default for tensors and PIL images).
    #[default]
    Bilinear,
    /// Bicubic (Catmull-Rom).
    Bicubic,
    /// Lanczos3.
    Lanczos3,
}

/// Resizes to a fixed width and height with `fast_image_resize` (SIMD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize {
    /// Target width.
    pub width: u32,
    /// Target height.
    pub height: u32,
    /// Resampling filter.
    pub filter: ResizeFilter,
}

impl Resize {
    /// A bilinear resize to `width` × `height`.
    pub fn new(width: u32, height: u32) -> Result<Self, Error> {
        if width == 0 || height == 0 {
            return Err(Error::InvalidParameter(format!(
                "resize to {width}x{height}"
            )));
        }
        Ok(Self {
            width,
            height,
            filter: ResizeFilter::Bilinear,
        })
    }

    /// The same resize with another filter.
    #[must_use]
    pub fn with_filter(mut self, filter: ResizeFilter) -> Self {
        self.filter = filter;
        self
    }

    fn options(&self) -> fr::ResizeOptions {
        fr::ResizeOptions::new().resize_alg(self.filter.algorithm())
    }
}

impl ResizeFilter {
    /// The resizer's algorithm for this filter (PIL's bicubic is
    /// Catmull-Rom, a = −0.5).
    fn algorithm(self) -> fr::ResizeAlg {
        match self {
            ResizeFilter::Nearest => fr::ResizeAlg::Nearest,
            ResizeFilter::Bilinear => fr::ResizeAlg::Convolution(fr::FilterType::Bilinear),
            ResizeFilter::Bicubic => fr::ResizeAlg::Convolution(fr::FilterType::CatmullRom),
            ResizeFilter::Lanczos3 => fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3),
        }
    }
}

impl Transform for Resize {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        let from = sample.shape;
        let to = Shape::new(self.height, self.width, from.channels);
        if from == to {
            return Ok(());
        }
        sample.make_interleaved(&mut scratch.bytes);
        resize_u8(sample, scratch, to, &self.options())?;
        sample.layout = Layout::Interleaved;
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        pixel_type(input.channels)?;
        Ok(Shape::new(self.height, self.width, input.channels))
    }
}

/// A crop box with fractional position and size, in source pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Region {
    /// First row.
    pub top: f64,
    /// First column.
    pub left: f64,
    /// Rows.
    pub height: f64,
    /// Columns.
    pub width: f64,
}

impl Region {
    /// The whole of an image of `shape`.
    pub fn whole(shape: Shape) -> Self {
        Self {
            top: 0.0,
            left: 0.0,
            height: f64::from(shape.height),
            width: f64::from(shape.width),
        }
    }
}

/// Resizes `region` of an interleaved sample to `height × width` in one
/// pass (the SIMD resizer reads the region in place; nothing is cropped
/// first), through `filter` with antialiasing as PIL's.
pub fn resize_region(
    sample: &mut Sample,
    scratch: &mut Scratch,
    region: Region,
    (height, width): (u32, u32),
    filter: ResizeFilter,
) -> Result<(), Error> {
    sample.make_interleaved(&mut scratch.bytes);
    let from = sample.shape;
    let to = Shape::new(height, width, from.channels);
    let options = fr::ResizeOptions::new()
        .resize_alg(filter.algorithm())
        .crop(region.left, region.top, region.width, region.height);
    resize_u8(sample, scratch, to, &options)
}

/// torchvision's `RandomResizedCrop(size, scale, ratio)`: a region of
/// random area (a `scale` fraction of the image) and aspect ratio (log-
/// uniform in `ratio`), resized to `height × width` (bilinear unless
/// `filter` says otherwise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomResizedCrop {
    /// Resampling filter.
    pub filter: ResizeFilter,
    /// Output rows.
    pub height: u32,
    /// Output columns.
    pub width: u32,
    /// Range of the region's area as a fraction of the image's.
    pub scale: (f64, f64),
    /// Range of the region's width / height.
    pub ratio: (f64, f64),
}

impl RandomResizedCrop {
    /// torchvision's defaults: scale (0.08, 1), ratio (3/4, 4/3).
    pub fn new(height: u32, width: u32) -> Result<Self, Error> {
        Self::with(height, width, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
    }

    /// Explicit ranges; each must be ordered, positive and finite.
    pub fn with(
        height: u32,
        width: u32,
        scale: (f64, f64),
        ratio: (f64, f64),
    ) -> Result<Self, Error> {
        let ok = |(a, b): (f64, f64)| a.is_finite() && b.is_finite() && a > 0.0 && a <= b;
        if height == 0 || width == 0 || !ok(scale) || !ok(ratio) {
            return Err(Error::InvalidParameter(format!(
                "random_resized_crop({height}x{width}, scale={scale:?}, ratio={ratio:?})"
            )));
        }
        Ok(Self {
            filter: ResizeFilter::Bilinear,
            height,
            width,
            scale,
            ratio,
        })
    }

    /// The region for an image of `h × w`, drawn as torchvision's
    /// `get_params`: up to ten attempts, then the whole image clipped to the
    /// ratio range, centred. Integer pixel box, like torchvision's.
    pub fn region(&self, h: u32, w: u32, rng: &mut SampleRng) -> Region {
        let (hf, wf) = (f64::from(h), f64::from(w));
        let area = hf * wf;
        let (lr0, lr1) = (self.ratio.0.ln(), self.ratio.1.ln());
        for _ in 0..10 {
            let target = area * rng.uniform_in(self.scale.0, self.scale.1);
            let aspect = rng.uniform_in(lr0, lr1).exp();
            let cw = (target * aspect).sqrt().round();
            let ch = (target / aspect).sqrt().round();
            if cw > 0.0 && cw <= wf && ch > 0.0 && ch <= hf {
                let i = rng.below((hf - ch) as u64 + 1) as f64;
                let j = rng.below((wf - cw) as u64 + 1) as f64;
                return Region {
                    top: i,
                    left: j,
                    height: ch,
                    width: cw,
                };
            }
        }
        let in_ratio = wf / hf;
        let (cw, ch) = if in_ratio < self.ratio.0 {
            (wf, (wf / self.ratio.0).round())
        } else if in_ratio > self.ratio.1 {
            ((hf * self.ratio.1).round(), hf)
        } else {
            (wf, hf)
        };
        Region {
            top: ((hf - ch) / 2.0).floor(),
            left: ((wf - cw) / 2.0).floor(),
            height: ch,
            width: cw,
        }
    }
}

/// The full (width, height) of an encoded image, from its header; `None`
/// when it has none to reduce from.
fn full_size(enc: &Encoded, dec: &dyn ScaledDecode) -> Result<Option<(u32, u32)>, Error> {
    let (w, h) = dec.dimensions(&enc.bytes)?;
    Ok((w > 0 && h > 0).then_some((w, h)))
}

impl Transform for RandomResizedCrop {
    fn decode_reduced(
        &self,
        enc: &Encoded,
        dec: &dyn ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        let Some((w, h)) = full_size(enc, dec)? else {
            return Ok(false);
        };
        // Drawn on the full image, as `apply` draws: the reduced decode
        // changes the resampling, never the region.
        let region = self.region(h, w, &mut scratch.rng);
        // The smallest decode whose copy of the region still has at least
        // the output's pixels on both axes.
        let need = (
            (f64::from(self.width) * f64::from(w) / region.width).ceil() as u32,
            (f64::from(self.height) * f64::from(h) / region.height).ceil() as u32,
        );
        dec.decode(&enc.bytes, Some(need), sample)?;
        let (sx, sy) = scale_of(sample.shape, (w, h));
        let scaled = Region {
            top: region.top * sy,
            left: region.left * sx,
            height: region.height * sy,
            width: region.width * sx,
        };
        resize_region(
            sample,
            scratch,
            scaled,
            (self.height, self.width),
            self.filter,
        )?;
        Ok(true)
    }
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        let s = sample.shape;
        if !known(s) {
            return Err(Error::InvalidParameter(
                "random_resized_crop of an empty image".into(),
            ));
        }
        let region = self.region(s.height, s.width, &mut scratch.rng);
        resize_region(
            sample,
            scratch,
            region,
            (self.height, self.width),
            self.filter,
        )
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        pixel_type(input.channels)?;
        Ok(Shape::new(self.height, self.width, input.channels))
    }
}

/// torchvision's `Resize(size)` with one number: the shorter side becomes
/// `size`, the longer `int(size × long / short)`; antialiased, bilinear
/// unless `filter` says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizeShorter {
    /// The shorter side's new length.
    pub size: u32,
    /// Resampling filter.
    pub filter: ResizeFilter,
}

impl ResizeShorter {
    /// A bilinear resize of the shorter side to `size`.
    pub fn new(size: u32) -> Self {
        Self {
            size,
            filter: ResizeFilter::Bilinear,
        }
    }

    /// The output (height, width) for an input of `h × w`.
    pub fn size_for(&self, h: u32, w: u32) -> (u32, u32) {
        let (short, long) = if w <= h { (w, h) } else { (h, w) };
        let new_long = (u64::from(self.size) * u64::from(long) / u64::from(short.max(1))) as u32;
        if w <= h {
            (new_long.max(1), self.size)
        } else {
            (self.size, new_long.max(1))
        }
    }
}

impl Transform for ResizeShorter {
    fn decode_reduced(
        &self,
        enc: &Encoded,
        dec: &dyn ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        let Some((w, h)) = full_size(enc, dec)? else {
            return Ok(false);
        };
        let (oh, ow) = self.size_for(h, w);
        dec.decode(&enc.bytes, Some((ow, oh)), sample)?;
        let s = sample.shape;
        if (s.height, s.width) != (oh, ow) {
            let whole = Region::whole(s);
            resize_region(sample, scratch, whole, (oh, ow), self.filter)?;
        }
        Ok(true)
    }
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        let s = sample.shape;
        let (h, w) = self.size_for(s.height, s.width);
        if (h, w) == (s.height, s.width) {
            return Ok(());
        }
        let whole = Region::whole(s);
        resize_region(sample, scratch, whole, (h, w), self.filter)
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if self.size == 0 {
            return Err(Error::InvalidParameter("resize to 0".into()));
        }
        pixel_type(input.channels)?;
        if !known(input) {
            return Ok(input);
        }
        let (h, w) = self.size_for(input.height, input.width);
        Ok(Shape::new(h, w, input.channels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_resized_crop_regions_follow_the_scale_and_ratio_laws() {
        let t = RandomResizedCrop::new(224, 224).unwrap();
        // A square image: the accepted ratios are then symmetric in log.
        let (h, w) = (400u32, 400u32);
        let mut rng = SampleRng::new(0, 0, 0);
        let n = 20_000;
        let (mut log_ratios, mut scales) = (Vec::new(), Vec::new());
        let mut fallbacks = 0;
        for _ in 0..n {
            let r = t.region(h, w, &mut rng);
            assert!(r.top >= 0.0 && r.left >= 0.0);
            assert!(r.top + r.height <= f64::from(h) && r.left + r.width <= f64::from(w));
            let scale = r.height * r.width / f64::from(h * w);
            if (r.width, r.height) == (f64::from(w), f64::from(h)) {
                fallbacks += 1;
                continue;
            }
            // Rounding to whole pixels moves scale and ratio slightly.
            assert!((0.08 * 0.95..=1.0).contains(&scale), "scale {scale}");
            let ratio = r.width / r.height;
            assert!(
                (0.75 * 0.95..=4.0 / 3.0 * 1.05).contains(&ratio),
                "ratio {ratio}"
            );
            log_ratios.push(ratio.ln());
            scales.push(scale);
        }
        // Accepted draws: the log-ratio is symmetric around 0 (its range is),
        // and small scales are accepted more often than large ones.
        let mean_lr = log_ratios.iter().sum::<f64>() / log_ratios.len() as f64;
        assert!(mean_lr.abs() < 0.01, "mean log ratio {mean_lr}");
        let below_half = scales.iter().filter(|&&s| s < 0.5).count() as f64 / scales.len() as f64;
        assert!(below_half > 0.45, "share of scales below 0.5: {below_half}");
        assert!(
            fallbacks < n / 100,
            "{fallbacks} fallbacks on a square image"
        );
        // Positions: the centre of the region is spread around the image's.
        // A tall strip cannot fit the ratio range: the fallback is the
        // centred, ratio-clipped box.
        let mut rng = SampleRng::new(0, 0, 1);
        let t = RandomResizedCrop::with(10, 10, (0.99, 1.0), (1.0, 1.0)).unwrap();
        let r = t.region(100, 10, &mut rng);
        assert_eq!((r.top, r.left, r.height, r.width), (45.0, 0.0, 10.0, 10.0));
    }

    #[test]
    fn resize_shorter_keeps_the_aspect_as_torchvision() {
        let t = ResizeShorter::new(256);
        assert_eq!(t.size_for(375, 500), (256, 341));
        assert_eq!(t.size_for(500, 375), (341, 256));
        let mut s = Sample::hwc(vec![50; 30 * 40 * 3], 30, 40, 3, 0).unwrap();
        ResizeShorter::new(15)
            .apply(&mut s, &mut Scratch::default())
            .unwrap();
        assert_eq!(s.shape, Shape::new(15, 20, 3));
        assert!(s.pixels.iter().all(|&v| v == 50));
        assert_eq!(
            t.output_shape(Shape::new(0, 0, 3)).unwrap(),
            Shape::new(0, 0, 3)
        );
    }

    #[test]
    fn resize_changes_shape_and_keeps_flat_colour() {
        let mut s = Sample::hwc(vec![90; 8 * 6 * 3], 8, 6, 3, 0).unwrap();
        let mut scratch = Scratch::default();
        Resize::new(3, 4)
            .unwrap()
            .apply(&mut s, &mut scratch)
            .unwrap();
        assert_eq!(s.shape, Shape::new(4, 3, 3));
        assert!(s.pixels.iter().all(|&v| v == 90));
        assert!(Resize::new(0, 4).is_err());
    }
}
