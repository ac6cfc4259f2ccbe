//! A restricted reader of Python's pickle format (protocols 0–5, without out-of-band
//! buffers), enough for the weight files of Paddle (`.pdparams`: a dict of numpy arrays) and
//! PyTorch (`data.pkl` inside the zip: tensors rebuilt from persistent storages).
//!
//! Nothing is ever executed: a `GLOBAL` becomes a name, `REDUCE`/`NEWOBJ`/`BUILD` record the
//! call and its state as data, and the weight readers accept only the calls they know
//! (`_rebuild_tensor_v2`, numpy's `_reconstruct`, ...). `serde-pickle` does not fit: it drops
//! persistent ids and the arguments of unknown calls, which is where both formats keep tensors.
//!
//! Objects live in one arena and refer to each other by index, so a hostile file cannot make
//! a deep structure overflow the stack when it is dropped, and every length is checked against
//! the bytes left before anything is allocated.

use std::collections::HashMap;

/// One unpickled object; containers hold arena indices.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Obj {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A byte range of the input (no copy).
    Bytes(std::ops::Range<usize>),
    /// Bytes made while reading (`_codecs.encode` of a latin-1 string, protocol 2).
    OwnedBytes(Vec<u8>),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
    /// `module.name`, never imported.
    Global {
        module: String,
        name: String,
    },
    /// A recorded call `func(*args)` with the state a later `BUILD` gave it.
    Call {
        func: usize,
        args: usize,
        state: Option<usize>,
    },
    /// A persistent id (PyTorch's storages).
    Persistent(usize),
}

/// A fully read pickle: the arena and the index of the top object.
#[derive(Debug)]
pub(crate) struct Pickle<'a> {
    pub input: &'a [u8],
    objs: Vec<Obj>,
    pub root: usize,
}

impl<'a> Pickle<'a> {
    /// Reads `input` to its `STOP`. Errors are plain messages; the caller names the file.
    pub fn parse(input: &'a [u8]) -> Result<Self, String> {
        let mut vm = Vm { input, pos: 0, objs: Vec::new(), stack: Vec::new(), marks: Vec::new(), memo: HashMap::new() };
        let root = vm.run()?;
        Ok(Pickle { input, objs: vm.objs, root })
    }

    pub fn get(&self, i: usize) -> &Obj {
        &self.objs[i]
    }

    /// The bytes of a `Bytes` or `OwnedBytes` object.
    pub fn bytes(&self, i: usize) -> Option<&[u8]> {
        match &self.objs[i] {
            Obj::Bytes(r) => Some(&self.input[r.clone()]),
            Obj::OwnedBytes(b) => Some(b),
            _ => None,
        }
    }

