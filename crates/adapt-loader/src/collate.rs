//! Collation of one sample into its place in a batch: normalised f32 CHW
//! or u8 CHW / HWC, reading through the crops and flips deferred to it.

use crate::OutputFormat;
use adapt_dataset::{Error, SampleView, Shape};
use adapt_transform::{Geometry, Normalize};

/// Writes `view` (through `geometry`, when crops and flips were deferred)
/// into `out`, its bytes in the batch, as `output` lays batches out; the
/// sample must come out as `expected`. `row` is scratch space. Returns the
/// sample's label.
pub fn collate_sample(
    output: OutputFormat,
    normalize: &Normalize,
    expected: Shape,
    view: SampleView<'_>,
    geometry: Option<Geometry<'_>>,
    row: &mut Vec<u8>,
    out: &mut [u8],
) -> Result<i64, Error> {
    let shape = geometry.map_or(view.shape, |g| g.output_shape(view.shape));
    if shape != expected {
        return Err(Error::ShapeMismatch {
            shape: expected,
            expected: expected.len(),
            got: shape.len(),
        });
    }
    match (output, geometry) {
        (OutputFormat::F32Nchw, None) => normalize.write_chw(view, floats(out)?)?,
        (OutputFormat::F32Nchw, Some(g)) => g.write_chw(view, normalize, floats(out)?, row)?,
        (OutputFormat::U8Nchw, None) => adapt_transform::write_u8(view, out, false)?,
        (OutputFormat::U8Nchw, Some(g)) => g.write_u8(view, out, false, row)?,
        (OutputFormat::U8Nhwc, None) => adapt_transform::write_u8(view, out, true)?,
        (OutputFormat::U8Nhwc, Some(g)) => g.write_u8(view, out, true, row)?,
    }
    Ok(view.label)
}

/// The f32 view of a sample's bytes in the batch: the pool's buffers are
/// 4-byte aligned and each sample's share is a multiple of 4 bytes.
fn floats(out: &mut [u8]) -> Result<&mut [f32], Error> {
    bytemuck::try_cast_slice_mut(out)
        .map_err(|e| Error::InvalidParameter(format!("batch buffer: {e}")))
}
