//! Crops and flips deferred to collation: a window (with padding) and flips
//! that the collating step reads through, so the CIFAR recipe
//! (`random_crop(32,padding=4),hflip,normalize`) touches each byte once,
//! from the source straight into the batch, instead of once per step.

use crate::augment::{PaddingMode, copy_window, flip_horizontal, flip_vertical, source_coord};
use crate::{Error, Layout, Normalize, Sample, SampleView, Scratch, Shape, Transform};

/// A window of the source (its top-left corner possibly outside it: padding
/// by `mode`, constant `fill`), then flips of the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry<'t> {
    /// First source row of the window (negative: padding above).
    pub top: i64,
    /// First source column of the window.
    pub left: i64,
    /// Rows of the output.
    pub height: u32,
    /// Columns of the output.
    pub width: u32,
    /// How padding is filled.
    pub mode: PaddingMode,
    /// Constant fill: one value, or one per channel.
    pub fill: &'t [u8],
    /// Flip the window left-right.
    pub hflip: bool,
    /// Flip the window top-bottom.
    pub vflip: bool,
}

impl<'t> Geometry<'t> {
    /// The whole of an image of `shape`, unflipped.
    pub fn whole(shape: Shape) -> Self {
        Self {
            top: 0,
            left: 0,
            height: shape.height,
            width: shape.width,
            mode: PaddingMode::Constant,
            fill: &[0],
            hflip: false,
            vflip: false,
        }
    }

    /// The output shape for a source of `input`.
    pub fn output_shape(&self, input: Shape) -> Shape {
        Shape::new(self.height, self.width, input.channels)
    }

    /// Applies the geometry to `sample`'s pixels (what collating through it
    /// yields, as a sample).
    pub fn materialize(&self, sample: &mut Sample, scratch: &mut Scratch) {
        let s = sample.shape;
        if (self.top, self.left, self.height, self.width) != (0, 0, s.height, s.width) {
            copy_window(
                sample,
                &mut scratch.bytes,
                (self.top, self.left),
                (self.height, self.width),
                self.mode,
                self.fill,
            );
        }
        if self.hflip {
            flip_horizontal(sample);
        }
        if self.vflip {
            flip_vertical(sample);
        }
    }

    /// Builds channel `ch` of the output into `plane` (`height × width`
    /// bytes): each row's interior as one run, borders by the padding mode,
    /// then the flips as a second pass over the (cache-hot) plane, which
    /// keeps the copies plain `memcpy`s.
    fn plane(&self, src: SampleView<'_>, ch: usize, plane: &mut [u8]) {
        let s = src.shape;
        let (h, w, c) = (i64::from(s.height), i64::from(s.width), s.channels as usize);
        let sw = s.width as usize;
        let fill = self
            .fill
            .get(ch)
            .or(self.fill.first())
            .copied()
            .unwrap_or(0);
        let ow = self.width as usize;
        let x0 = (-self.left).clamp(0, ow as i64) as usize;
        let x1 = (w - self.left).clamp(x0 as i64, ow as i64) as usize;
        // Only read when the run is not empty: `left + x0` is then inside the row.
        let from = if x1 > x0 {
            (self.left + x0 as i64) as usize
        } else {
            0
        };
        let border = |x: usize| source_coord(self.left + x as i64, w, self.mode);
        let constant = self.mode == PaddingMode::Constant;
        if constant && (x0 > 0 || x1 < ow) {
            // One fill of the plane instead of a small one per row and side.
            plane.fill(fill);
        }
        for (y, line) in plane.chunks_exact_mut(ow).enumerate() {
            let yy = if self.vflip {
                self.height as usize - 1 - y
            } else {
                y
            };
            let Some(sy) = source_coord(self.top + yy as i64, h, self.mode) else {
                line.fill(fill);
                continue;
            };
            match src.layout {
                Layout::Planar => {
                    let srow = &src.pixels[(ch * s.height as usize + sy) * sw..][..sw];
                    copy_run(&mut line[x0..x1], &srow[from..from + (x1 - x0)]);
                    if !constant {
                        for x in (0..x0).chain(x1..ow) {
                            line[x] = border(x).map_or(fill, |sx| srow[sx]);
                        }
                    }
                }
                Layout::Interleaved => {
                    let srow = &src.pixels[sy * sw * c..][..sw * c];
                    for (d, px) in line[x0..x1]
                        .iter_mut()
                        .zip(srow[from * c..].chunks_exact(c))
                    {
                        *d = px[ch];
                    }
                    for x in (0..x0).chain(x1..ow) {
                        line[x] = border(x).map_or(fill, |sx| srow[sx * c + ch]);
                    }
                }
            }
        }
        if self.hflip {
            for line in plane.chunks_exact_mut(ow) {
                line.reverse();
            }
        }
    }

