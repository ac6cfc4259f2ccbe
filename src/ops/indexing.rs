//! NumPy-style indexing (`x[1:, ::2, None, ..., mask]` in Paddle): [`Tensor::index`] reads,
//! [`Tensor::index_put`] writes out of place (differentiable in both operands) and
//! [`Tensor::set_value`] writes in place (Paddle's `x[...] = v`). Write an index as a slice
//! of [`Idx`]: integers, ranges (`Idx::from(1..)`, [`Idx::range`] with a step), `Idx::NewAxis`,
//! `Idx::Ellipsis`, and one tensor (integer indices along a dimension, or a bool mask over
//! the next dimensions).

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo};

use crate::{DType, Error, Result, Tensor};

const OP: &str = "index";

/// One entry of an index.
#[derive(Clone, Debug)]
pub enum Idx {
    /// One position (negative counts from the end); the dimension is removed.
    At(i64),
    /// `start..end` by `step` (Python's slice: missing bounds are the ends, out-of-range
    /// bounds clamp, a negative step walks backwards).
    Range { start: Option<i64>, end: Option<i64>, step: i64 },
    /// A new dimension of size 1 (`None` in Python).
    NewAxis,
    /// As many full ranges as the dimensions not otherwise indexed (`...`).
    Ellipsis,
    /// Integer indices along one dimension (the dimension becomes the index's shape), or a
    /// bool mask over as many dimensions as it has (they become one of the selected count).
    Tensor(Tensor),
}

impl Idx {
    /// `start..end` with a step (`x[start:end:step]`); `None` for an open bound.
    pub fn range(start: Option<i64>, end: Option<i64>, step: i64) -> Idx {
        Idx::Range { start, end, step }
    }

    /// Every position (`:`).
    pub fn full() -> Idx {
        Idx::Range { start: None, end: None, step: 1 }
    }

    fn consumes(&self) -> usize {
        match self {
            Idx::NewAxis | Idx::Ellipsis => 0,
            Idx::Tensor(t) if t.dtype() == DType::Bool => t.ndim(),
            _ => 1,
        }
    }
}

impl From<i64> for Idx {
    fn from(i: i64) -> Self {
        Idx::At(i)
    }
}

impl From<Range<i64>> for Idx {
    fn from(r: Range<i64>) -> Self {
        Idx::range(Some(r.start), Some(r.end), 1)
    }
}

impl From<RangeInclusive<i64>> for Idx {
    fn from(r: RangeInclusive<i64>) -> Self {
        Idx::range(Some(*r.start()), Some(*r.end() + 1), 1)
    }
}

impl From<RangeFrom<i64>> for Idx {
    fn from(r: RangeFrom<i64>) -> Self {
        Idx::range(Some(r.start), None, 1)
    }
}

impl From<RangeTo<i64>> for Idx {
    fn from(r: RangeTo<i64>) -> Self {
        Idx::range(None, Some(r.end), 1)
    }
}

impl From<RangeFull> for Idx {
    fn from(_: RangeFull) -> Self {
        Idx::full()
    }
}

impl From<&Tensor> for Idx {
    fn from(t: &Tensor) -> Self {
        Idx::Tensor(t.clone())
    }
}

/// `index[..]` entries one per dimension, with the ellipsis expanded.
fn expand(x: &Tensor, index: &[Idx]) -> Result<Vec<Idx>> {
    let used: usize = index.iter().map(Idx::consumes).sum();
    let ellipses = index.iter().filter(|i| matches!(i, Idx::Ellipsis)).count();
    if ellipses > 1 || used > x.ndim() {
        return Err(Error::invalid(
            OP,
            format!("{} dimensions indexed ({ellipses} ellipses) in a tensor of shape {:?}", used, x.shape()),
        ));
    }
    let tensors = index.iter().filter(|i| matches!(i, Idx::Tensor(_))).count();
    if tensors > 1 {
        return Err(Error::invalid(OP, "one tensor index at most (combining several is not supported yet)"));
    }
    let mut out = Vec::new();
    for i in index {
        match i {
            Idx::Ellipsis => out.extend((0..x.ndim() - used).map(|_| Idx::full())),
            other => out.push(other.clone()),
        }
    }
    if ellipses == 0 {
        out.extend((0..x.ndim() - used).map(|_| Idx::full()));
    }
    Ok(out)
}

