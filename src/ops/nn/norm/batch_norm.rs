//! `batch_norm` (`paddle.nn.functional.batch_norm`): per-channel statistics of x viewed as
//! [N, C, S]. On the GPU one workgroup per channel computes the batch mean and variance, an
//! elementwise kernel normalises; backward is one per-channel reduction (Σg, Σg·x̂, and the
//! dx coefficients) and one elementwise dx kernel.
//!
//! Running variance: as Paddle 2.x (its `batch_norm` CPU kernel), the running variance is
//! updated with the **biased** batch variance (divided by N·H·W, the variance that
//! normalises the batch): `running_var = momentum · running_var + (1 − momentum) · var`.
//! PyTorch uses the unbiased variance there; Paddle does not.

use super::{
    Grads3, cast_opt, check_epsilon, check_param, cpu_data, f32_param, from_vec, gpu_buf, grads_vec, slice, small_vec,
};
use crate::autograd::{is_grad_enabled, no_grad, record};
use crate::backend::Storage;
use crate::backend::cpu::par_blocks_mut;
use crate::backend::gpu::{Bind, GpuBuffer, Kernel, grid};
use crate::{DType, Element, Error, Result, Tensor};

pub(crate) static BATCH_NORM: Kernel = Kernel { file: "batch_norm.wgsl", variants: || vec![vec![]] };
pub(crate) static BATCH_NORM_APPLY: Kernel = Kernel { file: "batch_norm_apply.wgsl", variants: || vec![vec![]] };
pub(crate) static BATCH_NORM_GRAD: Kernel = Kernel { file: "batch_norm_grad.wgsl", variants: || vec![vec![]] };
pub(crate) static BATCH_NORM_DX: Kernel = Kernel { file: "batch_norm_dx.wgsl", variants: || vec![vec![]] };

/// Paddle's keyword arguments of `F.batch_norm`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    /// Training mode: normalise with the batch statistics and update the running ones
    /// (default `false`, as `F.batch_norm`).
    pub training: bool,
    /// `running = momentum · running + (1 − momentum) · batch` (default 0.9).
    pub momentum: f64,
    /// Added to the variance before the square root (default 1e-5).
    pub epsilon: f64,
    /// `Some(true)`: always normalise with the running statistics (and never update them);
    /// `Some(false)`: always use (and update with) the batch statistics; `None` (default):
    /// follow `training`.
    pub use_global_stats: Option<bool>,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions { training: false, momentum: 0.9, epsilon: 1e-5, use_global_stats: None }
    }
}

/// (N, C, S): x viewed as batch, channels and the product of the remaining dims.
type BnGeom = (usize, usize, usize);

