//! The image operations of torchvision's automatic augmentations and of
//! `ColorJitter`, computed as PIL computes them for a PIL image (the
//! images timm's and torchvision's recipes augment): its affine transform
//! (16.16 fixed point for nearest, its bilinear and bicubic filters), its
//! `ImageEnhance` blends (truncating), `ImageOps` look-up tables and its
//! HSV conversion. Each works on interleaved RGB bytes.

use crate::{Error, Sample, Scratch};

/// How a geometric operation samples the source: torchvision's
/// `InterpolationMode` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Interpolation {
    /// Nearest neighbour (the automatic augmentations' default).
    #[default]
    Nearest,
    /// Bilinear.
    Bilinear,
    /// Bicubic.
    Bicubic,
}

impl Interpolation {
    /// The name in the recipe text.
    pub fn name(self) -> &'static str {
        match self {
            Interpolation::Nearest => "nearest",
            Interpolation::Bilinear => "bilinear",
            Interpolation::Bicubic => "bicubic",
        }
    }

    /// The mode named `name` (torchvision's spelling, any case).
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "nearest" => Some(Interpolation::Nearest),
            "bilinear" => Some(Interpolation::Bilinear),
            "bicubic" => Some(Interpolation::Bicubic),
            _ => None,
        }
    }
}

/// One operation of the augmentation policies, by torchvision's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Nothing.
    Identity,
    /// Shear along x by a factor.
    ShearX,
    /// Shear along y by a factor.
    ShearY,
    /// Shift along x by whole pixels.
    TranslateX,
    /// Shift along y by whole pixels.
    TranslateY,
    /// Rotate about the centre by degrees (counter-clockwise).
    Rotate,
    /// Brightness by a factor of 1 + magnitude.
    Brightness,
    /// Saturation by a factor of 1 + magnitude.
    Color,
    /// Contrast by a factor of 1 + magnitude.
    Contrast,
    /// Sharpness by a factor of 1 + magnitude.
    Sharpness,
    /// Keep this many high bits.
    Posterize,
    /// Invert the values at or above a threshold.
    Solarize,
    /// Stretch each channel to the full range.
    AutoContrast,
    /// Equalise each channel's histogram.
    Equalize,
    /// Invert every value.
    Invert,
}

fn px(sample: &mut Sample) -> &mut [u8] {
    &mut sample.pixels
}

/// The 3-channel requirement of every operation here.
pub(crate) fn rgb(sample: &Sample, transform: &'static str) -> Result<(), Error> {
    match sample.shape.channels {
        3 => Ok(()),
        channels => Err(Error::Channels {
            transform,
            channels,
        }),
    }
}

impl Op {
    /// Applies the operation at `magnitude` (torchvision's `_apply_op`) to
    /// an RGB sample; geometric operations fill what they uncover with `fill`.
    pub fn apply(
        self,
        magnitude: f64,
        interpolation: Interpolation,
        fill: [u8; 3],
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<(), Error> {
        rgb(sample, "augmentation")?;
        apply_op(self, magnitude, interpolation, fill, sample, scratch);
        Ok(())
    }

    /// Every operation, in torchvision's order (RandAugment's 14, then `Invert`).
    pub const ALL: [Op; 15] = [
        Op::Identity,
        Op::ShearX,
        Op::ShearY,
        Op::TranslateX,
        Op::TranslateY,
        Op::Rotate,
        Op::Brightness,
        Op::Color,
        Op::Contrast,
        Op::Sharpness,
        Op::Posterize,
        Op::Solarize,
        Op::AutoContrast,
        Op::Equalize,
        Op::Invert,
    ];

    /// What RandAugment and TrivialAugmentWide choose among, in their order.
    pub const RAND_AUGMENT: &'static [Op] = Op::ALL.split_at(14).0;

    /// The operation named `name` (torchvision's spelling).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| format!("{op:?}") == name)
    }
}

