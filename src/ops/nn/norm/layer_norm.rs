//! `layer_norm` (`paddle.nn.functional.layer_norm`): statistics over the trailing
//! `normalized_shape` dims of each row. On the GPU one workgroup per row (one invocation per
//! row for short rows) computes the mean and variance with tree reductions, writes y, and
//! saves mean and rstd for backward; backward runs one row kernel for dx and one
//! column-chunked kernel for dweight / dbias.

use super::{
    Grads3, cast_opt, check_epsilon, check_param, cpu_data, f32_param, from_vec, gpu_buf, grads_vec, slice, small_vec,
};
use crate::autograd::{is_grad_enabled, record};
use crate::backend::Storage;
use crate::backend::cpu::par_blocks_mut;
use crate::backend::gpu::{Bind, GpuBuffer, Kernel, grid};
use crate::{DType, Element, Error, Result, Tensor};

pub(crate) static LAYER_NORM: Kernel = Kernel { file: "layer_norm.wgsl", variants: || vec![vec![]] };
pub(crate) static LAYER_NORM_GRAD: Kernel = Kernel { file: "layer_norm_grad.wgsl", variants: || vec![vec![]] };
pub(crate) static LAYER_NORM_WGRAD: Kernel = Kernel { file: "layer_norm_wgrad.wgsl", variants: || vec![vec![]] };

/// Rows shorter than this get one invocation each instead of a whole workgroup.
const ROWS_MIN_LEN: usize = 32;

/// Layer normalisation over the trailing dimensions given by `normalized_shape`
/// (`paddle.nn.functional.layer_norm`): `y = (x − mean) / sqrt(var + epsilon) · weight + bias`
/// with the mean and biased variance of each row of `prod(normalized_shape)` elements.
/// `weight` and `bias` have shape `normalized_shape` (the flattened `[prod]` is accepted
/// too); `None` means no scale / no shift. Paddle's default `epsilon` is 1e-5.
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    epsilon: f64,
) -> Result<Tensor> {
    const OP: &str = "layer_norm";
    x.expect_float(OP)?;
    check_epsilon(OP, epsilon)?;
    let k = normalized_shape.len();
    if k == 0 || k > x.ndim() || x.shape()[x.ndim() - k..] != *normalized_shape {
        return Err(Error::shape(
            OP,
            format!(
                "normalized_shape {normalized_shape:?} must be non-empty and equal the trailing dimensions of input {:?}",
                x.shape()
            ),
        ));
    }
    let d: usize = normalized_shape.iter().product();
    for (name, p) in [("weight", weight), ("bias", bias)] {
        if let Some(p) = p {
            let ok = p.shape() == normalized_shape || p.shape() == [d];
            let expected = format!("normalized_shape is {normalized_shape:?} (input {:?})", x.shape());
            check_param(OP, name, x, p, false, ok, &expected)?;
        }
    }
    if x.dtype() == DType::Float16 {
        let (w, b) = (cast_opt(weight, DType::Float32)?, cast_opt(bias, DType::Float32)?);
        let y = layer_norm(&x.cast(DType::Float32)?, normalized_shape, w.as_ref(), b.as_ref(), epsilon)?;
        return y.cast(DType::Float16);
    }
    if x.is_empty() {
        return x.zeros_like();
    }
    let rows = x.numel() / d;
    let (y, mean, rstd) = match x.storage() {
        Storage::Cpu(_) => match x.dtype() {
            DType::Float32 => ln_forward_cpu::<f32>(x, weight, bias, rows, d, epsilon)?,
            _ => ln_forward_cpu::<f64>(x, weight, bias, rows, d, epsilon)?,
        },
        Storage::Gpu(_) => ln_forward_gpu(x, weight, bias, rows, d, epsilon)?,
    };
    let (has_w, has_b) = (weight.is_some(), bias.is_some());
    let mut inputs = vec![x];
    inputs.extend(weight);
    inputs.extend(bias);
    let (xs, ws) = (x.clone(), weight.cloned());
    let (w_shape, b_shape) = (weight.map(|w| w.shape().to_vec()), bias.map(|b| b.shape().to_vec()));
    let norm_shape = normalized_shape.to_vec();
    record(OP, &inputs, &[&y], move |c| {
        let g = c.grad();
        let need_x = c.needs(0);
        let need_w = has_w && c.needs(1);
        let need_b = has_b && c.needs(1 + has_w as usize);
        let (dx, dw, db) = if is_grad_enabled() {
            ln_backward_ops(&xs, g, ws.as_ref(), &norm_shape, epsilon, (need_x, need_w, need_b))?
        } else {
            let g = g.cast(xs.dtype())?;
            ln_backward_fused(&xs, &g, ws.as_ref(), &mean, &rstd, (rows, d), (need_x, need_w, need_b))?
        };
        let dw = dw.map(|t| t.reshape(w_shape.clone().unwrap_or_default())).transpose()?;
        let db = db.map(|t| t.reshape(b_shape.clone().unwrap_or_default())).transpose()?;
        Ok(grads_vec(dx, has_w, dw, has_b, db))
    });
    Ok(y)
}

