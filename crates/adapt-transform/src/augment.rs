//! torchvision's geometry and augmentation steps on u8 samples, with its
//! names and semantics: `RandomCrop` (with padding modes), `CenterCrop`,
//! `RandomHorizontalFlip` / `RandomVerticalFlip`, `RandomResizedCrop` (ten
//! attempts, then the centre-crop fallback), `Resize` of the shorter side,
//! `ColorJitter` (brightness, contrast, saturation, in random order).
//!
//! Random steps draw from the [`Scratch::rng`] the caller seeded for the
//! sample (the loader: from seed, epoch and the sample's draw key), so the
//! values drawn never depend on which thread runs them. The draws follow
//! torchvision's distributions, not torch's random stream: the same seed
//! does not give torchvision's exact crops.
//!
//! Crops and flips keep a planar (CHW) sample planar: CIFAR-10 goes from its
//! in-memory file through the CIFAR recipe to the batch without a transpose.

use crate::{Error, Geometry, Layout, Sample, SampleRng, Scratch, Shape, Transform};
use fast_image_resize as fr;

/// How [`RandomCrop`] fills its padding (torchvision's `padding_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PaddingMode {
    /// The fill value.
    #[default]
    Constant,
    /// The nearest edge pixel repeated.
    Edge,
    /// Mirrored without repeating the edge (`[1, 2, 3]` pads as `3 2 | 1 2 3 | 2 1`).
    Reflect,
    /// Mirrored with the edge repeated (`2 1 | 1 2 3 | 3 2`).
    Symmetric,
}

/// Where padded coordinate `x` reads from in a line of `n` pixels; `None`
/// for the fill value.
pub(crate) fn source_coord(x: i64, n: i64, mode: PaddingMode) -> Option<usize> {
    if (0..n).contains(&x) {
        return Some(x as usize);
    }
    let m = match mode {
        PaddingMode::Constant => return None,
        PaddingMode::Edge => x.clamp(0, n - 1),
        PaddingMode::Reflect if n == 1 => 0,
        PaddingMode::Reflect => {
            let p = 2 * (n - 1);
            let m = x.rem_euclid(p);
            if m < n { m } else { p - m }
        }
        PaddingMode::Symmetric => {
            let p = 2 * n;
            let m = x.rem_euclid(p);
            if m < n { m } else { p - 1 - m }
        }
    };
    Some(m as usize)
}

/// Copies the window of `oh × ow` pixels whose top-left corner is at
/// (`top`, `left`) in the sample's coordinates (possibly outside it: padding
/// by `mode`, constant `fill` per channel) into a new buffer, in the
/// sample's own layout. Interior runs are copied as slices.
pub(crate) fn copy_window(
    sample: &mut Sample,
    spare: &mut Vec<u8>,
    (top, left): (i64, i64),
    (oh, ow): (u32, u32),
    mode: PaddingMode,
    fill: &[u8],
) {
    let Shape {
        height: h,
        width: w,
        channels: c,
    } = sample.shape;
    let (h, w, c) = (i64::from(h), i64::from(w), c as usize);
    let (oh_u, ow_u) = (oh as usize, ow as usize);
    let fill_of = |ch: usize| fill.get(ch).or(fill.first()).copied().unwrap_or(0);
    spare.clear();
    spare.resize(oh_u * ow_u * c, 0);
    // Columns whose source is inside the row, as one contiguous run.
    let x0 = (-left).clamp(0, i64::from(ow)) as usize;
    let x1 = (w - left).clamp(x0 as i64, i64::from(ow)) as usize;
    // (plane count, bytes per pixel within a plane, source row length)
    let (planes, px) = match sample.layout {
        Layout::Planar => (c, 1),
        Layout::Interleaved => (1, c),
    };
    let src_plane = (h * w) as usize * px;
    let dst_plane = oh_u * ow_u * px;
    for p in 0..planes {
        let src = &sample.pixels[p * src_plane..(p + 1) * src_plane];
        let dst = &mut spare[p * dst_plane..(p + 1) * dst_plane];
        for (r, drow) in dst.chunks_exact_mut(ow_u * px).enumerate() {
            let Some(sy) = source_coord(top + r as i64, h, mode) else {
                for (k, d) in drow.iter_mut().enumerate() {
                    *d = fill_of(if planes > 1 { p } else { k % px });
                }
                continue;
            };
            let srow = &src[sy * w as usize * px..(sy + 1) * w as usize * px];
            if x1 > x0 {
                // `left + x0` is then inside the row.
                let from = (left + x0 as i64) as usize * px;
                drow[x0 * px..x1 * px].copy_from_slice(&srow[from..from + (x1 - x0) * px]);
            }
            for x in (0..x0).chain(x1..ow_u) {
                let d = &mut drow[x * px..(x + 1) * px];
                match source_coord(left + x as i64, w, mode) {
                    Some(sx) => d.copy_from_slice(&srow[sx * px..(sx + 1) * px]),
                    None => {
                        for (k, v) in d.iter_mut().enumerate() {
                            *v = fill_of(if planes > 1 { p } else { k });
                        }
                    }
                }
            }
        }
    }
    std::mem::swap(&mut sample.pixels, spare);
    sample.shape = Shape::new(oh, ow, sample.shape.channels);
}