/// [`Op::apply`] on a sample known to be RGB.
pub(crate) fn apply_op(
    op: Op,
    magnitude: f64,
    interpolation: Interpolation,
    fill: [u8; 3],
    sample: &mut Sample,
    scratch: &mut Scratch,
) {
    sample.make_interleaved(&mut scratch.bytes);
    let (h, w) = (sample.shape.height as usize, sample.shape.width as usize);
    let affine = |m: [f64; 6], sample: &mut Sample, scratch: &mut Scratch| {
        scratch.bytes.clear();
        scratch.bytes.resize(sample.pixels.len(), 0);
        transform_affine(
            &sample.pixels,
            &mut scratch.bytes,
            (w, h),
            m,
            interpolation,
            fill,
        );
        std::mem::swap(&mut sample.pixels, &mut scratch.bytes);
    };
    match op {
        Op::Identity => {}
        Op::ShearX => affine(shear_x(magnitude), sample, scratch),
        Op::ShearY => affine(shear_y(magnitude), sample, scratch),
        Op::TranslateX => affine(
            [1.0, 0.0, -magnitude.trunc(), 0.0, 1.0, 0.0],
            sample,
            scratch,
        ),
        Op::TranslateY => affine(
            [1.0, 0.0, 0.0, 0.0, 1.0, -magnitude.trunc()],
            sample,
            scratch,
        ),
        Op::Rotate => {
            if let Some(m) = rotation(magnitude, w, h, px(sample), scratch) {
                affine(m, sample, scratch);
            }
        }
        Op::Brightness => brightness(px(sample), (1.0 + magnitude) as f32),
        Op::Color => saturation(px(sample), (1.0 + magnitude) as f32),
        Op::Contrast => contrast(px(sample), (1.0 + magnitude) as f32),
        Op::Sharpness => sharpness(
            px(sample),
            (w, h),
            (1.0 + magnitude) as f32,
            &mut scratch.bytes,
        ),
        Op::Posterize => {
            let keep = magnitude.clamp(0.0, 8.0) as u32;
            let mask = !((1u16 << (8 - keep)) - 1) as u8;
            px(sample).iter_mut().for_each(|v| *v &= mask);
        }
        Op::Solarize => px(sample).iter_mut().for_each(|v| {
            *v = if f64::from(*v) < magnitude {
                *v
            } else {
                255 - *v
            }
        }),
        Op::AutoContrast => auto_contrast(px(sample)),
        Op::Equalize => equalize(px(sample)),
        Op::Invert => px(sample).iter_mut().for_each(|v| *v = 255 - *v),
    }
}

/// torchvision's inverse matrix for a shear along x by `m` about the
/// top-left corner (`shear=[degrees(atan(m)), 0], center=[0, 0]`).
fn shear_x(m: f64) -> [f64; 6] {
    let sx = m.atan().to_degrees().to_radians();
    [1.0, sx.tan(), 0.0, 0.0, 1.0, 0.0]
}

/// The same along y.
fn shear_y(m: f64) -> [f64; 6] {
    let sy = m.atan().to_degrees().to_radians();
    // torchvision's c = sin(-sy) / cos(sy); the inverse holds -c.
    let c = (-sy).sin() / sy.cos();
    let a = (-sy).cos() / sy.cos();
    [1.0, 0.0, 0.0, -c, a, 0.0]
}

/// PIL's `rotate(angle)` about the centre as an inverse matrix; `None`
/// when PIL takes a shortcut (0° leaves the image, 180° is a transpose,
/// done here in place; 90° and 270° on a square likewise).
fn rotation(
    degrees: f64,
    w: usize,
    h: usize,
    px: &mut [u8],
    scratch: &mut Scratch,
) -> Option<[f64; 6]> {
    let angle = degrees.rem_euclid(360.0);
    if angle == 0.0 {
        return None;
    }
    if angle == 180.0 {
        px.as_chunks_mut::<3>().0.reverse();
        return None;
    }
    if (angle == 90.0 || angle == 270.0) && w == h {
        quarter_turn(px, w, angle == 90.0, &mut scratch.bytes);
        return None;
    }
    let r = -angle.to_radians();
    let round15 = |v: f64| (v * 1e15).round() / 1e15;
    let (cos, sin) = (round15(r.cos()), round15(r.sin()));
    let mut m = [cos, sin, 0.0, -sin, cos, 0.0];
    let (cx, cy) = (w as f64 / 2.0, h as f64 / 2.0);
    m[2] = m[0] * -cx + m[1] * -cy + m[2] + cx;
    m[5] = m[3] * -cx + m[4] * -cy + m[5] + cy;
    Some(m)
}

