//! Transforms on decoded u8 samples. Each works in place on the caller's
//! [`Sample`] where the output fits in the input (crop, channel drop) and
//! through the caller's [`Scratch`] otherwise (resize, channel expansion
//! beyond capacity), so a worker that keeps both alive allocates nothing per
//! sample once the buffers have grown.

use crate::{CropBox, Error, Layout, Sample, SampleRng, Shape};
use fast_image_resize as fr;
use std::fmt;

/// Per-worker scratch space reused by every transform call.
#[derive(Default)]
pub struct Scratch {
    /// A spare pixel buffer (swapped with the sample's when a transform
    /// cannot work in place).
    pub bytes: Vec<u8>,
    /// The random stream of the sample being transformed, seeded by the
    /// caller before each sample (the loader: from seed, epoch and the
    /// sample's draw key). Random steps draw from it in pipeline order.
    pub rng: SampleRng,
    pub(crate) resizer: Option<fr::Resizer>,
}

impl Scratch {
    /// Empty scratch space whose random stream is `rng`.
    pub fn with_rng(rng: SampleRng) -> Self {
        Self {
            rng,
            ..Self::default()
        }
    }
}

impl fmt::Debug for Scratch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scratch")
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// One step applied to a decoded sample.
pub trait Transform: Send + Sync + fmt::Debug {
    /// Applies the step to `sample` in place, using `scratch` as needed.
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error>;

    /// For crops and flips: this step composed onto `pending` (the crops
    /// and flips deferred so far, over a sample of `shape`), drawing from
    /// `scratch.rng` exactly as `apply` would, without touching pixels.
    /// `None` (the default) when the step must run on the pixels now; the
    /// caller then materialises `pending` first. A step that answers `None`
    /// has drawn nothing.
    fn defer<'t>(
        &'t self,
        _shape: Shape,
        _pending: Option<crate::Geometry<'t>>,
        _scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        Ok(None)
    }

    /// As the first step of a pipeline over an encoded image: decodes it
    /// through `dec`, at a reduced scale when this step shrinks it by 2× or
    /// more, and applies the step, drawing as `apply` draws (from the full
    /// image's size). `false` (the default) when the step cannot use a
    /// reduced decode; it has then drawn and decoded nothing.
    fn decode_reduced(
        &self,
        _enc: &crate::Encoded,
        _dec: &dyn crate::ScaledDecode,
        _sample: &mut Sample,
        _scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        Ok(false)
    }

    /// [`apply_deferring`](Transform::apply_deferring) on an encoded
    /// image: decoded through `dec` (reduced where the first step allows),
    /// then the steps.
    fn apply_encoded_deferring<'t>(
        &'t self,
        enc: &crate::Encoded,
        dec: &dyn crate::ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        if crate::decode::plain(enc) && self.decode_reduced(enc, dec, sample, scratch)? {
            sample.label = enc.label;
            return Ok(None);
        }
        crate::decode_exact(enc, dec, sample, scratch)?;
        self.apply_deferring(sample, scratch)
    }

    /// The whole step as a geometry over a sample of `shape`, when it is
    /// only crops and flips (nothing to do on the pixels before
    /// collation); `None` otherwise, and the draws it made are to be
    /// discarded (re-seed, then [`apply_deferring`](Transform::apply_deferring)).
    fn plan<'t>(
        &'t self,
        shape: Shape,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        self.defer(shape, None, scratch)
    }

    /// Applies the step, or defers it when it is a crop or flip: the
    /// geometry returned is left for the collating step to read through
    /// ([`crate::Geometry::write_chw`]). Materialising the geometry gives
    /// exactly what [`apply`](Transform::apply) gives.
    fn apply_deferring<'t>(
        &'t self,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        match self.defer(sample.shape, None, scratch)? {
            Some(g) => Ok(Some(g)),
            None => self.apply(sample, scratch).map(|()| None),
        }
    }

    /// The shape a sample of shape `input` has after this step. An input
    /// of height and width 0 means "size not known in advance" (an image
    /// folder of mixed sizes); a step that fixes the size (a crop, a resize
    /// to W×H) answers it, the others pass it on.
    fn output_shape(&self, input: Shape) -> Result<Shape, Error>;
}

