//! Shapes, numpy broadcasting, axis normalisation and the strided "views" that every
//! data-movement kernel (CPU and GPU) executes.

use std::fmt;

use crate::{Error, Result};

/// The dimensions of a tensor, outermost first. A rank-0 shape (`[]`) holds one element.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub(crate) Vec<usize>);

impl Shape {
    /// A shape from its dimensions.
    pub fn new(dims: impl Into<Vec<usize>>) -> Self {
        Shape(dims.into())
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Rank (number of dimensions).
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for rank 0).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Row-major (C-contiguous) strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        contiguous_strides(&self.0)
    }

    /// Normalises a possibly negative axis into `0..rank`.
    pub fn axis(&self, op: &'static str, axis: isize) -> Result<usize> {
        normalize_axis(op, axis, self.rank(), &self.0)
    }

    /// Normalises a list of axes; an empty list means "all axes". Duplicates are an error.
    pub fn axes(&self, op: &'static str, axes: &[isize]) -> Result<Vec<usize>> {
        if axes.is_empty() {
            return Ok((0..self.rank()).collect());
        }
        let mut out = Vec::with_capacity(axes.len());
        for &a in axes {
            let a = self.axis(op, a)?;
            if out.contains(&a) {
                return Err(Error::invalid(op, format!("axis {a} appears twice in {axes:?}")));
            }
            out.push(a);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Splits the shape around `axis`: (product before, size at, product after).
    pub(crate) fn around(&self, axis: usize) -> (usize, usize, usize) {
        let outer = self.0[..axis].iter().product();
        let inner = self.0[axis + 1..].iter().product();
        (outer, self.0[axis], inner)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Self {
        Shape(d.to_vec())
    }
}

impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Self {
        Shape(d)
    }
}

/// Anything the creation functions accept as a shape: slices, arrays and Vecs of `usize`,
/// `i32`, `i64` or `isize`, and `&Shape`. Negative dimensions are an error naming the op.
pub trait IntoShape {
    /// The dimensions, or an error naming `op` if one is negative.
    fn into_dims(self, op: &'static str) -> Result<Vec<usize>>;
}

impl IntoShape for &Shape {
    fn into_dims(self, _op: &'static str) -> Result<Vec<usize>> {
        Ok(self.0.clone())
    }
}

impl IntoShape for Shape {
    fn into_dims(self, _op: &'static str) -> Result<Vec<usize>> {
        Ok(self.0)
    }
}

/// The element count of `dims`, or `None` when it overflows `usize`.
pub(crate) fn checked_numel(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// `dims` unchanged, or an error naming `op` when their element count overflows.
fn fits(op: &'static str, dims: Vec<usize>) -> Result<Vec<usize>> {
    match checked_numel(&dims) {
        Some(_) => Ok(dims),
        None => Err(Error::invalid(op, format!("shape {dims:?} has more elements than the address space holds"))),
    }
}

macro_rules! into_shape_unsigned {
    ($($t:ty),*) => {$(
        impl IntoShape for &[$t] {
            fn into_dims(self, op: &'static str) -> Result<Vec<usize>> {
                fits(op, self.iter().map(|&d| d as usize).collect())
            }
        }
    )*};
}
into_shape_unsigned!(usize);

macro_rules! into_shape_signed {
    ($($t:ty),*) => {$(
        impl IntoShape for &[$t] {
            fn into_dims(self, op: &'static str) -> Result<Vec<usize>> {
                let dims = self
                    .iter()
                    .map(|&d| {
                        usize::try_from(d).map_err(|_| {
                            Error::invalid(op, format!("negative dimension {d} in shape {self:?}"))
                        })
                    })
                    .collect::<Result<Vec<usize>>>()?;
                fits(op, dims)
            }
        }
    )*};
}
into_shape_signed!(i32, i64, isize);

macro_rules! into_shape_forward {
    ($($t:ty),*) => {$(
        impl<const N: usize> IntoShape for &[$t; N] {
            fn into_dims(self, op: &'static str) -> Result<Vec<usize>> {
                self.as_slice().into_dims(op)
            }
        }
        impl<const N: usize> IntoShape for [$t; N] {
            fn into_dims(self, op: &'static str) -> Result<Vec<usize>> {
                self.as_slice().into_dims(op)
            }
        }
        impl IntoShape for Vec<$t> {
            fn into_dims(self, op: &'static str) -> Result<Vec<usize>> {
                self.as_slice().into_dims(op)
            }
        }
        impl IntoShape for &Vec<$t> {
            fn into_dims(self, op: &'static str) -> Result<Vec<usize>> {
                self.as_slice().into_dims(op)
            }
        }
    )*};
}
into_shape_forward!(usize, i32, i64, isize);

pub(crate) fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; dims.len()];
    let mut acc = 1;
    for i in (0..dims.len()).rev() {
        strides[i] = acc;
        acc *= dims[i];
    }
    strides
}

pub(crate) fn normalize_axis(op: &'static str, axis: isize, rank: usize, dims: &[usize]) -> Result<usize> {
    let r = rank as isize;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(Error::Axis { op, axis, rank, shape: dims.to_vec() });
    }
    Ok(a as usize)
}

/// numpy broadcasting of two shapes.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::Broadcast { op, lhs: a.to_vec(), rhs: b.to_vec() });
        };
    }
    if checked_numel(&out).is_none() {
        return Err(Error::shape(
            op,
            format!("broadcasting {a:?} and {b:?} gives {out:?}: more elements than the address space holds"),
        ));
    }
    Ok(out)
}