    fn check(&self, src: SampleView<'_>, out_len: usize) -> Result<(), Error> {
        src.validate()?;
        let n = self.output_shape(src.shape).len();
        if out_len != n {
            return Err(Error::OutputSize {
                expected: n,
                got: out_len,
            });
        }
        if src.shape.height == 0 || src.shape.width == 0 {
            return Err(Error::InvalidParameter("a window of an empty image".into()));
        }
        Ok(())
    }

    /// Collates `src` through this geometry as normalised f32 CHW into `out`
    /// (equal to materialising, then [`Normalize::write_chw`]); `row` is
    /// scratch space.
    pub fn write_chw(
        &self,
        src: SampleView<'_>,
        norm: &Normalize,
        out: &mut [f32],
        row: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.check(src, out.len())?;
        let c = src.shape.channels as usize;
        if c != norm.channels() {
            return Err(Error::Channels {
                transform: "Normalize",
                channels: src.shape.channels,
            });
        }
        let plane = self.width as usize * self.height as usize;
        // A whole plane of bytes, then one long (vectorised) normalising pass.
        row.resize(plane, 0);
        for (ch, dst) in out.chunks_exact_mut(plane).enumerate() {
            self.plane(src, ch, row);
            let (a, b) = norm.coefficients(ch);
            crate::normalize::affine(row, dst, a, b);
        }
        Ok(())
    }

    /// Collates `src` through this geometry as u8 CHW (`nhwc = false`) or
    /// HWC into `out` (equal to materialising, then [`crate::write_u8`]).
    pub fn write_u8(
        &self,
        src: SampleView<'_>,
        out: &mut [u8],
        nhwc: bool,
        row: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.check(src, out.len())?;
        let c = src.shape.channels as usize;
        let plane = self.width as usize * self.height as usize;
        if nhwc {
            row.resize(plane, 0);
            for ch in 0..c {
                self.plane(src, ch, row);
                for (px, &v) in out.chunks_exact_mut(c).zip(row.iter()) {
                    px[ch] = v;
                }
            }
        } else {
            for (ch, dst) in out.chunks_exact_mut(plane).enumerate() {
                self.plane(src, ch, dst);
            }
        }
        Ok(())
    }
}

/// `dst.copy_from_slice(src)` for the short runs of a crop's rows, without
/// a call into `memcpy` per row (at 32-byte rows the call costs more than
/// the copy): fixed-size, overlapping moves that compile inline.
#[inline]
fn copy_run(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    match n {
        0..8 => dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s),
        8..=16 => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..].copy_from_slice(&src[n - 8..]);
        }
        17..=32 => {
            dst[..16].copy_from_slice(&src[..16]);
            dst[n - 16..].copy_from_slice(&src[n - 16..]);
        }
        33..=64 => {
            dst[..32].copy_from_slice(&src[..32]);
            dst[n - 32..].copy_from_slice(&src[n - 32..]);
        }
        _ => dst.copy_from_slice(src),
    }
}

/// Plans `steps` as one geometry over a sample of `shape`, when every step
/// is a crop or flip that composes; `None` otherwise (the draws made so far
/// are then to be discarded: re-seed before applying).
pub fn plan<'t>(
    steps: &'t [Box<dyn Transform>],
    shape: Shape,
    scratch: &mut Scratch,
) -> Result<Option<Geometry<'t>>, Error> {
    let mut pending = None;
    for step in steps {
        match step.defer(shape, pending, scratch)? {
            Some(g) => pending = Some(g),
            None => return Ok(None),
        }
    }
    Ok(pending)
}