impl<T: Transform + ?Sized> Transform for Box<T> {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        (**self).apply(sample, scratch)
    }
    fn defer<'t>(
        &'t self,
        shape: Shape,
        pending: Option<crate::Geometry<'t>>,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        (**self).defer(shape, pending, scratch)
    }
    fn apply_deferring<'t>(
        &'t self,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        (**self).apply_deferring(sample, scratch)
    }
    fn plan<'t>(
        &'t self,
        shape: Shape,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        (**self).plan(shape, scratch)
    }
    fn decode_reduced(
        &self,
        enc: &crate::Encoded,
        dec: &dyn crate::ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        (**self).decode_reduced(enc, dec, sample, scratch)
    }
    fn apply_encoded_deferring<'t>(
        &'t self,
        enc: &crate::Encoded,
        dec: &dyn crate::ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        (**self).apply_encoded_deferring(enc, dec, sample, scratch)
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        (**self).output_shape(input)
    }
}

/// Transforms applied in order.
#[derive(Debug, Default)]
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Compose {
    /// An empty pipeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step.
    #[must_use]
    pub fn then(mut self, t: impl Transform + 'static) -> Self {
        self.0.push(Box::new(t));
        self
    }
}

impl Transform for Compose {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        self.0.iter().try_for_each(|t| t.apply(sample, scratch))
    }
    fn apply_deferring<'t>(
        &'t self,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        crate::geometry::apply_deferring(&self.0, sample, scratch)
    }
    fn plan<'t>(
        &'t self,
        shape: Shape,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        crate::geometry::plan(&self.0, shape, scratch)
    }
    fn apply_encoded_deferring<'t>(
        &'t self,
        enc: &crate::Encoded,
        dec: &dyn crate::ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<crate::Geometry<'t>>, Error> {
        crate::apply_encoded_deferring(&self.0, enc, dec, sample, scratch)
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        self.0.iter().try_fold(input, |s, t| t.output_shape(s))
    }
}

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

/// Converts to 3-channel RGB as PIL's `convert('RGB')` does: RGBA drops its
/// alpha (no blending), grey is replicated, grey+alpha drops alpha then
/// replicates; RGB passes through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToRgb;

impl ToRgb {
    /// Converts an interleaved pixel buffer of `channels` channels to RGB in
    /// place. Readers call this directly on a freshly decoded buffer.
    pub fn convert_in_place(pixels: &mut Vec<u8>, channels: u32) -> Result<(), Error> {
        let n = match channels {
            3 => return Ok(()),
            1..=4 => pixels.len() / channels as usize,
            _ => {
                return Err(Error::Channels {
                    transform: "ToRgb",
                    channels,
                });
            }
        };
        match channels {
            4 => {
                // Destination index 3i never passes source index 4i.
                for i in 0..n {
                    pixels.copy_within(4 * i..4 * i + 3, 3 * i);
                }
                pixels.truncate(3 * n);
            }
            2 => {
                for i in 0..n {
                    pixels[i] = pixels[2 * i];
                }
                expand_grey(pixels, n);
            }
            _ => expand_grey(pixels, n),
        }
        Ok(())
    }
}

/// Replicates the first `n` grey bytes into `3n` RGB bytes, back to front so
/// that the in-place expansion never reads a byte it already overwrote.
fn expand_grey(pixels: &mut Vec<u8>, n: usize) {
    pixels.resize(3 * n, 0);
    for i in (0..n).rev() {
        let v = pixels[i];
        pixels[3 * i..3 * i + 3].fill(v);
    }
}

impl Transform for ToRgb {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        sample.make_interleaved(&mut scratch.bytes);
        Self::convert_in_place(&mut sample.pixels, sample.shape.channels)?;
        sample.shape.channels = 3;
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        match input.channels {
            1..=4 => Ok(Shape::new(input.height, input.width, 3)),
            channels => Err(Error::Channels {
                transform: "ToRgb",
                channels,
            }),
        }
    }
}

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
        let alg = match self.filter {
            ResizeFilter::Nearest => fr::ResizeAlg::Nearest,
            ResizeFilter::Bilinear => fr::ResizeAlg::Convolution(fr::FilterType::Bilinear),
            ResizeFilter::Bicubic => fr::ResizeAlg::Convolution(fr::FilterType::CatmullRom),
            ResizeFilter::Lanczos3 => fr::ResizeAlg::Convolution(fr::FilterType::Lanczos3),
        };
        fr::ResizeOptions::new().resize_alg(alg)
    }
}