/// Batch normalisation over the channel axis 1 of `x` (`[N, C]`, `[N, C, L]`, `[N, C, H, W]`,
/// `[N, C, D, H, W]`; `paddle.nn.functional.batch_norm`):
/// `y = (x − mean[c]) / sqrt(var[c] + epsilon) · weight[c] + bias[c]`.
///
/// With batch statistics (training, unless `use_global_stats` says otherwise) the mean and
/// biased variance over N and the spatial dims normalise `x`, and `running_mean` /
/// `running_var` (shape `[C]`) are updated in place:
/// `running = momentum · running + (1 − momentum) · batch`, with the biased variance as
/// Paddle. Otherwise the running statistics normalise and stay unchanged. `weight` and
/// `bias` (shape `[C]`) may be `None` (no scale / shift).
pub fn batch_norm(
    x: &Tensor,
    running_mean: &Tensor,
    running_var: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    options: &BatchNormOptions,
) -> Result<Tensor> {
    const OP: &str = "batch_norm";
    x.expect_float(OP)?;
    check_epsilon(OP, options.epsilon)?;
    if !(0.0..=1.0).contains(&options.momentum) {
        return Err(Error::invalid(OP, format!("momentum must be in [0, 1], got {}", options.momentum)));
    }
    if x.ndim() < 2 {
        return Err(Error::shape(
            OP,
            format!("input must have rank ≥ 2 ([N, C], [N, C, L], [N, C, H, W], ...), got shape {:?}", x.shape()),
        ));
    }
    let channels = x.shape()[1];
    let expected = format!("expected [{channels}] (the channels of input {:?})", x.shape());
    for (name, p, any) in [("running_mean", Some(running_mean), true), ("running_var", Some(running_var), true)]
        .into_iter()
        .chain([("weight", weight, false), ("bias", bias, false)])
    {
        if let Some(p) = p {
            check_param(OP, name, x, p, any, p.shape() == [channels], &expected)?;
        }
    }
    if x.dtype() == DType::Float16 {
        let (w, b) = (cast_opt(weight, DType::Float32)?, cast_opt(bias, DType::Float32)?);
        let y = batch_norm(&x.cast(DType::Float32)?, running_mean, running_var, w.as_ref(), b.as_ref(), options)?;
        return y.cast(DType::Float16);
    }
    let geom: BnGeom = (x.shape()[0], channels, x.shape()[2..].iter().product());
    let batch_stats = options.use_global_stats.map_or(options.training, |g| !g);
    let dtype = x.dtype();
    let eps = options.epsilon;
    let (mean, rstd) = if batch_stats {
        if geom.0 * geom.2 == 0 {
            return Err(Error::shape(
                OP,
                format!("batch statistics need at least one value per channel, input has shape {:?}", x.shape()),
            ));
        }
        let (mean, var, rstd) = match x.storage() {
            Storage::Cpu(_) => match dtype {
                DType::Float32 => bn_stats_cpu::<f32>(x, geom, eps)?,
                _ => bn_stats_cpu::<f64>(x, geom, eps)?,
            },
            Storage::Gpu(_) => bn_stats_gpu(x, geom, eps)?,
        };
        let m = options.momentum;
        no_grad(|| -> Result<()> {
            for (running, batch) in [(running_mean, &mean), (running_var, &var)] {
                let r = running.cast(dtype)?;
                let new = r.scale(m, 0.0)?.add(&batch.scale(1.0 - m, 0.0)?)?;
                running.assign_(&new.cast(running.dtype())?)?;
            }
            Ok(())
        })?;
        (mean, rstd)
    } else {
        // A copy of the running mean: a later in-place update must not change what this
        // op's backward sees.
        no_grad(|| -> Result<(Tensor, Tensor)> {
            Ok((
                running_mean.cast(dtype)?.detach().clone_data()?,
                running_var.cast(dtype)?.scale(1.0, eps)?.rsqrt()?.detach(),
            ))
        })?
    };
    let y = if x.is_empty() {
        x.zeros_like()?
    } else {
        match x.storage() {
            Storage::Cpu(_) => match dtype {
                DType::Float32 => bn_apply_cpu::<f32>(x, &mean, &rstd, weight, bias, geom)?,
                _ => bn_apply_cpu::<f64>(x, &mean, &rstd, weight, bias, geom)?,
            },
            Storage::Gpu(_) => bn_apply_gpu(x, &mean, &rstd, weight, bias, geom)?,
        }
    };
    let (has_w, has_b) = (weight.is_some(), bias.is_some());
    let mut inputs = vec![x];
    inputs.extend(weight);
    inputs.extend(bias);
    let (xs, ws) = (x.clone(), weight.cloned());
    record(OP, &inputs, &[&y], move |c| {
        let g = c.grad();
        let need = (c.needs(0), has_w && c.needs(1), has_b && c.needs(1 + has_w as usize));
        let (dx, dw, db) = if is_grad_enabled() {
            bn_backward_ops(&xs, g, ws.as_ref(), &mean, &rstd, batch_stats, eps, need)?
        } else if xs.is_empty() {
            let zc = |n: bool| -> Result<Option<Tensor>> {
                if n { Ok(Some(crate::zeros_on([geom.1], xs.dtype(), xs.place())?)) } else { Ok(None) }
            };
            (if need.0 { Some(xs.zeros_like()?) } else { None }, zc(need.1)?, zc(need.2)?)
        } else {
            let g = g.cast(xs.dtype())?;
            let w = ws.as_ref().map(|w| w.cast(xs.dtype())).transpose()?;
            bn_backward_fused(&xs, &g, w.as_ref(), &mean, &rstd, batch_stats, geom, need)?
        };
        Ok(grads_vec(dx, has_w, dw, has_b, db))
    });
    Ok(y)
}

