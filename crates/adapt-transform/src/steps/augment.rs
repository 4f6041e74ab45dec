//! torchvision's automatic augmentation policies (`RandAugment`,
//! `TrivialAugmentWide`, `AutoAugment`) and `RandomErasing`, with
//! torchvision's operation lists, magnitude tables (float32, as
//! `torch.linspace` makes them) and draws, from the sample's own stream.

use super::ops::{Interpolation, Op, apply_op, rgb};
use crate::{Error, Sample, SampleRng, Scratch, Shape, Transform};

const RAND_OPS: &[Op] = Op::RAND_AUGMENT;

/// `torch.linspace(start, end, steps)[i]` in float32.
fn linspace(start: f32, end: f32, steps: u32, i: u32) -> f32 {
    if steps <= 1 {
        return start;
    }
    let step = (end - start) / (steps - 1) as f32;
    if i < steps / 2 {
        start + step * i as f32
    } else {
        end - step * (steps - i - 1) as f32
    }
}

/// Which magnitude table: RandAugment's and AutoAugment's, or
/// TrivialAugmentWide's wider one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Standard,
    Wide,
}

/// Bin `i` of `bins` of `op`'s magnitudes for an image of `w` × `h`, and
/// whether the op takes a random sign; `None` for ops without a magnitude.
fn level(op: Op, table: Table, bins: u32, i: u32, (w, h): (u32, u32)) -> Option<(f64, bool)> {
    let wide = table == Table::Wide;
    let lin = |hi: f32| Some((f64::from(linspace(0.0, hi, bins, i)), true));
    match op {
        Op::ShearX | Op::ShearY => lin(if wide { 0.99 } else { 0.3 }),
        Op::TranslateX if wide => lin(32.0),
        Op::TranslateY if wide => lin(32.0),
        Op::TranslateX => lin((150.0 / 331.0 * f64::from(w)) as f32),
        Op::TranslateY => lin((150.0 / 331.0 * f64::from(h)) as f32),
        Op::Rotate => lin(if wide { 135.0 } else { 30.0 }),
        Op::Brightness | Op::Color | Op::Contrast | Op::Sharpness => {
            lin(if wide { 0.99 } else { 0.9 })
        }
        Op::Posterize => {
            let div = (bins.saturating_sub(1)) as f32 / if wide { 6.0 } else { 4.0 };
            let bits = 8.0 - (i as f32 / div).round_ties_even();
            Some((f64::from(bits), false))
        }
        Op::Solarize => Some((f64::from(linspace(255.0, 0.0, bins, i)), false)),
        Op::Identity | Op::AutoContrast | Op::Equalize | Op::Invert => None,
    }
}

impl Op {
    /// Bin `bin` of `bins` of this op's magnitudes for an image of `width`
    /// × `height` (TrivialAugmentWide's ranges when `wide`, else
    /// RandAugment's and AutoAugment's), and whether the op takes a random
    /// sign; `None` for an op without a magnitude.
    pub fn level(
        self,
        wide: bool,
        bins: u32,
        bin: u32,
        width: u32,
        height: u32,
    ) -> Option<(f64, bool)> {
        let table = if wide { Table::Wide } else { Table::Standard };
        level(self, table, bins, bin, (width, height))
    }
}

/// Draws a sign for a signed magnitude: negative when a fair coin says so.
fn signed(m: f64, sign: bool, rng: &mut SampleRng, negate_on: u64) -> f64 {
    if sign && rng.below(2) == negate_on {
        -m
    } else {
        m
    }
}

fn check_bins(transform: &str, bins: u32, magnitude: Option<u32>) -> Result<(), Error> {
    if !(2..=1000).contains(&bins) || magnitude.is_some_and(|m| m >= bins) {
        return Err(Error::InvalidParameter(format!(
            "{transform}: num_magnitude_bins {bins} must be 2 to 1000{}",
            magnitude.map_or(String::new(), |m| format!(" and above magnitude {m}"))
        )));
    }
    Ok(())
}