    /// Raw bytes: a `bytes` object, or a Python 2 byte string (read as latin-1 text, each
    /// character one byte), as numpy arrays pickled by Python 2 hold their data.
    pub fn raw(&self, i: usize) -> Option<std::borrow::Cow<'_, [u8]>> {
        match &self.objs[i] {
            Obj::Str(s) => {
                s.chars().map(|c| u8::try_from(c as u32).ok()).collect::<Option<Vec<u8>>>().map(std::borrow::Cow::Owned)
            }
            _ => self.bytes(i).map(std::borrow::Cow::Borrowed),
        }
    }

    /// The value under `key` in a dict whose keys are strings or bytes.
    pub fn dict_get(&self, dict: usize, key: &str) -> Option<usize> {
        let Obj::Dict(entries) = &self.objs[dict] else { return None };
        entries.iter().find(|&&(k, _)| self.raw(k).is_some_and(|b| *b == *key.as_bytes())).map(|&(_, v)| v)
    }

    pub fn str(&self, i: usize) -> Option<&str> {
        match &self.objs[i] {
            Obj::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn int(&self, i: usize) -> Option<i64> {
        match self.objs[i] {
            Obj::Int(v) => Some(v),
            Obj::Bool(b) => Some(b as i64),
            _ => None,
        }
    }

    /// The items of a tuple or list.
    pub fn items(&self, i: usize) -> Option<&[usize]> {
        match &self.objs[i] {
            Obj::Tuple(v) | Obj::List(v) => Some(v),
            _ => None,
        }
    }

    /// `module.name` of a global.
    pub fn global(&self, i: usize) -> Option<(&str, &str)> {
        match &self.objs[i] {
            Obj::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }

    /// A short description for error messages.
    pub fn describe(&self, i: usize) -> String {
        match &self.objs[i] {
            Obj::None => "None".into(),
            Obj::Bool(b) => b.to_string(),
            Obj::Int(v) => v.to_string(),
            Obj::Float(v) => v.to_string(),
            Obj::Str(s) => format!("{:?}", s.chars().take(64).collect::<String>()),
            Obj::Bytes(r) => format!("{} bytes", r.len()),
            Obj::OwnedBytes(b) => format!("{} bytes", b.len()),
            Obj::List(v) => format!("a list of {}", v.len()),
            Obj::Tuple(v) => format!("a tuple of {}", v.len()),
            Obj::Dict(v) => format!("a dict of {}", v.len()),
            Obj::Global { module, name } => format!("{module}.{name}"),
            Obj::Call { func, .. } => format!("a call of {}", self.describe(*func)),
            Obj::Persistent(_) => "a persistent id".into(),
        }
    }
}

struct Vm<'a> {
    input: &'a [u8],
    pos: usize,
    objs: Vec<Obj>,
    stack: Vec<usize>,
    marks: Vec<usize>,
    memo: HashMap<u64, usize>,
}

impl Vm<'_> {
    fn push(&mut self, o: Obj) {
        self.objs.push(o);
        self.stack.push(self.objs.len() - 1);
    }

    fn pop(&mut self) -> Result<usize, String> {
        self.stack.pop().ok_or_else(|| format!("stack underflow at byte {}", self.pos))
    }

    fn top(&self) -> Result<usize, String> {
        self.stack.last().copied().ok_or_else(|| format!("stack underflow at byte {}", self.pos))
    }

    /// The objects above the last mark, removed from the stack.
    fn pop_mark(&mut self) -> Result<Vec<usize>, String> {
        let m = self.marks.pop().ok_or_else(|| format!("no MARK before byte {}", self.pos))?;
        if m > self.stack.len() {
            return Err(format!("MARK above the stack at byte {}", self.pos));
        }
        Ok(self.stack.split_off(m))
    }

    fn take(&mut self, n: u64) -> Result<std::ops::Range<usize>, String> {
        let left = (self.input.len() - self.pos) as u64;
        if n > left {
            return Err(format!("a length of {n} bytes at byte {} runs past the end ({left} left)", self.pos));
        }
        let r = self.pos..self.pos + n as usize;
        self.pos += n as usize;
        Ok(r)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let r = self.take(N as u64)?;
        Ok(self.input[r].try_into().expect("N bytes"))
    }

    fn line(&mut self) -> Result<&str, String> {
        let rest = &self.input[self.pos..];
        let n = rest.iter().position(|&b| b == b'\n').ok_or("a text argument without its newline")?;
        self.pos += n + 1;
        std::str::from_utf8(&rest[..n]).map_err(|_| "a text argument that is not UTF-8".to_string())
    }

    fn utf8(&mut self, n: u64) -> Result<(), String> {
        let r = self.take(n)?;
        let s = std::str::from_utf8(&self.input[r]).map_err(|_| "a string that is not UTF-8".to_string())?;
        let s = s.to_string();
        self.push(Obj::Str(s));
        Ok(())
    }

    /// A protocol-0/1 byte string: latin-1, as Python 3 reads it with `encoding="latin1"`.
    fn latin1(&mut self, n: u64) -> Result<(), String> {
        let r = self.take(n)?;
        let s: String = self.input[r].iter().map(|&b| b as char).collect();
        self.push(Obj::Str(s));
        Ok(())
    }

    fn memo_get(&mut self, key: u64) -> Result<(), String> {
        let i = *self.memo.get(&key).ok_or_else(|| format!("memo key {key} used before it was set"))?;
        self.stack.push(i);
        Ok(())
    }

    fn memo_put(&mut self, key: u64) -> Result<(), String> {
        let top = self.top()?;
        self.memo.insert(key, top);
        Ok(())
    }

    fn set_items(&mut self, dict: usize, kv: Vec<usize>) -> Result<(), String> {
        if !kv.len().is_multiple_of(2) {
            return Err("SETITEMS with an odd number of items".into());
        }
        let Obj::Dict(d) = &mut self.objs[dict] else {
            return Err(format!("SETITEM(S) on {} at byte {}", describe_kind(&self.objs[dict]), self.pos));
        };
        for pair in kv.chunks_exact(2) {
            d.push((pair[0], pair[1]));
        }
        Ok(())
    }

    fn append(&mut self, list: usize, items: Vec<usize>) -> Result<(), String> {
        match &mut self.objs[list] {
            Obj::List(l) => {
                l.extend(items);
                Ok(())
            }
            other => Err(format!("APPEND(S) on {} at byte {}", describe_kind(other), self.pos)),
        }
    }

    /// `func(*args)`, recorded. The two calls that build plain data are evaluated: an empty
    /// `OrderedDict()` becomes a dict (so `SETITEMS` fill it) and `_codecs.encode(s, "latin1")`
    /// becomes bytes (how protocol 2 stores Python 3 bytes).
    fn call(&mut self, func: usize, args: usize) -> Result<(), String> {
        if let Obj::Global { module, name } = &self.objs[func] {
            let arg_items = match &self.objs[args] {
                Obj::Tuple(v) => v.clone(),
                _ => Vec::new(),
            };
            match (module.as_str(), name.as_str()) {
                ("collections", "OrderedDict") if arg_items.is_empty() => {
                    self.push(Obj::Dict(Vec::new()));
                    return Ok(());
                }
                ("_codecs", "encode") if arg_items.len() == 2 => {
                    if let (Obj::Str(s), Obj::Str(enc)) = (&self.objs[arg_items[0]], &self.objs[arg_items[1]])
                        && enc == "latin1"
                    {
                        let bytes = s.chars().map(|c| u8::try_from(c as u32)).collect::<Result<Vec<u8>, _>>();
                        let bytes = bytes.map_err(|_| "_codecs.encode of a string outside latin-1".to_string())?;
                        self.push(Obj::OwnedBytes(bytes));
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        self.push(Obj::Call { func, args, state: None });
        Ok(())
    }

    fn run(&mut self) -> Result<usize, String> {
        loop {
            let at = self.pos;
            let [op] = self.fixed::<1>().map_err(|_| "the pickle ends before its STOP".to_string())?;
            match op {
                b'.' => return self.pop(),
                0x80 => {
                    let [proto] = self.fixed::<1>()?;
                    if proto > 5 {
                        return Err(format!("pickle protocol {proto} (at most 5 is known)"));
                    }
                }
                0x95 => {
                    self.fixed::<8>()?;
                }
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let t = self.top()?;
                    self.stack.push(t);
                }
                b'N' => self.push(Obj::None),
                0x88 => self.push(Obj::Bool(true)),
                0x89 => self.push(Obj::Bool(false)),
                b'K' => {
                    let [v] = self.fixed::<1>()?;
                    self.push(Obj::Int(v as i64));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.fixed()?);
                    self.push(Obj::Int(v as i64));
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.fixed()?);
                    self.push(Obj::Int(v as i64));
                }
                0x8a | 0x8b => {
                    let n = if op == 0x8a {
                        self.fixed::<1>()?[0] as u64
                    } else {
                        i32::from_le_bytes(self.fixed()?).max(0) as u64
                    };
                    if n > 8 {
                        return Err(format!("an integer of {n} bytes at byte {at} (at most 8 are read)"));
                    }
                    let r = self.take(n)?;
                    let b = &self.input[r];
                    let mut buf = if b.last().is_some_and(|&x| x & 0x80 != 0) { [0xff; 8] } else { [0; 8] };
                    buf[..b.len()].copy_from_slice(b);
                    self.push(Obj::Int(i64::from_le_bytes(buf)));
                }
                b'I' | b'L' => {
                    let text = self.line()?.trim_end_matches('L').to_string();
                    let o = match text.as_str() {
                        "00" if op == b'I' => Obj::Bool(false),
                        "01" if op == b'I' => Obj::Bool(true),
                        t => Obj::Int(t.parse().map_err(|_| format!("integer {t:?} at byte {at}"))?),
                    };
                    self.push(o);
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.fixed()?);
                    self.push(Obj::Float(v));
                }
                b'F' => {
                    let t = self.line()?.to_string();
                    let v = t.parse().map_err(|_| format!("float {t:?} at byte {at}"))?;
                    self.push(Obj::Float(v));
                }
                0x8c => {
                    let n = self.fixed::<1>()?[0] as u64;
                    self.utf8(n)?;
                }
                b'X' => {
                    let n = u32::from_le_bytes(self.fixed()?) as u64;
                    self.utf8(n)?;
                }
                0x8d => {
                    let n = u64::from_le_bytes(self.fixed()?);
                    self.utf8(n)?;
                }
                b'U' => {
                    let n = self.fixed::<1>()?[0] as u64;
                    self.latin1(n)?;
                }
                b'T' => {
                    let n = i32::from_le_bytes(self.fixed()?);
                    let n = u64::try_from(n).map_err(|_| format!("a negative string length at byte {at}"))?;
                    self.latin1(n)?;
                }
                b'C' => {
                    let n = self.fixed::<1>()?[0] as u64;
                    let r = self.take(n)?;
                    self.push(Obj::Bytes(r));
                }
                b'B' => {
                    let n = u32::from_le_bytes(self.fixed()?) as u64;
                    let r = self.take(n)?;
                    self.push(Obj::Bytes(r));
                }
                0x8e | 0x96 => {
                    let n = u64::from_le_bytes(self.fixed()?);
                    let r = self.take(n)?;
                    self.push(Obj::Bytes(r));
                }
                b')' => self.push(Obj::Tuple(Vec::new())),
                b't' => {
                    let items = self.pop_mark()?;
                    self.push(Obj::Tuple(items));
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n {
                        return Err(format!("stack underflow at byte {at}"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push(Obj::Tuple(items));
                }
                b']' => self.push(Obj::List(Vec::new())),
                b'l' => {
                    let items = self.pop_mark()?;
                    self.push(Obj::List(items));
                }
                b'a' => {
                    let item = self.pop()?;
                    let list = self.top()?;
                    self.append(list, vec![item])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.append(list, items)?;
                }
                b'}' => self.push(Obj::Dict(Vec::new())),
                b'd' => {
                    let kv = self.pop_mark()?;
                    self.push(Obj::Dict(Vec::new()));
                    let d = self.top()?;
                    self.set_items(d, kv)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?;
                    self.set_items(d, vec![k, v])?;
                }
                b'u' => {
                    let kv = self.pop_mark()?;
                    let d = self.top()?;
                    self.set_items(d, kv)?;
                }
                // Sets and frozensets only occur in metadata: kept as lists.
                0x8f => self.push(Obj::List(Vec::new())),
                0x90 => {
                    let items = self.pop_mark()?;
                    let set = self.top()?;
                    self.append(set, items)?;
                }
                0x91 => {
                    let items = self.pop_mark()?;
                    self.push(Obj::List(items));
                }
                b'g' => {
                    let t = self.line()?.to_string();
                    self.memo_get(t.parse().map_err(|_| format!("memo key {t:?} at byte {at}"))?)?;
                }
                b'h' => {
                    let k = self.fixed::<1>()?[0] as u64;
                    self.memo_get(k)?;
                }
                b'j' => {
                    let k = u32::from_le_bytes(self.fixed()?) as u64;
                    self.memo_get(k)?;
                }
                b'p' => {
                    let t = self.line()?.to_string();
                    self.memo_put(t.parse().map_err(|_| format!("memo key {t:?} at byte {at}"))?)?;
                }
                b'q' => {
                    let k = self.fixed::<1>()?[0] as u64;
                    self.memo_put(k)?;
                }
                b'r' => {
                    let k = u32::from_le_bytes(self.fixed()?) as u64;
                    self.memo_put(k)?;
                }
                0x94 => {
                    let k = self.memo.len() as u64;
                    self.memo_put(k)?;
                }
                b'c' => {
                    let module = self.line()?.to_string();
                    let name = self.line()?.to_string();
                    self.push(Obj::Global { module, name });
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (&self.objs[module], &self.objs[name]) {
                        (Obj::Str(m), Obj::Str(n)) => {
                            let (module, name) = (m.clone(), n.clone());
                            self.push(Obj::Global { module, name });
                        }
                        _ => return Err(format!("STACK_GLOBAL without two strings at byte {at}")),
                    }
                }
                b'R' | 0x81 => {
                    let args = self.pop()?;
                    let func = self.pop()?;
                    self.call(func, args)?;
                }
                0x92 => {
                    let _kwargs = self.pop()?;
                    let args = self.pop()?;
                    let func = self.pop()?;
                    self.call(func, args)?;
                }
                b'b' => {
                    let state = self.pop()?;
                    let target = self.top()?;
                    match &mut self.objs[target] {
                        Obj::Call { state: s, .. } => *s = Some(state),
                        // `OrderedDict` attributes (PyTorch's `_metadata`): not weights.
                        Obj::Dict(_) => {}
                        other => return Err(format!("BUILD on {} at byte {at}", describe_kind(other))),
                    }
                }
                b'Q' => {
                    let pid = self.pop()?;
                    self.push(Obj::Persistent(pid));
                }
                b'P' => {
                    let t = self.line()?.to_string();
                    self.push(Obj::Str(t));
                    let pid = self.pop()?;
                    self.push(Obj::Persistent(pid));
                }
                other => {
                    let name = match other {
                        b'i' => "INST",
                        b'o' => "OBJ",
                        0x82..=0x84 => "EXT",
                        0x97 | 0x98 => "an out-of-band buffer",
                        b'S' | b'V' => "a protocol-0 quoted string",
                        _ => "an unknown opcode",
                    };
                    return Err(format!("{name} (0x{other:02x}) at byte {at} is not supported"));
                }
            }
        }
    }
}

fn describe_kind(o: &Obj) -> &'static str {
    match o {
        Obj::None => "None",
        Obj::Bool(_) => "a bool",
        Obj::Int(_) => "an int",
        Obj::Float(_) => "a float",
        Obj::Str(_) => "a string",
        Obj::Bytes(_) | Obj::OwnedBytes(_) => "bytes",
        Obj::List(_) => "a list",
        Obj::Tuple(_) => "a tuple",
        Obj::Dict(_) => "a dict",
        Obj::Global { .. } => "a global",
        Obj::Call { .. } => "an object",
        Obj::Persistent(_) => "a persistent id",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_lengths_and_opcodes_are_errors() {
        // BINBYTES8 claiming 2^60 bytes.
        let mut p = vec![0x80, 4, 0x8e];
        p.extend((1u64 << 60).to_le_bytes());
        assert!(Pickle::parse(&p).unwrap_err().contains("runs past the end"));
        // INST would construct a class instance.
        assert!(Pickle::parse(b"(i__main__\nX\n.").unwrap_err().contains("INST"));
        assert!(Pickle::parse(b"").unwrap_err().contains("before its STOP"));
        assert!(Pickle::parse(b"0.").unwrap_err().contains("underflow"));
    }

    #[test]
    fn nested_lists_a_million_deep_drop_without_recursion() {
        let mut p = vec![0x80, 2];
        p.extend(std::iter::repeat_n(b']', 1_000_000));
        p.extend(std::iter::repeat_n(b'a', 999_999));
        p.push(b'.');
        let pk = Pickle::parse(&p).unwrap();
        assert_eq!(pk.items(pk.root).unwrap().len(), 1);
    }
}