fn known(shape: Shape) -> bool {
    shape.height > 0 && shape.width > 0
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

/// torchvision's `RandomHorizontalFlip(p)` (`vertical: false`) and
/// `RandomVerticalFlip(p)`, in place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomFlip {
    /// Flip top-bottom instead of left-right.
    pub vertical: bool,
    /// Probability of flipping.
    pub p: f64,
}

impl RandomFlip {
    /// A horizontal flip with probability `p` (in [0, 1]).
    pub fn horizontal(p: f64) -> Result<Self, Error> {
        Self::checked(false, p)
    }
    /// A vertical flip with probability `p` (in [0, 1]).
    pub fn vertical(p: f64) -> Result<Self, Error> {
        Self::checked(true, p)
    }
    fn checked(vertical: bool, p: f64) -> Result<Self, Error> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidParameter(format!(
                "flip probability {p} is not in [0, 1]"
            )));
        }
        Ok(Self { vertical, p })
    }
}

/// Flips a sample left-right in place.
pub fn flip_horizontal(sample: &mut Sample) {
    let s = sample.shape;
    let (w, c) = (s.width as usize, s.channels as usize);
    if w == 0 {
        return;
    }
    match sample.layout {
        Layout::Planar => {
            for row in sample.pixels.chunks_exact_mut(w) {
                row.reverse();
            }
        }
        Layout::Interleaved if c == 3 => {
            for row in sample.pixels.chunks_exact_mut(w * 3) {
                let (px, _) = row.as_chunks_mut::<3>();
                px.reverse();
            }
        }
        Layout::Interleaved => {
            for row in sample.pixels.chunks_exact_mut(w * c) {
                for x in 0..w / 2 {
                    for k in 0..c {
                        row.swap(x * c + k, (w - 1 - x) * c + k);
                    }
                }
            }
        }
    }
}

/// Flips a sample top-bottom in place.
pub fn flip_vertical(sample: &mut Sample) {
    let s = sample.shape;
    let (h, w, c) = (s.height as usize, s.width as usize, s.channels as usize);
    let (planes, row) = match sample.layout {
        Layout::Planar => (c, w),
        Layout::Interleaved => (1, w * c),
    };
    if row == 0 {
        return;
    }
    for plane in sample.pixels.chunks_exact_mut(h * row).take(planes) {
        for y in 0..h / 2 {
            let (a, b) = plane.split_at_mut((h - 1 - y) * row);
            a[y * row..(y + 1) * row].swap_with_slice(&mut b[..row]);
        }
    }
}

impl Transform for RandomFlip {
    fn defer<'t>(
        &'t self,
        shape: Shape,
        pending: Option<Geometry<'t>>,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        let mut g = pending.unwrap_or_else(|| Geometry::whole(shape));
        if scratch.rng.chance(self.p) {
            if self.vertical {
                g.vflip = !g.vflip;
            } else {
                g.hflip = !g.hflip;
            }
        }
        Ok(Some(g))
    }
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        if scratch.rng.chance(self.p) {
            if self.vertical {
                flip_vertical(sample);
            } else {
                flip_horizontal(sample);
            }
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        Ok(input)
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

/// Resizes `region` of an interleaved sample to `height × width` in one
/// pass (the SIMD resizer reads the region in place; nothing is cropped
/// first), bilinear with antialiasing as PIL's.
pub fn resize_region(
    sample: &mut Sample,
    scratch: &mut Scratch,
    region: Region,
    (height, width): (u32, u32),
) -> Result<(), Error> {
    sample.make_interleaved(&mut scratch.bytes);
    let from = sample.shape;
    let to = Shape::new(height, width, from.channels);
    let options = fr::ResizeOptions::new()
        .resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Bilinear))
        .crop(region.left, region.top, region.width, region.height);
    crate::transform::resize_u8(sample, scratch, to, &options)
}