/// A square image turned by 90° counter-clockwise (`ccw`) or clockwise.
fn quarter_turn(px: &mut [u8], n: usize, ccw: bool, spare: &mut Vec<u8>) {
    spare.clear();
    spare.extend_from_slice(px);
    for y in 0..n {
        for x in 0..n {
            // PIL's ROTATE_90 (counter-clockwise): out(x, y) = in(n-1-y, x).
            let (sx, sy) = if ccw { (n - 1 - y, x) } else { (y, n - 1 - x) };
            let (o, i) = (3 * (y * n + x), 3 * (sy * n + sx));
            px[o..o + 3].copy_from_slice(&spare[i..i + 3]);
        }
    }
}

/// PIL's `COORD`: truncation, with everything below 0 out of range.
fn coord(v: f64) -> i64 {
    if v < 0.0 { -1 } else { v as i64 }
}

/// PIL's `Image.transform(AFFINE)` with `fillcolor`: `dst(x, y)` samples
/// `src` at `m · (x + ½, y + ½)`.
fn transform_affine(
    src: &[u8],
    dst: &mut [u8],
    (w, h): (usize, usize),
    m: [f64; 6],
    interpolation: Interpolation,
    fill: [u8; 3],
) {
    dst.as_chunks_mut::<3>().0.fill(fill);
    let inside = |x: i64, y: i64| x >= 0 && (x as usize) < w && y >= 0 && (y as usize) < h;
    let mut put = |x: usize, y: usize, sx: i64, sy: i64| {
        let (o, i) = (3 * (y * w + x), 3 * (sy as usize * w + sx as usize));
        dst[o..o + 3].copy_from_slice(&src[i..i + 3]);
    };
    if interpolation != Interpolation::Nearest {
        return filtered(src, dst, (w, h), m, interpolation);
    }
    if m[1] == 0.0 && m[3] == 0.0 {
        // ImagingScaleAffine.
        let mut yo = m[5] + m[4] * 0.5;
        for y in 0..h {
            let mut xo = m[2] + m[0] * 0.5;
            for x in 0..w {
                let (sx, sy) = (coord(xo), coord(yo));
                if inside(sx, sy) {
                    put(x, y, sx, sy);
                }
                xo += m[0];
            }
            yo += m[4];
        }
        return;
    }
    let fits = |x: f64, y: f64| {
        (x * m[0] + y * m[1] + m[2]).abs() < 32768.0 && (x * m[3] + y * m[4] + m[5]).abs() < 32768.0
    };
    let (wf, hf) = (w as f64, h as f64);
    if fits(0.0, 0.0) && fits(wf, hf) && fits(0.0, hf) && fits(wf, 0.0) {
        // affine_fixed: 16.16 fixed point.
        let fix = |v: f64| (v * 65536.0 + 0.5).floor() as i64;
        let (a0, a1, a3, a4) = (fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4]));
        let mut a2 = fix(m[2] + m[0] * 0.5 + m[1] * 0.5);
        let mut a5 = fix(m[5] + m[3] * 0.5 + m[4] * 0.5);
        for y in 0..h {
            let (mut xx, mut yy) = (a2, a5);
            for x in 0..w {
                let (sx, sy) = (xx >> 16, yy >> 16);
                if inside(sx, sy) {
                    put(x, y, sx, sy);
                }
                xx += a0;
                yy += a3;
            }
            a2 += a1;
            a5 += a4;
        }
        return;
    }
    let (mut xo, mut yo) = (
        m[2] + m[1] * 0.5 + m[0] * 0.5,
        m[5] + m[4] * 0.5 + m[3] * 0.5,
    );
    for y in 0..h {
        let (mut xx, mut yy) = (xo, yo);
        for x in 0..w {
            let (sx, sy) = (coord(xx), coord(yy));
            if inside(sx, sy) {
                put(x, y, sx, sy);
            }
            xx += m[0];
            yy += m[3];
        }
        xo += m[1];
        yo += m[4];
    }
}