fn rgb_shape(input: Shape, transform: &'static str) -> Result<Shape, Error> {
    match input.channels {
        3 => Ok(input),
        channels => Err(Error::Channels {
            transform,
            channels,
        }),
    }
}

/// torchvision's `RandAugment(num_ops, magnitude, num_magnitude_bins,
/// interpolation, fill)`: `num_ops` operations drawn uniformly from 14,
/// each at bin `magnitude` with a random sign where it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandAugment {
    /// Operations applied one after another.
    pub num_ops: u32,
    /// The bin of every operation's magnitude.
    pub magnitude: u32,
    /// Bins in each magnitude range.
    pub num_magnitude_bins: u32,
    /// Sampling of the geometric operations.
    pub interpolation: Interpolation,
    /// What the geometric operations uncover.
    pub fill: [u8; 3],
}

impl RandAugment {
    /// torchvision's defaults at `num_ops` and `magnitude` (31 bins, nearest, fill 0).
    pub fn new(num_ops: u32, magnitude: u32) -> Result<Self, Error> {
        Self {
            num_ops,
            magnitude,
            num_magnitude_bins: 31,
            interpolation: Interpolation::Nearest,
            fill: [0; 3],
        }
        .checked()
    }

    /// The same after checking the ranges.
    pub fn checked(self) -> Result<Self, Error> {
        check_bins(
            "rand_augment",
            self.num_magnitude_bins,
            Some(self.magnitude),
        )?;
        if self.num_ops > 16 {
            return Err(Error::InvalidParameter(format!(
                "rand_augment: num_ops {} (at most 16)",
                self.num_ops
            )));
        }
        Ok(self)
    }
}

impl Transform for RandAugment {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        rgb(sample, "rand_augment")?;
        for _ in 0..self.num_ops {
            let size = (sample.shape.width, sample.shape.height);
            let op = RAND_OPS[scratch.rng.below(RAND_OPS.len() as u64) as usize];
            let m = match level(
                op,
                Table::Standard,
                self.num_magnitude_bins,
                self.magnitude,
                size,
            ) {
                Some((m, sign)) => signed(m, sign, &mut scratch.rng, 1),
                None => 0.0,
            };
            apply_op(op, m, self.interpolation, self.fill, sample, scratch);
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        rgb_shape(input, "rand_augment")
    }
}

/// torchvision's `TrivialAugmentWide(num_magnitude_bins, interpolation,
/// fill)`: one operation drawn uniformly from 14 at a uniformly drawn bin
/// of its wide range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrivialAugmentWide {
    /// Bins in each magnitude range.
    pub num_magnitude_bins: u32,
    /// Sampling of the geometric operations.
    pub interpolation: Interpolation,
    /// What the geometric operations uncover.
    pub fill: [u8; 3],
}

impl TrivialAugmentWide {
    /// The same after checking the ranges.
    pub fn checked(self) -> Result<Self, Error> {
        check_bins("trivial_augment", self.num_magnitude_bins, None)?;
        Ok(self)
    }
}

impl Default for TrivialAugmentWide {
    fn default() -> Self {
        Self {
            num_magnitude_bins: 31,
            interpolation: Interpolation::Nearest,
            fill: [0; 3],
        }
    }
}

impl Transform for TrivialAugmentWide {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        rgb(sample, "trivial_augment")?;
        let size = (sample.shape.width, sample.shape.height);
        let rng = &mut scratch.rng;
        let op = RAND_OPS[rng.below(RAND_OPS.len() as u64) as usize];
        let bins = self.num_magnitude_bins;
        let m = match level(op, Table::Wide, bins, 0, size) {
            Some(_) => {
                let bin = rng.below(u64::from(bins)) as u32;
                let (m, sign) = level(op, Table::Wide, bins, bin, size).unwrap_or((0.0, false));
                signed(m, sign, rng, 1)
            }
            None => 0.0,
        };
        apply_op(op, m, self.interpolation, self.fill, sample, scratch);
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        rgb_shape(input, "trivial_augment")
    }
}

