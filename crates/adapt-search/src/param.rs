//! Parameters, their domains and configurations: the space a search walks.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// One value of a parameter's domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A boolean switch (`false` sorts first).
    Bool(bool),
    /// An integer.
    Int(i64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
        }
    }
}

/// An invalid parameter or space.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParamError {
    /// A domain with no value.
    #[error("parameter {0:?} has an empty domain")]
    Empty(String),
    /// A domain mixing booleans and integers.
    #[error("parameter {0:?} mixes booleans and integers")]
    Mixed(String),
    /// Two parameters with one name.
    #[error("parameter {0:?} appears twice")]
    Duplicate(String),
    /// A priority order that is not a permutation of the parameters.
    #[error("priority order {0:?} is not a permutation of the parameters")]
    Priority(Vec<String>),
    /// A range with a zero step or reversed bounds.
    #[error("invalid range for {0:?}")]
    Range(String),
}

/// A tunable parameter: a name and an ordered, finite domain (sorted, no
/// duplicates).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    name: String,
    values: Vec<Value>,
}

impl Param {
    /// A parameter over explicit values (sorted and deduplicated here).
    pub fn list(name: &str, mut values: Vec<Value>) -> Result<Self, ParamError> {
        if values.is_empty() {
            return Err(ParamError::Empty(name.into()));
        }
        if values.iter().any(|v| matches!(v, Value::Bool(_)))
            && values.iter().any(|v| matches!(v, Value::Int(_)))
        {
            return Err(ParamError::Mixed(name.into()));
        }
        values.sort_unstable();
        values.dedup();
        Ok(Self {
            name: name.into(),
            values,
        })
    }

    /// A parameter over explicit integers.
    pub fn ints(name: &str, values: impl IntoIterator<Item = i64>) -> Result<Self, ParamError> {
        Self::list(name, values.into_iter().map(Value::Int).collect())
    }

    /// `lo, lo + step, …` up to `hi` inclusive.
    pub fn range(name: &str, lo: i64, hi: i64, step: i64) -> Result<Self, ParamError> {
        if step <= 0 || lo > hi {
            return Err(ParamError::Range(name.into()));
        }
        Self::ints(name, (lo..=hi).step_by(step as usize))
    }

    /// Powers of two from `lo` to `hi` inclusive (both powers of two).
    pub fn powers_of_two(name: &str, lo: i64, hi: i64) -> Result<Self, ParamError> {
        if lo <= 0 || lo > hi || lo.count_ones() != 1 || hi.count_ones() != 1 {
            return Err(ParamError::Range(name.into()));
        }
        Self::ints(
            name,
            std::iter::successors(Some(lo), |v| v.checked_mul(2)).take_while(|v| *v <= hi),
        )
    }

    /// `false, true`.
    pub fn boolean(name: &str) -> Self {
        Self {
            name: name.into(),
            values: vec![Value::Bool(false), Value::Bool(true)],
        }
    }

    /// A single fixed value (a parameter that is not tuned, said so in reports).
    pub fn fixed(name: &str, value: Value) -> Self {
        Self {
            name: name.into(),
            values: vec![value],
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sorted domain.
    pub fn values(&self) -> &[Value] {
        &self.values
    }
}

/// One value per parameter, in the space's parameter order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Config(pub Vec<Value>);

impl Config {
    /// Parameter `i` as an integer (a boolean reads as 0 or 1).
    pub fn int(&self, i: usize) -> i64 {
        match self.0[i] {
            Value::Int(v) => v,
            Value::Bool(b) => i64::from(b),
        }
    }

    /// Parameter `i` as a boolean (an integer reads as `!= 0`).
    pub fn bool(&self, i: usize) -> bool {
        match self.0[i] {
            Value::Bool(b) => b,
            Value::Int(v) => v != 0,
        }
    }
}

type Canonical = Arc<dyn Fn(&mut Config) + Send + Sync>;

/// The parameters, their priority order, and an optional canonical form.
#[derive(Clone)]
pub struct Space {
    params: Vec<Param>,
    /// Parameter indices from outermost (lowest priority) to innermost.
    order: Vec<usize>,
    canonical: Option<Canonical>,
}

impl fmt::Debug for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Space")
            .field("params", &self.params)
            .field("order", &self.order)
            .finish_non_exhaustive()
    }
}

