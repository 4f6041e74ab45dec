//! Crops and flips deferred to collation: a window (with padding) and flips
//! that the collating step reads through, so the CIFAR recipe
//! (`random_crop(32,padding=4),hflip,normalize`) touches each byte once,
//! from the source straight into the batch, instead of once per step. The
//! writers that read through a geometry are the collation's
//! ([`crate::Normalize`], [`crate::write_u8`]).

use crate::pixels::{PaddingMode, copy_window, flip_horizontal, flip_vertical, source_coord};
use crate::{Layout, Sample, SampleView, Scratch, Shape};

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
    pub(crate) fn plane(&self, src: SampleView<'_>, ch: usize, plane: &mut [u8]) {
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