/// PIL's `FLOOR`.
fn floor_i(v: f64) -> i64 {
    if v < 0.0 { v.floor() as i64 } else { v as i64 }
}

/// PIL's generic transform with its bilinear or bicubic filter: a point
/// outside the source keeps the fill.
fn filtered(
    src: &[u8],
    dst: &mut [u8],
    (w, h): (usize, usize),
    m: [f64; 6],
    interp: Interpolation,
) {
    let (wi, hi) = (w as i64, h as i64);
    let at = |x: i64, y: i64, b: usize| f64::from(src[3 * (y as usize * w + x as usize) + b]);
    let xc = |x: i64| x.clamp(0, wi - 1);
    for y in 0..h {
        for x in 0..w {
            let (xin, yin) = (x as f64 + 0.5, y as f64 + 0.5);
            let xx = m[0] * xin + m[1] * yin + m[2];
            let yy = m[3] * xin + m[4] * yin + m[5];
            if xx < 0.0 || xx >= w as f64 || yy < 0.0 || yy >= h as f64 {
                continue;
            }
            let (fx, fy) = (xx - 0.5, yy - 0.5);
            let (ix, iy) = (floor_i(fx), floor_i(fy));
            let (dx, dy) = (fx - ix as f64, fy - iy as f64);
            for b in 0..3 {
                let v = match interp {
                    Interpolation::Bicubic => {
                        let row = |yr: i64| {
                            let p = |k: i64| at(xc(ix - 1 + k), yr, b);
                            cubic(p(0), p(1), p(2), p(3), dx)
                        };
                        let v1 = row((iy - 1).clamp(0, hi - 1));
                        let v2 = if (0..hi).contains(&iy) { row(iy) } else { v1 };
                        let v3 = if (0..hi).contains(&(iy + 1)) {
                            row(iy + 1)
                        } else {
                            v2
                        };
                        let v4 = if (0..hi).contains(&(iy + 2)) {
                            row(iy + 2)
                        } else {
                            v3
                        };
                        cubic(v1, v2, v3, v4, dy).clamp(0.0, 255.0)
                    }
                    _ => {
                        let row = |yr: i64| {
                            let (a, c) = (at(xc(ix), yr, b), at(xc(ix + 1), yr, b));
                            a + (c - a) * dx
                        };
                        let v1 = row(iy.clamp(0, hi - 1));
                        let v2 = if (0..hi).contains(&(iy + 1)) {
                            row(iy + 1)
                        } else {
                            v1
                        };
                        v1 + (v2 - v1) * dy
                    }
                };
                dst[3 * (y * w + x) + b] = v as u8;
            }
        }
    }
}

/// PIL's `BICUBIC` (a = −0.5) through four values at fraction `d`.
fn cubic(v1: f64, v2: f64, v3: f64, v4: f64, d: f64) -> f64 {
    let p1 = v2;
    let p2 = -v1 + v3;
    let p3 = 2.0 * (v1 - v2) + v3 - v4;
    let p4 = -v1 + v2 - v3 + v4;
    p1 + d * (p2 + d * (p3 + d * p4))
}

/// PIL's `Image.blend(degenerate, image, alpha)` for one value: truncating
/// between the two, clipped beyond them.
fn blend(degenerate: u8, image: u8, alpha: f32) -> u8 {
    if alpha == 0.0 {
        return degenerate;
    }
    if alpha == 1.0 {
        return image;
    }
    let (d, i) = (i32::from(degenerate), i32::from(image));
    let v = d as f32 + alpha * (i - d) as f32;
    if (0.0..=1.0).contains(&alpha) {
        v as u8
    } else if v <= 0.0 {
        0
    } else if v >= 255.0 {
        255
    } else {
        v as u8
    }
}

/// PIL's `convert('L')` of one pixel (ITU-R 601-2 in 16.16 fixed point).
pub(crate) fn luma(p: &[u8; 3]) -> u8 {
    ((u32::from(p[0]) * 19595 + u32::from(p[1]) * 38470 + u32::from(p[2]) * 7471 + 0x8000) >> 16)
        as u8
}

/// `ImageEnhance.Brightness(img).enhance(f)`.
pub(crate) fn brightness(px: &mut [u8], f: f32) {
    px.iter_mut().for_each(|v| *v = blend(0, *v, f));
}

