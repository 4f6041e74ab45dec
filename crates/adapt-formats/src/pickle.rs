//! A pickle reader that runs nothing: the opcodes the data pickles of
//! torchvision's CIFAR downloads hold (dicts, lists, tuples, ints, strings,
//! bytes, a numpy array) read as values, and the four globals such a file
//! names (numpy's `_reconstruct`, `ndarray` and `dtype`, `_codecs.encode`)
//! interpreted here, never imported or called. Any other opcode or global
//! is refused by name, with its byte offset.
//!
//! Python's `pickle.load` runs whatever callable a file names, so a crafted
//! batch file runs code; this reader is the answer for data files.

use std::collections::HashMap;

/// Elements (values, bytes of strings) one file may make, per input byte,
/// beyond a fixed allowance: memo references copy values, and a file of
/// references to references would otherwise grow without bound.
const ELEMENTS_PER_BYTE: usize = 16;
const ELEMENTS_BASE: usize = 1 << 20;
/// The deepest stack a data pickle needs (a batch of 1000 appended items,
/// nested a little), with room to spare.
const MAX_STACK: usize = 1 << 20;
/// Lists, tuples and dicts one file may make: a CIFAR pickle makes a
/// handful; the bound also bounds how deep values nest (reading, copying
/// and dropping them recurses).
const MAX_CONTAINERS: usize = 4096;

/// A value of a data pickle.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// A text string.
    Str(String),
    /// Bytes (also Python 2's `str`, as `encoding="bytes"` reads it).
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Value>),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A dict, in insertion order.
    Dict(Vec<(Value, Value)>),
    /// A numpy array of bytes (`uint8`), C order.
    Array {
        /// Its shape.
        shape: Vec<usize>,
        /// Its bytes; empty until the array's state is set.
        data: Vec<u8>,
    },
    /// A numpy dtype: its code (`u1`).
    Dtype(String),
    /// A global this reader interprets.
    Global(Global),
}

/// The globals a data pickle may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Global {
    /// `numpy.core.multiarray._reconstruct` (numpy 2: `numpy._core…`).
    Reconstruct,
    /// `numpy.ndarray`.
    NdArray,
    /// `numpy.dtype`.
    Dtype,
    /// `_codecs.encode` (how Python 3 writes bytes at protocol 2).
    Encode,
    /// `numpy.core.numeric._frombuffer` (how numpy writes an array at
    /// protocol 5).
    FromBuffer,
}

impl Value {
    /// The entry of a dict keyed `key` (a text or a bytes key).
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        let Value::Dict(entries) = self else {
            return None;
        };
        entries.iter().find_map(|(k, v)| match k {
            Value::Str(s) if s == key => Some(v),
            Value::Bytes(b) if b == key.as_bytes() => Some(v),
            _ => None,
        })
    }

    /// A text, from a text or (latin-1) bytes value.
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            Value::Bytes(b) => Some(b.iter().map(|&c| char::from(c)).collect()),
            _ => None,
        }
    }

    /// What kind of value this is, for errors.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "a list",
            Value::Tuple(_) => "a tuple",
            Value::Dict(_) => "a dict",
            Value::Array { .. } => "an array",
            Value::Dtype(_) => "a dtype",
            Value::Global(_) => "a global",
        }
    }

    /// Elements this value holds (itself, its items, its bytes).
    fn elements(&self) -> usize {
        match self {
            Value::Str(s) => 1 + s.len(),
            Value::Bytes(b) | Value::Array { data: b, .. } => 1 + b.len(),
            Value::List(v) | Value::Tuple(v) => 1 + v.iter().map(Value::elements).sum::<usize>(),
            Value::Dict(v) => {
                1 + v
                    .iter()
                    .map(|(k, x)| k.elements() + x.elements())
                    .sum::<usize>()
            }
            _ => 1,
        }
    }
}

/// Why a pickle was refused: what, at which byte.
#[derive(Debug)]
pub(crate) struct PickleError {
    /// Offset of the opcode in the file.
    pub offset: usize,
    /// What was found.
    pub reason: String,
}

impl std::fmt::Display for PickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pickle refused at byte {}: {}", self.offset, self.reason)
    }
}