/// The policies AutoAugment learned, by the dataset they were learned on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoAugmentPolicy {
    /// ImageNet's 25 sub-policies.
    ImageNet,
    /// CIFAR-10's.
    Cifar10,
    /// SVHN's.
    Svhn,
}

/// One step of a sub-policy: the op, its probability, its bin of 10.
pub type PolicyStep = (Op, f64, Option<u32>);

impl AutoAugmentPolicy {
    /// The name in the recipe text.
    pub fn name(self) -> &'static str {
        match self {
            AutoAugmentPolicy::ImageNet => "imagenet",
            AutoAugmentPolicy::Cifar10 => "cifar10",
            AutoAugmentPolicy::Svhn => "svhn",
        }
    }

    /// The policy named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "imagenet" => Some(AutoAugmentPolicy::ImageNet),
            "cifar10" => Some(AutoAugmentPolicy::Cifar10),
            "svhn" => Some(AutoAugmentPolicy::Svhn),
            _ => None,
        }
    }

    /// The 25 sub-policies, as torchvision lists them: two steps of (op,
    /// probability, magnitude bin of 10).
    pub fn sub_policies(self) -> &'static [[PolicyStep; 2]; 25] {
        match self {
            AutoAugmentPolicy::ImageNet => &super::policies::IMAGENET,
            AutoAugmentPolicy::Cifar10 => &super::policies::CIFAR10,
            AutoAugmentPolicy::Svhn => &super::policies::SVHN,
        }
    }
}

/// torchvision's `AutoAugment(policy, interpolation, fill)`: one of the
/// policy's 25 sub-policies drawn uniformly, each of its two steps applied
/// with its probability at its magnitude bin of 10, with a random sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoAugment {
    /// The learned policy.
    pub policy: AutoAugmentPolicy,
    /// Sampling of the geometric operations.
    pub interpolation: Interpolation,
    /// What the geometric operations uncover.
    pub fill: [u8; 3],
}

impl Transform for AutoAugment {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        rgb(sample, "auto_augment")?;
        let subs = self.policy.sub_policies();
        let rng = &mut scratch.rng;
        let chosen = &subs[rng.below(subs.len() as u64) as usize];
        // torchvision draws the sub-policy, two probabilities and two signs
        // up front.
        let probs = [rng.uniform(), rng.uniform()];
        let negate = [rng.below(2) == 0, rng.below(2) == 0];
        for (i, &(op, p, bin)) in chosen.iter().enumerate() {
            if probs[i] > p {
                continue;
            }
            let size = (sample.shape.width, sample.shape.height);
            let m = match bin.and_then(|b| level(op, Table::Standard, 10, b, size)) {
                Some((m, true)) if negate[i] => -m,
                Some((m, _)) => m,
                None => 0.0,
            };
            apply_op(op, m, self.interpolation, self.fill, sample, scratch);
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        rgb_shape(input, "auto_augment")
    }
}

/// What [`RandomErasing`] writes into the erased box.
#[derive(Clone, Debug, PartialEq)]
pub enum EraseValue {
    /// One value for every channel, or one per channel.
    Constant(Vec<u8>),
    /// Per-pixel normal noise: torchvision's `value='random'` after
    /// `Normalize(mean, std)`, in pixel units (`mean × 255 + std × 255 × N(0, 1)`,
    /// rounded and clipped to 0–255). One mean and std per channel.
    Normal {
        /// The normalisation's mean, on the [0, 1] scale.
        mean: Vec<f32>,
        /// Its standard deviation.
        std: Vec<f32>,
    },
}

/// torchvision's `RandomErasing(p, scale, ratio, value)`: with probability
/// `p` a box of random area (a `scale` fraction) and aspect ratio
/// (log-uniform in `ratio`) is overwritten; after ten draws that do not
/// fit, nothing is.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomErasing {
    /// Probability of erasing.
    pub p: f64,
    /// Range of the box's area as a fraction of the image's.
    pub scale: (f64, f64),
    /// Range of the box's height / width.
    pub ratio: (f64, f64),
    /// What is written.
    pub value: EraseValue,
}