/// `ImageEnhance.Color(img).enhance(f)` (torchvision's `adjust_saturation`).
pub(crate) fn saturation(px: &mut [u8], f: f32) {
    for p in px.as_chunks_mut::<3>().0 {
        let g = luma(p);
        p.iter_mut().for_each(|v| *v = blend(g, *v, f));
    }
}

/// `ImageEnhance.Contrast(img).enhance(f)`: around the mean grey, rounded.
pub(crate) fn contrast(px: &mut [u8], f: f32) {
    let pixels = px.as_chunks_mut::<3>().0;
    let sum: u64 = pixels.iter().map(|p| u64::from(luma(p))).sum();
    let mean = (sum as f64 / pixels.len().max(1) as f64 + 0.5) as u8;
    pixels
        .iter_mut()
        .flatten()
        .for_each(|v| *v = blend(mean, *v, f));
}

/// `ImageEnhance.Sharpness(img).enhance(f)`: a blend with PIL's `SMOOTH`
/// filter (3×3, 5 in the centre over 13; the border rows and columns
/// unfiltered).
fn sharpness(px: &mut [u8], (w, h): (usize, usize), f: f32, spare: &mut Vec<u8>) {
    spare.clear();
    spare.extend_from_slice(px);
    let k = [1.0f32 / 13.0, 5.0 / 13.0];
    for y in 1..h.saturating_sub(1) {
        for x in 1..w.saturating_sub(1) {
            for b in 0..3 {
                let at = |xx: usize, yy: usize| f32::from(spare[3 * (yy * w + xx) + b]);
                let row = |yy: usize, centre: f32| {
                    at(x - 1, yy) * k[0] + at(x, yy) * centre + at(x + 1, yy) * k[0]
                };
                let mut ss = 0.5f32;
                ss += row(y + 1, k[0]);
                ss += row(y, k[1]);
                ss += row(y - 1, k[0]);
                let smooth = ss.clamp(0.0, 255.0) as u8;
                let i = 3 * (y * w + x) + b;
                px[i] = blend(smooth, spare[i], f);
            }
        }
    }
}

/// Per-channel histograms of interleaved RGB.
fn histograms(px: &[u8]) -> [[u64; 256]; 3] {
    let mut h = [[0u64; 256]; 3];
    for p in px.as_chunks::<3>().0 {
        for b in 0..3 {
            h[b][usize::from(p[b])] += 1;
        }
    }
    h
}

/// Applies one look-up table per channel.
fn apply_luts(px: &mut [u8], luts: &[[u8; 256]; 3]) {
    for p in px.as_chunks_mut::<3>().0 {
        for b in 0..3 {
            p[b] = luts[b][usize::from(p[b])];
        }
    }
}

fn identity_lut() -> [u8; 256] {
    std::array::from_fn(|i| i as u8)
}

/// `ImageOps.autocontrast(img)`: each channel's lowest and highest values
/// stretched to 0 and 255 (truncating).
fn auto_contrast(px: &mut [u8]) {
    let hist = histograms(px);
    let luts = hist.map(|h| {
        let lo = h.iter().position(|&c| c != 0);
        let hi = h.iter().rposition(|&c| c != 0);
        match (lo, hi) {
            (Some(lo), Some(hi)) if hi > lo => {
                let scale = 255.0 / (hi - lo) as f64;
                let offset = -(lo as f64) * scale;
                std::array::from_fn(|i| (i as f64 * scale + offset).trunc().clamp(0.0, 255.0) as u8)
            }
            _ => identity_lut(),
        }
    });
    apply_luts(px, &luts);
}

/// `ImageOps.equalize(img)`: each channel through its cumulative histogram.
fn equalize(px: &mut [u8]) {
    let hist = histograms(px);
    let luts = hist.map(|h| {
        let used: Vec<u64> = h.iter().copied().filter(|&c| c != 0).collect();
        let last = used.last().copied().unwrap_or(0);
        let step = (used.iter().sum::<u64>() - last) / 255;
        if used.len() <= 1 || step == 0 {
            return identity_lut();
        }
        let mut n = step / 2;
        std::array::from_fn(|i| {
            let v = (n / step).min(255) as u8;
            n += h[i];
            v
        })
    });
    apply_luts(px, &luts);
}