/// A stack item: a value or a mark.
enum Item {
    Mark,
    Value(Value),
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    /// Offset of the opcode being read.
    at: usize,
    stack: Vec<Item>,
    memo: HashMap<u32, Value>,
    elements: usize,
    containers: usize,
}

/// Reads the pickle `input` into a value, running nothing.
pub(crate) fn load(input: &[u8]) -> Result<Value, PickleError> {
    let mut r = Reader {
        input,
        pos: 0,
        at: 0,
        stack: Vec::new(),
        memo: HashMap::new(),
        elements: 0,
        containers: 0,
    };
    loop {
        r.at = r.pos;
        let op = r.take(1)?[0];
        if op == b'.' {
            return r.pop();
        }
        if matches!(op, b'}' | b']' | b')' | b't' | 0x85..=0x87) {
            r.containers += 1;
            if r.containers > MAX_CONTAINERS {
                return Err(r.refuse(format!(
                    "more than {MAX_CONTAINERS} lists, tuples and dicts"
                )));
            }
        }
        r.step(op)?;
        if r.stack.len() > MAX_STACK {
            return Err(r.refuse(format!("more than {MAX_STACK} items on the stack")));
        }
    }
}

impl<'a> Reader<'a> {
    fn refuse(&self, reason: impl Into<String>) -> PickleError {
        PickleError {
            offset: self.at,
            reason: reason.into(),
        }
    }

    /// The next `n` bytes; `n` is checked against what is left before
    /// anything is sized by it.
    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let left = self.input.len() - self.pos;
        if n > left {
            return Err(self.refuse(format!(
                "{n} bytes claimed, {left} left in the file (truncated, or a false length)"
            )));
        }
        let s = &self.input[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn uint(&mut self, width: usize) -> Result<usize, PickleError> {
        let b = self.take(width)?;
        let mut v = [0u8; 8];
        v[..width].copy_from_slice(b);
        usize::try_from(u64::from_le_bytes(v)).map_err(|_| self.refuse("a length past memory"))
    }

    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        self.elements = self.elements.saturating_add(v.elements());
        let limit =
            ELEMENTS_BASE.saturating_add(self.input.len().saturating_mul(ELEMENTS_PER_BYTE));
        if self.elements > limit {
            return Err(self.refuse(format!(
                "more than {limit} elements from a {}-byte file (memo references that copy \
                 values without end)",
                self.input.len()
            )));
        }
        self.stack.push(Item::Value(v));
        Ok(())
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        match self.stack.pop() {
            Some(Item::Value(v)) => Ok(v),
            Some(Item::Mark) => Err(self.refuse("a mark where a value belongs")),
            None => Err(self.refuse("an opcode with nothing on the stack")),
        }
    }

    fn top(&mut self) -> Result<&mut Value, PickleError> {
        let at = self.at;
        match self.stack.last_mut() {
            Some(Item::Value(v)) => Ok(v),
            _ => Err(PickleError {
                offset: at,
                reason: "an opcode with no value on the stack".into(),
            }),
        }
    }