impl Space {
    /// A space whose priority is the reverse of `params`' order: the first
    /// parameter is the innermost (highest priority, refined under every
    /// context), the last the outermost.
    pub fn new(params: Vec<Param>) -> Result<Self, ParamError> {
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.name == p.name) {
                return Err(ParamError::Duplicate(p.name.clone()));
            }
        }
        let order = (0..params.len()).rev().collect();
        Ok(Self {
            params,
            order,
            canonical: None,
        })
    }

    /// Sets the priority: parameter names from outermost (lowest priority)
    /// to innermost (highest).
    pub fn with_priority(mut self, outermost_first: &[&str]) -> Result<Self, ParamError> {
        let order: Option<Vec<usize>> = outermost_first
            .iter()
            .map(|n| self.params.iter().position(|p| p.name == *n))
            .collect();
        match order {
            Some(mut o)
                if o.len() == self.params.len() && {
                    let mut s = o.clone();
                    s.sort_unstable();
                    s.dedup();
                    s.len() == o.len()
                } =>
            {
                std::mem::swap(&mut self.order, &mut o);
                Ok(self)
            }
            _ => Err(ParamError::Priority(
                outermost_first.iter().map(|s| (*s).to_owned()).collect(),
            )),
        }
    }

    /// Sets the canonical form: configurations that differ only in
    /// parameters without effect map to one configuration (memoised and
    /// counted once).
    #[must_use]
    pub fn with_canonical(mut self, f: impl Fn(&mut Config) + Send + Sync + 'static) -> Self {
        self.canonical = Some(Arc::new(f));
        self
    }

    /// The parameters.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Index of the parameter called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Parameter indices from outermost to innermost.
    pub fn priority(&self) -> &[usize] {
        &self.order
    }

    /// The canonical form of `config`.
    pub fn canonicalize(&self, config: &Config) -> Config {
        let mut c = config.clone();
        if let Some(f) = &self.canonical {
            f(&mut c);
        }
        c
    }

    /// Every canonical configuration, each once, in odometer order (last
    /// parameter fastest).
    pub fn configurations(&self) -> Vec<Config> {
        let mut out: Vec<Config> = vec![Config(Vec::new())];
        for p in &self.params {
            out = out
                .into_iter()
                .flat_map(|c| {
                    p.values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.0.push(*v);
                        c
                    })
                })
                .collect();
        }
        let mut seen = std::collections::HashSet::new();
        out.into_iter()
            .map(|c| self.canonicalize(&c))
            .filter(|c| seen.insert(c.clone()))
            .collect()
    }

    /// `name=value` pairs of a configuration, for reports.
    pub fn describe(&self, config: &Config) -> String {
        self.params
            .iter()
            .zip(&config.0)
            .map(|(p, v)| format!("{}={v}", p.name))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_sorted_and_checked() {
        assert_eq!(
            Param::ints("a", [4, 1, 4, 2]).unwrap().values(),
            [Value::Int(1), Value::Int(2), Value::Int(4)]
        );
        assert_eq!(
            Param::powers_of_two("p", 1, 2048).unwrap().values().len(),
            12
        );
        assert_eq!(Param::range("w", 2, 64, 2).unwrap().values().len(), 32);
        assert!(Param::ints("e", []).is_err());
        assert!(Param::powers_of_two("p", 3, 8).is_err());
        assert!(Param::range("r", 5, 1, 1).is_err());
        assert!(Param::list("m", vec![Value::Bool(true), Value::Int(1)]).is_err());
        assert!(Space::new(vec![Param::boolean("a"), Param::boolean("a")]).is_err());
    }

    #[test]
    fn canonical_configurations_are_counted_once() {
        let s = Space::new(vec![
            Param::ints("w", [0, 1, 2]).unwrap(),
            Param::ints("p", [1, 2]).unwrap(),
        ])
        .unwrap()
        .with_canonical(|c| {
            if c.int(0) == 0 {
                c.0[1] = Value::Int(1);
            }
        });
        assert_eq!(s.configurations().len(), 5);
        assert!(s.clone().with_priority(&["w", "w"]).is_err());
        assert_eq!(s.with_priority(&["w", "p"]).unwrap().priority(), [0, 1]);
    }
}