/// torchvision's `RandomResizedCrop(size, scale, ratio)`: a region of
/// random area (a `scale` fraction of the image) and aspect ratio (log-
/// uniform in `ratio`), resized to `height × width`, bilinear.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomResizedCrop {
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

impl Transform for RandomResizedCrop {
    fn decode_reduced(
        &self,
        enc: &crate::Encoded,
        dec: &dyn crate::ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        let (w, h) = dec.dimensions(&enc.bytes)?;
        if w == 0 || h == 0 {
            return Ok(false);
        }
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
        let (sx, sy) = crate::decode::scale_of(sample.shape, (w, h));
        let scaled = Region {
            top: region.top * sy,
            left: region.left * sx,
            height: region.height * sy,
            width: region.width * sx,
        };
        resize_region(sample, scratch, scaled, (self.height, self.width))?;
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
        resize_region(sample, scratch, region, (self.height, self.width))
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        crate::transform::pixel_type(input.channels)?;
        Ok(Shape::new(self.height, self.width, input.channels))
    }
}

/// torchvision's `Resize(size)` with one number: the shorter side becomes
/// `size`, the longer `int(size × long / short)`; bilinear, antialiased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResizeShorter {
    /// The shorter side's new length.
    pub size: u32,
}

impl ResizeShorter {
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
        enc: &crate::Encoded,
        dec: &dyn crate::ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        let (w, h) = dec.dimensions(&enc.bytes)?;
        if w == 0 || h == 0 {
            return Ok(false);
        }
        let (oh, ow) = self.size_for(h, w);
        dec.decode(&enc.bytes, Some((ow, oh)), sample)?;
        let s = sample.shape;
        if (s.height, s.width) != (oh, ow) {
            let whole = Region {
                top: 0.0,
                left: 0.0,
                height: f64::from(s.height),
                width: f64::from(s.width),
            };
            resize_region(sample, scratch, whole, (oh, ow))?;
        }
        Ok(true)
    }
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        let s = sample.shape;
        let (h, w) = self.size_for(s.height, s.width);
        if (h, w) == (s.height, s.width) {
            return Ok(());
        }
        let whole = Region {
            top: 0.0,
            left: 0.0,
            height: f64::from(s.height),
            width: f64::from(s.width),
        };
        resize_region(sample, scratch, whole, (h, w))
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if self.size == 0 {
            return Err(Error::InvalidParameter("resize to 0".into()));
        }
        crate::transform::pixel_type(input.channels)?;
        if !known(input) {
            return Ok(input);
        }
        let (h, w) = self.size_for(input.height, input.width);
        Ok(Shape::new(h, w, input.channels))
    }
}

/// torchvision's `ColorJitter(brightness, contrast, saturation)`: each
/// factor uniform in its range, the steps in a random order; grey as PIL's
/// `L` (299, 587, 114 per mille), contrast around the mean grey.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColorJitter {
    /// Range of the brightness factor, or none.
    pub brightness: Option<(f32, f32)>,
    /// Range of the contrast factor, or none.
    pub contrast: Option<(f32, f32)>,
    /// Range of the saturation factor, or none.
    pub saturation: Option<(f32, f32)>,
}

impl ColorJitter {
    /// torchvision's form: a number `b` means the range [max(0, 1 − b), 1 + b].
    pub fn new(brightness: f32, contrast: f32, saturation: f32) -> Result<Self, Error> {
        let range = |name: &str, v: f32| {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::InvalidParameter(format!(
                    "color_jitter {name} {v} must be a non-negative number"
                )));
            }
            Ok((v > 0.0).then(|| ((1.0 - v).max(0.0), 1.0 + v)))
        };
        Ok(Self {
            brightness: range("brightness", brightness)?,
            contrast: range("contrast", contrast)?,
            saturation: range("saturation", saturation)?,
        })
    }
}

