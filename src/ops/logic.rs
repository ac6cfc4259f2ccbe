//! Truth reductions and closeness (`any`, `all`, `isclose`, `allclose`), composed from
//! registered ops.

use crate::{DType, Place, Result, Tensor};

/// `x` as bool: itself, or `x != 0` (NaN counts as true, as in numpy and Paddle).
fn truth(x: &Tensor) -> Result<Tensor> {
    if x.dtype() == DType::Bool { Ok(x.clone()) } else { x.not_equal_scalar(0) }
}

/// True where any element along `axis` is true (nonzero); over every axis when empty
/// (`paddle.any`). An empty reduction is false.
pub fn any(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    crate::sum(&truth(x)?.cast(DType::Int64)?, axis, keepdim)?.greater_than_scalar(0)
}

/// True where every element along `axis` is true (nonzero); over every axis when empty
/// (`paddle.all`). An empty reduction is true.
pub fn all(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    crate::sum(&truth(x)?.logical_not()?.cast(DType::Int64)?, axis, keepdim)?.equal_scalar(0)
}

/// Element-wise `|x − y| ≤ atol + rtol·|y|` (`paddle.isclose`), bool. Equal values are
/// close (so are equal infinities), a finite and an infinite value never are, and NaN is
/// close to NaN only with `equal_nan`. Integer inputs compare as floats.
pub fn isclose(x: &Tensor, y: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
    let as_float = |t: &Tensor| -> Result<Tensor> {
        match t.dtype() {
            d if d.is_float() => Ok(t.clone()),
            _ => t.cast(if t.place() == Place::Cpu { DType::Float64 } else { DType::Float32 }),
        }
    };
    let (x, y) = (as_float(x)?, as_float(y)?);
    let bound = y.abs()?.scale(rtol, atol)?;
    let finite = x.isfinite()?.logical_and(&y.isfinite()?)?;
    let near = x.subtract(&y)?.abs()?.less_equal(&bound)?.logical_and(&finite)?;
    let close = near.logical_or(&x.equal(&y)?)?;
    if equal_nan { close.logical_or(&x.isnan()?.logical_and(&y.isnan()?)?) } else { Ok(close) }
}

/// True when every element pair is close (`paddle.allclose`), as a 0-d bool tensor.
pub fn allclose(x: &Tensor, y: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
    all(&isclose(x, y, rtol, atol, equal_nan)?, &[], false)
}

impl Tensor {
    /// `any` as a method.
    pub fn any(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        any(self, axis, keepdim)
    }

    /// `all` as a method.
    pub fn all(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        all(self, axis, keepdim)
    }

    /// `isclose` as a method.
    pub fn isclose(&self, y: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        isclose(self, y, rtol, atol, equal_nan)
    }

    /// `allclose` as a method.
    pub fn allclose(&self, y: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        allclose(self, y, rtol, atol, equal_nan)
    }
}