/// Strides (in elements) that read a contiguous tensor of shape `from` as if broadcast to
/// `to`: broadcast dimensions get stride 0. `from` must broadcast to `to`.
pub(crate) fn broadcast_strides(from: &[usize], to: &[usize]) -> Vec<usize> {
    let own = contiguous_strides(from);
    let lead = to.len() - from.len();
    (0..to.len()).map(|i| if i < lead || from[i - lead] == 1 { 0 } else { own[i - lead] }).collect()
}

/// A strided reading (or writing) of a flat buffer: element at coordinates `c` lives at
/// `offset + Σ c[k]·strides[k]`. Strides may be zero (broadcast) or negative (flip).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub offset: usize,
}

impl View {
    pub fn contiguous(shape: &[usize]) -> Self {
        View {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape).into_iter().map(|s| s as isize).collect(),
            offset: 0,
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Merges adjacent dimensions that every operand walks contiguously, and drops size-1
/// dimensions, so kernels loop over as few dimensions as possible. `strides[j]` are the
/// strides of operand `j` over `shape`. Returns the collapsed shape and strides.
/// A broadcast kernel's parameter words: `[n, ndim, shape[ndim], then each operand's
/// strides[ndim]]` over `shape` collapsed with `strides`, and the collapsed shape.
pub(crate) fn strided_params(n: usize, shape: &[usize], strides: &[Vec<isize>]) -> (Vec<u32>, Vec<usize>) {
    let (cs, st) = collapse(shape, strides);
    let mut params = vec![n as u32, cs.len() as u32];
    params.extend(cs.iter().map(|&d| d as u32));
    for s in &st {
        params.extend(s.iter().map(|&d| d as u32));
    }
    (params, cs)
}

pub(crate) fn collapse(shape: &[usize], strides: &[Vec<isize>]) -> (Vec<usize>, Vec<Vec<isize>>) {
    let mut out_shape: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<isize>> = vec![Vec::new(); strides.len()];
    for k in 0..shape.len() {
        if shape[k] == 1 {
            continue;
        }
        let mergeable = !out_shape.is_empty()
            && strides.iter().enumerate().all(|(j, s)| {
                let last = *out_strides[j].last().unwrap();
                last == s[k] * shape[k] as isize
            });
        if mergeable {
            let n = out_shape.len() - 1;
            out_shape[n] *= shape[k];
            for (j, s) in strides.iter().enumerate() {
                out_strides[j][n] = s[k];
            }
        } else {
            out_shape.push(shape[k]);
            for (j, s) in strides.iter().enumerate() {
                out_strides[j].push(s[k]);
            }
        }
    }
    (out_shape, out_strides)
}

/// The size that stands for an unknown (`-1`) dimension while a program is built: meta
/// inference runs on it, and any output dim that is a multiple of it is recorded as `-1`.
/// `x.shape()` of a static variable shows it; `Tensor::var_shape` gives the `-1` form.
pub const UNKNOWN_DIM: usize = 9973;

/// True for a size that stands for an unknown dim (or a multiple of one).
pub(crate) fn is_unknown(d: usize) -> bool {
    d != 0 && d.is_multiple_of(UNKNOWN_DIM)
}

/// `dims` as a reshape target: the one unknown dim (if exactly one) becomes `-1`, so the
/// reshape fits whatever size the program is fed.
pub(crate) fn reshape_target(dims: &[usize]) -> Vec<i64> {
    let unknown = dims.iter().filter(|&&d| is_unknown(d)).count();
    dims.iter().map(|&d| if unknown == 1 && is_unknown(d) { -1 } else { d as i64 }).collect()
}

/// `shape` with every `-1` replaced by [`UNKNOWN_DIM`].
pub(crate) fn stand_in_dims(shape: &[i64]) -> Vec<usize> {
    shape.iter().map(|&d| if d < 0 { UNKNOWN_DIM } else { d as usize }).collect()
}

/// `dims` with every multiple of [`UNKNOWN_DIM`] recorded as `-1`.
pub(crate) fn var_dims(dims: &[usize]) -> Vec<i64> {
    dims.iter().map(|&d| if is_unknown(d) { -1 } else { d as i64 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes("t", &[4, 2], &[2]).unwrap(), vec![4, 2]);
        assert_eq!(broadcast_shapes("t", &[3, 1, 5], &[4, 1]).unwrap(), vec![3, 4, 5]);
        assert_eq!(broadcast_shapes("t", &[], &[2, 3]).unwrap(), vec![2, 3]);
        assert_eq!(broadcast_shapes("t", &[0, 3], &[1, 3]).unwrap(), vec![0, 3]);
        assert!(broadcast_shapes("t", &[3], &[4]).is_err());
    }

    #[test]
    fn collapse_merges_contiguous_runs() {
        let (s, st) = collapse(&[2, 3, 4], &[vec![12, 4, 1], vec![12, 4, 1]]);
        assert_eq!(s, vec![24]);
        assert_eq!(st, vec![vec![1], vec![1]]);
        let (s, st) = collapse(&[2, 3, 4], &[vec![12, 4, 1], vec![0, 0, 1]]);
        assert_eq!(s, vec![6, 4]);
        assert_eq!(st, vec![vec![4, 1], vec![0, 1]]);
    }

    #[test]
    fn axis_normalisation() {
        let s = Shape::new(vec![2, 3]);
        assert_eq!(s.axis("t", -1).unwrap(), 1);
        assert!(matches!(s.axis("t", 2), Err(Error::Axis { .. })));
        assert!(Shape::new(vec![]).axis("t", 0).is_err());
        assert_eq!(s.axes("t", &[]).unwrap(), vec![0, 1]);
    }
}
