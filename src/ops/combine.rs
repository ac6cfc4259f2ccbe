//! Compositions that rearrange or combine elements (`roll`, `diff`, `meshgrid`, `unbind`,
//! `repeat_interleave`, `masked_fill`, `lerp`): plain Rust over registered ops, so their
//! gradients, both places and static mode come from those ops.

use crate::{DType, Error, Result, Scalar, Tensor, full_on};

/// An operand that is a tensor, or a scalar taken as a 0-d tensor of another operand's dtype
/// and place (`lerp`'s weight, `masked_fill`'s value).
pub trait TensorOrScalar {
    /// This operand as a tensor next to `like`.
    fn operand_like(self, like: &Tensor) -> Result<Tensor>;
}

impl TensorOrScalar for &Tensor {
    fn operand_like(self, _: &Tensor) -> Result<Tensor> {
        Ok(self.clone())
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl TensorOrScalar for $t {
            fn operand_like(self, like: &Tensor) -> Result<Tensor> {
                full_on(&[] as &[usize], Scalar::from(self), like.dtype(), like.place())
            }
        }
    )*};
}
scalar_operand!(f32, f64, i32, i64, bool);

/// `x` with the elements where `mask` is true replaced by `value` (`paddle.masked_fill`);
/// `mask` (bool) broadcasts against `x`. Gradients flow to `x` where the mask is false (and
/// to a tensor `value` where it is true).
pub fn masked_fill(x: &Tensor, mask: &Tensor, value: impl TensorOrScalar) -> Result<Tensor> {
    crate::where_(mask, &value.operand_like(x)?, x)
}

/// `x + weight · (y − x)` (`paddle.lerp`); `weight` is a tensor (broadcast) or a scalar.
pub fn lerp(x: &Tensor, y: &Tensor, weight: impl TensorOrScalar) -> Result<Tensor> {
    x.add(&weight.operand_like(x)?.multiply(&y.subtract(x)?)?)
}

/// `x` shifted cyclically by `shifts[i]` along `axes[i]` (`paddle.roll`); with no axes the
/// flattened tensor is rolled by the one shift and keeps its shape.
pub fn roll(x: &Tensor, shifts: &[i64], axes: &[isize]) -> Result<Tensor> {
    if axes.is_empty() {
        if shifts.len() != 1 {
            return Err(Error::invalid("roll", format!("without axes takes one shift, got {shifts:?}")));
        }
        return roll(&x.flatten(0, -1)?, shifts, &[0])?.reshape(x.shape());
    }
    if shifts.len() != axes.len() {
        return Err(Error::invalid("roll", format!("{} shifts for {} axes", shifts.len(), axes.len())));
    }
    let mut y = x.clone();
    for (&shift, &axis) in shifts.iter().zip(axes) {
        let ax = x.shape_ref().axis("roll", axis)?;
        let n = x.shape()[ax] as i64;
        let s = if n == 0 { 0 } else { shift.rem_euclid(n) };
        if s == 0 {
            continue;
        }
        let axis = [ax as isize];
        let tail = crate::slice(&y, &axis, &[n - s], &[n])?;
        let head = crate::slice(&y, &axis, &[0], &[n - s])?;
        y = crate::concat(&[tail, head], ax as isize)?;
    }
    Ok(y)
}

/// The `n`-th forward difference along `axis` (`paddle.diff`): `out[i] = x[i+1] − x[i]`,
/// applied `n` times, after putting `prepend` before and `append` after `x` on that axis.
/// For bool tensors the difference is `!=` (numpy's and Paddle's xor).
pub fn diff(x: &Tensor, n: usize, axis: isize, prepend: Option<&Tensor>, append: Option<&Tensor>) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Err(Error::shape("diff", "the input must have at least one dimension, got a 0-d tensor"));
    }
    let ax = x.shape_ref().axis("diff", axis)?;
    let parts: Vec<Tensor> = prepend.into_iter().chain([x]).chain(append).cloned().collect();
    let mut y = if parts.len() == 1 { x.clone() } else { crate::concat(&parts, ax as isize)? };
    let axis = [ax as isize];
    for _ in 0..n {
        let len = y.shape()[ax] as i64;
        let hi = crate::slice(&y, &axis, &[len.min(1)], &[len])?;
        let lo = crate::slice(&y, &axis, &[0], &[(len - 1).max(0)])?;
        y = if y.dtype() == DType::Bool { hi.not_equal(&lo)? } else { hi.subtract(&lo)? };
    }
    Ok(y)
}

