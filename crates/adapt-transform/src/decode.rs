//! Decoding an encoded sample at full size with its format's fixed steps
//! (shape check, crop), as its reader would; reduced-scale decoding is the
//! first step's ([`crate::Transform::decode_reduced`]), chosen by
//! [`crate::Compose`]. The reduced path is a different resampling from the
//! full decode (the DCT scaling is a box-like filter), so pipelines keep the
//! exact path on request.

use crate::{Crop, Encoded, Error, Sample, ScaledDecode, Scratch, Transform};

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
