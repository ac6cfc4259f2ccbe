//! `softmax` and `log_softmax` along one axis (`paddle.nn.functional.softmax`), numerically
//! stable (the maximum is subtracted first), with fused backward kernels.
//!
//! The tensor is viewed as (outer, R, inner) around the axis. On the GPU a row that is
//! contiguous (inner == 1) and long enough gets one workgroup that finds the maximum and
//! Σexp with tree reductions and writes the result in one dispatch (rows up to 1,024
//! elements held in registers, read once); otherwise, and for many rows on a software
//! adapter, each (outer, inner) line gets one invocation that loops over R.

use crate::backend::cpu::float_kernel;
use crate::backend::cpu::{CpuData, par_blocks_new};
use crate::backend::gpu::{Bind, GpuContext, Kernel, ROW_CACHE_MAX_LEN, Variant, grid};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::op_header;
use crate::ops::registry::{AmpList, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::tensor::grad_mode::is_grad_enabled;
use crate::{Element, Error, Result, Tensor};

pub(crate) static SOFTMAX: Kernel = Kernel { file: "softmax.wgsl", keys: || wgsl::with_f16_keys(vec![0, 1]), variant };

pub(crate) static SOFTMAX_GRAD: Kernel =
    Kernel { file: "softmax_grad.wgsl", keys: || wgsl::with_f16_keys(vec![0, 1]), variant };

/// Rows shorter than this use the thread-per-line kernel even when contiguous: a whole
/// workgroup per row would leave most of its invocations idle.
const ROWS_MIN_LEN: usize = 32;

/// Key bit 0: log-softmax; [`wgsl::F16_ELEMENTS`]: float16 tensors.
fn variant(key: u32) -> Variant {
    let (log, mut v) = wgsl::element_variant(key);
    v.push(("LOG", (log == 1).to_string()));
    v
}

/// (outer, R, inner) around the softmax axis.
type Geom = (usize, usize, usize);

/// `softmax` / `log_softmax`'s attribute.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct SoftmaxAttrs {
    pub axis: isize,
}

/// Softmax or log-softmax along an axis (`log` picks log-softmax).
pub(crate) struct SoftmaxOp {
    log: bool,
}

pub(crate) static SOFTMAX_OP: SoftmaxOp = SoftmaxOp { log: false };
pub(crate) static LOG_SOFTMAX_OP: SoftmaxOp = SoftmaxOp { log: true };

/// The fused gradient of softmax / log-softmax: inputs `[y, dy]`.
pub(crate) struct SoftmaxGradOp {
    log: bool,
}

pub(crate) static SOFTMAX_GRAD_OP: SoftmaxGradOp = SoftmaxGradOp { log: false };
pub(crate) static LOG_SOFTMAX_GRAD_OP: SoftmaxGradOp = SoftmaxGradOp { log: true };

fn op_name(log: bool) -> &'static str {
    if log { "log_softmax" } else { "softmax" }
}

/// `(outer, R, inner)` around the axis; a 0-D tensor is a one-element row, as in Paddle.
fn geom_of(op: &'static str, x: &TensorMeta, axis: isize) -> Result<Geom> {
    x.expect_float(op, "the input")?;
    if x.rank() == 0 {
        if axis != 0 && axis != -1 {
            return Err(Error::Axis { op, axis, rank: 0, shape: vec![] });
        }
        return Ok((1, 1, 1));
    }
    Ok(x.shape.around(x.shape.axis(op, axis)?))
}

op_header!(SoftmaxOp: SoftmaxAttrs, Geom; |op| op_name(op.log));

