//! The text form of an attribute map: one `attr <name> <type> <value...>` line per
//! attribute, names and strings percent-encoded (every byte outside `A-Z a-z 0-9 . _ @ -`
//! becomes `%XX`), lists comma-separated (`-` for an empty one), floats in Rust's shortest
//! round-trip form. The program file (`static_/serialize.rs`) and the CPU shadow's
//! reproduction files write attributes this way.

use std::fmt::Write as _;

use super::{AttrMap, AttrValue};
use crate::{DType, Error, Result};

const OP: &str = "load_inference_model";

pub(crate) fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"._@-".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    if out.is_empty() { "%".into() } else { out }
}

pub(crate) fn dec(s: &str) -> Result<String> {
    if s == "%" {
        return Ok(String::new());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| bad(format!("truncated escape in {s:?}")))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad(format!("bad escape in {s:?}")))?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad(format!("{s:?} is not UTF-8")))
}

pub(crate) fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(OP, format!("corrupt program file: {}", msg.into()))
}

pub(crate) fn list<T: ToString>(v: &[T]) -> String {
    if v.is_empty() { "-".into() } else { v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",") }
}

pub(crate) fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>> {
    if s == "-" {
        return Ok(Vec::new());
    }
    s.split(',').map(|x| x.parse().map_err(|_| bad(format!("bad list item {x:?}")))).collect()
}

pub(crate) fn attr_line(name: &str, v: &AttrValue) -> String {
    let body = match v {
        AttrValue::None => "none".to_string(),
        AttrValue::Bool(b) => format!("bool {b}"),
        AttrValue::Int(i) => format!("int {i}"),
        AttrValue::Float(f) => format!("float {f:?}"),
        AttrValue::Str(s) => format!("str {}", enc(s)),
        AttrValue::Ints(v) => format!("ints {}", list(v)),
        AttrValue::Floats(v) => {
            let items: Vec<String> = v.iter().map(|f| format!("{f:?}")).collect();
            format!("floats {}", if items.is_empty() { "-".into() } else { items.join(",") })
        }
        AttrValue::DType(d) => format!("dtype {d}"),
    };
    format!("attr {} {body}", enc(name))
}

pub(crate) fn parse_attr(kind: &str, rest: &[&str]) -> Result<AttrValue> {
    let one = || rest.first().copied().ok_or_else(|| bad(format!("attribute of type {kind} has no value")));
    Ok(match kind {
        "none" => AttrValue::None,
        "bool" => AttrValue::Bool(one()?.parse().map_err(|_| bad("bad bool"))?),
        "int" => AttrValue::Int(one()?.parse().map_err(|_| bad("bad int"))?),
        "float" => AttrValue::Float(one()?.parse().map_err(|_| bad("bad float"))?),
        "str" => AttrValue::Str(dec(one()?)?),
        "ints" => AttrValue::Ints(parse_list(one()?)?),
        "floats" => AttrValue::Floats(parse_list(one()?)?),
        "dtype" => AttrValue::DType(one()?.parse::<DType>().map_err(|_| bad("bad dtype"))?),
        other => return Err(bad(format!("unknown attribute type {other:?}"))),
    })
}

/// `attrs` as `attr` lines.
pub(crate) fn write_attrs(attrs: &AttrMap) -> String {
    attrs.iter().map(|(n, v)| attr_line(n, v) + "\n").collect()
}

/// Parses lines written by [`write_attrs`].
pub(crate) fn read_attrs(text: &str) -> Result<AttrMap> {
    let mut attrs = AttrMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["attr", name, kind, rest @ ..] = words.as_slice() else {
            return Err(bad(format!("not an attribute line: {line:?}")));
        };
        attrs.set(dec(name)?, parse_attr(kind, rest)?);
    }
    Ok(attrs)
}