/// Per-channel (mean, biased variance, rstd) on the CPU, in f64.
fn bn_stats_cpu<T: Element>(x: &Tensor, (n, c, s): BnGeom, eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "batch_norm";
    let xd = cpu_data(x);
    let xv = slice::<T>(OP, &xd)?;
    let m = (n * s) as f64;
    let mut stats = vec![0.0f64; 3 * c];
    par_blocks_mut(&mut stats, 3, |first, chunk| {
        for (k, st) in chunk.chunks_mut(3).enumerate() {
            let ch = first + k;
            let planes = || (0..n).flat_map(move |i| xv[(i * c + ch) * s..][..s].iter().map(|v| v.to_f64()));
            let mu = planes().sum::<f64>() / m;
            let var = planes().map(|v| (v - mu) * (v - mu)).sum::<f64>() / m;
            st.copy_from_slice(&[mu, var, 1.0 / (var + eps).sqrt()]);
        }
    });
    let pick = |o: usize| from_vec((0..c).map(|ch| T::from_f64(stats[3 * ch + o])).collect::<Vec<T>>(), vec![c]);
    Ok((pick(0), pick(1), pick(2)))
}

fn bn_stats_gpu(x: &Tensor, (n, c, s): BnGeom, eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "batch_norm";
    let xb = gpu_buf(x);
    let ctx = &xb.ctx;
    let outs = [ctx.alloc(OP, 4 * c as u64)?, ctx.alloc(OP, 4 * c as u64)?, ctx.alloc(OP, 4 * c as u64)?];
    let params = [n as u32, c as u32, s as u32, f32_param(eps)];
    let binds = [Bind::read(xb), Bind::write(&outs[0]), Bind::write(&outs[1]), Bind::write(&outs[2])];
    ctx.dispatch(&BATCH_NORM, &vec![], "stats", &binds, &params, grid(ctx, c as u64)?)?;
    let [mean, var, rstd] = outs.map(|b| Tensor::from_gpu(b, vec![c], x.dtype()));
    Ok((mean, var, rstd))
}

fn bn_apply_cpu<T: Element>(
    x: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    (_, c, s): BnGeom,
) -> Result<Tensor> {
    const OP: &str = "batch_norm";
    let (mean, rstd) = (small_vec::<T>(OP, mean)?, small_vec::<T>(OP, rstd)?);
    let w = weight.map(|w| small_vec::<T>(OP, w)).transpose()?;
    let b = bias.map(|b| small_vec::<T>(OP, b)).transpose()?;
    let xd = cpu_data(x);
    let xv = slice::<T>(OP, &xd)?;
    let mut y = vec![T::from_f64(0.0); xv.len()];
    par_blocks_mut(&mut y, s, |first, chunk| {
        for (k, plane) in chunk.chunks_mut(s).enumerate() {
            let q = first + k;
            let ch = q % c;
            let scale = rstd[ch].to_f64() * w.as_ref().map_or(1.0, |w| w[ch].to_f64());
            let shift = b.as_ref().map_or(0.0, |b| b[ch].to_f64());
            let mu = mean[ch].to_f64();
            for (j, out) in plane.iter_mut().enumerate() {
                *out = T::from_f64((xv[q * s + j].to_f64() - mu) * scale + shift);
            }
        }
    });
    Ok(from_vec(y, x.shape()))
}