    /// The values above the topmost mark, the mark removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let Some(m) = self.stack.iter().rposition(|i| matches!(i, Item::Mark)) else {
            return Err(self.refuse("no mark to pop to"));
        };
        let items = self.stack.split_off(m + 1);
        self.stack.pop();
        Ok(items
            .into_iter()
            .filter_map(|i| match i {
                Item::Value(v) => Some(v),
                Item::Mark => None,
            })
            .collect())
    }

    fn text(&mut self, n: usize) -> Result<String, PickleError> {
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.refuse("a text that is not UTF-8"))
    }

    fn step(&mut self, op: u8) -> Result<(), PickleError> {
        match op {
            0x80 => self.take(1).map(drop), // PROTO
            0x95 => self.take(8).map(drop), // FRAME
            b'}' => self.push(Value::Dict(Vec::new())),
            b']' => self.push(Value::List(Vec::new())),
            b')' => self.push(Value::Tuple(Vec::new())),
            b'(' => {
                self.stack.push(Item::Mark);
                Ok(())
            }
            b'0' => self.pop().map(drop),
            b'1' => self.pop_mark().map(drop),
            b'N' => self.push(Value::None),
            0x88 => self.push(Value::Bool(true)),
            0x89 => self.push(Value::Bool(false)),
            b'J' => {
                let b = self.take(4)?;
                self.push(Value::Int(i64::from(i32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ]))))
            }
            b'K' => {
                let v = self.uint(1)?;
                self.push(Value::Int(v as i64))
            }
            b'M' => {
                let v = self.uint(2)?;
                self.push(Value::Int(v as i64))
            }
            0x8a => self.long1(),
            b'G' => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                self.push(Value::Float(f64::from_be_bytes(a)))
            }
            _ => self.step_strings(op),
        }
    }

    fn step_strings(&mut self, op: u8) -> Result<(), PickleError> {
        let bytes = |r: &mut Self, width| -> Result<Vec<u8>, PickleError> {
            let n = r.uint(width)?;
            Ok(r.take(n)?.to_vec())
        };
        match op {
            b'U' | b'C' => {
                let b = bytes(self, 1)?;
                self.push(Value::Bytes(b))
            }
            b'T' | b'B' => {
                let b = bytes(self, 4)?;
                self.push(Value::Bytes(b))
            }
            0x8e | 0x96 => {
                let b = bytes(self, 8)?;
                self.push(Value::Bytes(b))
            }
            0x8c | b'X' | 0x8d => {
                let width = match op {
                    0x8c => 1,
                    b'X' => 4,
                    _ => 8,
                };
                let n = self.uint(width)?;
                let s = self.text(n)?;
                self.push(Value::Str(s))
            }
            _ => self.step_containers(op),
        }
    }

    fn step_containers(&mut self, op: u8) -> Result<(), PickleError> {
        match op {
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items))
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.pop()?);
                }
                items.reverse();
                self.push(Value::Tuple(items))
            }
            b'a' => {
                let v = self.pop()?;
                self.extend_list(vec![v])
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.extend_list(items)
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.extend_dict(vec![k, v])
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.extend_dict(items)
            }
            _ => self.step_memo(op),
        }
    }

    fn step_memo(&mut self, op: u8) -> Result<(), PickleError> {
        match op {
            b'q' | b'r' | 0x94 => {
                let key = match op {
                    b'q' => self.uint(1)?,
                    b'r' => self.uint(4)?,
                    _ => self.memo.len(),
                };
                let key = u32::try_from(key).map_err(|_| self.refuse("a memo key past 32 bits"))?;
                let v = self.top()?.clone();
                self.memo.insert(key, v);
                Ok(())
            }
            b'h' | b'j' => {
                let key = if op == b'h' {
                    self.uint(1)?
                } else {
                    self.uint(4)?
                };
                let v = u32::try_from(key)
                    .ok()
                    .and_then(|k| self.memo.get(&k))
                    .cloned()
                    .ok_or_else(|| self.refuse(format!("memo entry {key} was never stored")))?;
                self.push(v)
            }
            _ => self.step_objects(op),
        }
    }

    fn step_objects(&mut self, op: u8) -> Result<(), PickleError> {
        match op {
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                let g = global(&module, &name).map_err(|e| self.refuse(e))?;
                self.push(Value::Global(g))
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Value::Str(module), Value::Str(name)) = (module, name) else {
                    return Err(self.refuse("STACK_GLOBAL of something other than two texts"));
                };
                let g = global(&module, &name).map_err(|e| self.refuse(e))?;
                self.push(Value::Global(g))
            }
            b'R' => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let v = reduce(callable, args).map_err(|e| self.refuse(e))?;
                self.push(v)
            }
            b'b' => {
                let state = self.pop()?;
                let at = self.at;
                let obj = self.top()?;
                build(obj, state).map_err(|reason| PickleError { offset: at, reason })
            }
            other => Err(self.refuse(format!(
                "opcode 0x{other:02x} ({:?}), which a data pickle does not hold",
                char::from(other)
            ))),
        }
    }

    /// A newline-ended line of GLOBAL, at most 256 bytes.
    fn line(&mut self) -> Result<String, PickleError> {
        let rest = &self.input[self.pos..];
        let n = rest
            .iter()
            .take(256)
            .position(|&c| c == b'\n')
            .ok_or_else(|| self.refuse("a GLOBAL name without its newline in 256 bytes"))?;
        let s = self.text(n)?;
        self.take(1)?;
        Ok(s)
    }

    fn long1(&mut self) -> Result<(), PickleError> {
        let n = self.uint(1)?;
        if n > 8 {
            return Err(self.refuse(format!("an integer of {n} bytes (past 64 bits)")));
        }
        let b = self.take(n)?;
        let negative = b.last().is_some_and(|&c| c & 0x80 != 0);
        let mut a = if negative { [0xff; 8] } else { [0; 8] };
        a[..n].copy_from_slice(b);
        self.push(Value::Int(i64::from_le_bytes(a)))
    }

    fn extend_list(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        self.elements = self.elements.saturating_add(items.len());
        let at = self.at;
        match self.top()? {
            Value::List(l) => {
                l.extend(items);
                Ok(())
            }
            other => Err(PickleError {
                offset: at,
                reason: format!("APPEND to {}", other.kind()),
            }),
        }
    }

    fn extend_dict(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.refuse("SETITEMS with a key and no value"));
        }
        let at = self.at;
        match self.top()? {
            Value::Dict(d) => {
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    d.push((k, v));
                }
                Ok(())
            }
            other => Err(PickleError {
                offset: at,
                reason: format!("SETITEM on {}", other.kind()),
            }),
        }
    }
}