impl Tensor {
    /// `x[index]` (see the module docs): a view-like result, differentiable.
    pub fn index(&self, index: &[Idx]) -> Result<Tensor> {
        let entries = expand(self, index)?;
        let mut y = self.clone();
        // `d`: the dimension of `y` the next entry applies to.
        let mut d = 0usize;
        for e in entries {
            match e {
                Idx::At(i) => {
                    let n = y.shape()[d] as i64;
                    let at = if i < 0 { i + n } else { i };
                    if !(0..n).contains(&at) {
                        return Err(Error::invalid(
                            OP,
                            format!(
                                "index {i} is out of range for dimension {d} of size {n} (shape {:?})",
                                self.shape()
                            ),
                        ));
                    }
                    y = y.slice(&[d as isize], &[at], &[at + 1])?.squeeze(&[d as isize])?;
                }
                Idx::Range { start, end, step } => {
                    if step == 0 {
                        return Err(Error::invalid(OP, "a range's step must not be zero"));
                    }
                    let n = y.shape()[d] as i64;
                    let (s, e) = if step > 0 {
                        (start.unwrap_or(0), end.unwrap_or(n))
                    } else {
                        (start.unwrap_or(n - 1), end.unwrap_or(-n - 1))
                    };
                    if !(step == 1 && s == 0 && e >= n) {
                        y = crate::strided_slice(&y, &[d as isize], &[s], &[e], &[step])?;
                    }
                    d += 1;
                }
                Idx::NewAxis => {
                    y = y.unsqueeze(&[d as isize])?;
                    d += 1;
                }
                Idx::Tensor(t) if t.dtype() == DType::Bool => {
                    let k = t.ndim();
                    if y.shape()[d..d + k] != *t.shape() {
                        return Err(Error::shape(
                            OP,
                            format!("mask {:?} does not match dimensions {d}.. of {:?}", t.shape(), y.shape()),
                        ));
                    }
                    // The masked dimensions flatten into one of the selected positions.
                    let picks = crate::nonzero(&t.flatten(0, -1)?)?.flatten(0, -1)?;
                    let mut shape: Vec<i64> = y.shape()[..d].iter().map(|&v| v as i64).collect();
                    shape.push(-1);
                    shape.extend(y.shape()[d + k..].iter().map(|&v| v as i64));
                    y = crate::index_select(&crate::reshape(&y, &shape)?, &picks, d as isize)?;
                    d += 1;
                }
                Idx::Tensor(t) => {
                    if !t.dtype().is_int() {
                        return Err(Error::unsupported(
                            OP,
                            t.dtype(),
                            "for a tensor index (expected integers or bool)",
                        ));
                    }
                    let n = y.shape()[d] as i64;
                    // Negative indices count from the end, as in Python.
                    let t64 = t.cast(DType::Int64)?;
                    let wrapped = crate::where_(&t64.less_than_scalar(0)?, &t64.add_scalar(n)?, &t64)?;
                    let picked = crate::index_select(&y, &wrapped.flatten(0, -1)?, d as isize)?;
                    let mut shape: Vec<i64> = y.shape()[..d].iter().map(|&v| v as i64).collect();
                    shape.extend(t.shape().iter().map(|&v| v as i64));
                    shape.extend(y.shape()[d + 1..].iter().map(|&v| v as i64));
                    y = crate::reshape(&picked, &shape)?;
                    d += t.ndim();
                }
                Idx::Ellipsis => {}
            }
        }
        Ok(y)
    }

    /// This tensor with `value` (broadcast to the indexed region) written at `index`, as a
    /// new tensor (Paddle's `index_put` / `x[index] = value` out of place); gradients flow to
    /// the untouched elements and to `value`.
    pub fn index_put(&self, index: &[Idx], value: &Tensor) -> Result<Tensor> {
        // The flat positions the index selects: the same index applied to 0..numel.
        let n = self.numel() as i64;
        let positions =
            crate::arange_on(0i64, n, 1i64, DType::Int64, self.place())?.reshape(self.shape())?.index(index)?;
        let value = if value.dtype() == self.dtype() { value.clone() } else { value.cast(self.dtype())? };
        let value = if value.shape() == positions.shape() { value } else { value.broadcast_to(positions.shape())? };
        let written = crate::scatter(&self.flatten(0, -1)?, &positions.flatten(0, -1)?, &value.flatten(0, -1)?, true)?;
        written.reshape(self.shape())
    }

    /// Writes `value` at `index` in place (Paddle's `x[index] = value`): the memory (and every
    /// view of it) changes, with the version counter and autograd rules of the in-place ops.
    pub fn set_value(&self, index: &[Idx], value: &Tensor) -> Result<&Self> {
        self.write_in_place("set_value", |x| x.index_put(index, value))
    }
}
