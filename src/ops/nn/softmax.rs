//! `softmax` and `log_softmax` along one axis (`paddle.nn.functional.softmax`), numerically
//! stable (the maximum is subtracted first), with fused backward kernels.
//!
//! The tensor is viewed as (outer, R, inner) around the axis. On the GPU a row that is
//! contiguous (inner == 1) and long enough gets one workgroup that finds the maximum and
//! Σexp with tree reductions and writes the result in one dispatch; otherwise each
//! (outer, inner) line gets one invocation that loops over R.

use crate::autograd::{is_grad_enabled, record1};
use crate::backend::cpu::{CpuData, par_blocks_mut};
use crate::backend::gpu::{Bind, GpuBuffer, Kernel, Variant, grid};
use crate::tensor::Backend;
use crate::{DType, Element, Error, Result, Tensor};

pub(crate) static SOFTMAX: Kernel = Kernel { file: "softmax.wgsl", variants: || vec![variant(false), variant(true)] };

pub(crate) static SOFTMAX_GRAD: Kernel =
    Kernel { file: "softmax_grad.wgsl", variants: || vec![variant(false), variant(true)] };

/// Rows shorter than this use the thread-per-line kernel even when contiguous: a whole
/// workgroup per row would leave most of its invocations idle.
const ROWS_MIN_LEN: usize = 32;

fn variant(log: bool) -> Variant {
    vec![("LOG", log.to_string())]
}

/// (outer, R, inner) around the softmax axis.
type Geom = (usize, usize, usize);

/// Softmax along `axis` (Paddle's default axis is -1): `exp(x − max) / Σ exp(x − max)`.
pub fn softmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    softmax_op(false, x, axis)
}

/// Log-softmax along `axis`: `x − max − log Σ exp(x − max)`, without forming the softmax.
pub fn log_softmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    softmax_op(true, x, axis)
}

fn op_name(log: bool) -> &'static str {
    if log { "log_softmax" } else { "softmax" }
}

fn softmax_op(log: bool, x: &Tensor, axis: isize) -> Result<Tensor> {
    let op = op_name(log);
    if !x.dtype().is_float() {
        return Err(Error::unsupported(op, x.dtype(), "(softmax needs a float tensor; cast first)"));
    }
    if x.dtype() == DType::Float16 {
        return softmax_op(log, &x.cast(DType::Float32)?, axis)?.cast(DType::Float16);
    }
    if x.ndim() == 0 {
        // A 0-D tensor is a one-element row, as in Paddle.
        if axis != 0 && axis != -1 {
            return Err(Error::Axis { op, axis, rank: 0, shape: vec![] });
        }
        return softmax_op(log, &x.reshape([1usize])?, 0)?.reshape(Vec::<usize>::new());
    }
    let ax = x.shape_ref().axis(op, axis)?;
    let geom = x.shape_ref().around(ax);
    let out = if x.is_empty() {
        x.detach().clone_data()?
    } else {
        match x.backend() {
            Backend::Cpu(d) => Tensor::from_cpu(cpu_forward(op, log, &d, geom)?, x.shape()),
            Backend::Gpu(b) => Tensor::from_gpu(gpu_forward(op, log, b, geom)?, x.shape(), x.dtype()),
        }
    };
    let y = out.downgrade();
    Ok(record1(op, &[x], out, move |c| {
        let y = y.upgrade()?;
        let g = c.grad();
        let gx = if is_grad_enabled() {
            // create_graph: ordinary tensor ops, so the gradient can be differentiated again.
            if log {
                g.sub(&y.exp()?.mul(&g.sum(&[axis], true)?)?)?
            } else {
                y.mul(&g.sub(&g.mul(&y)?.sum(&[axis], true)?)?)?
            }
        } else {
            softmax_backward(log, &y, g, geom)?
        };
        Ok(vec![Some(gx)])
    }))
}

/// The fused backward: `dx` from the op's output `y` and the output gradient `g`.
fn softmax_backward(log: bool, y: &Tensor, g: &Tensor, geom: Geom) -> Result<Tensor> {
    let op = op_name(log);
    let g = g.cast(y.dtype())?;
    y.same_place(op, &g)?;
    if y.is_empty() {
        return g.zeros_like();
    }
    Ok(match (y.backend(), g.backend()) {
        (Backend::Cpu(yd), Backend::Cpu(gd)) => Tensor::from_cpu(cpu_backward(op, log, &yd, &gd, geom)?, y.shape()),
        (Backend::Gpu(yb), Backend::Gpu(gb)) => {
            let ctx = &yb.ctx;
            let dx = ctx.alloc(op, 4 * y.numel() as u64)?;
            let binds = [Bind::read(yb), Bind::read(gb), Bind::write(&dx)];
            dispatch(&SOFTMAX_GRAD, log, &binds, geom)?;
            Tensor::from_gpu(dx, y.shape(), y.dtype())
        }
        _ => unreachable!("places were checked equal"),
    })
}

/// Dispatches the `rows` or the `strided` entry of a softmax-family kernel.
fn dispatch(kernel: &Kernel, log: bool, binds: &[Bind<'_>], (outer, len, inner): Geom) -> Result<()> {
    let ctx = &binds[0].buffer.ctx;
    let params = [outer as u32, len as u32, inner as u32];
    if inner == 1 && len >= ROWS_MIN_LEN {
        ctx.dispatch(kernel, &variant(log), "rows", binds, &params, grid(ctx, outer as u64)?)
    } else {
        ctx.dispatch_1d(kernel, &variant(log), "strided", binds, &params, (outer * inner) as u64)
    }
}

fn gpu_forward(op: &'static str, log: bool, buf: &GpuBuffer, geom: Geom) -> Result<GpuBuffer> {
    let out = buf.ctx.alloc(op, 4 * (geom.0 * geom.1 * geom.2) as u64)?;
    dispatch(&SOFTMAX, log, &[Bind::read(buf), Bind::write(&out)], geom)?;
    Ok(out)
}

fn cpu_forward(op: &'static str, log: bool, d: &CpuData, geom: Geom) -> Result<CpuData> {
    Ok(match d {
        CpuData::F32(v) => CpuData::F32(forward_rows(v, log, geom)),
        CpuData::F64(v) => CpuData::F64(forward_rows(v, log, geom)),
        other => return Err(Error::unsupported(op, other.dtype(), "")),
    })
}

/// CPU softmax in f64 over each (outer, inner) line.
fn forward_rows<T: Element>(x: &[T], log: bool, (_, len, inner): Geom) -> Vec<T> {
    let mut out = vec![T::from_f64(0.0); x.len()];
    par_blocks_mut(&mut out, len * inner, |first, blocks| {
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
    });
    out
}

fn cpu_backward(op: &'static str, log: bool, y: &CpuData, g: &CpuData, geom: Geom) -> Result<CpuData> {
    Ok(match (y, g) {
        (CpuData::F32(y), CpuData::F32(g)) => CpuData::F32(backward_rows(y, g, log, geom)),
        (CpuData::F64(y), CpuData::F64(g)) => CpuData::F64(backward_rows(y, g, log, geom)),
        (other, _) => return Err(Error::unsupported(op, other.dtype(), "")),
    })
}

fn backward_rows<T: Element>(y: &[T], g: &[T], log: bool, (_, len, inner): Geom) -> Vec<T> {
    let mut out = vec![T::from_f64(0.0); y.len()];
    par_blocks_mut(&mut out, len * inner, |first, blocks| {
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
    });
    out
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
