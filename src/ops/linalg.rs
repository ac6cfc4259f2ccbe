//! Vector and matrix products and norms built from registered ops: `outer`, `kron`, `norm`.

use crate::{Error, Result, Tensor};

/// The outer product of two vectors (`paddle.outer`; inputs are flattened):
/// `out[i, j] = x[i] · y[j]`.
pub fn outer(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    crate::reshape(x, &[-1, 1])?.multiply(&crate::reshape(y, &[1, -1])?)
}

/// The Kronecker product (`paddle.kron`): with both ranks padded to the larger, output
/// dimension `k` has size `x_k · y_k` and `out[i·y_k + j] = x[i] · y[j]` along every axis.
pub fn kron(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let r = x.ndim().max(y.ndim());
    let pad = |t: &Tensor| -> Vec<i64> {
        std::iter::repeat_n(1, r - t.ndim()).chain(t.shape().iter().map(|&d| d as i64)).collect()
    };
    let (xs, ys) = (pad(x), pad(y));
    // x as [x0, 1, x1, 1, …] and y as [1, y0, 1, y1, …]: the product interleaves the axes.
    let xi: Vec<i64> = xs.iter().flat_map(|&d| [d, 1]).collect();
    let yi: Vec<i64> = ys.iter().flat_map(|&d| [1, d]).collect();
    let out: Vec<i64> = xs.iter().zip(&ys).map(|(a, b)| a * b).collect();
    x.reshape(xi)?.multiply(&y.reshape(yi)?)?.reshape(out)
}

/// Which norm [`norm`] computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormKind {
    /// Frobenius: the square root of the sum of squares (Paddle's default `p='fro'`).
    Fro,
    /// `(Σ |x|^p)^(1/p)`; `P(0.0)` counts the nonzero elements.
    P(f64),
    /// `max |x|` (`p = inf`).
    Inf,
    /// `min |x|` (`p = -inf`).
    NegInf,
}

/// The vector norm of `x` over `axis` (every axis when empty) (`paddle.linalg.norm` for
/// vectors and the Frobenius norm of matrices). Gradients at an all-zero input are zero,
/// as PyTorch's, not NaN.
pub fn norm(x: &Tensor, kind: NormKind, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    if !x.dtype().is_float() {
        return Err(Error::unsupported("norm", x.dtype(), "(expected float16, float32 or float64)"));
    }
    match kind {
        NormKind::Inf => crate::max(&x.abs()?, axis, keepdim),
        NormKind::NegInf => crate::min(&x.abs()?, axis, keepdim),
        NormKind::P(0.0) => crate::sum(&x.not_equal_scalar(0)?.cast(x.dtype())?, axis, keepdim),
        NormKind::P(1.0) => crate::sum(&x.abs()?, axis, keepdim),
        NormKind::P(p) if !p.is_finite() => {
            Err(Error::invalid("norm", format!("p = {p}: use NormKind::Inf or NormKind::NegInf")))
        }
        NormKind::Fro | NormKind::P(2.0) => root_of_sum(&x.square()?, 2.0, axis, keepdim),
        NormKind::P(p) => root_of_sum(&x.abs()?.pow(p)?, p, axis, keepdim),
    }
}

/// `(Σ powers)^(1/p)` with a zero sum giving 0 and a zero gradient (the root's derivative
/// at 0 is infinite; the masked branch keeps it out of the backward pass).
fn root_of_sum(powers: &Tensor, p: f64, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    let s = crate::sum(powers, axis, keepdim)?;
    let zero = s.equal_scalar(0)?;
    let safe = crate::where_(&zero, &crate::ones_like(&s)?, &s)?;
    let root = if p == 2.0 { safe.sqrt()? } else { safe.pow(1.0 / p)? };
    crate::where_(&zero, &s.zeros_like()?, &root)
}

impl Tensor {
    /// `norm` as a method.
    pub fn norm(&self, kind: NormKind, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        norm(self, kind, axis, keepdim)
    }
}
