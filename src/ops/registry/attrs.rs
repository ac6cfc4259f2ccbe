//! Op attributes: every op's typed attribute struct converts to and from a flat, ordered map
//! of [`AttrValue`]s, the form programs print and serialise and the interpreter runs from.
//! `#[derive(Attrs)]` writes the conversion for a struct whose fields implement
//! [`AttrField`].

use std::fmt;

use crate::{DType, Error, Place, Result, Scalar};

/// One attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// Absent optional value.
    None,
    /// A boolean flag.
    Bool(bool),
    /// An integer (sizes, axes, counts, indices).
    Int(i64),
    /// A float (scales, probabilities, fill values).
    Float(f64),
    /// A string (modes, formats).
    Str(String),
    /// A list of integers (shapes, axis lists, paddings).
    Ints(Vec<i64>),
    /// A list of floats.
    Floats(Vec<f64>),
    /// A dtype.
    DType(DType),
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::None => f.write_str("None"),
            AttrValue::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(v) => write!(f, "{v:?}"),
            AttrValue::Str(s) => write!(f, "{s:?}"),
            AttrValue::Ints(v) => write!(f, "{v:?}"),
            AttrValue::Floats(v) => write!(f, "{v:?}"),
            AttrValue::DType(d) => write!(f, "{d}"),
        }
    }
}

/// An op's attributes by name, in declaration order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttrMap(Vec<(String, AttrValue)>);

impl AttrMap {
    /// An empty map.
    pub fn new() -> Self {
        AttrMap::default()
    }

    /// Adds or replaces `name`.
    pub fn set(&mut self, name: impl Into<String>, value: AttrValue) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// `set` that returns the map, for building one in an expression.
    pub fn with(mut self, name: impl Into<String>, value: impl AttrField) -> Self {
        self.set(name, value.to_attr());
        self
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Names and values in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The typed value of `name`, an error naming `op` when it is missing or mistyped.
    pub fn field<T: AttrField>(&self, op: &'static str, name: &str) -> Result<T> {
        let v = self.get(name).ok_or_else(|| Error::invalid(op, format!("missing attribute {name:?}")))?;
        T::from_attr(v).ok_or_else(|| Error::invalid(op, format!("attribute {name:?} cannot be {v}")))
    }

    /// Errors when the map holds a name outside `known` (a misspelt attribute).
    pub fn check_known(&self, op: &'static str, known: &[&str]) -> Result<()> {
        match self.0.iter().find(|(n, _)| !known.contains(&n.as_str())) {
            Some((n, _)) => Err(Error::invalid(op, format!("unknown attribute {n:?} (attributes: {known:?})"))),
            None => Ok(()),
        }
    }
}

impl fmt::Display for AttrMap {
    /// `{axis = -1, keepdim = False}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} = {v}")?;
        }
        f.write_str("}")
    }
}

/// A typed attribute struct (Clone + PartialEq + Debug) with its flat-map form.
pub trait Attrs: Clone + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The attributes by name.
    fn to_map(&self) -> AttrMap;
    /// Parses a map produced by `to_map` (errors name `op` and the attribute).
    fn from_map(op: &'static str, map: &AttrMap) -> Result<Self>;
}

impl Attrs for () {
    fn to_map(&self) -> AttrMap {
        AttrMap::new()
    }
    fn from_map(op: &'static str, map: &AttrMap) -> Result<Self> {
        map.check_known(op, &[])
    }
}

/// A type that can be one attribute.
pub trait AttrField: Sized {
    /// The value as an attribute.
    fn to_attr(&self) -> AttrValue;
    /// The value back, `None` when `v` has the wrong form.
    fn from_attr(v: &AttrValue) -> Option<Self>;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl AttrField for $t {
            fn to_attr(&self) -> AttrValue {
                AttrValue::Int(*self as i64)
            }
            fn from_attr(v: &AttrValue) -> Option<Self> {
                match v {
                    AttrValue::Int(i) => <$t>::try_from(*i).ok(),
                    _ => None,
                }
            }
        }

        impl AttrField for Vec<$t> {
            fn to_attr(&self) -> AttrValue {
                AttrValue::Ints(self.iter().map(|&v| v as i64).collect())
            }
            fn from_attr(v: &AttrValue) -> Option<Self> {
                match v {
                    AttrValue::Ints(v) => v.iter().map(|&i| <$t>::try_from(i).ok()).collect(),
                    _ => None,
                }
            }
        }
    )*};
}
int_field!(i64, i32, isize, usize, u64);

/// `AttrField` impls from the conversion each way: `Type: |value| attribute; pattern =>
/// value, ...;` (a wrong form is `None`).
macro_rules! attr_fields {
    ($($t:ty: |$s:ident| $to:expr; $($pat:pat => $from:expr),+;)*) => {$(
        impl AttrField for $t {
            fn to_attr(&self) -> AttrValue {
                let $s = self;
                $to
            }
            fn from_attr(v: &AttrValue) -> Option<Self> {
                match v {
                    $($pat => $from,)+
                    _ => None,
                }
            }
        }
    )*};
}

attr_fields! {
    bool: |b| AttrValue::Bool(*b); AttrValue::Bool(b) => Some(*b);
    f64: |f| AttrValue::Float(*f); AttrValue::Float(f) => Some(*f), AttrValue::Int(i) => Some(*i as f64);
    Vec<f64>: |v| AttrValue::Floats(v.clone());
        AttrValue::Floats(v) => Some(v.clone()), AttrValue::Ints(v) => Some(v.iter().map(|&i| i as f64).collect());
    String: |s| AttrValue::Str(s.clone()); AttrValue::Str(s) => Some(s.clone());
    DType: |d| AttrValue::DType(*d); AttrValue::DType(d) => Some(*d), AttrValue::Str(s) => s.parse().ok();
    Place: |p| AttrValue::Str(match p {
        Place::Cpu => "cpu".into(),
        Place::Gpu(i) => format!("gpu:{i}"),
    });
        AttrValue::Str(s) => s.parse().ok();
}

impl AttrField for Scalar {
    fn to_attr(&self) -> AttrValue {
        match *self {
            Scalar::Float(f) => AttrValue::Float(f),
            Scalar::Int(i) => AttrValue::Int(i),
            Scalar::Bool(b) => AttrValue::Bool(b),
        }
    }
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Float(f) => Some(Scalar::Float(*f)),
            AttrValue::Int(i) => Some(Scalar::Int(*i)),
            AttrValue::Bool(b) => Some(Scalar::Bool(*b)),
            _ => None,
        }
    }
}

impl<T: AttrField> AttrField for Option<T> {
    fn to_attr(&self) -> AttrValue {
        match self {
            Some(v) => v.to_attr(),
            None => AttrValue::None,
        }
    }
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::None => Some(None),
            v => T::from_attr(v).map(Some),
        }
    }
}

impl Attrs for [f64; 2] {
    /// Two unnamed scalars `p0`, `p1` (table ops name them in their own `attr_map`).
    fn to_map(&self) -> AttrMap {
        AttrMap::new().with("p0", self[0]).with("p1", self[1])
    }
    fn from_map(op: &'static str, map: &AttrMap) -> Result<Self> {
        map.check_known(op, &["p0", "p1"])?;
        Ok([map.field(op, "p0")?, map.field(op, "p1")?])
    }
}
