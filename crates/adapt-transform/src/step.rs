//! The step trait: what one step of a pipeline defines (applying itself,
//! deferring a crop or flip, decoding at a reduced scale as a first step,
//! its output shape). Running a list of steps, with the deferral and the
//! reduced decoding, is [`crate::Compose`]'s.

use crate::{Encoded, Error, Geometry, Sample, ScaledDecode, Scratch, Shape};
use std::fmt;

/// One step applied to a decoded sample.
pub trait Transform: Send + Sync + fmt::Debug {
    /// Applies the step to `sample` in place, using `scratch` as needed.
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error>;

    /// For crops and flips: this step composed onto `pending` (the crops
    /// and flips deferred so far, over a sample of `shape`), drawing from
    /// `scratch.rng` exactly as `apply` would, without touching pixels.
    /// `None` (the default) when the step must run on the pixels now; the
    /// caller then materialises `pending` first. A step that answers `None`
    /// has drawn nothing.
    fn defer<'t>(
        &'t self,
        _shape: Shape,
        _pending: Option<Geometry<'t>>,
        _scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        Ok(None)
    }

    /// As the first step of a pipeline over an encoded image: decodes it
    /// through `dec`, at a reduced scale when this step shrinks it by 2× or
    /// more, and applies the step, drawing as `apply` draws (from the full
    /// image's size). `false` (the default) when the step cannot use a
    /// reduced decode; it has then drawn and decoded nothing.
    fn decode_reduced(
        &self,
        _enc: &Encoded,
        _dec: &dyn ScaledDecode,
        _sample: &mut Sample,
        _scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        Ok(false)
    }

    /// The shape a sample of shape `input` has after this step. An input
    /// of height and width 0 means "size not known in advance" (an image
    /// folder of mixed sizes); a step that fixes the size (a crop, a resize
    /// to W×H) answers it, the others pass it on.
    fn output_shape(&self, input: Shape) -> Result<Shape, Error>;
}

impl<T: Transform + ?Sized> Transform for Box<T> {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        (**self).apply(sample, scratch)
    }
    fn defer<'t>(
        &'t self,
        shape: Shape,
        pending: Option<Geometry<'t>>,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        (**self).defer(shape, pending, scratch)
    }
    fn decode_reduced(
        &self,
        enc: &Encoded,
        dec: &dyn ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        (**self).decode_reduced(enc, dec, sample, scratch)
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        (**self).output_shape(input)
    }
}