fn grey(p: &[u8]) -> f32 {
    (f32::from(p[0]) * 299.0 + f32::from(p[1]) * 587.0 + f32::from(p[2]) * 114.0) / 1000.0
}

fn to_u8(v: f32) -> u8 {
    (v + 0.5).clamp(0.0, 255.0) as u8
}

impl Transform for ColorJitter {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        if sample.shape.channels != 3 {
            return Err(Error::Channels {
                transform: "color_jitter",
                channels: sample.shape.channels,
            });
        }
        let rng = &mut scratch.rng;
        let mut order = [0usize, 1, 2];
        for i in (1..3).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut draw = |r: Option<(f32, f32)>| {
            r.map(|(a, b)| rng.uniform_in(f64::from(a), f64::from(b)) as f32)
        };
        let factors = [
            draw(self.brightness),
            draw(self.contrast),
            draw(self.saturation),
        ];
        if factors.iter().all(Option::is_none) {
            return Ok(());
        }
        // Channel order does not matter for these steps except grey, which
        // needs whole pixels: work interleaved.
        sample.make_interleaved(&mut scratch.bytes);
        for op in order {
            let Some(f) = factors[op] else { continue };
            let px = sample.pixels.as_chunks_mut::<3>().0;
            match op {
                0 => px
                    .iter_mut()
                    .flatten()
                    .for_each(|v| *v = to_u8(f32::from(*v) * f)),
                1 => {
                    let n = px.len().max(1) as f32;
                    let mean = (px.iter().map(|p| grey(p)).sum::<f32>() / n + 0.5).floor();
                    px.iter_mut()
                        .flatten()
                        .for_each(|v| *v = to_u8(mean + f * (f32::from(*v) - mean)));
                }
                _ => {
                    for p in px.iter_mut() {
                        let g = grey(p);
                        for v in p.iter_mut() {
                            *v = to_u8(g + f * (f32::from(*v) - g));
                        }
                    }
                }
            }
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if input.channels != 3 {
            return Err(Error::Channels {
                transform: "color_jitter",
                channels: input.channels,
            });
        }
        Ok(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(h: u32, w: u32, c: u32, layout: Layout) -> Sample {
        let n = (h * w * c) as usize;
        Sample::with_layout(
            (0..n).map(|i| (i % 251) as u8).collect(),
            Shape::new(h, w, c),
            layout,
            0,
        )
        .unwrap()
    }

    /// The reference: pad by `mode` into a full image, then crop.
    fn naive_window(
        s: &Sample,
        top: i64,
        left: i64,
        oh: u32,
        ow: u32,
        mode: PaddingMode,
        fill: u8,
    ) -> Vec<u8> {
        let hwc = s.hwc_bytes();
        let (h, w, c) = (
            s.shape.height as i64,
            s.shape.width as i64,
            s.shape.channels as usize,
        );
        let mut out = Vec::new();
        for y in 0..i64::from(oh) {
            for x in 0..i64::from(ow) {
                let (sy, sx) = (
                    source_coord(top + y, h, mode),
                    source_coord(left + x, w, mode),
                );
                for k in 0..c {
                    out.push(match (sy, sx) {
                        (Some(sy), Some(sx)) => hwc[(sy * w as usize + sx) * c + k],
                        _ => fill,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn padding_modes_match_torchvision_on_a_line() {
        // torchvision pads [1, 2, 3] by 2: reflect 3 2 1 2 3 2 1, edge 1 1 1 2 3 3 3,
        // symmetric 2 1 1 2 3 3 2, constant 0 0 1 2 3 0 0.
        let line = [1u8, 2, 3];
        let padded = |mode| -> Vec<u8> {
            (-2..5)
                .map(|x| source_coord(x, 3, mode).map_or(0, |i| line[i]))
                .collect()
        };
        assert_eq!(padded(PaddingMode::Reflect), [3, 2, 1, 2, 3, 2, 1]);
        assert_eq!(padded(PaddingMode::Edge), [1, 1, 1, 2, 3, 3, 3]);
        assert_eq!(padded(PaddingMode::Symmetric), [2, 1, 1, 2, 3, 3, 2]);
        assert_eq!(padded(PaddingMode::Constant), [0, 0, 1, 2, 3, 0, 0]);
    }

    #[test]
    fn windows_equal_pad_then_crop_in_both_layouts() {
        for mode in [
            PaddingMode::Constant,
            PaddingMode::Edge,
            PaddingMode::Reflect,
            PaddingMode::Symmetric,
        ] {
            for layout in [Layout::Interleaved, Layout::Planar] {
                for (top, left, oh, ow) in
                    [(-2, -3, 6, 7), (1, 2, 3, 3), (-1, 3, 5, 4), (0, 0, 5, 6)]
                {
                    let s = ramp(5, 6, 3, layout);
                    let want = naive_window(&s, top, left, oh, ow, mode, 9);
                    let mut got = s.clone();
                    copy_window(&mut got, &mut Vec::new(), (top, left), (oh, ow), mode, &[9]);
                    assert_eq!(got.layout, layout, "crops keep the layout");
                    assert_eq!(
                        &*got.hwc_bytes(),
                        want.as_slice(),
                        "{mode:?} {layout:?} {top} {left}"
                    );
                }
            }
        }
    }

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
    fn flips_reverse_rows_or_columns_in_either_layout() {
        for layout in [Layout::Interleaved, Layout::Planar] {
            let s = ramp(3, 4, 3, layout);
            let hwc = s.hwc_bytes().into_owned();
            let px =
                |b: &[u8], y: usize, x: usize| b[(y * 4 + x) * 3..(y * 4 + x) * 3 + 3].to_vec();
            let mut h = s.clone();
            flip_horizontal(&mut h);
            let mut v = s.clone();
            flip_vertical(&mut v);
            let (h, v) = (h.hwc_bytes().into_owned(), v.hwc_bytes().into_owned());
            for y in 0..3 {
                for x in 0..4 {
                    assert_eq!(px(&h, y, x), px(&hwc, y, 3 - x));
                    assert_eq!(px(&v, y, x), px(&hwc, 2 - y, x));
                }
            }
        }
    }

    #[test]
    fn flip_rate_is_p() {
        // 20,000 draws at p = 0.3: sd = sqrt(n p (1-p)) ≈ 65; allow 5 sd.
        let t = RandomFlip::horizontal(0.3).unwrap();
        let mut scratch = Scratch::default();
        let mut flips = 0;
        for key in 0..20_000 {
            let mut s = Sample::hwc(vec![1, 2], 1, 2, 1, 0).unwrap();
            scratch.rng = SampleRng::new(1, 0, key);
            t.apply(&mut s, &mut scratch).unwrap();
            flips += usize::from(s.pixels == [2, 1]);
        }
        assert!((flips as i64 - 6_000).abs() < 325, "{flips} flips");
        assert!(RandomFlip::horizontal(1.5).is_err());
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
        let t = ResizeShorter { size: 256 };
        assert_eq!(t.size_for(375, 500), (256, 341));
        assert_eq!(t.size_for(500, 375), (341, 256));
        let mut s = Sample::hwc(vec![50; 30 * 40 * 3], 30, 40, 3, 0).unwrap();
        ResizeShorter { size: 15 }
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
    fn color_jitter_factors_of_one_change_nothing_and_brightness_scales() {
        let base = ramp(4, 4, 3, Layout::Interleaved);
        let mut s = base.clone();
        let mut scratch = Scratch::default();
        ColorJitter {
            brightness: Some((1.0, 1.0)),
            contrast: Some((1.0, 1.0)),
            saturation: Some((1.0, 1.0)),
        }
        .apply(&mut s, &mut scratch)
        .unwrap();
        assert_eq!(s.pixels, base.pixels);
        let mut s = base.clone();
        ColorJitter {
            brightness: Some((0.5, 0.5)),
            contrast: None,
            saturation: None,
        }
        .apply(&mut s, &mut scratch)
        .unwrap();
        for (a, b) in s.pixels.iter().zip(&base.pixels) {
            assert_eq!(*a, to_u8(f32::from(*b) * 0.5));
        }
        let mut s = base.clone();
        ColorJitter {
            brightness: None,
            contrast: None,
            saturation: Some((0.0, 0.0)),
        }
        .apply(&mut s, &mut scratch)
        .unwrap();
        assert!(
            s.pixels.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]),
            "saturation 0 is grey"
        );
        assert!(ColorJitter::new(-1.0, 0.0, 0.0).is_err());
    }
}
