//! One sample's way into its place in a batch: the pipeline's steps on the
//! sample just read (crops and flips of a lent sample planned to be read
//! through while collating), then collation as normalised f32 CHW or u8
//! CHW / HWC. The loader's workers and adapt's steps over samples read
//! elsewhere (a Python dataset) both take it.

use crate::OutputFormat;
use adapt_dataset::{Error, Read, Sample, SampleView, Shape};
use adapt_transform::{Compose, Geometry, Normalize, SampleRng, Scratch};

/// Runs `transforms` on a sample just read (`read`: lent from where it
/// lives, or filled into `sample`), drawing from `rng`. A lent sample whose
/// steps are all crops and flips stays where it is, the steps planned as a
/// geometry that collation reads through (each byte copied once, into the
/// batch); otherwise it is copied into `sample` and the steps run, a
/// trailing run of crops and flips deferred the same way.
pub fn transform_read<'a, 't>(
    transforms: &'t Compose,
    read: Read<'a>,
    rng: SampleRng,
    sample: &'a mut Sample,
    scratch: &mut Scratch,
) -> Result<(SampleView<'a>, Option<Geometry<'t>>), Error> {
    scratch.rng = rng.clone();
    if let Read::Lent(v) = read {
        if let Some(g) = transforms.plan(v.shape, scratch)? {
            return Ok((v, Some(g)));
        }
        sample.copy_from(v);
    }
    // The planning's draws are discarded: the steps draw again from the start.
    scratch.rng = rng;
    let g = transforms.apply_deferring(sample, scratch)?;
    Ok((sample.view(), g))
}

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
        return Err(Error::SizeDiffers {
            got: shape,
            expected,
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
