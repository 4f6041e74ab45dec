//! The transform steps of a pipeline, their short text form and its parser.

use crate::PipelineError;
use crate::augment::{EraseSpec, InterpolationName, Policy};
use adapt_transform::{
    CenterCrop, ColorJitter, Normalize, PaddingMode, RandomCrop, RandomFlip, RandomResizedCrop,
    Resize, ResizeShorter, Transform,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// An output size: a square side or width × height.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    /// Columns.
    pub width: u32,
    /// Rows.
    pub height: u32,
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.width == self.height {
            write!(f, "{}", self.width)
        } else {
            write!(f, "{}x{}", self.width, self.height)
        }
    }
}

/// One step of a pipeline, with torchvision's names and defaults. The
/// text form (`random_crop(32,padding=4)`) round-trips through
/// [`parse_transforms`](crate::parse_transforms) and `Display`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TransformSpec {
    /// `random_crop(size, padding=0, fill=0, padding_mode=constant)`;
    /// padding is one number, (left/right, top/bottom) or (left, top, right, bottom).
    RandomCrop {
        /// Output size.
        size: Size,
        /// Padding (left, top, right, bottom).
        padding: [u32; 4],
        /// Constant fill, one value or one per channel.
        fill: Vec<u8>,
        /// constant, edge, reflect or symmetric.
        padding_mode: String,
    },
    /// `random_horizontal_flip(p=0.5)`, alias `hflip`.
    RandomHorizontalFlip {
        /// Probability.
        p: f64,
    },
    /// `random_vertical_flip(p=0.5)`, alias `vflip`.
    RandomVerticalFlip {
        /// Probability.
        p: f64,
    },
    /// `random_resized_crop(size, scale=(0.08,1.0), ratio=(0.75,1.3333), interpolation=bilinear)`.
    RandomResizedCrop {
        /// Output size.
        size: Size,
        /// Area fraction range.
        scale: (f64, f64),
        /// Aspect ratio range.
        ratio: (f64, f64),
        /// Resampling.
        #[serde(default, skip_serializing_if = "InterpolationName::is_bilinear")]
        interpolation: InterpolationName,
    },
    /// `center_crop(size)`.
    CenterCrop {
        /// Output size.
        size: Size,
    },
    /// `resize(N)`: shorter side to N; `resize(WxH)`: exactly W × H;
    /// `interpolation=bilinear` by default.
    Resize {
        /// The shorter side, or `None` for a fixed size.
        shorter: Option<u32>,
        /// The fixed size, when `shorter` is `None`.
        size: Option<Size>,
        /// Resampling.
        #[serde(default, skip_serializing_if = "InterpolationName::is_bilinear")]
        interpolation: InterpolationName,
    },
    /// `color_jitter(brightness=0, contrast=0, saturation=0, hue=0)`.
    ColorJitter {
        /// Brightness.
        brightness: f32,
        /// Contrast.
        contrast: f32,
        /// Saturation.
        saturation: f32,
        /// Hue, at most 0.5.
        #[serde(default, skip_serializing_if = "is_zero")]
        hue: f32,
    },
    /// `rand_augment(num_ops=2, magnitude=9, num_magnitude_bins=31,
    /// interpolation=nearest, fill=0)`, `trivial_augment(num_magnitude_bins=31,
    /// interpolation=nearest, fill=0)` or `auto_augment(policy=imagenet,
    /// interpolation=nearest, fill=0)`: torchvision's policies.
    Augment {
        /// The policy and its own arguments.
        policy: Policy,
        /// Sampling of the geometric operations.
        #[serde(default)]
        interpolation: InterpolationName,
        /// What the geometric operations uncover, one value or one per channel.
        #[serde(default)]
        fill: Vec<u8>,
    },
    /// `random_erasing(p=0.5, scale=(0.02,0.33), ratio=(0.3,3.3), value=0)`;
    /// value a pixel value (0–255, or one per channel), `mean` (the
    /// normalize step's mean: torchvision's `value=0` after `Normalize`) or
    /// `random` (normal noise in the normalized space: `value='random'`).
    RandomErasing {
        /// Probability.
        p: f64,
        /// Area fraction range.
        scale: (f64, f64),
        /// Aspect ratio range.
        ratio: (f64, f64),
        /// What is written.
        value: EraseSpec,
    },
    /// `normalize(mean, std)` or `normalize(cifar10|imagenet)`: the last
    /// step; f32 output applies it, u8 output leaves it to the device.
    Normalize {
        /// The preset's name, when one was used.
        preset: Option<String>,
        /// Per-channel mean on the [0, 1] scale.
        mean: Vec<f32>,
        /// Per-channel standard deviation.
        std: Vec<f32>,
    },
}