/// PIL's RGB → HSV of one pixel (all three 0–255).
fn to_hsv(p: &[u8; 3]) -> [u8; 3] {
    let (r, g, b) = (p[0], p[1], p[2]);
    let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
    if maxc == minc {
        return [0, 0, maxc];
    }
    let cr = f32::from(maxc - minc);
    let s = cr / f32::from(maxc);
    let rc = f32::from(maxc - r) / cr;
    let gc = f32::from(maxc - g) / cr;
    let bc = f32::from(maxc - b) / cr;
    let h: f32 = if r == maxc {
        bc - gc
    } else if g == maxc {
        (2.0 + f64::from(rc) - f64::from(bc)) as f32
    } else {
        (4.0 + f64::from(gc) - f64::from(rc)) as f32
    };
    let h = ((f64::from(h) / 6.0 + 1.0) % 1.0) as f32;
    let clip = |v: f64| (v as i32).clamp(0, 255) as u8;
    [clip(f64::from(h) * 255.0), clip(f64::from(s) * 255.0), maxc]
}

/// PIL's HSV → RGB of one pixel.
fn from_hsv(p: &[u8; 3]) -> [u8; 3] {
    let (h, s, v) = (p[0], p[1], p[2]);
    if s == 0 {
        return [v, v, v];
    }
    let sixth = f64::from(h) * 6.0 / 255.0;
    let i = sixth.floor() as i32;
    let f = (sixth - f64::from(i)) as f32;
    let fs = (f64::from(s) / 255.0) as f32;
    let vf = f64::from(v);
    let clip = |x: f64| (x.round() as i32).clamp(0, 255) as u8;
    let pp = clip(vf * (1.0 - f64::from(fs)));
    let q = clip(vf * (1.0 - f64::from(fs * f)));
    let t = clip(vf * (1.0 - f64::from(fs * (1.0 - f))));
    match i % 6 {
        0 => [v, t, pp],
        1 => [q, v, pp],
        2 => [pp, v, t],
        3 => [pp, q, v],
        4 => [t, pp, v],
        _ => [v, pp, q],
    }
}

/// torchvision's `adjust_hue(img, factor)` on a PIL image: the hue byte
/// shifted by `int(factor × 255)`, wrapping.
pub(crate) fn hue(px: &mut [u8], factor: f32) {
    let shift = ((f64::from(factor) * 255.0).trunc() as i32).rem_euclid(256) as u8;
    if shift == 0 {
        return;
    }
    for p in px.as_chunks_mut::<3>().0 {
        let mut hsv = to_hsv(p);
        hsv[0] = hsv[0].wrapping_add(shift);
        *p = from_hsv(&hsv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blend_truncates_between_and_clips_beyond() {
        assert_eq!(blend(0, 255, 0.5), 127);
        assert_eq!(blend(10, 200, 2.0), 255);
        assert_eq!(blend(200, 10, 2.0), 0);
        assert_eq!(blend(7, 9, 0.0), 7);
    }

    #[test]
    fn hsv_converts_as_pil_does() {
        // PIL 13: convert('HSV') and back; yellow's hue byte (42) does not
        // come back exactly, in PIL either.
        for (rgb, hsv, back) in [
            ([255, 0, 0], [0, 255, 255], [255, 0, 0]),
            ([0, 255, 0], [85, 255, 255], [0, 255, 0]),
            ([0, 0, 255], [170, 255, 255], [0, 0, 255]),
            ([90, 90, 90], [0, 0, 90], [90, 90, 90]),
            ([255, 255, 0], [42, 255, 255], [255, 252, 0]),
        ] {
            assert_eq!(to_hsv(&rgb), hsv, "{rgb:?}");
            assert_eq!(from_hsv(&hsv), back, "{rgb:?}");
        }
    }

    #[test]
    fn equalize_and_autocontrast_leave_a_flat_image() {
        let mut px = vec![77u8; 3 * 16];
        equalize(&mut px);
        auto_contrast(&mut px);
        assert!(px.iter().all(|&v| v == 77));
    }
}
