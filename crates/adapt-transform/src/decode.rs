//! Decoding only what the pipeline keeps: a transform that shrinks an image
//! (a resize of the shorter side, a random resized crop) can ask the JPEG
//! decoder for a reduced DCT scale (1/2, 1/4, 1/8), which skips most of the
//! inverse transform and colour conversion, then resample the smaller image.
//! The result is a different resampling from the full decode (the DCT
//! scaling is a box-like filter), so pipelines keep the exact path on
//! request.

use crate::{Crop, Encoded, Error, Sample, ScaledDecode, Scratch, Shape, Transform};

/// Decodes an encoded sample at full size and applies its format's fixed
/// steps (shape check, crop), as its reader would.
pub fn decode_exact(
    enc: &Encoded,
    dec: &dyn ScaledDecode,
    out: &mut Sample,
    scratch: &mut Scratch,
) -> Result<(), Error> {
    dec.decode(&enc.bytes, None, out)?;
    if let Some(expected) = enc.steps.expect
        && out.shape != expected
    {
        return Err(Error::ShapeMismatch {
            shape: expected,
            expected: expected.len(),
            got: out.pixels.len(),
        });
    }
    if let Some(b) = enc.steps.crop {
        Crop(b).apply(out, scratch)?;
    }
    out.label = enc.label;
    Ok(())
}

/// Whether reduced decoding may apply: a sample without fixed steps (an
/// image folder's file, a pack of one). Others take the exact path.
pub(crate) fn plain(enc: &Encoded) -> bool {
    enc.steps.crop.is_none() && enc.steps.expect.is_none()
}

/// Runs `steps` on an encoded sample: the first step decodes at a reduced
/// scale when it shrinks enough ([`Transform::decode_reduced`]), otherwise
/// the image is decoded in full; the rest run as
/// [`crate::apply_deferring`] runs them.
pub fn apply_encoded_deferring<'t>(
    steps: &'t [Box<dyn Transform>],
    enc: &Encoded,
    dec: &dyn ScaledDecode,
    sample: &mut Sample,
    scratch: &mut Scratch,
) -> Result<Option<crate::Geometry<'t>>, Error> {
    let rest = match steps.split_first() {
        Some((first, rest)) if plain(enc) && first.decode_reduced(enc, dec, sample, scratch)? => {
            sample.label = enc.label;
            rest
        }
        _ => {
            decode_exact(enc, dec, sample, scratch)?;
            steps
        }
    };
    crate::geometry::apply_deferring(rest, sample, scratch)
}

/// The decoded size's ratio to the full size, per axis (1 at full scale).
pub(crate) fn scale_of(decoded: Shape, full: (u32, u32)) -> (f64, f64) {
    (
        f64::from(decoded.width) / f64::from(full.0.max(1)),
        f64::from(decoded.height) / f64::from(full.1.max(1)),
    )
}