/// Coordinate grids from 0-d or 1-D tensors (`paddle.meshgrid`, "ij" indexing): output `i`
/// has shape `[len_0, …, len_{k−1}]` and varies along axis `i`.
pub fn meshgrid(xs: &[Tensor]) -> Result<Vec<Tensor>> {
    if let Some((i, x)) = xs.iter().enumerate().find(|(_, x)| x.ndim() > 1) {
        return Err(Error::shape("meshgrid", format!("input {i} must be 0-d or 1-D, got shape {:?}", x.shape())));
    }
    let lens: Vec<i64> = xs.iter().map(|x| x.numel() as i64).collect();
    xs.iter()
        .enumerate()
        .map(|(i, x)| {
            let mut shape = vec![1i64; xs.len()];
            shape[i] = lens[i];
            x.reshape(shape)?.expand(&lens)
        })
        .collect()
}

/// The slices of `x` along `axis`, each without that axis (`paddle.unbind`).
pub fn unbind(x: &Tensor, axis: isize) -> Result<Vec<Tensor>> {
    let ax = x.shape_ref().axis("unbind", axis)?;
    let n = x.shape()[ax];
    if n == 0 {
        return Ok(Vec::new());
    }
    crate::split(x, n, ax as isize)?.iter().map(|p| p.squeeze(&[ax as isize])).collect()
}

/// Each element repeated `repeats` times along `axis` (`paddle.repeat_interleave`); over
/// the flattened tensor when `None`.
pub fn repeat_interleave(x: &Tensor, repeats: usize, axis: Option<isize>) -> Result<Tensor> {
    let (x, ax) = interleave_axis(x, axis)?;
    let len = x.shape()[ax];
    let index = crate::arange_on(0i64, len as i64, 1i64, DType::Int64, x.place())?
        .unsqueeze(&[1])?
        .expand(&[len as i64, repeats as i64])?
        .flatten(0, -1)?;
    crate::index_select(&x, &index, ax as isize)
}

/// `repeat_interleave` with a count per element: `repeats` is an integer tensor with one
/// non-negative entry per element of the axis (read on the host, so eager only).
pub fn repeat_interleave_by(x: &Tensor, repeats: &Tensor, axis: Option<isize>) -> Result<Tensor> {
    let (x, ax) = interleave_axis(x, axis)?;
    if !repeats.dtype().is_int() {
        return Err(Error::unsupported(
            "repeat_interleave",
            repeats.dtype(),
            "for the repeats (expected int32 or int64)",
        ));
    }
    let counts = repeats.cast(DType::Int64)?.to_vec::<i64>()?;
    let len = x.shape()[ax];
    if counts.len() != len || counts.iter().any(|&c| c < 0) {
        return Err(Error::invalid(
            "repeat_interleave",
            format!("repeats {counts:?} must hold one non-negative count per element of axis {ax} (size {len})"),
        ));
    }
    let idx: Vec<i64> =
        counts.iter().enumerate().flat_map(|(i, &c)| std::iter::repeat_n(i as i64, c as usize)).collect();
    let n = idx.len();
    let index = Tensor::from_vec_on(idx, [n], x.place())?;
    crate::index_select(&x, &index, ax as isize)
}

/// `x` (flattened when `axis` is `None`) and the normalised axis.
fn interleave_axis(x: &Tensor, axis: Option<isize>) -> Result<(Tensor, usize)> {
    match axis {
        None => Ok((x.flatten(0, -1)?, 0)),
        Some(a) => Ok((x.clone(), x.shape_ref().axis("repeat_interleave", a)?)),
    }
}

/// `max(0, x) + weight · min(0, x)` (`paddle.nn.functional.prelu`): `weight` holds one slope,
/// or one per channel (axis 1, NCHW).
pub fn prelu(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    let w = match weight.numel() {
        1 => weight.reshape([1usize])?,
        n if x.ndim() >= 2 && x.shape()[1] == n => {
            let mut shape = vec![1usize; x.ndim() - 1];
            shape[0] = n;
            weight.reshape(shape)?
        }
        n => {
            return Err(Error::shape(
                "prelu",
                format!("weight of {n} slopes needs 1 or one per channel of input {:?}", x.shape()),
            ));
        }
    };
    let pos = x.relu()?;
    pos.add(&w.mul(&x.subtract(&pos)?)?)
}

impl Tensor {
    /// `masked_fill` as a method.
    pub fn masked_fill(&self, mask: &Tensor, value: impl TensorOrScalar) -> Result<Tensor> {
        masked_fill(self, mask, value)
    }

    /// `lerp` as a method.
    pub fn lerp(&self, y: &Tensor, weight: impl TensorOrScalar) -> Result<Tensor> {
        lerp(self, y, weight)
    }

    /// `roll` as a method.
    pub fn roll(&self, shifts: &[i64], axes: &[isize]) -> Result<Tensor> {
        roll(self, shifts, axes)
    }

    /// `unbind` as a method.
    pub fn unbind(&self, axis: isize) -> Result<Vec<Tensor>> {
        unbind(self, axis)
    }

    /// `repeat_interleave` as a method.
    pub fn repeat_interleave(&self, repeats: usize, axis: Option<isize>) -> Result<Tensor> {
        repeat_interleave(self, repeats, axis)
    }
}
