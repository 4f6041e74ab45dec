//! The parser of the steps' text form (`random_crop(32,padding=4),hflip,
//! normalize(cifar10)`): one function per step name, torchvision's
//! argument names and defaults, every error naming the step as written.

use crate::PipelineError;
use crate::augment::{self, InterpolationName};
use crate::spec::{Size, TransformSpec, check_order, padding_mode_of};
use adapt_transform::Normalize;

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
pub(crate) enum Value<'a> {
    Atom(&'a str),
    Tuple(Vec<&'a str>),
}

pub(crate) struct Args<'a> {
    token: &'a str,
    positional: Vec<Value<'a>>,
    named: Vec<(&'a str, Value<'a>)>,
}

impl<'a> Args<'a> {
    pub(crate) fn err(&self, reason: impl Into<String>) -> PipelineError {
        PipelineError::Transform {
            token: self.token.to_owned(),
            reason: reason.into(),
        }
    }

    /// Takes argument `name` (or the next positional one at `pos`).
    pub(crate) fn take(&mut self, name: &str, pos: usize) -> Option<Value<'a>> {
        if let Some(i) = self.named.iter().position(|(n, _)| *n == name) {
            return Some(self.named.remove(i).1);
        }
        (pos < self.positional.len())
            .then(|| std::mem::replace(&mut self.positional[pos], Value::Atom("")))
            .filter(|v| !matches!(v, Value::Atom("")))
    }

    pub(crate) fn done(&self, used_positional: usize) -> Result<(), PipelineError> {
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

    pub(crate) fn number<T: std::str::FromStr>(
        &self,
        v: &str,
        what: &str,
    ) -> Result<T, PipelineError> {
        v.parse::<T>()
            .map_err(|_| self.err(format!("{what} {v:?} is not a valid number")))
    }

    pub(crate) fn f64_of(&self, v: Value<'a>, what: &str) -> Result<f64, PipelineError> {
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

    pub(crate) fn pair(&self, v: Value<'a>, what: &str) -> Result<(f64, f64), PipelineError> {
        match v {
            Value::Tuple(t) if t.len() == 2 => {
                let a = self.f64_of(Value::Atom(t[0]), what)?;
                let b = self.f64_of(Value::Atom(t[1]), what)?;
                Ok((a, b))
            }
            _ => Err(self.err(format!("{what} must be a pair (a,b)"))),
        }
    }

    pub(crate) fn floats(&self, v: Value<'a>, what: &str) -> Result<Vec<f32>, PipelineError> {
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

    pub(crate) fn size(&self, v: Value<'a>) -> Result<Size, PipelineError> {
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

/// Splits a step as written into its lower-cased name and its arguments.
fn split_step(token: &str) -> Result<(String, Args<'_>), PipelineError> {
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
    Ok((name.to_ascii_lowercase(), args))
}

/// One step of the text form, by its torchvision name.
fn parse_step(token: &str) -> Result<TransformSpec, PipelineError> {
    let (name, mut args) = split_step(token)?;
    match name.as_str() {
        "random_crop" => random_crop(&mut args),
        "random_horizontal_flip" | "hflip" => Ok(TransformSpec::RandomHorizontalFlip {
            p: flip_p(&mut args)?,
        }),
        "random_vertical_flip" | "vflip" => Ok(TransformSpec::RandomVerticalFlip {
            p: flip_p(&mut args)?,
        }),
        "random_resized_crop" | "rrc" => random_resized_crop(&mut args),
        "center_crop" => {
            let size = args
                .take("size", 0)
                .ok_or_else(|| args.err("needs a size"))?;
            let size = args.size(size)?;
            args.done(1)?;
            Ok(TransformSpec::CenterCrop { size })
        }
        "resize" => resize(&mut args),
        "color_jitter" => color_jitter(&mut args),
        "rand_augment" | "randaugment" => augment::rand_augment(&mut args),
        "trivial_augment" | "trivial_augment_wide" => augment::trivial_augment(&mut args),
        "auto_augment" | "autoaugment" => augment::auto_augment(&mut args),
        "random_erasing" => augment::random_erasing(&mut args),
        "normalize" | "normalise" => normalize(&mut args),
        "" => Err(args.err("empty step")),
        other => Err(args.err(format!(
            "unknown transform {other:?}; expected random_crop, random_horizontal_flip (hflip), \
             random_vertical_flip (vflip), random_resized_crop, center_crop, resize, \
             color_jitter, rand_augment, trivial_augment, auto_augment, random_erasing \
             or normalize"
        ))),
    }
}

/// `random_crop(size, padding=0, fill=0, padding_mode=constant)`.
fn random_crop(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let size = args
        .take("size", 0)
        .ok_or_else(|| args.err("needs a size"))?;
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
                _ => return Err(args.err("padding takes 1, 2 or 4 numbers")),
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
            padding_mode_of(a).map_err(|r| args.err(r))?;
            a.to_owned()
        }
        Some(Value::Tuple(_)) => return Err(args.err("padding_mode is a name")),
    };
    args.done(4)?;
    Ok(TransformSpec::RandomCrop {
        size,
        padding,
        fill,
        padding_mode,
    })
}

/// A flip's probability, `p=0.5` by default.
fn flip_p(args: &mut Args<'_>) -> Result<f64, PipelineError> {
    let p = match args.take("p", 0) {
        Some(v) => args.f64_of(v, "p")?,
        None => 0.5,
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(args.err("p must be in [0, 1]"));
    }
    args.done(1)?;
    Ok(p)
}

/// `random_resized_crop(size, scale=(0.08, 1), ratio=(3/4, 4/3), interpolation=bilinear)`.
fn random_resized_crop(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let size = args
        .take("size", 0)
        .ok_or_else(|| args.err("needs a size"))?;
    let size = args.size(size)?;
    let scale = match args.take("scale", 1) {
        Some(v) => args.pair(v, "scale")?,
        None => (0.08, 1.0),
    };
    let ratio = match args.take("ratio", 2) {
        Some(v) => args.pair(v, "ratio")?,
        None => (3.0 / 4.0, 4.0 / 3.0),
    };
    let interpolation = augment::interpolation_arg(args, 3, InterpolationName::Bilinear)?;
    args.done(4)?;
    if !(scale.0 > 0.0 && scale.0 <= scale.1 && ratio.0 > 0.0 && ratio.0 <= ratio.1) {
        return Err(args.err("scale and ratio must be positive, (low, high) with low ≤ high"));
    }
    Ok(TransformSpec::RandomResizedCrop {
        size,
        scale,
        ratio,
        interpolation,
    })
}

/// `resize(N)` (the shorter side) or `resize(WxH)` / `resize((h, w))`.
fn resize(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let v = args
        .take("size", 0)
        .ok_or_else(|| args.err("needs a size"))?;
    let spec = match v {
        Value::Atom(a) if !a.contains(['x', 'X']) => {
            let n: u32 = args.number(a, "size")?;
            if n == 0 {
                return Err(args.err("size must be positive"));
            }
            (Some(n), None)
        }
        other => (None, Some(args.size(other)?)),
    };
    let interpolation = augment::interpolation_arg(args, 1, InterpolationName::Bilinear)?;
    args.done(2)?;
    Ok(TransformSpec::Resize {
        shorter: spec.0,
        size: spec.1,
        interpolation,
    })
}

/// `color_jitter(brightness=0, contrast=0, saturation=0, hue=0)`.
fn color_jitter(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
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
    let (brightness, contrast, saturation, hue) = (
        f("brightness", 0)?,
        f("contrast", 1)?,
        f("saturation", 2)?,
        f("hue", 3)?,
    );
    args.done(4)?;
    if hue > 0.5 {
        return Err(args.err("hue must be in [0, 0.5]"));
    }
    Ok(TransformSpec::ColorJitter {
        brightness,
        contrast,
        saturation,
        hue,
    })
}

/// `normalize(preset)` or `normalize(mean, std)`.
fn normalize(args: &mut Args<'_>) -> Result<TransformSpec, PipelineError> {
    let first = args.take("mean", 0).ok_or_else(|| {
        args.err("needs mean and std, or a preset: normalize(cifar10) or normalize(imagenet)")
    })?;
    let spec = match first {
        Value::Atom(a) if a.parse::<f32>().is_err() => {
            let (mean, std) = Normalize::preset_values(a).ok_or_else(|| {
                args.err(format!(
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
                .ok_or_else(|| args.err("needs std beside mean"))?;
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
        return Err(args.err(e.to_string()));
    }
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
    augment::check_erasing(&specs)?;
    Ok(specs)
}