/// (y, mean, rstd) on the CPU, computing in f64.
fn ln_forward_cpu<T: Element>(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    rows: usize,
    d: usize,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "layer_norm";
    let w = weight.map(|w| small_vec::<T>(OP, w)).transpose()?;
    let b = bias.map(|b| small_vec::<T>(OP, b)).transpose()?;
    let xd = cpu_data(x);
    let xv = slice::<T>(OP, &xd)?;
    let mut stats = vec![0.0f64; 2 * rows];
    par_blocks_mut(&mut stats, 2, |first, chunk| {
        for (k, st) in chunk.chunks_mut(2).enumerate() {
            let row = &xv[(first + k) * d..][..d];
            let mu = row.iter().map(|v| v.to_f64()).sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v.to_f64() - mu).powi(2)).sum::<f64>() / d as f64;
            st[0] = mu;
            st[1] = 1.0 / (var + eps).sqrt();
        }
    });
    let mut y = vec![T::from_f64(0.0); xv.len()];
    par_blocks_mut(&mut y, d, |first, chunk| {
        for (k, yr) in chunk.chunks_mut(d).enumerate() {
            let r = first + k;
            let (mu, rs) = (stats[2 * r], stats[2 * r + 1]);
            for (j, out) in yr.iter_mut().enumerate() {
                let mut v = (xv[r * d + j].to_f64() - mu) * rs;
                if let Some(w) = &w {
                    v *= w[j].to_f64();
                }
                if let Some(b) = &b {
                    v += b[j].to_f64();
                }
                *out = T::from_f64(v);
            }
        }
    });
    let mean: Vec<T> = stats.iter().step_by(2).map(|&v| T::from_f64(v)).collect();
    let rstd: Vec<T> = stats.iter().skip(1).step_by(2).map(|&v| T::from_f64(v)).collect();
    Ok((from_vec(y, x.shape()), from_vec(mean, vec![rows]), from_vec(rstd, vec![rows])))
}

fn ln_forward_gpu(
    x: &Tensor,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    rows: usize,
    d: usize,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    const OP: &str = "layer_norm";
    let xb = gpu_buf(x);
    let ctx = &xb.ctx;
    let y = ctx.alloc(OP, 4 * x.numel() as u64)?;
    let mean = ctx.alloc(OP, 4 * rows as u64)?;
    let rstd = ctx.alloc(OP, 4 * rows as u64)?;
    // An absent weight or bias binds x in its place; the flags keep it unread.
    let wb = weight.map_or(xb, gpu_buf);
    let bb = bias.map_or(xb, gpu_buf);
    let params = [rows as u32, d as u32, weight.is_some() as u32, bias.is_some() as u32, f32_param(eps)];
    let binds =
        [Bind::read(xb), Bind::read(wb), Bind::read(bb), Bind::write(&y), Bind::write(&mean), Bind::write(&rstd)];
    if d >= ROWS_MIN_LEN {
        ctx.dispatch(&LAYER_NORM, &vec![], "rows", &binds, &params, grid(ctx, rows as u64)?)?;
    } else {
        ctx.dispatch_1d(&LAYER_NORM, &vec![], "small", &binds, &params, rows as u64)?;
    }
    let dtype = x.dtype();
    Ok((
        Tensor::from_gpu(y, x.shape(), dtype),
        Tensor::from_gpu(mean, vec![rows], dtype),
        Tensor::from_gpu(rstd, vec![rows], dtype),
    ))
}