impl Op for SoftmaxOp {
    fn facts(&self) -> Facts {
        Facts { amp: AmpList::BlackFloat16, ..Facts::NONE }
    }
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &SoftmaxAttrs) -> Result<(Vec<TensorMeta>, Geom)> {
        let op = op_name(self.log);
        let [x] = inputs(op, xs)?;
        Ok((vec![(*x).clone()], geom_of(op, x, a.axis)?))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &SoftmaxAttrs, geom: &Geom) -> Result<Vec<CpuData>> {
        Ok(vec![cpu_forward(op_name(self.log), self.log, k.x(0), *geom)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &SoftmaxAttrs, geom: &Geom) -> Result<()> {
        let key = self.log as u32 | wgsl::f16_bit(k.ins[0].dtype);
        dispatch(k.ctx, &SOFTMAX, key, &[Bind::read(k.x(0)), Bind::write(k.y(0))], *geom)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, a: &SoftmaxAttrs, _: &Geom) -> Result<Vec<Option<Tensor>>> {
        let (y, dy, axis) = (g.y(0)?, g.g(), a.axis);
        let gx = || -> Result<Tensor> {
            if is_grad_enabled() {
                // create_graph: ordinary tensor ops, so the gradient can be differentiated again.
                if self.log {
                    dy.sub(&y.exp()?.mul(&dy.sum(&[axis], true)?)?)
                } else {
                    y.mul(&dy.sub(&dy.mul(&y)?.sum(&[axis], true)?)?)
                }
            } else {
                let grad = if self.log { &LOG_SOFTMAX_GRAD_OP } else { &SOFTMAX_GRAD_OP };
                apply1(grad, &[&y, &dy.cast(y.dtype())?], a.clone())
            }
        };
        Ok(vec![g.grad_if(0, gx)?])
    }
}

op_header!(SoftmaxGradOp: SoftmaxAttrs, Geom; |op| if op.log { "log_softmax_grad" } else { "softmax_grad" });

impl Op for SoftmaxGradOp {
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &SoftmaxAttrs) -> Result<(Vec<TensorMeta>, Geom)> {
        let op = op_name(self.log);
        let [y, dy] = inputs(op, xs)?;
        if y.shape != dy.shape || y.dtype != dy.dtype {
            return Err(Error::shape(
                op,
                format!("gradient {:?} {} for output {:?} {}", dy.dims(), dy.dtype, y.dims(), y.dtype),
            ));
        }
        Ok((vec![(*y).clone()], geom_of(op, y, a.axis)?))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &SoftmaxAttrs, geom: &Geom) -> Result<Vec<CpuData>> {
        Ok(vec![cpu_backward(op_name(self.log), self.log, k.x(0), k.x(1), *geom)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &SoftmaxAttrs, geom: &Geom) -> Result<()> {
        let key = self.log as u32 | wgsl::f16_bit(k.ins[0].dtype);
        dispatch(k.ctx, &SOFTMAX_GRAD, key, &[Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::write(k.y(0))], *geom)
    }
}

/// Softmax along `axis` (Paddle's default axis is -1): `exp(x − max) / Σ exp(x − max)`.
pub fn softmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    apply1(&SOFTMAX_OP, &[x], SoftmaxAttrs { axis })
}

/// Log-softmax along `axis`: `x − max − log Σ exp(x − max)`, without forming the softmax.
pub fn log_softmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    apply1(&LOG_SOFTMAX_OP, &[x], SoftmaxAttrs { axis })
}

/// Dispatches the `rows_cached`, `rows` or `strided` entry of a softmax-family kernel.
pub(crate) fn dispatch(
    ctx: &GpuContext,
    kernel: &'static Kernel,
    key: u32,
    binds: &[Bind<'_>],
    (outer, len, inner): Geom,
) -> Result<()> {
    let params = [outer as u32, len as u32, inner as u32];
    let software_rows = inner == 1 && ctx.rows_without_barriers(outer, len, 3);
    if inner == 1 && len >= ROWS_MIN_LEN && !software_rows {
        let entry = if len <= ROW_CACHE_MAX_LEN { "rows_cached" } else { "rows" };
        ctx.dispatch(kernel, key, entry, binds, &params, grid(ctx, outer as u64)?)
    } else {
        ctx.dispatch(kernel, key, "strided", binds, &params, (outer * inner) as u64)
    }
}

pub(crate) fn cpu_forward(op: &'static str, log: bool, d: &CpuData, geom: Geom) -> Result<CpuData> {
    float_kernel!(op; v = d => forward_rows(v, log, geom))
}

/// CPU softmax in f64 over each (outer, inner) line.
fn forward_rows<T: Element>(x: &[T], log: bool, (_, len, inner): Geom) -> Vec<T> {
    par_blocks_new(x.len(), T::from_f64(0.0), len * inner, |first, blocks| {
        for (b, block) in blocks.chunks_mut(len * inner).enumerate() {
            let base = (first + b) * len * inner;
            for i in 0..inner {
                let at = |r: usize| x[base + r * inner + i].to_f64();
                let m = (0..len).map(at).fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = (0..len).map(|r| (at(r) - m).exp()).sum();
                for r in 0..len {
                    let s = at(r) - m;
                    block[r * inner + i] = T::from_f64(if log { s - total.ln() } else { s.exp() / total });
                }
            }
        }
    })
}

fn cpu_backward(op: &'static str, log: bool, y: &CpuData, g: &CpuData, geom: Geom) -> Result<CpuData> {
    float_kernel!(op; y = y, g = g => backward_rows(y, g, log, geom))
}

fn backward_rows<T: Element>(y: &[T], g: &[T], log: bool, (_, len, inner): Geom) -> Vec<T> {
    par_blocks_new(y.len(), T::from_f64(0.0), len * inner, |first, blocks| {
        for (b, block) in blocks.chunks_mut(len * inner).enumerate() {
            let base = (first + b) * len * inner;
            for i in 0..inner {
                let k = |r: usize| base + r * inner + i;
                let (yv, gv) = (|r: usize| y[k(r)].to_f64(), |r: usize| g[k(r)].to_f64());
                if log {
                    let total: f64 = (0..len).map(gv).sum();
                    for r in 0..len {
                        block[r * inner + i] = T::from_f64(gv(r) - yv(r).exp() * total);
                    }
                } else {
                    let total: f64 = (0..len).map(|r| gv(r) * yv(r)).sum();
                    for r in 0..len {
                        block[r * inner + i] = T::from_f64(yv(r) * (gv(r) - total));
                    }
                }
            }
        }
    })
}

impl Tensor {
    /// `softmax(self, axis)`.
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        softmax(self, axis)
    }

    /// `log_softmax(self, axis)`.
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        log_softmax(self, axis)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&SOFTMAX_OP, &LOG_SOFTMAX_OP, &SOFTMAX_GRAD_OP, &LOG_SOFTMAX_GRAD_OP],
    kernels: &[&SOFTMAX, &SOFTMAX_GRAD],
};
