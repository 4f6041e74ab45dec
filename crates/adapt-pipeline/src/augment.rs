//! The automatic augmentation steps of the text form (`rand_augment`,
//! `trivial_augment`, `auto_augment`, `random_erasing`) and the
//! `interpolation=` argument: their spec types, text, parsers and builders.

use crate::PipelineError;
use crate::parse::{Args, Value};
use crate::spec::TransformSpec;
use adapt_transform::{
    AutoAugment, AutoAugmentPolicy, EraseValue, Interpolation, RandAugment, RandomErasing,
    ResizeFilter, Transform, TrivialAugmentWide,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// torchvision's `InterpolationMode` names a step accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterpolationName {
    /// Nearest neighbour.
    Nearest,
    /// Bilinear (the resizing steps' default).
    #[default]
    Bilinear,
    /// Bicubic.
    Bicubic,
}

impl InterpolationName {
    /// Whether this is bilinear (the resizing steps' default, left out of the text).
    pub fn is_bilinear(&self) -> bool {
        *self == InterpolationName::Bilinear
    }

    /// `,interpolation=NAME` unless bilinear.
    pub(crate) fn unless_bilinear(self) -> String {
        if self.is_bilinear() {
            String::new()
        } else {
            format!(",interpolation={}", self.mode().name())
        }
    }

    /// The resizer's filter.
    pub(crate) fn filter(self) -> ResizeFilter {
        match self {
            InterpolationName::Nearest => ResizeFilter::Nearest,
            InterpolationName::Bilinear => ResizeFilter::Bilinear,
            InterpolationName::Bicubic => ResizeFilter::Bicubic,
        }
    }

    /// The augmentations' sampling.
    pub(crate) fn mode(self) -> Interpolation {
        match self {
            InterpolationName::Nearest => Interpolation::Nearest,
            InterpolationName::Bilinear => Interpolation::Bilinear,
            InterpolationName::Bicubic => Interpolation::Bicubic,
        }
    }
}

/// Which automatic augmentation, with its own arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Policy {
    /// RandAugment.
    RandAugment {
        /// Operations per image.
        num_ops: u32,
        /// The magnitude bin.
        magnitude: u32,
        /// Bins per range.
        num_magnitude_bins: u32,
    },
    /// TrivialAugmentWide.
    TrivialAugment {
        /// Bins per range.
        num_magnitude_bins: u32,
    },
    /// AutoAugment with a learned policy (imagenet, cifar10 or svhn).
    AutoAugment {
        /// The policy's name.
        policy: String,
    },
}

/// What `random_erasing` writes, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EraseSpec {
    /// Pixel values: one, or one per channel.
    Constant(Vec<u8>),
    /// The normalize step's mean.
    Mean,
    /// Normal noise in the normalize step's space.
    Random,
}

impl fmt::Display for EraseSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EraseSpec::Constant(v) if v.len() == 1 => write!(f, "{}", v[0]),
            EraseSpec::Constant(v) => {
                let items: Vec<String> = v.iter().map(u8::to_string).collect();
                write!(f, "({})", items.join(","))
            }
            EraseSpec::Mean => f.write_str("mean"),
            EraseSpec::Random => f.write_str("random"),
        }
    }
}

impl EraseSpec {
    /// The value to write, `mean` and `random` from the normalize step of
    /// `steps`; the reason when there is none.
    pub(crate) fn resolve(&self, steps: &[TransformSpec]) -> Result<EraseValue, String> {
        let normalize = steps.iter().find_map(|s| match s {
            TransformSpec::Normalize { mean, std, .. } => Some((mean.clone(), std.clone())),
            _ => None,
        });
        match (self, normalize) {
            (EraseSpec::Constant(v), _) => Ok(EraseValue::Constant(v.clone())),
            (EraseSpec::Mean, Some((mean, _))) => Ok(EraseValue::Constant(
                mean.iter()
                    .map(|m| (m * 255.0).round().clamp(0.0, 255.0) as u8)
                    .collect(),
            )),
            (EraseSpec::Random, Some((mean, std))) => Ok(EraseValue::Normal { mean, std }),
            (_, None) => Err(format!(
                "value={self} takes its values from the normalize step, and there is none \
                 (add normalize(...) as the last step, or give pixel values: value=0 or value=(r,g,b))"
            )),
        }
    }
}

