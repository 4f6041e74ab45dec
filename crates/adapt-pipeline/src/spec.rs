//! The transform steps of a pipeline, their short text form and its parser.

use crate::PipelineError;
use adapt_dataset::{
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
/// [`parse_transforms`] and `Display`.
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

fn padding_mode_of(s: &str) -> Result<PaddingMode, String> {
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

/// Splits `s` at commas outside parentheses; `None` when they do not balance.
fn split_top(s: &str) -> Option<Vec<&str>> {
    let (mut depth, mut start, mut parts) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ',' if depth == 0 => {
                parts.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    parts.push(s[start..].trim());
    Some(parts)
}

/// One parsed argument value.
#[derive(Debug)]
enum Value<'a> {
    Atom(&'a str),
    Tuple(Vec<&'a str>),
}

struct Args<'a> {
    token: &'a str,
    positional: Vec<Value<'a>>,
    named: Vec<(&'a str, Value<'a>)>,
}

impl<'a> Args<'a> {
    fn err(&self, reason: impl Into<String>) -> PipelineError {
        PipelineError::Transform {
            token: self.token.to_owned(),
            reason: reason.into(),
        }
    }

    /// Takes argument `name` (or the next positional one at `pos`).
    fn take(&mut self, name: &str, pos: usize) -> Option<Value<'a>> {
        if let Some(i) = self.named.iter().position(|(n, _)| *n == name) {
            return Some(self.named.remove(i).1);
        }
        (pos < self.positional.len())
            .then(|| std::mem::replace(&mut self.positional[pos], Value::Atom("")))
            .filter(|v| !matches!(v, Value::Atom("")))
    }

    fn done(&self, used_positional: usize) -> Result<(), PipelineError> {
        if let Some((n, _)) = self.named.first() {
            return Err(self.err(format!("unknown argument {n:?}")));
        }
        if self.positional.len() > used_positional {
            return Err(self.err(format!(
                "takes at most {used_positional} positional argument(s), got {}",
                self.positional.len()
            )));
        }
        Ok(())
    }

    fn number<T: std::str::FromStr>(&self, v: &str, what: &str) -> Result<T, PipelineError> {
        v.parse::<T>()
            .map_err(|_| self.err(format!("{what} {v:?} is not a valid number")))
    }

    fn f64_of(&self, v: Value<'a>, what: &str) -> Result<f64, PipelineError> {
        match v {
            Value::Atom(a) => {
                let x: f64 = self.number(a, what)?;
                if x.is_finite() {
                    Ok(x)
                } else {
                    Err(self.err(format!("{what} must be finite")))
                }
            }
            Value::Tuple(_) => Err(self.err(format!("{what} must be one number"))),
        }
    }

    fn pair(&self, v: Value<'a>, what: &str) -> Result<(f64, f64), PipelineError> {
        match v {
            Value::Tuple(t) if t.len() == 2 => {
                let a = self.f64_of(Value::Atom(t[0]), what)?;
                let b = self.f64_of(Value::Atom(t[1]), what)?;
                Ok((a, b))
            }
            _ => Err(self.err(format!("{what} must be a pair (a,b)"))),
        }
    }

    fn floats(&self, v: Value<'a>, what: &str) -> Result<Vec<f32>, PipelineError> {
        let items = match v {
            Value::Atom(a) => vec![a],
            Value::Tuple(t) => t,
        };
        items
            .into_iter()
            .map(|a| {
                let x: f32 = self.number(a, what)?;
                if x.is_finite() {
                    Ok(x)
                } else {
                    Err(self.err(format!("{what} must be finite")))
                }
            })
            .collect()
    }

    fn size(&self, v: Value<'a>) -> Result<Size, PipelineError> {
        let s = match v {
            Value::Atom(a) => match a.split_once(['x', 'X']) {
                Some((w, h)) => Size {
                    width: self.number(w.trim(), "width")?,
                    height: self.number(h.trim(), "height")?,
                },
                None => {
                    let n = self.number(a, "size")?;
                    Size {
                        width: n,
                        height: n,
                    }
                }
            },
            // torchvision's (h, w).
            Value::Tuple(t) if t.len() == 2 => Size {
                height: self.number(t[0], "height")?,
                width: self.number(t[1], "width")?,
            },
            Value::Tuple(_) => return Err(self.err("size must be N, WxH or (h,w)")),
        };
        if s.width == 0 || s.height == 0 {
            return Err(self.err("size must be positive"));
        }
        Ok(s)
    }
}

fn value(s: &str) -> Option<Value<'_>> {
    let s = s.trim();
    match s.strip_prefix('(') {
        Some(rest) => {
            let inner = rest.strip_suffix(')')?;
            let items = split_top(inner)?;
            if items.iter().any(|i| i.is_empty() || i.contains('(')) {
                return None;
            }
            Some(Value::Tuple(items))
        }
        None if s.is_empty() || s.contains(['(', ')']) => None,
        None => Some(Value::Atom(s)),
    }
}

fn parse_step(token: &str) -> Result<TransformSpec, PipelineError> {
    let bad = |reason: &str| PipelineError::Transform {
        token: token.to_owned(),
        reason: reason.to_owned(),
    };
    let (name, body) = match token.find('(') {
        Some(i) => {
            let body = token[i + 1..]
                .strip_suffix(')')
                .ok_or_else(|| bad("unbalanced parentheses"))?;
            (token[..i].trim(), body)
        }
        None => (token.trim(), ""),
    };
    let mut args = Args {
        token,
        positional: Vec::new(),
        named: Vec::new(),
    };
    if !body.trim().is_empty() {
        for part in split_top(body).ok_or_else(|| bad("unbalanced parentheses"))? {
            let eq = part.find('=').filter(|&i| !part[..i].contains('('));
            match eq {
                Some(i) => {
                    let v = value(&part[i + 1..]).ok_or_else(|| bad("malformed argument"))?;
                    args.named.push((part[..i].trim(), v));
                }
                None if args.named.is_empty() => {
                    args.positional
                        .push(value(part).ok_or_else(|| bad("malformed argument"))?);
                }
                None => return Err(bad("a positional argument after a named one")),
            }
        }
    }
    let name = name.to_ascii_lowercase();
    let spec = match name.as_str() {
        "random_crop" => {
            let size = args.take("size", 0).ok_or_else(|| bad("needs a size"))?;
            let size = args.size(size)?;
            let padding = match args.take("padding", 1) {
                None => [0; 4],
                Some(Value::Atom(a)) => [args.number(a, "padding")?; 4],
                Some(Value::Tuple(t)) => {
                    let n: Vec<u32> = t
                        .iter()
                        .map(|v| args.number(v, "padding"))
                        .collect::<Result<_, _>>()?;
                    match n.as_slice() {
                        [lr, tb] => [*lr, *tb, *lr, *tb],
                        [l, t, r, b] => [*l, *t, *r, *b],
                        _ => return Err(bad("padding takes 1, 2 or 4 numbers")),
                    }
                }
            };
            let fill = match args.take("fill", 2) {
                None => vec![0],
                Some(Value::Atom(a)) => vec![args.number(a, "fill")?],
                Some(Value::Tuple(t)) => t
                    .iter()
                    .map(|v| args.number(v, "fill"))
                    .collect::<Result<_, _>>()?,
            };
            let padding_mode = match args.take("padding_mode", 3) {
                None => "constant".to_owned(),
                Some(Value::Atom(a)) => {
                    padding_mode_of(a).map_err(|r| bad(&r))?;
                    a.to_owned()
                }
                Some(Value::Tuple(_)) => return Err(bad("padding_mode is a name")),
            };
            args.done(4)?;
            TransformSpec::RandomCrop {
                size,
                padding,
                fill,
                padding_mode,
            }
        }
        "random_horizontal_flip" | "hflip" | "random_vertical_flip" | "vflip" => {
            let p = match args.take("p", 0) {
                Some(v) => args.f64_of(v, "p")?,
                None => 0.5,
            };
            if !(0.0..=1.0).contains(&p) {
                return Err(bad("p must be in [0, 1]"));
            }
            args.done(1)?;
            if name.contains("vertical") || name == "vflip" {
                TransformSpec::RandomVerticalFlip { p }
            } else {
                TransformSpec::RandomHorizontalFlip { p }
            }
        }
        "random_resized_crop" | "rrc" => {
            let size = args.take("size", 0).ok_or_else(|| bad("needs a size"))?;
            let size = args.size(size)?;
            let scale = match args.take("scale", 1) {
                Some(v) => args.pair(v, "scale")?,
                None => (0.08, 1.0),
            };
            let ratio = match args.take("ratio", 2) {
                Some(v) => args.pair(v, "ratio")?,
                None => (3.0 / 4.0, 4.0 / 3.0),
            };
            args.done(3)?;
            if !(scale.0 > 0.0 && scale.0 <= scale.1 && ratio.0 > 0.0 && ratio.0 <= ratio.1) {
                return Err(bad(
                    "scale and ratio must be positive, (low, high) with low ≤ high",
                ));
            }
            TransformSpec::RandomResizedCrop { size, scale, ratio }
        }
        "center_crop" => {
            let size = args.take("size", 0).ok_or_else(|| bad("needs a size"))?;
            let size = args.size(size)?;
            args.done(1)?;
            TransformSpec::CenterCrop { size }
        }
        "resize" => {
            let v = args.take("size", 0).ok_or_else(|| bad("needs a size"))?;
            let spec = match v {
                Value::Atom(a) if !a.contains(['x', 'X']) => {
                    let n: u32 = args.number(a, "size")?;
                    if n == 0 {
                        return Err(bad("size must be positive"));
                    }
                    TransformSpec::Resize {
                        shorter: Some(n),
                        size: None,
                    }
                }
                other => TransformSpec::Resize {
                    shorter: None,
                    size: Some(args.size(other)?),
                },
            };
            args.done(1)?;
            spec
        }
        "color_jitter" => {
            let mut f = |name: &str, pos: usize| -> Result<f32, PipelineError> {
                match args.take(name, pos) {
                    Some(v) => {
                        let x = args.f64_of(v, name)? as f32;
                        if x < 0.0 {
                            return Err(args.err(format!("{name} must not be negative")));
                        }
                        Ok(x)
                    }
                    None => Ok(0.0),
                }
            };
            let (brightness, contrast, saturation) =
                (f("brightness", 0)?, f("contrast", 1)?, f("saturation", 2)?);
            args.done(3)?;
            TransformSpec::ColorJitter {
                brightness,
                contrast,
                saturation,
            }
        }
        "normalize" | "normalise" => {
            let first = args.take("mean", 0).ok_or_else(|| {
                bad("needs mean and std, or a preset: normalize(cifar10) or normalize(imagenet)")
            })?;
            let spec = match first {
                Value::Atom(a) if a.parse::<f32>().is_err() => {
                    let (mean, std) = Normalize::preset_values(a).ok_or_else(|| {
                        bad(&format!(
                            "unknown preset {a:?}; expected cifar10 or imagenet"
                        ))
                    })?;
                    TransformSpec::Normalize {
                        preset: Some(a.to_ascii_lowercase()),
                        mean: mean.to_vec(),
                        std: std.to_vec(),
                    }
                }
                v => {
                    let mean = args.floats(v, "mean")?;
                    let std = args
                        .take("std", 1)
                        .ok_or_else(|| bad("needs std beside mean"))?;
                    let std = args.floats(std, "std")?;
                    TransformSpec::Normalize {
                        preset: None,
                        mean,
                        std,
                    }
                }
            };
            args.done(2)?;
            if let Some(Err(e)) = spec.normalizer() {
                return Err(bad(&e.to_string()));
            }
            spec
        }
        "" => return Err(bad("empty step")),
        other => {
            return Err(bad(&format!(
                "unknown transform {other:?}; expected random_crop, random_horizontal_flip (hflip), \
                 random_vertical_flip (vflip), random_resized_crop, center_crop, resize, \
                 color_jitter or normalize"
            )));
        }
    };
    Ok(spec)
}

/// Parses the text form: steps separated by commas, e.g.
/// `random_crop(32,padding=4),hflip,normalize(cifar10)`. An empty text is
/// an empty pipeline. `normalize` may only be the last step.
pub fn parse_transforms(text: &str) -> Result<Vec<TransformSpec>, PipelineError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let steps = split_top(text).ok_or_else(|| PipelineError::Transform {
        token: text.to_owned(),
        reason: "unbalanced parentheses".into(),
    })?;
    let specs: Vec<TransformSpec> = steps
        .into_iter()
        .map(parse_step)
        .collect::<Result<_, _>>()?;
    check_order(&specs)?;
    Ok(specs)
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

/// The canonical text form of `specs` (what [`parse_transforms`] reads back).
pub fn transforms_text(specs: &[TransformSpec]) -> String {
    specs
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