fn bn_apply_gpu(
    x: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    (_, c, s): BnGeom,
) -> Result<Tensor> {
    const OP: &str = "batch_norm";
    let xb = gpu_buf(x);
    let ctx = &xb.ctx;
    let y = ctx.alloc(OP, 4 * x.numel() as u64)?;
    let (wb, bb) = (weight.map_or(xb, gpu_buf), bias.map_or(xb, gpu_buf));
    let params = [x.numel() as u32, c as u32, s as u32, weight.is_some() as u32, bias.is_some() as u32];
    let binds = [
        Bind::read(xb),
        Bind::read(gpu_buf(mean)),
        Bind::read(gpu_buf(rstd)),
        Bind::read(wb),
        Bind::read(bb),
        Bind::write(&y),
    ];
    ctx.dispatch_1d(&BATCH_NORM_APPLY, &vec![], "main", &binds, &params, x.numel() as u64)?;
    Ok(Tensor::from_gpu(y, x.shape(), x.dtype()))
}

/// The fused batch_norm backward: one per-channel reduction (Σg, Σg·x̂) and one
/// elementwise pass for dx. `batch_stats` adds the terms through the batch statistics.
#[allow(clippy::too_many_arguments)]
fn bn_backward_fused(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    batch_stats: bool,
    geom: BnGeom,
    need: (bool, bool, bool),
) -> Result<Grads3> {
    const OP: &str = "batch_norm";
    x.same_place(OP, g)?;
    match x.storage() {
        Storage::Cpu(_) => match x.dtype() {
            DType::Float32 => bn_backward_cpu::<f32>(x, g, weight, mean, rstd, batch_stats, geom, need),
            _ => bn_backward_cpu::<f64>(x, g, weight, mean, rstd, batch_stats, geom, need),
        },
        Storage::Gpu(_) => bn_backward_gpu(x, g, weight, mean, rstd, batch_stats, geom, need),
    }
}

#[allow(clippy::too_many_arguments)]
fn bn_backward_cpu<T: Element>(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    batch_stats: bool,
    (n, c, s): BnGeom,
    (need_x, need_w, need_b): (bool, bool, bool),
) -> Result<Grads3> {
    const OP: &str = "batch_norm";
    let (mean, rstd) = (small_vec::<T>(OP, mean)?, small_vec::<T>(OP, rstd)?);
    let w = weight.map(|w| small_vec::<T>(OP, w)).transpose()?;
    let (xd, gd) = (cpu_data(x), cpu_data(g));
    let (xv, gv) = (slice::<T>(OP, &xd)?, slice::<T>(OP, &gd)?);
    let m = (n * s) as f64;
    // Per channel: Σg, Σg·x̂.
    let mut sums = vec![0.0f64; 2 * c];
    par_blocks_mut(&mut sums, 2, |first, chunk| {
        for (k, st) in chunk.chunks_mut(2).enumerate() {
            let ch = first + k;
            let (mu, rs) = (mean[ch].to_f64(), rstd[ch].to_f64());
            let (mut sg, mut sgx) = (0.0, 0.0);
            for i in 0..n {
                let base = (i * c + ch) * s;
                for (xe, ge) in xv[base..base + s].iter().zip(&gv[base..base + s]) {
                    let gk = ge.to_f64();
                    sg += gk;
                    sgx += gk * (xe.to_f64() - mu) * rs;
                }
            }
            st[0] = sg;
            st[1] = sgx;
        }
    });
    let dx = if need_x {
        let mut out = vec![T::from_f64(0.0); xv.len()];
        par_blocks_mut(&mut out, s, |first, chunk| {
            for (k, plane) in chunk.chunks_mut(s).enumerate() {
                let q = first + k;
                let ch = q % c;
                let (mu, rs) = (mean[ch].to_f64(), rstd[ch].to_f64());
                let k0 = rs * w.as_ref().map_or(1.0, |w| w[ch].to_f64());
                let (k1, k2) = if batch_stats { (sums[2 * ch] / m, rs * sums[2 * ch + 1] / m) } else { (0.0, 0.0) };
                for (j, out) in plane.iter_mut().enumerate() {
                    let at = q * s + j;
                    *out = T::from_f64(k0 * (gv[at].to_f64() - k1 - (xv[at].to_f64() - mu) * k2));
                }
            }
        });
        Some(from_vec(out, x.shape()))
    } else {
        None
    };
    let pick = |o: usize| from_vec((0..c).map(|ch| T::from_f64(sums[2 * ch + o])).collect::<Vec<T>>(), vec![c]);
    Ok((dx, need_w.then(|| pick(1)), need_b.then(|| pick(0))))
}

