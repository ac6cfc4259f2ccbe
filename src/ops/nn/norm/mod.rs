//! Normalisation layers' functional forms: `layer_norm` (`paddle.nn.functional.layer_norm`)
//! and `batch_norm` (`paddle.nn.functional.batch_norm`), with fused CPU and GPU kernels for
//! the forward pass (statistics and normalisation) and for the backward pass. This file
//! holds what both share.
//!
//! Backward rules run the fused gradient ops; under `create_graph` they are written in
//! ordinary tensor ops instead (recomputing the statistics from `x`), so they can be
//! differentiated again.

pub(crate) mod batch_norm;
pub(crate) mod layer_norm;

pub use batch_norm::{BatchNormOptions, batch_norm};
pub use layer_norm::layer_norm;

use crate::backend::cpu::{CpuData, typed_ref};
use crate::tensor::TensorMeta;
use crate::{DType, Element, Error, Result, Tensor};

/// Gradients of (x, weight, bias), each computed only where needed.
type Grads3 = (Option<Tensor>, Option<Tensor>, Option<Tensor>);

/// The elements of `d` as `&[T]`.
fn slice<'a, T: Element>(op: &'static str, d: &'a CpuData) -> Result<&'a [T]> {
    typed_ref::<T>(d).map(Vec::as_slice).ok_or_else(|| Error::unsupported(op, d.dtype(), "(internal dtype mismatch)"))
}

/// The elements of `d` as f64 (weights, statistics: small vectors).
fn f64s(d: &CpuData) -> Vec<f64> {
    (0..d.len()).map(|i| d.get_f64(i)).collect()
}

/// Checks an affine parameter or statistic against `x`: a float dtype equal to x's (a
/// float16 or bfloat16 input also takes float32 parameters), and a shape `ok` accepts.
fn check_param(op: &'static str, name: &str, x: &TensorMeta, p: &TensorMeta, ok: bool, expected: &str) -> Result<()> {
    p.expect_float(op, name)?;
    if p.dtype != x.dtype && !(x.dtype.is_half() && p.dtype == DType::Float32) {
        return Err(Error::DTypeMismatch { op, lhs: x.dtype, rhs: p.dtype });
    }
    if !ok {
        return Err(Error::shape(op, format!("{name} has shape {:?} but {expected}", p.dims())));
    }
    Ok(())
}

fn check_epsilon(op: &'static str, epsilon: f64) -> Result<()> {
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(Error::invalid(op, format!("epsilon must be finite and non-negative, got {epsilon}")));
    }
    Ok(())
}

fn f32_param(v: f64) -> u32 {
    (v as f32).to_bits()
}

fn cast_opt(t: Option<&Tensor>, dtype: DType) -> Result<Option<Tensor>> {
    t.map(|t| t.cast(dtype)).transpose()
}

/// `[x, weight?, bias?]`: the inputs of an op with optional affine parameters.
fn with_affine<'a>(x: &'a Tensor, weight: Option<&'a Tensor>, bias: Option<&'a Tensor>) -> Vec<&'a Tensor> {
    let mut v = vec![x];
    v.extend(weight);
    v.extend(bias);
    v
}

/// The gradient slots of `[x, weight?, bias?]` in input order.
fn grads_vec(
    dx: Option<Tensor>,
    has_w: bool,
    dw: Option<Tensor>,
    has_b: bool,
    db: Option<Tensor>,
) -> Vec<Option<Tensor>> {
    let mut v = vec![dx];
    if has_w {
        v.push(dw);
    }
    if has_b {
        v.push(db);
    }
    v
}

/// Which of (dx, dweight, dbias) a fused gradient op computes; the others come back empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Needs {
    x: bool,
    w: bool,
    b: bool,
}

/// A fused gradient op's three outputs: the needed ones with their shapes, the others `[0]`.
fn grad_metas(x: &TensorMeta, n: Needs, param: &[usize]) -> Vec<TensorMeta> {
    let pick = |need: bool, shape: &[usize]| x.with_shape(if need { shape.to_vec() } else { vec![0] });
    vec![pick(n.x, x.dims()), pick(n.w, param), pick(n.b, param)]
}

/// The non-empty outputs of a fused gradient op as `(dx, dw, db)`.
fn grads3(mut outs: Vec<Tensor>, n: Needs) -> Result<Grads3> {
    let db = outs.pop().filter(|_| n.b);
    let dw = outs.pop().filter(|_| n.w);
    let dx = outs.pop().filter(|_| n.x);
    Ok((dx, dw, db))
}