/// The fused layer_norm backward from the saved statistics: dx, and dweight / dbias as
/// flat `[D]` tensors.
fn ln_backward_fused(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    (rows, d): (usize, usize),
    need: (bool, bool, bool),
) -> Result<Grads3> {
    const OP: &str = "layer_norm";
    x.same_place(OP, g)?;
    let w = weight.map(|w| w.cast(x.dtype())).transpose()?;
    match x.storage() {
        Storage::Cpu(_) => match x.dtype() {
            DType::Float32 => ln_backward_cpu::<f32>(x, g, w.as_ref(), mean, rstd, (rows, d), need),
            _ => ln_backward_cpu::<f64>(x, g, w.as_ref(), mean, rstd, (rows, d), need),
        },
        Storage::Gpu(_) => ln_backward_gpu(x, g, w.as_ref(), mean, rstd, (rows, d), need),
    }
}

fn ln_backward_cpu<T: Element>(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    (rows, d): (usize, usize),
    (need_x, need_w, need_b): (bool, bool, bool),
) -> Result<Grads3> {
    const OP: &str = "layer_norm";
    let w = weight.map(|w| small_vec::<T>(OP, w)).transpose()?;
    let (mean, rstd) = (small_vec::<T>(OP, mean)?, small_vec::<T>(OP, rstd)?);
    let (xd, gd) = (cpu_data(x), cpu_data(g));
    let (xv, gv) = (slice::<T>(OP, &xd)?, slice::<T>(OP, &gd)?);
    let xhat = |r: usize, j: usize| (xv[r * d + j].to_f64() - mean[r].to_f64()) * rstd[r].to_f64();
    let mut dx = None;
    if need_x {
        let mut out = vec![T::from_f64(0.0); xv.len()];
        par_blocks_mut(&mut out, d, |first, chunk| {
            for (k, dr) in chunk.chunks_mut(d).enumerate() {
                let r = first + k;
                let gw = |j: usize| gv[r * d + j].to_f64() * w.as_ref().map_or(1.0, |w| w[j].to_f64());
                let a = (0..d).map(gw).sum::<f64>() / d as f64;
                let c = (0..d).map(|j| gw(j) * xhat(r, j)).sum::<f64>() / d as f64;
                let rs = rstd[r].to_f64();
                for (j, out) in dr.iter_mut().enumerate() {
                    *out = T::from_f64(rs * (gw(j) - a - xhat(r, j) * c));
                }
            }
        });
        dx = Some(from_vec(out, x.shape()));
    }
    let (mut dw, mut db) = (None, None);
    if need_w || need_b {
        let (mut sw, mut sb) = (vec![0.0f64; d], vec![0.0f64; d]);
        for r in 0..rows {
            for j in 0..d {
                let gk = gv[r * d + j].to_f64();
                sw[j] += gk * xhat(r, j);
                sb[j] += gk;
            }
        }
        let cast = |v: Vec<f64>| from_vec(v.into_iter().map(T::from_f64).collect::<Vec<T>>(), vec![d]);
        dw = need_w.then(|| cast(sw));
        db = need_b.then(|| cast(sb));
    }
    Ok((dx, dw, db))
}