impl RandomErasing {
    /// The same after checking the ranges.
    pub fn checked(self) -> Result<Self, Error> {
        let ordered = |(a, b): (f64, f64)| a.is_finite() && b.is_finite() && a > 0.0 && a <= b;
        let value_ok = match &self.value {
            EraseValue::Constant(v) => !v.is_empty(),
            EraseValue::Normal { mean, std } => {
                !mean.is_empty() && mean.len() == std.len() && std.iter().all(|s| *s >= 0.0)
            }
        };
        if !(0.0..=1.0).contains(&self.p)
            || !ordered(self.scale)
            || self.scale.1 > 1.0
            || !ordered(self.ratio)
            || !value_ok
        {
            return Err(Error::InvalidParameter(format!(
                "random_erasing(p={}, scale={:?}, ratio={:?}, value={:?})",
                self.p, self.scale, self.ratio, self.value
            )));
        }
        Ok(self)
    }

    /// The box (top, left, height, width) for an image of `h × w`, drawn as
    /// torchvision's `get_params`; `None` after ten misses.
    fn region(&self, h: u32, w: u32, rng: &mut SampleRng) -> Option<(usize, usize, usize, usize)> {
        let area = f64::from(h) * f64::from(w);
        let (l0, l1) = (self.ratio.0.ln(), self.ratio.1.ln());
        for _ in 0..10 {
            let target = area * rng.uniform_in(self.scale.0, self.scale.1);
            let aspect = rng.uniform_in(l0, l1).exp();
            let eh = (target * aspect).sqrt().round_ties_even() as u64;
            let ew = (target / aspect).sqrt().round_ties_even() as u64;
            if !(eh < u64::from(h) && ew < u64::from(w)) {
                continue;
            }
            let top = rng.below(u64::from(h) - eh + 1);
            let left = rng.below(u64::from(w) - ew + 1);
            return Some((top as usize, left as usize, eh as usize, ew as usize));
        }
        None
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut SampleRng) -> f64 {
    let u1 = 1.0 - rng.uniform();
    let u2 = rng.uniform();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl Transform for RandomErasing {
    fn apply(&self, sample: &mut Sample, scratch: &mut Scratch) -> Result<(), Error> {
        let c = sample.shape.channels as usize;
        let per_channel = match &self.value {
            EraseValue::Constant(v) => v.len(),
            EraseValue::Normal { mean, .. } => mean.len(),
        };
        if per_channel != 1 && per_channel != c {
            return Err(Error::InvalidParameter(format!(
                "random_erasing: {per_channel} values for {c} channels"
            )));
        }
        let rng = &mut scratch.rng;
        if !rng.chance(self.p) {
            return Ok(());
        }
        let (h, w) = (sample.shape.height, sample.shape.width);
        let Some((top, left, eh, ew)) = self.region(h, w, rng) else {
            return Ok(());
        };
        sample.make_interleaved(&mut scratch.bytes);
        let w = w as usize;
        for y in top..top + eh {
            let row = &mut sample.pixels[c * (y * w + left)..c * (y * w + left + ew)];
            for px in row.chunks_exact_mut(c) {
                for (b, v) in px.iter_mut().enumerate() {
                    let k = if per_channel == 1 { 0 } else { b };
                    *v = match &self.value {
                        EraseValue::Constant(vals) => vals[k],
                        EraseValue::Normal { mean, std } => {
                            let z = normal(&mut scratch.rng);
                            let x = (f64::from(mean[k]) + f64::from(std[k]) * z) * 255.0;
                            x.round().clamp(0.0, 255.0) as u8
                        }
                    };
                }
            }
        }
        Ok(())
    }
    fn output_shape(&self, input: Shape) -> Result<Shape, Error> {
        Ok(input)
    }
}