fn is_zero(v: &f32) -> bool {
    *v == 0.0
}

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The text of `random_crop`, its arguments at their defaults left out.
fn write_random_crop(
    f: &mut fmt::Formatter<'_>,
    size: Size,
    padding: &[u32; 4],
    fill: &[u8],
    padding_mode: &str,
) -> fmt::Result {
    write!(f, "random_crop({size}")?;
    if padding.iter().any(|&p| p != 0) {
        if padding.iter().all(|&p| p == padding[0]) {
            write!(f, ",padding={}", padding[0])?;
        } else {
            write!(f, ",padding=({})", join(padding))?;
        }
    }
    if fill.iter().any(|&v| v != 0) {
        match fill {
            [v] => write!(f, ",fill={v}")?,
            many => write!(f, ",fill=({})", join(many))?,
        }
    }
    if padding_mode != "constant" {
        write!(f, ",padding_mode={padding_mode}")?;
    }
    f.write_str(")")
}

impl fmt::Display for TransformSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransformSpec::RandomCrop {
                size,
                padding,
                fill,
                padding_mode,
            } => write_random_crop(f, *size, padding, fill, padding_mode),
            TransformSpec::RandomHorizontalFlip { p } => write!(f, "random_horizontal_flip(p={p})"),
            TransformSpec::RandomVerticalFlip { p } => write!(f, "random_vertical_flip(p={p})"),
            TransformSpec::RandomResizedCrop {
                size,
                scale,
                ratio,
                interpolation,
            } => write!(
                f,
                "random_resized_crop({size},scale=({},{}),ratio=({},{}){})",
                scale.0,
                scale.1,
                ratio.0,
                ratio.1,
                interpolation.unless_bilinear()
            ),
            TransformSpec::CenterCrop { size } => write!(f, "center_crop({size})"),
            TransformSpec::Resize {
                shorter,
                size,
                interpolation,
            } => {
                let i = interpolation.unless_bilinear();
                match (shorter, size) {
                    (Some(n), _) => write!(f, "resize({n}{i})"),
                    (None, Some(s)) => write!(f, "resize({}x{}{i})", s.width, s.height),
                    (None, None) => f.write_str("resize()"),
                }
            }
            TransformSpec::ColorJitter {
                brightness,
                contrast,
                saturation,
                hue,
            } => {
                write!(
                    f,
                    "color_jitter(brightness={brightness},contrast={contrast},saturation={saturation}"
                )?;
                if *hue != 0.0 {
                    write!(f, ",hue={hue}")?;
                }
                f.write_str(")")
            }
            TransformSpec::Augment {
                policy,
                interpolation,
                fill,
            } => crate::augment::write_policy(f, policy, *interpolation, fill),
            TransformSpec::RandomErasing {
                p,
                scale,
                ratio,
                value,
            } => write!(
                f,
                "random_erasing(p={p},scale=({},{}),ratio=({},{}),value={value})",
                scale.0, scale.1, ratio.0, ratio.1
            ),
            TransformSpec::Normalize { preset, mean, std } => match preset {
                Some(p) => write!(f, "normalize({p})"),
                None => write!(f, "normalize(mean=({}),std=({}))", join(mean), join(std)),
            },
        }
    }
}

impl TransformSpec {
    /// Whether this step draws random numbers.
    pub fn is_random(&self) -> bool {
        matches!(
            self,
            TransformSpec::RandomCrop { .. }
                | TransformSpec::RandomHorizontalFlip { .. }
                | TransformSpec::RandomVerticalFlip { .. }
                | TransformSpec::RandomResizedCrop { .. }
                | TransformSpec::ColorJitter { .. }
                | TransformSpec::Augment { .. }
                | TransformSpec::RandomErasing { .. }
        )
    }

    /// A normaliser for a normalize step; `None` for other steps.
    pub fn normalizer(&self) -> Option<Result<Normalize, PipelineError>> {
        match self {
            TransformSpec::Normalize { mean, std, .. } => {
                Some(Normalize::new(mean, std).map_err(|e| self.error(e.to_string())))
            }
            _ => None,
        }
    }

    pub(crate) fn error(&self, reason: impl Into<String>) -> PipelineError {
        PipelineError::Transform {
            token: self.to_string(),
            reason: reason.into(),
        }
    }

    /// The u8 step this spec describes; `None` for normalize (a collation
    /// step). A `random_erasing(value=mean|random)` needs the pipeline's
    /// normalize step: build it with [`build_in`](Self::build_in).
    pub fn build(&self) -> Result<Option<Box<dyn Transform>>, PipelineError> {
        self.build_in(&[])
    }

