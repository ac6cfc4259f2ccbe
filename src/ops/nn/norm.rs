//! Normalisation layers' functional forms: `layer_norm` (`paddle.nn.functional.layer_norm`)
//! and `batch_norm` (`paddle.nn.functional.batch_norm`), with fused CPU and GPU kernels for
//! the forward pass (statistics and normalisation) and for the backward pass. This file
//! holds what both share.
//!
//! Backward rules run the fused kernels; under `create_graph` they are written in ordinary
//! tensor ops instead (recomputing the statistics from `x`), so they can be differentiated
//! again.

pub(crate) mod batch_norm;
pub(crate) mod layer_norm;

pub use batch_norm::{BatchNormOptions, batch_norm};
pub use layer_norm::layer_norm;

use std::sync::{Arc, RwLockReadGuard};

use crate::backend::Storage;
use crate::backend::cpu::{CpuData, typed_ref};
use crate::backend::gpu::GpuBuffer;
use crate::{DType, Element, Error, Result, Tensor};

/// Gradients of (x, weight, bias), each computed only where needed.
type Grads3 = (Option<Tensor>, Option<Tensor>, Option<Tensor>);

/// The GPU buffer of a tensor whose place was checked to be a GPU.
fn gpu_buf(t: &Tensor) -> &Arc<GpuBuffer> {
    match t.storage() {
        Storage::Gpu(b) => b,
        Storage::Cpu(_) => unreachable!("places were checked equal"),
    }
}

/// The host data of a tensor whose place was checked to be the CPU.
fn cpu_data(t: &Tensor) -> RwLockReadGuard<'_, CpuData> {
    match t.storage() {
        Storage::Cpu(d) => d.read().unwrap_or_else(|e| e.into_inner()),
        Storage::Gpu(_) => unreachable!("places were checked equal"),
    }
}

/// The elements of `d` as `&[T]`.
fn slice<'a, T: Element>(op: &'static str, d: &'a CpuData) -> Result<&'a [T]> {
    typed_ref::<T>(d).map(Vec::as_slice).ok_or_else(|| Error::unsupported(op, d.dtype(), "(internal dtype mismatch)"))
}

/// A copy of a small CPU tensor's elements (weights, statistics).
fn small_vec<T: Element>(op: &'static str, t: &Tensor) -> Result<Vec<T>> {
    Ok(slice::<T>(op, &cpu_data(t))?.to_vec())
}

fn from_vec<T: Element>(v: Vec<T>, shape: impl Into<crate::Shape>) -> Tensor {
    Tensor::from_cpu(T::into_data(v), shape)
}

/// Checks an affine parameter or running statistic against `x`: same place, a float dtype
/// equal to x's (a float16 input also takes float32 parameters), and a shape `ok` accepts.
fn check_param(
    op: &'static str,
    name: &str,
    x: &Tensor,
    p: &Tensor,
    any_float: bool,
    ok: bool,
    expected: &str,
) -> Result<()> {
    x.same_place(op, p)?;
    if !p.dtype().is_float() {
        return Err(Error::unsupported(op, p.dtype(), format!("for {name} (expected a float tensor)")));
    }
    let mixed_ok = any_float || (x.dtype() == DType::Float16 && p.dtype() == DType::Float32);
    if p.dtype() != x.dtype() && !mixed_ok {
        return Err(Error::DTypeMismatch { op, lhs: x.dtype(), rhs: p.dtype() });
    }
    if !ok {
        return Err(Error::shape(op, format!("{name} has shape {:?} but {expected}", p.shape())));
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

/// The gradient slots of `[x, weight?, bias?]` in record order.
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
