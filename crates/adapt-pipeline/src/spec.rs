//! The transform steps of a pipeline, their short text form and its parser.

use crate::PipelineError;
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
    /// `random_resized_crop(size, scale=(0.08,1.0), ratio=(0.75,1.3333))`.
    RandomResizedCrop {
        /// Output size.
        size: Size,
        /// Area fraction range.
        scale: (f64, f64),
        /// Aspect ratio range.
        ratio: (f64, f64),
    },
    /// `center_crop(size)`.
    CenterCrop {
        /// Output size.
        size: Size,
    },
    /// `resize(N)`: shorter side to N; `resize(WxH)`: exactly W × H.
    Resize {
        /// The shorter side, or `None` for a fixed size.
        shorter: Option<u32>,
        /// The fixed size, when `shorter` is `None`.
        size: Option<Size>,
    },
    /// `color_jitter(brightness=0, contrast=0, saturation=0)`.
    ColorJitter {
        /// Brightness.
        brightness: f32,
        /// Contrast.
        contrast: f32,
        /// Saturation.
        saturation: f32,
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

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for TransformSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransformSpec::RandomCrop {
                size,
                padding,
                fill,
                padding_mode,
            } => {
                write!(f, "random_crop({size}")?;
                if padding.iter().any(|&p| p != 0) {
                    if padding.iter().all(|&p| p == padding[0]) {
                        write!(f, ",padding={}", padding[0])?;
                    } else {
                        write!(f, ",padding=({})", join(padding))?;
                    }
                }
                if fill.iter().any(|&v| v != 0) {
                    match fill.as_slice() {
                        [v] => write!(f, ",fill={v}")?,
                        many => write!(f, ",fill=({})", join(many))?,
                    }
                }
                if padding_mode != "constant" {
                    write!(f, ",padding_mode={padding_mode}")?;
                }
                f.write_str(")")
            }
            TransformSpec::RandomHorizontalFlip { p } => write!(f, "random_horizontal_flip(p={p})"),
            TransformSpec::RandomVerticalFlip { p } => write!(f, "random_vertical_flip(p={p})"),
            TransformSpec::RandomResizedCrop { size, scale, ratio } => write!(
                f,
                "random_resized_crop({size},scale=({},{}),ratio=({},{}))",
                scale.0, scale.1, ratio.0, ratio.1
            ),
            TransformSpec::CenterCrop { size } => write!(f, "center_crop({size})"),
            TransformSpec::Resize { shorter, size } => match (shorter, size) {
                (Some(n), _) => write!(f, "resize({n})"),
                (None, Some(s)) => write!(f, "resize({}x{})", s.width, s.height),
                (None, None) => f.write_str("resize()"),
            },
            TransformSpec::ColorJitter {
                brightness,
                contrast,
                saturation,
            } => write!(
                f,
                "color_jitter(brightness={brightness},contrast={contrast},saturation={saturation})"
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

    /// The u8 step this spec describes; `None` for normalize (a collation step).
    pub fn build(&self) -> Result<Option<Box<dyn Transform>>, PipelineError> {
        let e = |err: adapt_dataset::Error| self.error(err.to_string());
        let t: Box<dyn Transform> = match self {
            TransformSpec::RandomCrop {
                size,
                padding,
                fill,
                padding_mode,
            } => {
                let mut c = RandomCrop::new(size.height, size.width).map_err(e)?;
                c.padding = *padding;
                c.fill = fill.clone();
                c.mode = padding_mode_of(padding_mode).map_err(|r| self.error(r))?;
                Box::new(c)
            }
            TransformSpec::RandomHorizontalFlip { p } => {
                Box::new(RandomFlip::horizontal(*p).map_err(e)?)
            }
            TransformSpec::RandomVerticalFlip { p } => {
                Box::new(RandomFlip::vertical(*p).map_err(e)?)
            }
            TransformSpec::RandomResizedCrop { size, scale, ratio } => Box::new(
                RandomResizedCrop::with(size.height, size.width, *scale, *ratio).map_err(e)?,
            ),
            TransformSpec::CenterCrop { size } => {
                if size.width == 0 || size.height == 0 {
                    return Err(self.error("size must be positive"));
                }
                Box::new(CenterCrop {
                    height: size.height,
                    width: size.width,
                })
            }
            TransformSpec::Resize { shorter, size } => match (shorter, size) {
                (Some(0), _) => return Err(self.error("size must be positive")),
                (Some(n), _) => Box::new(ResizeShorter { size: *n }),
                (None, Some(s)) => Box::new(Resize::new(s.width, s.height).map_err(e)?),
                (None, None) => return Err(self.error("needs a size")),
            },
            TransformSpec::ColorJitter {
                brightness,
                contrast,
                saturation,
            } => Box::new(ColorJitter::new(*brightness, *contrast, *saturation).map_err(e)?),
            TransformSpec::Normalize { .. } => return Ok(None),
        };
        Ok(Some(t))
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