/// The text of an augmentation step.
pub(crate) fn write_policy(
    f: &mut fmt::Formatter<'_>,
    policy: &Policy,
    interpolation: InterpolationName,
    fill: &[u8],
) -> fmt::Result {
    match policy {
        Policy::RandAugment {
            num_ops,
            magnitude,
            num_magnitude_bins,
        } => write!(
            f,
            "rand_augment(num_ops={num_ops},magnitude={magnitude},num_magnitude_bins={num_magnitude_bins}"
        )?,
        Policy::TrivialAugment { num_magnitude_bins } => {
            write!(f, "trivial_augment(num_magnitude_bins={num_magnitude_bins}")?
        }
        Policy::AutoAugment { policy } => write!(f, "auto_augment(policy={policy}")?,
    }
    if interpolation != InterpolationName::Nearest {
        write!(f, ",interpolation={}", interpolation.mode().name())?;
    }
    match fill {
        [] => {}
        [v] if *v == 0 => {}
        [v] => write!(f, ",fill={v}")?,
        many => {
            let items: Vec<String> = many.iter().map(u8::to_string).collect();
            write!(f, ",fill=({})", items.join(","))?;
        }
    }
    f.write_str(")")
}

/// The fill as three channels: none is 0, one value is every channel's.
fn fill3(fill: &[u8]) -> Result<[u8; 3], adapt_dataset::Error> {
    match fill {
        [] => Ok([0; 3]),
        [v] => Ok([*v; 3]),
        [r, g, b] => Ok([*r, *g, *b]),
        other => Err(adapt_dataset::Error::InvalidParameter(format!(
            "fill takes 1 or 3 values, got {}",
            other.len()
        ))),
    }
}

/// The step an augmentation spec describes.
pub(crate) fn build_policy(
    policy: &Policy,
    interpolation: InterpolationName,
    fill: &[u8],
) -> Result<Box<dyn Transform>, adapt_dataset::Error> {
    let (interpolation, fill) = (interpolation.mode(), fill3(fill)?);
    Ok(match policy {
        Policy::RandAugment {
            num_ops,
            magnitude,
            num_magnitude_bins,
        } => Box::new(
            RandAugment {
                num_ops: *num_ops,
                magnitude: *magnitude,
                num_magnitude_bins: *num_magnitude_bins,
                interpolation,
                fill,
            }
            .checked()?,
        ),
        Policy::TrivialAugment { num_magnitude_bins } => Box::new(
            TrivialAugmentWide {
                num_magnitude_bins: *num_magnitude_bins,
                interpolation,
                fill,
            }
            .checked()?,
        ),
        Policy::AutoAugment { policy } => Box::new(AutoAugment {
            policy: AutoAugmentPolicy::from_name(policy).ok_or_else(|| {
                adapt_dataset::Error::InvalidParameter(format!(
                    "auto_augment policy {policy:?}: expected imagenet, cifar10 or svhn"
                ))
            })?,
            interpolation,
            fill,
        }),
    })
}

/// The `random_erasing` step.
pub(crate) fn erasing(
    p: f64,
    scale: (f64, f64),
    ratio: (f64, f64),
    value: EraseValue,
) -> Result<RandomErasing, adapt_dataset::Error> {
    RandomErasing {
        p,
        scale,
        ratio,
        value,
    }
    .checked()
}

/// An `interpolation=` argument at `pos`, `default` when absent.
pub(crate) fn interpolation_arg(
    args: &mut Args<'_>,
    pos: usize,
    default: InterpolationName,
) -> Result<InterpolationName, PipelineError> {
    match args.take("interpolation", pos) {
        None => Ok(default),
        Some(Value::Atom(a)) => match a.to_ascii_lowercase().as_str() {
            "nearest" => Ok(InterpolationName::Nearest),
            "bilinear" => Ok(InterpolationName::Bilinear),
            "bicubic" => Ok(InterpolationName::Bicubic),
            other => Err(args.err(format!(
                "interpolation {other:?}: expected nearest, bilinear or bicubic"
            ))),
        },
        Some(Value::Tuple(_)) => Err(args.err("interpolation is a name")),
    }
}

/// Pixel values (0–255): one number or a tuple.
fn bytes(args: &Args<'_>, v: Value<'_>, what: &str) -> Result<Vec<u8>, PipelineError> {
    let items = match v {
        Value::Atom(a) => vec![a],
        Value::Tuple(t) => t,
    };
    items
        .into_iter()
        .map(|a| args.number::<u8>(a, what))
        .collect()
}