/// Runs `steps` on `sample`, deferring a trailing run of crops and flips
/// (the geometry returned) for collation; random draws happen in step
/// order exactly as [`Transform::apply`] would make them.
pub fn apply_deferring<'t>(
    steps: &'t [Box<dyn Transform>],
    sample: &mut Sample,
    scratch: &mut Scratch,
) -> Result<Option<Geometry<'t>>, Error> {
    let mut pending: Option<Geometry<'t>> = None;
    for step in steps {
        match step.defer(sample.shape, pending, scratch)? {
            Some(g) => pending = Some(g),
            None => {
                if let Some(g) = pending.take() {
                    g.materialize(sample, scratch);
                }
                step.apply(sample, scratch)?;
            }
        }
    }
    Ok(pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CenterCrop, ColorJitter, Compose, RandomCrop, RandomFlip, SampleRng};
    use proptest::prelude::*;

    fn pipeline(kinds: &[u8], h: u32, w: u32, pad: u32, mode: u8) -> Compose {
        let mut c = Compose::new();
        for &k in kinds {
            c = match k % 5 {
                0 => {
                    let mut crop = RandomCrop::new(h.max(2) - 1, w.max(2) - 1).unwrap();
                    crop.padding = [pad; 4];
                    crop.fill = vec![7, 8, 9];
                    crop.mode = [
                        PaddingMode::Constant,
                        PaddingMode::Edge,
                        PaddingMode::Reflect,
                        PaddingMode::Symmetric,
                    ][mode as usize % 4];
                    if matches!(crop.mode, PaddingMode::Reflect | PaddingMode::Symmetric) {
                        crop.padding = [pad.min(h.min(w) - 1); 4];
                    }
                    c.then(crop)
                }
                1 => c.then(RandomFlip::horizontal(0.5).unwrap()),
                2 => c.then(RandomFlip::vertical(0.5).unwrap()),
                3 => c.then(CenterCrop {
                    height: h + 1,
                    width: w.max(2) - 1,
                }),
                _ => c.then(ColorJitter::new(0.3, 0.3, 0.3).unwrap()),
            };
        }
        c
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Collating through deferred crops and flips equals applying every
        /// step, then collating: same draws, same bytes.
        #[test]
        fn deferred_collation_equals_applying(
            kinds in proptest::collection::vec(0u8..5, 1..5),
            h in 2u32..9, w in 2u32..9, pad in 0u32..4, mode in 0u8..4,
            planar in any::<bool>(), key in 0u64..1000,
        ) {
            let t = pipeline(&kinds, h, w, pad, mode);
            let layout = if planar { Layout::Planar } else { Layout::Interleaved };
            let n = (h * w * 3) as usize;
            let base = Sample::with_layout((0..n).map(|i| (i * 37 % 256) as u8).collect(), Shape::new(h, w, 3), layout, 0).unwrap();
            let Ok(out_shape) = t.output_shape(base.shape) else { return Ok(()) };
            let norm = Normalize::new(&[0.1, 0.2, 0.3], &[0.3, 0.2, 0.1]).unwrap();

            let mut applied = base.clone();
            let mut scratch = Scratch::with_rng(SampleRng::new(1, 2, key));
            t.apply(&mut applied, &mut scratch).unwrap();
            prop_assert_eq!(applied.shape, out_shape);
            let mut want_f = vec![0.0; out_shape.len()];
            norm.write_chw(applied.view(), &mut want_f).unwrap();
            let (mut want_chw, mut want_hwc) = (vec![0; out_shape.len()], vec![0; out_shape.len()]);
            crate::write_u8(applied.view(), &mut want_chw, false).unwrap();
            crate::write_u8(applied.view(), &mut want_hwc, true).unwrap();

            let mut deferred = base.clone();
            scratch.rng = SampleRng::new(1, 2, key);
            let g = t.apply_deferring(&mut deferred, &mut scratch).unwrap();
            let g = g.unwrap_or(Geometry::whole(deferred.shape));
            let mut row = Vec::new();
            let mut got_f = vec![0.0; out_shape.len()];
            g.write_chw(deferred.view(), &norm, &mut got_f, &mut row).unwrap();
            let (mut got_chw, mut got_hwc) = (vec![0; out_shape.len()], vec![0; out_shape.len()]);
            g.write_u8(deferred.view(), &mut got_chw, false, &mut row).unwrap();
            g.write_u8(deferred.view(), &mut got_hwc, true, &mut row).unwrap();
            prop_assert_eq!(got_f, want_f);
            prop_assert_eq!(got_chw, want_chw);
            prop_assert_eq!(got_hwc, want_hwc);
        }
    }
}