/// Resizes `sample`'s interleaved u8 pixels to `to` with `options` (which
/// may crop first) through the scratch buffer, then swaps it in: the one
/// call into `fast_image_resize`. Typed per channel count, so only the four
/// u8 pixel types are compiled, not the library's thirteen (its untyped
/// `resize` instantiates every type: most of this crate's build time).
pub(crate) fn resize_u8(
    sample: &mut Sample,
    scratch: &mut Scratch,
    to: Shape,
    options: &fr::ResizeOptions,
) -> Result<(), Error> {
    use fr::pixels::{U8, U8x2, U8x3, U8x4};
    let from = sample.shape;
    scratch.bytes.clear();
    scratch.bytes.resize(to.len(), 0);
    let resizer = scratch.resizer.get_or_insert_with(fr::Resizer::new);
    let (src, dst) = (&sample.pixels[..], &mut scratch.bytes[..]);
    let resized = match from.channels {
        1 => resize_typed::<U8>(resizer, (from, src), (to, dst), options),
        2 => resize_typed::<U8x2>(resizer, (from, src), (to, dst), options),
        3 => resize_typed::<U8x3>(resizer, (from, src), (to, dst), options),
        4 => resize_typed::<U8x4>(resizer, (from, src), (to, dst), options),
        channels => {
            return Err(Error::Channels {
                transform: "Resize",
                channels,
            });
        }
    };
    resized.map_err(|message| Error::Resize { from, to, message })?;
    std::mem::swap(&mut sample.pixels, &mut scratch.bytes);
    sample.shape = to;
    Ok(())
}

fn resize_typed<P: fr::PixelTrait>(
    resizer: &mut fr::Resizer,
    (from, src): (Shape, &[u8]),
    (to, dst): (Shape, &mut [u8]),
    options: &fr::ResizeOptions,
) -> Result<(), String> {
    let src = fr::images::TypedImageRef::<P>::from_buffer(from.width, from.height, src)
        .map_err(|e| e.to_string())?;
    let mut dst = fr::images::TypedImage::<P>::from_buffer(to.width, to.height, dst)
        .map_err(|e| e.to_string())?;
    resizer
        .resize_typed(&src, &mut dst, options)
        .map_err(|e| e.to_string())
}

pub(crate) fn pixel_type(channels: u32) -> Result<fr::PixelType, Error> {
    Ok(match channels {
        1 => fr::PixelType::U8,
        2 => fr::PixelType::U8x2,
        3 => fr::PixelType::U8x3,
        4 => fr::PixelType::U8x4,
        channels => {
            return Err(Error::Channels {
                transform: "Resize",
                channels,
            });
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ramp(h: u32, w: u32, c: u32) -> Sample {
        let n = (h * w * c) as usize;
        Sample::hwc((0..n).map(|i| (i % 251) as u8).collect(), h, w, c, 0).unwrap()
    }

    #[test]
    fn crop_matches_pil_box_semantics() {
        let mut s = ramp(4, 5, 1);
        Crop(CropBox::new(1, 2, 4, 4))
            .apply(&mut s, &mut Scratch::default())
            .unwrap();
        // Rows 2..4, columns 1..4 of a 5-wide ramp.
        assert_eq!(s.shape, Shape::new(2, 3, 1));
        assert_eq!(s.pixels, vec![11, 12, 13, 16, 17, 18]);
    }

    #[test]
    fn crop_outside_is_an_error() {
        let mut s = ramp(4, 5, 3);
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

    #[test]
    fn to_rgb_drops_alpha_and_replicates_grey() {
        let mut rgba = vec![1, 2, 3, 200, 4, 5, 6, 0];
        ToRgb::convert_in_place(&mut rgba, 4).unwrap();
        assert_eq!(rgba, vec![1, 2, 3, 4, 5, 6]);
        let mut grey = vec![7, 9];
        ToRgb::convert_in_place(&mut grey, 1).unwrap();
        assert_eq!(grey, vec![7, 7, 7, 9, 9, 9]);
        let mut la = vec![7, 1, 9, 2];
        ToRgb::convert_in_place(&mut la, 2).unwrap();
        assert_eq!(la, vec![7, 7, 7, 9, 9, 9]);
        assert!(ToRgb::convert_in_place(&mut vec![0; 5], 5).is_err());
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

    #[test]
    fn compose_runs_in_order() {
        let t = Compose::new()
            .then(Crop(CropBox::new(0, 0, 4, 4)))
            .then(Resize::new(2, 2).unwrap());
        assert_eq!(
            t.output_shape(Shape::new(6, 6, 3)).unwrap(),
            Shape::new(2, 2, 3)
        );
        let mut s = ramp(6, 6, 3);
        t.apply(&mut s, &mut Scratch::default()).unwrap();
        assert_eq!(s.shape, Shape::new(2, 2, 3));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn crop_in_place_equals_naive(h in 1u32..12, w in 1u32..12, c in 1u32..5,
                                      a in 0u32..12, b in 0u32..12, d in 0u32..12, e in 0u32..12) {
            let (left, right) = (a.min(b) % w, (a.max(b) % w) + 1);
            let (top, bottom) = (d.min(e) % h, (d.max(e) % h) + 1);
            prop_assume!(left < right && top < bottom);
            let s = ramp(h, w, c);
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
