//! Colour steps: `ToRgb` (PIL's `convert('RGB')`) and torchvision's
//! `ColorJitter` (brightness, contrast, saturation, hue, in random order).

use super::ops;
use crate::{Error, Sample, Scratch, Shape, Transform};

/// Converts to 3-channel RGB as PIL's `convert('RGB')` does: RGBA drops its
/// alpha (no blending), grey is replicated, grey+alpha drops alpha then
/// replicates; RGB passes through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToRgb;

impl ToRgb {
    /// Converts an interleaved pixel buffer of `channels` channels to RGB in
    /// place. Readers call this directly on a freshly decoded buffer.
    pub fn convert_in_place(pixels: &mut Vec<u8>, channels: u32) -> Result<(), Error> {
        let n = match channels {
            3 => return Ok(()),
            1..=4 => pixels.len() / channels as usize,
            _ => {
                return Err(Error::Channels {
                    transform: "ToRgb",
                    channels,
                });
            }
        };
        match channels {
            4 => {
                // Destination index 3i never passes source index 4i.
                for i in 0..n {
                    pixels.copy_within(4 * i..4 * i + 3, 3 * i);
                }
                pixels.truncate(3 * n);
            }
            2 => {
                for i in 0..n {
                    pixels[i] = pixels[2 * i];
                }
                expand_grey(pixels, n);
            }
            _ => expand_grey(pixels, n),
        }
        Ok(())
    }
}

/// Replicates the first `n` grey bytes into `3n` RGB bytes, back to front so
/// that the in-place expansion never reads a byte it already overwrote.
fn expand_grey(pixels: &mut Vec<u8>, n: usize) {
    pixels.resize(3 * n, 0);
    for i in (0..n).rev() {
        let v = pixels[i];
        pixels[3 * i..3 * i + 3].fill(v);
    }
}

impl Transform for ToRgb {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        sample.make_interleaved(&mut scratch.bytes);
        Self::convert_in_place(&mut sample.pixels, sample.shape.channels)?;
        sample.shape.channels = 3;
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        match input.channels {
            1..=4 => Ok(Shape::new(input.height, input.width, 3)),
            channels => Err(Error::Channels {
                transform: "ToRgb",
                channels,
            }),
        }
    }
}

/// torchvision's `ColorJitter(brightness, contrast, saturation, hue)` on a
/// PIL image: each factor uniform in its range, the four steps in a random
/// order, each as PIL computes it (the `ops` module: truncating blends, grey
/// as PIL's `L`, contrast around the rounded mean grey, hue through PIL's
/// HSV).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColorJitter {
    /// Range of the brightness factor, or none.
    pub brightness: Option<(f32, f32)>,
    /// Range of the contrast factor, or none.
    pub contrast: Option<(f32, f32)>,
    /// Range of the saturation factor, or none.
    pub saturation: Option<(f32, f32)>,
    /// Range of the hue shift (within [−0.5, 0.5]), or none.
    pub hue: Option<(f32, f32)>,
}

impl ColorJitter {
    /// torchvision's form: a number `b` means the range [max(0, 1 − b), 1 + b].
    pub fn new(brightness: f32, contrast: f32, saturation: f32) -> Result<Self, Error> {
        let range = |name: &str, v: f32| {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::InvalidParameter(format!(
                    "color_jitter {name} {v} must be a non-negative number"
                )));
            }
            Ok((v > 0.0).then(|| ((1.0 - v).max(0.0), 1.0 + v)))
        };
        Ok(Self {
            brightness: range("brightness", brightness)?,
            contrast: range("contrast", contrast)?,
            saturation: range("saturation", saturation)?,
            hue: None,
        })
    }

    /// The same with a hue shift drawn from [−`hue`, `hue`] (0 to 0.5).
    pub fn with_hue(mut self, hue: f32) -> Result<Self, Error> {
        if !(0.0..=0.5).contains(&hue) {
            return Err(Error::InvalidParameter(format!(
                "color_jitter hue {hue} must be in [0, 0.5]"
            )));
        }
        self.hue = (hue > 0.0).then_some((-hue, hue));
        Ok(self)
    }
}

impl Transform for ColorJitter {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        ops::rgb(sample, "color_jitter")?;
        let rng = &mut scratch.rng;
        let mut order = [0usize, 1, 2, 3];
        for i in (1..4).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut draw = |r: Option<(f32, f32)>| {
            r.map(|(a, b)| rng.uniform_in(f64::from(a), f64::from(b)) as f32)
        };
        let factors = [
            draw(self.brightness),
            draw(self.contrast),
            draw(self.saturation),
            draw(self.hue),
        ];
        if factors.iter().all(Option::is_none) {
            return Ok(());
        }
        sample.make_interleaved(&mut scratch.bytes);
        let px = &mut sample.pixels;
        for op in order {
            let Some(f) = factors[op] else { continue };
            match op {
                0 => ops::brightness(px, f),
                1 => ops::contrast(px, f),
                2 => ops::saturation(px, f),
                _ => ops::hue(px, f),
            }
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        if input.channels != 3 {
            return Err(Error::Channels {
                transform: "color_jitter",
                channels: input.channels,
            });
        }
        Ok(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;
    use crate::testing::ramp;

    #[test]
    fn to_rgb_drops_alpha_and_replicates_grey() {
        let mut rgba = vec![1, 2, 3, 200, 4, 5, 6, 0];
        ToRgb::convert_in_place(&mut rgba, 4).unwrap();
        assert_eq!(rgba, vec![1, 2, 3, 4, 5, 6]);
        let mut grey = vec![7, 9];
        ToRgb::convert_in_place(&mut grey, 1).unwrap();
        assert_eq!(grey, vec![7, 7, 7, 9, 9, 9]);
        let mut la = vec![7, 1, 9, 2];
        ToRgb::convert_in_place(&mut la, 2).unwrap();
        assert_eq!(la, vec![7, 7, 7, 9, 9, 9]);
        assert!(ToRgb::convert_in_place(&mut vec![0; 5], 5).is_err());
    }

    #[test]
    fn color_jitter_factors_of_one_change_nothing_and_brightness_scales() {
        let base = ramp(4, 4, 3, Layout::Interleaved);
        let mut s = base.clone();
        let mut scratch = Scratch::default();
        ColorJitter {
            brightness: Some((1.0, 1.0)),
            contrast: Some((1.0, 1.0)),
            saturation: Some((1.0, 1.0)),
            hue: Some((0.0, 0.0)),
        }
        .apply(&mut s, &mut scratch)
        .unwrap();
        assert_eq!(s.pixels, base.pixels);
        let mut s = base.clone();
        ColorJitter {
            brightness: Some((0.5, 0.5)),
            contrast: None,
            saturation: None,
            hue: None,
        }
        .apply(&mut s, &mut scratch)
        .unwrap();
        for (a, b) in s.pixels.iter().zip(&base.pixels) {
            assert_eq!(*a, *b / 2, "PIL's blend truncates");
        }
        let mut s = base.clone();
        ColorJitter {
            brightness: None,
            contrast: None,
            saturation: Some((0.0, 0.0)),
            hue: None,
        }
        .apply(&mut s, &mut scratch)
        .unwrap();
        assert!(
            s.pixels.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]),
            "saturation 0 is grey"
        );
        assert!(ColorJitter::new(-1.0, 0.0, 0.0).is_err());
    }
}