    /// [`build`](Self::build) as a step of `steps` (whose normalize step
    /// gives `random_erasing`'s `mean` and `random` their values).
    pub fn build_in(
        &self,
        steps: &[TransformSpec],
    ) -> Result<Option<Box<dyn Transform>>, PipelineError> {
        let e = |err: adapt_dataset::Error| self.error(err.to_string());
        let t: Box<dyn Transform> = match self {
            TransformSpec::RandomCrop {
                size,
                padding,
                fill,
                padding_mode,
            } => {
                let mut c = RandomCrop::new(size.height, size.width).map_err(e)?;
                (c.padding, c.fill) = (*padding, fill.clone());
                c.mode = padding_mode_of(padding_mode).map_err(|r| self.error(r))?;
                Box::new(c)
            }
            TransformSpec::RandomHorizontalFlip { p } => {
                Box::new(RandomFlip::horizontal(*p).map_err(e)?)
            }
            TransformSpec::RandomVerticalFlip { p } => {
                Box::new(RandomFlip::vertical(*p).map_err(e)?)
            }
            TransformSpec::RandomResizedCrop {
                size,
                scale,
                ratio,
                interpolation,
            } => {
                let mut c =
                    RandomResizedCrop::with(size.height, size.width, *scale, *ratio).map_err(e)?;
                c.filter = interpolation.filter();
                Box::new(c)
            }
            TransformSpec::CenterCrop { size } if size.width == 0 || size.height == 0 => {
                return Err(self.error("size must be positive"));
            }
            TransformSpec::CenterCrop { size } => Box::new(CenterCrop {
                height: size.height,
                width: size.width,
            }),
            TransformSpec::Resize {
                shorter,
                size,
                interpolation,
            } => self.resize(*shorter, *size, interpolation.filter())?,
            TransformSpec::ColorJitter {
                brightness,
                contrast,
                saturation,
                hue,
            } => Box::new(
                ColorJitter::new(*brightness, *contrast, *saturation)
                    .and_then(|c| c.with_hue(*hue))
                    .map_err(e)?,
            ),
            TransformSpec::Augment {
                policy,
                interpolation,
                fill,
            } => crate::augment::build_policy(policy, *interpolation, fill).map_err(e)?,
            TransformSpec::RandomErasing {
                p,
                scale,
                ratio,
                value,
            } => {
                let value = value.resolve(steps).map_err(|reason| self.error(reason))?;
                Box::new(crate::augment::erasing(*p, *scale, *ratio, value).map_err(e)?)
            }
            TransformSpec::Normalize { .. } => return Ok(None),
        };
        Ok(Some(t))
    }

    /// A `resize` step: the shorter side to `shorter`, or exactly `size`.
    fn resize(
        &self,
        shorter: Option<u32>,
        size: Option<Size>,
        filter: adapt_transform::ResizeFilter,
    ) -> Result<Box<dyn Transform>, PipelineError> {
        Ok(match (shorter, size) {
            (Some(0), _) => return Err(self.error("size must be positive")),
            (Some(n), _) => Box::new(ResizeShorter { size: n, filter }),
            (None, Some(s)) => Box::new(
                Resize::new(s.width, s.height)
                    .map_err(|err| self.error(err.to_string()))?
                    .with_filter(filter),
            ),
            (None, None) => return Err(self.error("needs a size")),
        })
    }
}

pub(crate) fn padding_mode_of(s: &str) -> Result<PaddingMode, String> {
    match s {
        "constant" => Ok(PaddingMode::Constant),
        "edge" => Ok(PaddingMode::Edge),
        "reflect" => Ok(PaddingMode::Reflect),
        "symmetric" => Ok(PaddingMode::Symmetric),
        other => Err(format!(
            "padding_mode {other:?}: expected constant, edge, reflect or symmetric"
        )),
    }
}

/// Refuses a normalize step anywhere but last.
pub(crate) fn check_order(specs: &[TransformSpec]) -> Result<(), PipelineError> {
    let last = specs.len().saturating_sub(1);
    match specs
        .iter()
        .enumerate()
        .find(|(i, s)| matches!(s, TransformSpec::Normalize { .. }) && *i != last)
    {
        Some((_, s)) => {
            Err(s.error("normalize turns pixels into f32 values and must be the last step"))
        }
        None => Ok(()),
    }
}

/// The canonical text form of `specs` (what [`parse_transforms`](crate::parse_transforms) reads back).
pub fn transforms_text(specs: &[TransformSpec]) -> String {
    specs
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
