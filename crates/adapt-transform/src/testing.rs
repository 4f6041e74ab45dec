//! Test fixtures shared by the modules' unit tests.

use crate::{Layout, Sample, Shape};

/// An `h × w × c` sample in `layout` whose bytes count up (mod 251), so a
/// misplaced byte shows.
pub(crate) fn ramp(h: u32, w: u32, c: u32, layout: Layout) -> Sample {
    let n = (h * w * c) as usize;
    Sample::with_layout(
        (0..n).map(|i| (i % 251) as u8).collect(),
        Shape::new(h, w, c),
        layout,
        0,
    )
    .unwrap()
}

/// [`ramp`], interleaved (HWC).
pub(crate) fn ramp_hwc(h: u32, w: u32, c: u32) -> Sample {
    ramp(h, w, c, Layout::Interleaved)
}