/// The global `module.name`, if it is one this reader interprets.
fn global(module: &str, name: &str) -> Result<Global, String> {
    match (module, name) {
        ("numpy.core.multiarray" | "numpy._core.multiarray", "_reconstruct") => {
            Ok(Global::Reconstruct)
        }
        ("numpy", "ndarray") => Ok(Global::NdArray),
        ("numpy", "dtype") => Ok(Global::Dtype),
        ("_codecs", "encode") => Ok(Global::Encode),
        ("numpy.core.numeric" | "numpy._core.numeric", "_frombuffer") => Ok(Global::FromBuffer),
        _ => Err(format!(
            "global {module}.{name}: a data pickle names only numpy's array and dtype and \
             _codecs.encode (nothing is imported or called)"
        )),
    }
}

/// What calling `callable` with `args` would make, for the calls a data
/// pickle holds.
fn reduce(callable: Value, args: Value) -> Result<Value, String> {
    let Value::Tuple(args) = args else {
        return Err(format!("REDUCE with {} for arguments", args.kind()));
    };
    match (callable, args.as_slice()) {
        (Value::Global(Global::Reconstruct), [Value::Global(Global::NdArray), ..]) => {
            Ok(Value::Array {
                shape: Vec::new(),
                data: Vec::new(),
            })
        }
        (Value::Global(Global::Dtype), [code, ..]) => match code.text().as_deref() {
            Some(c @ ("u1" | "|u1" | "uint8" | "B")) => Ok(Value::Dtype(c.to_owned())),
            Some(c) => Err(format!("numpy dtype {c:?}: a CIFAR array holds uint8 only")),
            None => Err(format!("numpy dtype of {}", code.kind())),
        },
        (Value::Global(Global::Encode), [Value::Str(s), enc]) => {
            if !matches!(enc.text().as_deref(), Some("latin1" | "latin-1")) {
                return Err("_codecs.encode with an encoding other than latin1".into());
            }
            s.chars()
                .map(|c| u8::try_from(u32::from(c)).map_err(|_| "a latin1 text past 0xff".into()))
                .collect::<Result<Vec<u8>, String>>()
                .map(Value::Bytes)
        }
        (
            Value::Global(Global::FromBuffer),
            [Value::Bytes(b), Value::Dtype(_), Value::Tuple(dims), order],
        ) => {
            if order.text().as_deref() != Some("C") {
                return Err("an array not in C order".into());
            }
            let shape = dims_of(dims)?;
            check_size(&shape, b.len())?;
            Ok(Value::Array {
                shape,
                data: b.clone(),
            })
        }
        (c, args) => Err(format!(
            "REDUCE of {} with ({}): not a call a data pickle makes",
            c.kind(),
            args.iter().map(Value::kind).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Sets `obj`'s state, for the objects a data pickle builds.
fn build(obj: &mut Value, state: Value) -> Result<(), String> {
    match obj {
        Value::Dtype(_) => Ok(()),
        Value::Array { shape, data } => {
            let Value::Tuple(s) = state else {
                return Err(format!("an array's state is {}", state.kind()));
            };
            let Ok([_, Value::Tuple(dims), Value::Dtype(_), order, raw]) =
                <[Value; 5]>::try_from(s)
            else {
                return Err(
                    "an array's state is not (version, shape, uint8 dtype, order, bytes)".into(),
                );
            };
            if matches!(order, Value::Bool(true) | Value::Int(1)) {
                return Err("a Fortran-ordered array".into());
            }
            let dims_out = dims_of(&dims)?;
            let Value::Bytes(bytes) = raw else {
                return Err(format!("an array's data is {}", raw.kind()));
            };
            check_size(&dims_out, bytes.len())?;
            (*shape, *data) = (dims_out, bytes);
            Ok(())
        }
        other => Err(format!("BUILD on {}", other.kind())),
    }
}

/// An array's shape from its tuple of dimensions.
fn dims_of(dims: &[Value]) -> Result<Vec<usize>, String> {
    dims.iter()
        .map(|d| match d {
            Value::Int(n) if *n >= 0 => Ok(*n as usize),
            _ => Err(format!("an array dimension of {}", d.kind())),
        })
        .collect()
}

/// That a uint8 array of `shape` holds exactly `bytes` bytes.
fn check_size(shape: &[usize], bytes: usize) -> Result<(), String> {
    let want = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if want != Some(bytes) {
        return Err(format!(
            "an array of shape {shape:?} with {bytes} bytes of data"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(input: &[u8]) -> String {
        load(input).expect_err("refused").to_string()
    }

    #[test]
    fn a_dict_of_a_list_and_a_text_reads() {
        // {'labels': [1, 300, -2], 'name': 'x'} at protocol 2.
        let p = b"\x80\x02}q\x00(X\x06\x00\x00\x00labelsq\x01]q\x02(K\x01M,\x01J\xfe\xff\xff\xffeX\x04\x00\x00\x00nameq\x03X\x01\x00\x00\x00xu.";
        let v = load(p).unwrap();
        let labels = v.get("labels").unwrap();
        assert_eq!(
            labels,
            &Value::List(vec![Value::Int(1), Value::Int(300), Value::Int(-2)])
        );
        assert_eq!(v.get("name").unwrap().text().unwrap(), "x");
    }

    #[test]
    fn a_protocol_5_array_reads() {
        // pickle.dumps({'data': np.arange(6, dtype=np.uint8).reshape(2, 3)}, protocol=5)
        let v = load(include_bytes!("pickle_p5_test.bin")).unwrap();
        let want = Value::Array {
            shape: vec![2, 3],
            data: vec![0, 1, 2, 3, 4, 5],
        };
        assert_eq!(v.get("data"), Some(&want));
    }

    #[test]
    fn code_is_never_named_let_alone_run() {
        // pickle.dumps of an object whose __reduce__ is (os.system, ("…",)).
        let e = refused(b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.");
        assert!(
            e.contains("global posix.system") && e.contains("byte 2"),
            "{e}"
        );
        // Protocol 4's STACK_GLOBAL of builtins.eval.
        let e = refused(b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c\x011\x85R.");
        assert!(e.contains("builtins.eval"), "{e}");
        // INST and OBJ (protocol 0 and 1's calls) are not data opcodes.
        let e = refused(b"(ios\nsystem\nS'true'\n.");
        assert!(e.contains("opcode 0x69"), "{e}");
    }

    #[test]
    fn false_lengths_and_memo_copies_are_bounded() {
        // A BINBYTES claiming 4 GiB in a 9-byte file.
        let e = refused(b"\x80\x03B\xff\xff\xff\xff.");
        assert!(e.contains("4294967295 bytes claimed"), "{e}");
        // A list appended to itself through the memo, doubling each time.
        let mut p = b"\x80\x02](K\x01K\x02eq\x00".to_vec();
        for _ in 0..64 {
            p.extend_from_slice(b"0](h\x00h\x00eq\x00");
        }
        p.push(b'.');
        let e = refused(&p);
        assert!(e.contains("elements"), "{e}");
        assert!(refused(b"\x80\x02h\x07.").contains("never stored"));
        // Lists nested a million deep.
        let mut deep = b"\x80\x02".to_vec();
        deep.extend(std::iter::repeat_n(b']', 1 << 20));
        assert!(refused(&deep).contains("lists, tuples and dicts"));
        assert!(refused(b"\x80\x02").contains("claimed"));
        assert!(
            refused(b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00.")
                .contains("past 64 bits")
        );
    }
}
