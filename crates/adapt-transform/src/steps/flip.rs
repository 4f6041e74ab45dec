//! torchvision's `RandomHorizontalFlip` / `RandomVerticalFlip`, deferred to
//! collation where a crop or nothing came before.

use crate::pixels::{flip_horizontal, flip_vertical};
use crate::{Error, Geometry, Sample, Scratch, Shape, Transform};

/// torchvision's `RandomHorizontalFlip(p)` (`vertical: false`) and
/// `RandomVerticalFlip(p)`, in place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomFlip {
    /// Flip top-bottom instead of left-right.
    pub vertical: bool,
    /// Probability of flipping.
    pub p: f64,
}

impl RandomFlip {
    /// A horizontal flip with probability `p` (in [0, 1]).
    pub fn horizontal(p: f64) -> Result<Self, Error> {
        Self::checked(false, p)
    }
    /// A vertical flip with probability `p` (in [0, 1]).
    pub fn vertical(p: f64) -> Result<Self, Error> {
        Self::checked(true, p)
    }
    fn checked(vertical: bool, p: f64) -> Result<Self, Error> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidParameter(format!(
                "flip probability {p} is not in [0, 1]"
            )));
        }
        Ok(Self { vertical, p })
    }
}

impl Transform for RandomFlip {
    fn defer<'t>(
        &'t self,
        shape: Shape,
        pending: Option<Geometry<'t>>,
        scratch: &mut Scratch,
    ) -> Result<Option<Geometry<'t>>, Error> {
        let mut g = pending.unwrap_or_else(|| Geometry::whole(shape));
        if scratch.rng.chance(self.p) {
            if self.vertical {
                g.vflip = !g.vflip;
            } else {
                g.hflip = !g.hflip;
            }
        }
        Ok(Some(g))
    }
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        if scratch.rng.chance(self.p) {
            if self.vertical {
                flip_vertical(sample);
            } else {
                flip_horizontal(sample);
            }
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        Ok(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SampleRng;

    #[test]
    fn flip_rate_is_p() {
        // 20,000 draws at p = 0.3: sd = sqrt(n p (1-p)) ≈ 65; allow 5 sd.
        let t = RandomFlip::horizontal(0.3).unwrap();
        let mut scratch = Scratch::default();
        let mut flips = 0;
        for key in 0..20_000 {
            let mut s = Sample::hwc(vec![1, 2], 1, 2, 1, 0).unwrap();
            scratch.rng = SampleRng::new(1, 0, key);
            t.apply(&mut s, &mut scratch).unwrap();
            flips += usize::from(s.pixels == [2, 1]);
        }
        assert!((flips as i64 - 6_000).abs() < 325, "{flips} flips");
        assert!(RandomFlip::horizontal(1.5).is_err());
    }
}