#[allow(clippy::too_many_arguments)]
fn bn_backward_gpu(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    batch_stats: bool,
    (n, c, s): BnGeom,
    (need_x, need_w, need_b): (bool, bool, bool),
) -> Result<Grads3> {
    const OP: &str = "batch_norm";
    let (xb, gb, mb) = (gpu_buf(x), gpu_buf(g), gpu_buf(mean));
    let ctx = &xb.ctx;
    let dw = ctx.alloc(OP, 4 * c as u64)?;
    let db = ctx.alloc(OP, 4 * c as u64)?;
    let coef = ctx.alloc(OP, 12 * c as u64)?;
    let params = [n as u32, c as u32, s as u32, batch_stats as u32];
    let binds = [
        Bind::read(xb),
        Bind::read(gb),
        Bind::read(mb),
        Bind::read(gpu_buf(rstd)),
        Bind::write(&dw),
        Bind::write(&db),
        Bind::write(&coef),
    ];
    ctx.dispatch(&BATCH_NORM_GRAD, &vec![], "main", &binds, &params, grid(ctx, c as u64)?)?;
    let dx = if need_x {
        let out = ctx.alloc(OP, 4 * x.numel() as u64)?;
        let wb = weight.map_or(xb, gpu_buf);
        let params = [x.numel() as u32, c as u32, s as u32, weight.is_some() as u32];
        let binds =
            [Bind::read(xb), Bind::read(gb), Bind::read(mb), Bind::read(wb), Bind::read(&coef), Bind::write(&out)];
        ctx.dispatch_1d(&BATCH_NORM_DX, &vec![], "main", &binds, &params, x.numel() as u64)?;
        Some(Tensor::from_gpu(out, x.shape(), x.dtype()))
    } else {
        None
    };
    let wrap = |b: GpuBuffer| Tensor::from_gpu(b, vec![c], x.dtype());
    Ok((dx, need_w.then(|| wrap(dw)), need_b.then(|| wrap(db))))
}

/// batch_norm backward in differentiable tensor ops (for `create_graph`). With batch
/// statistics they are recomputed from `x`; fixed statistics are constants.
#[allow(clippy::too_many_arguments)]
fn bn_backward_ops(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    batch_stats: bool,
    eps: f64,
    (need_x, need_w, need_b): (bool, bool, bool),
) -> Result<Grads3> {
    let c = x.shape()[1];
    let mut bshape = vec![1usize; x.ndim()];
    bshape[1] = c;
    let axes: Vec<isize> = (0..x.ndim() as isize).filter(|&a| a != 1).collect();
    let (xhat, rstd) = if batch_stats {
        let xc = x.sub(&x.mean(&axes, true)?)?;
        let rstd = xc.square()?.mean(&axes, true)?.scale(1.0, eps)?.rsqrt()?;
        (xc.mul(&rstd)?, rstd)
    } else {
        let rstd = rstd.reshape(bshape.clone())?;
        (x.sub(&mean.reshape(bshape.clone())?)?.mul(&rstd)?, rstd)
    };
    let dx = if need_x {
        let gw = match weight {
            Some(w) => g.mul(&w.reshape(bshape.clone())?)?,
            None => g.clone(),
        };
        Some(if batch_stats {
            let a = gw.mean(&axes, true)?;
            let k = gw.mul(&xhat)?.mean(&axes, true)?;
            rstd.mul(&gw.sub(&a)?.sub(&xhat.mul(&k)?)?)?
        } else {
            gw.mul(&rstd)?
        })
    } else {
        None
    };
    let dw = if need_w { Some(g.mul(&xhat)?.sum(&axes, false)?) } else { None };
    let db = if need_b { Some(g.sum(&axes, false)?) } else { None };
    Ok((dx, dw, db))
}
