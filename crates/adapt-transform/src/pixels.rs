//! Pixel operations the steps share: where a padded coordinate reads from,
//! window copies with padding, flips in either layout, and the one call into
//! the SIMD resizer (typed for the four u8 pixel types).

use crate::{Error, Layout, Sample, Scratch, Shape};
use fast_image_resize as fr;

/// How [`RandomCrop`](crate::RandomCrop) fills its padding (torchvision's `padding_mode`).
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

pub(crate) fn known(shape: Shape) -> bool {
    shape.height > 0 && shape.width > 0
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

/// The decoded size's ratio to the full size, per axis (1 at full scale).
pub(crate) fn scale_of(decoded: Shape, full: (u32, u32)) -> (f64, f64) {
    (
        f64::from(decoded.width) / f64::from(full.0.max(1)),
        f64::from(decoded.height) / f64::from(full.1.max(1)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ramp;

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
}