/// A whole number argument at `pos`, `default` when absent.
fn count(args: &mut Args<'_>, name: &str, pos: usize, default: u32) -> Result<u32, PipelineError> {
    match args.take(name, pos) {
        None => Ok(default),
        Some(Value::Atom(a)) => args.number(a, name),
        Some(Value::Tuple(_)) => Err(args.err(format!("{name} must be one number"))),
    }
}

/// The `interpolation` and `fill` arguments every policy takes, from `pos`.
fn policy_step(
    args: &mut Args<'_>,
    policy: Policy,
    pos: usize,
) -> Result<TransformSpec, PipelineError> {
    let interpolation = interpolation_arg(args, pos, InterpolationName::Nearest)?;
    let fill = match args.take("fill", pos + 1) {
        None => Vec::new(),
        Some(v) => bytes(args, v, "fill")?,
    };
    args.done(pos + 2)?;
    let spec = TransformSpec::Augment {
        policy,
        interpolation,
        fill,
    };
    spec.build().map(|_| spec).map_err(|e| match e {
        PipelineError::Transform { reason, .. } => args.err(reason),
        other => other,
    })
}

/// `rand_augment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest, fill=0)`.
pub(crate) fn rand_augment(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let policy = Policy::RandAugment {
        num_ops: count(args, "num_ops", 0, 2)?,
        magnitude: count(args, "magnitude", 1, 9)?,
        num_magnitude_bins: count(args, "num_magnitude_bins", 2, 31)?,
    };
    policy_step(args, policy, 3)
}

/// `trivial_augment(num_magnitude_bins=31, interpolation=nearest, fill=0)`.
pub(crate) fn trivial_augment(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let policy = Policy::TrivialAugment {
        num_magnitude_bins: count(args, "num_magnitude_bins", 0, 31)?,
    };
    policy_step(args, policy, 1)
}

/// `auto_augment(policy=imagenet, interpolation=nearest, fill=0)`.
pub(crate) fn auto_augment(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let policy = match args.take("policy", 0) {
        None => "imagenet".to_owned(),
        Some(Value::Atom(a)) => {
            let name = a.to_ascii_lowercase();
            if AutoAugmentPolicy::from_name(&name).is_none() {
                return Err(args.err(format!("policy {a:?}: expected imagenet, cifar10 or svhn")));
            }
            name
        }
        Some(Value::Tuple(_)) => return Err(args.err("policy is a name")),
    };
    policy_step(args, Policy::AutoAugment { policy }, 1)
}

/// `random_erasing(p=0.5, scale=(0.02,0.33), ratio=(0.3,3.3), value=0)`.
pub(crate) fn random_erasing(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let p = match args.take("p", 0) {
        Some(v) => args.f64_of(v, "p")?,
        None => 0.5,
    };
    let scale = match args.take("scale", 1) {
        Some(v) => args.pair(v, "scale")?,
        None => (0.02, 0.33),
    };
    let ratio = match args.take("ratio", 2) {
        Some(v) => args.pair(v, "ratio")?,
        None => (0.3, 3.3),
    };
    let value = match args.take("value", 3) {
        None => EraseSpec::Constant(vec![0]),
        Some(Value::Atom(a)) if a.eq_ignore_ascii_case("mean") => EraseSpec::Mean,
        Some(Value::Atom(a)) if a.eq_ignore_ascii_case("random") => EraseSpec::Random,
        Some(v) => EraseSpec::Constant(bytes(args, v, "value")?),
    };
    args.done(4)?;
    let probe = match &value {
        EraseSpec::Constant(v) => EraseValue::Constant(v.clone()),
        _ => EraseValue::Constant(vec![0]),
    };
    erasing(p, scale, ratio, probe).map_err(|e| args.err(e.to_string()))?;
    Ok(TransformSpec::RandomErasing {
        p,
        scale,
        ratio,
        value,
    })
}

/// Refuses a `random_erasing(value=mean|random)` without a normalize step.
pub(crate) fn check_erasing(specs: &[TransformSpec]) -> Result<(), PipelineError> {
    for s in specs {
        if let TransformSpec::RandomErasing { value, .. } = s {
            value.resolve(specs).map_err(|reason| s.error(reason))?;
        }
    }
    Ok(())
}
