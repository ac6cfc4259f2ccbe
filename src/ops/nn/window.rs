//! Arguments shared by the sliding-window ops (convolution and pooling): int-or-pair sizes,
//! Paddle's padding forms (an int, `[ph, pw]`, `[top, bottom, left, right]`, `"SAME"`,
//! `"VALID"`) and their resolution into explicit per-side padding.

use crate::ops::registry::{AttrField, AttrValue};
use crate::{Error, Result};

/// A (height, width) pair; an int means the same value on both axes (Paddle's
/// `int | list[int]` arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pair(pub [usize; 2]);

impl Pair {
    /// Height component.
    pub fn h(self) -> usize {
        self.0[0]
    }

    /// Width component.
    pub fn w(self) -> usize {
        self.0[1]
    }
}

impl From<usize> for Pair {
    fn from(v: usize) -> Self {
        Pair([v, v])
    }
}

impl From<[usize; 2]> for Pair {
    fn from(v: [usize; 2]) -> Self {
        Pair(v)
    }
}

impl From<(usize, usize)> for Pair {
    fn from((h, w): (usize, usize)) -> Self {
        Pair([h, w])
    }
}

/// Padding of a 2-D window op (Paddle's `padding` argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    /// Explicit zero padding `[top, bottom, left, right]`.
    Explicit([usize; 4]),
    /// `"SAME"`: output size `ceil(in / stride)`, the needed padding split in two with the
    /// odd element on the bottom / right. As in Paddle, convolution dilation is reset to 1.
    Same,
    /// `"VALID"`: no padding.
    Valid,
}

impl Default for Padding {
    fn default() -> Self {
        Padding::Explicit([0; 4])
    }
}

impl From<usize> for Padding {
    fn from(p: usize) -> Self {
        Padding::Explicit([p; 4])
    }
}

impl From<[usize; 2]> for Padding {
    /// `[ph, pw]`: `ph` on top and bottom, `pw` on left and right.
    fn from([ph, pw]: [usize; 2]) -> Self {
        Padding::Explicit([ph, ph, pw, pw])
    }
}

impl From<[usize; 4]> for Padding {
    /// `[top, bottom, left, right]`.
    fn from(p: [usize; 4]) -> Self {
        Padding::Explicit(p)
    }
}

impl TryFrom<&str> for Padding {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        Padding::parse(s)
    }
}

impl std::str::FromStr for Padding {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Padding::parse(s)
    }
}

impl Padding {
    /// Parses Paddle's string forms `"SAME"` and `"VALID"` (case-insensitive).
    pub fn parse(s: &str) -> Result<Padding> {
        match s.to_ascii_uppercase().as_str() {
            "SAME" => Ok(Padding::Same),
            "VALID" => Ok(Padding::Valid),
            _ => Err(Error::invalid(
                "padding",
                format!("unknown padding algorithm {s:?}; expected \"SAME\" or \"VALID\""),
            )),
        }
    }

    /// Explicit `[top, bottom, left, right]` padding for an input of `input` (h, w) and a
    /// window of `kernel` (h, w) moved by `stride`.
    pub(crate) fn resolve(self, input: [usize; 2], kernel: [usize; 2], stride: [usize; 2]) -> [usize; 4] {
        match self {
            Padding::Explicit(p) => p,
            Padding::Valid => [0; 4],
            Padding::Same => {
                let mut p = [0; 4];
                for a in 0..2 {
                    let out = input[a].div_ceil(stride[a]);
                    let total = ((out.max(1) - 1) * stride[a] + kernel[a]).saturating_sub(input[a]);
                    p[2 * a] = total / 2;
                    p[2 * a + 1] = total - total / 2;
                }
                p
            }
        }
    }
}

/// Checks that every component of a stride / dilation / kernel pair is positive.
pub(crate) fn check_positive(op: &'static str, what: &str, p: Pair) -> Result<()> {
    if p.0.contains(&0) {
        return Err(Error::invalid(op, format!("{what} must be positive, got {:?}", p.0)));
    }
    Ok(())
}

/// Checks the only supported data format.
pub(crate) fn check_nchw(op: &'static str, data_format: &str) -> Result<()> {
    if data_format != "NCHW" {
        return Err(Error::invalid(op, format!("data_format {data_format:?} is not supported; only \"NCHW\" is")));
    }
    Ok(())
}

impl AttrField for Pair {
    fn to_attr(&self) -> AttrValue {
        AttrValue::Ints(self.0.iter().map(|&v| v as i64).collect())
    }
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match *<Vec<usize>>::from_attr(v)?.as_slice() {
            [h, w] => Some(Pair([h, w])),
            [s] => Some(Pair([s, s])),
            _ => None,
        }
    }
}

impl AttrField for Padding {
    /// `"SAME"`, `"VALID"` or `[top, bottom, left, right]`.
    fn to_attr(&self) -> AttrValue {
        match self {
            Padding::Same => AttrValue::Str("SAME".into()),
            Padding::Valid => AttrValue::Str("VALID".into()),
            Padding::Explicit(p) => AttrValue::Ints(p.iter().map(|&v| v as i64).collect()),
        }
    }
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Str(s) => Padding::parse(s).ok(),
            v => match *<Vec<usize>>::from_attr(v)?.as_slice() {
                [p] => Some(Padding::from(p)),
                [h, w] => Some(Padding::from([h, w])),
                [t, b, l, r] => Some(Padding::Explicit([t, b, l, r])),
                _ => None,
            },
        }
    }
}
