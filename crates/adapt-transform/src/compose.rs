//! Steps run in order, and the orchestration a pipeline needs beyond
//! `apply`: the crops and flips planned or deferred to collation as one
//! [`Geometry`], and an encoded image decoded at a reduced scale when the
//! first step shrinks it. Kept here, not in the step trait, so a step (or
//! a wrapper that forwards only `apply`) cannot lose either.

use crate::decode::{decode_exact, plain};
use crate::{Encoded, Error, Geometry, Sample, ScaledDecode, Scratch, Shape, Transform};
use adapt_dataset::stage::{self, Stage};

/// Steps applied in order: the transforms of a pipeline.
#[derive(Debug, Default)]
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Compose {
    /// No steps.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step.
    #[must_use]
    pub fn then(mut self, t: impl Transform + 'static) -> Self {
        self.0.push(Box::new(t));
        self
    }

    /// Whether there are no steps.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The steps as one geometry over a sample of `shape`, when every step
    /// is a crop or flip that composes; `None` otherwise, and the draws made
    /// so far are then to be discarded (re-seed, then
    /// [`apply_deferring`](Self::apply_deferring)).
    pub fn plan(&self, shape: Shape, scratch: &mut Scratch) -> Result<Option<Geometry<'_>>, Error> {
        let mut pending = None;
        for step in &self.0 {
            match step.defer(shape, pending, scratch)? {
                Some(g) => pending = Some(g),
                None => return Ok(None),
            }
        }
        Ok(pending)
    }

    /// Runs the steps on `sample`, deferring a trailing run of crops and
    /// flips (the geometry returned) for the collating step to read through
    /// ([`Geometry::write_chw`]); random draws happen in step order exactly
    /// as [`Transform::apply`] makes them, and materialising the geometry
    /// gives exactly what `apply` gives.
    pub fn apply_deferring(
        &self,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'_>>, Error> {
        run_deferring(&self.0, 0, sample, scratch)
    }

    /// [`apply_deferring`](Self::apply_deferring) on an encoded image: the
    /// first step decodes it at a reduced scale when it shrinks enough
    /// ([`Transform::decode_reduced`]); otherwise it is decoded in full
    /// ([`decode_exact`]) and every step runs.
    pub fn apply_encoded_deferring(
        &self,
        enc: &Encoded,
        dec: &dyn ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'_>>, Error> {
        // Decoded at a reduced scale, the first step is done with the decode.
        let (rest, first_index) = match self.0.split_first() {
            Some((first, rest))
                if plain(enc) && first.decode_reduced(enc, dec, sample, scratch)? =>
            {
                sample.label = enc.label;
                (rest, 1)
            }
            _ => {
                decode_exact(enc, dec, sample, scratch)?;
                (&self.0[..], 0)
            }
        };
        run_deferring(rest, first_index, sample, scratch)
    }
}

/// Runs `steps` (the pipeline's from index `first_index` on),
/// materialising the pending geometry before a step that works on the
/// pixels, and returns what is still pending at the end. Each step's time
/// (a pending crop's materialising included) goes to its stage.
fn run_deferring<'t>(
    steps: &'t [Box<dyn Transform>],
    first_index: usize,
    sample: &mut Sample,
    scratch: &mut Scratch,
) -> Result<Option<Geometry<'t>>, Error> {
    let mut pending: Option<Geometry<'t>> = None;
    for (i, step) in steps.iter().enumerate() {
        stage::mark(Stage::Step(first_index + i));
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

/// A `Compose` is a step too (nested in another): it defers when all its
/// steps do, and decodes reduced when its first step does.
impl Transform for Compose {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        self.0.iter().try_for_each(|t| t.apply(sample, scratch))
    }
    fn defer<'t>(
        &'t self,
        shape: Shape,
        mut pending: Option<Geometry<'t>>,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        // A step that answers `None` has drawn nothing: undo the draws of
        // the steps before it.
        let rng = scratch.rng.clone();
        for step in &self.0 {
            match step.defer(shape, pending, scratch)? {
                Some(g) => pending = Some(g),
                None => {
                    scratch.rng = rng;
                    return Ok(None);
                }
            }
        }
        Ok(pending.or_else(|| Some(Geometry::whole(shape))))
    }
    fn decode_reduced(
        &self,
        enc: &Encoded,
        dec: &dyn ScaledDecode,
        sample: &mut Sample,
        scratch: &mut Scratch,
    ) -> Result<bool, Error> {
        let Some((first, rest)) = self.0.split_first() else {
            return Ok(false);
        };
        if !first.decode_reduced(enc, dec, sample, scratch)? {
            return Ok(false);
        }
        rest.iter().try_for_each(|t| t.apply(sample, scratch))?;
        Ok(true)
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        self.0.iter().try_fold(input, |s, t| t.output_shape(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ramp_hwc;
    use crate::{Crop, CropBox, RandomCrop, RandomFlip, Resize, SampleRng};

    #[test]
    fn compose_runs_in_order() {
        let t = Compose::new()
            .then(Crop(CropBox::new(0, 0, 4, 4)))
            .then(Resize::new(2, 2).unwrap());
        assert_eq!(
            t.output_shape(Shape::new(6, 6, 3)).unwrap(),
            Shape::new(2, 2, 3)
        );
        let mut s = ramp_hwc(6, 6, 3);
        t.apply(&mut s, &mut Scratch::default()).unwrap();
        assert_eq!(s.shape, Shape::new(2, 2, 3));
    }

    #[test]
    fn a_nested_compose_defers_as_its_steps_and_undoes_draws_when_it_cannot() {
        let crops = || {
            let mut c = RandomCrop::new(4, 4).unwrap();
            c.padding = [2; 4];
            Compose::new()
                .then(c)
                .then(RandomFlip::horizontal(0.5).unwrap())
        };
        let flat = crops();
        let nested = Compose::new().then(crops());
        for key in 0..20 {
            let mut a = Scratch::with_rng(SampleRng::new(3, 1, key));
            let mut b = Scratch::with_rng(SampleRng::new(3, 1, key));
            let s = Shape::new(6, 6, 3);
            assert_eq!(
                flat.plan(s, &mut a).unwrap(),
                nested.plan(s, &mut b).unwrap()
            );
        }
        // A resize cannot defer: the nested pipeline answers `None` with the
        // random stream where it was, so applying afterwards draws the same.
        let mixed = Compose::new()
            .then(crops())
            .then(Resize::new(2, 2).unwrap());
        let nested = Compose::new().then(mixed);
        let mut scratch = Scratch::with_rng(SampleRng::new(3, 1, 7));
        let before = scratch.rng.clone().below(1 << 30);
        assert!(
            nested.0[0]
                .defer(Shape::new(6, 6, 3), None, &mut scratch)
                .unwrap()
                .is_none()
        );
        assert_eq!(scratch.rng.clone().below(1 << 30), before);
    }
}