fn ln_backward_gpu(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
    (rows, d): (usize, usize),
    (need_x, need_w, need_b): (bool, bool, bool),
) -> Result<Grads3> {
    const OP: &str = "layer_norm";
    let (xb, gb, mb, rb) = (gpu_buf(x), gpu_buf(g), gpu_buf(mean), gpu_buf(rstd));
    let ctx = &xb.ctx;
    let mut dx = None;
    if need_x {
        let out = ctx.alloc(OP, 4 * x.numel() as u64)?;
        let wb = weight.map_or(xb, gpu_buf);
        let params = [rows as u32, d as u32, weight.is_some() as u32];
        let binds = [Bind::read(xb), Bind::read(gb), Bind::read(wb), Bind::read(mb), Bind::read(rb), Bind::write(&out)];
        if d >= ROWS_MIN_LEN {
            ctx.dispatch(&LAYER_NORM_GRAD, &vec![], "rows", &binds, &params, grid(ctx, rows as u64)?)?;
        } else {
            ctx.dispatch_1d(&LAYER_NORM_GRAD, &vec![], "small", &binds, &params, rows as u64)?;
        }
        dx = Some(Tensor::from_gpu(out, x.shape(), x.dtype()));
    }
    let (mut dw, mut db) = (None, None);
    if need_w || need_b {
        // Partial column sums over chunks of rows, then one reduction over the chunks.
        let chunks = rows.div_ceil(64).clamp(1, 1024);
        let chunk_rows = rows.div_ceil(chunks);
        let pw = ctx.alloc(OP, 4 * (chunks * d) as u64)?;
        let pb = ctx.alloc(OP, 4 * (chunks * d) as u64)?;
        let params = [rows as u32, d as u32, chunk_rows as u32, chunks as u32];
        let binds =
            [Bind::read(xb), Bind::read(gb), Bind::read(mb), Bind::read(rb), Bind::write(&pw), Bind::write(&pb)];
        ctx.dispatch_1d(&LAYER_NORM_WGRAD, &vec![], "main", &binds, &params, (chunks * d) as u64)?;
        let finish = |p: GpuBuffer| -> Result<Tensor> {
            let t = Tensor::from_gpu(p, vec![chunks, d], x.dtype());
            if chunks == 1 { t.reshape([d]) } else { t.sum(&[0], false) }
        };
        dw = if need_w { Some(finish(pw)?) } else { None };
        db = if need_b { Some(finish(pb)?) } else { None };
    }
    Ok((dx, dw, db))
}

/// layer_norm backward in differentiable tensor ops (for `create_graph`).
fn ln_backward_ops(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    normalized_shape: &[usize],
    eps: f64,
    (need_x, need_w, need_b): (bool, bool, bool),
) -> Result<Grads3> {
    let lead = x.ndim() - normalized_shape.len();
    let axes: Vec<isize> = (lead..x.ndim()).map(|a| a as isize).collect();
    let lead_axes: Vec<isize> = (0..lead).map(|a| a as isize).collect();
    let sum_lead = |t: Tensor| -> Result<Tensor> {
        let t = if lead_axes.is_empty() { t } else { t.sum(&lead_axes, false)? };
        t.reshape([t.numel()])
    };
    let xc = x.sub(&x.mean(&axes, true)?)?;
    let rstd = xc.square()?.mean(&axes, true)?.scale(1.0, eps)?.rsqrt()?;
    let xhat = xc.mul(&rstd)?;
    let dx = if need_x {
        let gw = match weight {
            Some(w) => g.mul(&w.reshape(normalized_shape)?)?,
            None => g.clone(),
        };
        let a = gw.mean(&axes, true)?;
        let c = gw.mul(&xhat)?.mean(&axes, true)?;
        Some(rstd.mul(&gw.sub(&a)?.sub(&xhat.mul(&c)?)?)?)
    } else {
        None
    };
    let dw = if need_w { Some(sum_lead(g.mul(&xhat)?)?) } else { None };
    let db = if need_b { Some(sum_lead(g.clone())?) } else { None };
    Ok((dx, dw, db))
}
