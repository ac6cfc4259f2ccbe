//! `layer_norm` (`paddle.nn.functional.layer_norm`): statistics over the trailing
//! `normalized_shape` dims of each row. On the GPU one workgroup per row computes the mean
//! and variance with tree reductions (rows up to 1,024 elements held in registers, read
//! once), writes y, and saves mean and rstd for backward; short rows, and many rows on a
//! software adapter, take one invocation per row instead. Backward runs one row kernel for dx
//! (chosen the same way) and one column-chunked kernel for dweight / dbias. Registry entries:
//! `layer_norm` (outputs y and the saved mean and rstd) and its fused gradient
//! `layer_norm_grad`.

use super::{
    Grads3, Needs, check_epsilon, check_param, f32_param, f64s, grad_metas, grads_vec, grads3, slice, with_affine,
};
use crate::backend::cpu::{CpuData, par_blocks_new};
use crate::backend::gpu::{Bind, Kernel, ROW_CACHE_MAX_LEN, Variant, grid};
use crate::ops::registry::apply::{apply, apply1};
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::tensor::grad_mode::is_grad_enabled;
use crate::{DType, Element, Error, Result, Tensor};

/// Keys: [`wgsl::F16_ELEMENTS`] for float16 inputs, with [`F16_PARAMS`] when the weight and
/// bias are float16 too (O2 keeps them float32).
pub(crate) static LAYER_NORM: Kernel = Kernel { file: "layer_norm.wgsl", keys: ln_keys, variant: ln_variant };
pub(crate) static LAYER_NORM_GRAD: Kernel = Kernel { file: "layer_norm_grad.wgsl", keys: ln_keys, variant: ln_variant };
/// Keys: [`wgsl::F16_ELEMENTS`] for float16 inputs; the partial sums are f32.
pub(crate) static LAYER_NORM_WGRAD: Kernel = Kernel {
    file: "layer_norm_wgrad.wgsl",
    keys: || wgsl::with_f16_keys(vec![0]),
    variant: |key| wgsl::element_variant(key).1,
};

/// Variant-key bit: the weight and bias are WGSL `f16` elements, `{{W}}`.
const F16_PARAMS: u32 = 1;

fn ln_keys() -> Vec<u32> {
    vec![0, wgsl::F16_ELEMENTS, wgsl::F16_ELEMENTS | F16_PARAMS]
}

fn ln_variant(key: u32) -> Variant {
    let (params, mut v) = wgsl::element_variant(key);
    v.push(("W", if params & F16_PARAMS != 0 { "f16" } else { "f32" }.into()));
    v
}

/// The variant key for input `x` and weight or bias `param` (if any) of these dtypes.
fn ln_key(x: DType, param: Option<DType>) -> u32 {
    wgsl::f16_bit(x) | if param == Some(DType::Float16) { F16_PARAMS } else { 0 }
}

/// Rows shorter than this get one invocation each instead of a whole workgroup.
const ROWS_MIN_LEN: usize = 32;

/// `layer_norm`'s attributes; `has_weight` / `has_bias` say which optional inputs follow x.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct LayerNormAttrs {
    pub normalized_shape: Vec<usize>,
    pub epsilon: f64,
    pub has_weight: bool,
    pub has_bias: bool,
}

registry_entry!(
    /// Layer normalisation: inputs `[x, weight?, bias?]`, outputs `[y, mean, rstd]`.
    LAYER_NORM_OP: LayerNormOp = "layer_norm", LayerNormAttrs, LnGeom
);

/// `(rows, d)`: the input as rows of `d` normalised elements.
type LnGeom = (usize, usize);

impl Op for LayerNormOp {
    fn facts(&self) -> Facts {
        Facts { amp: AmpList::BlackFloat16, amp_by_first: true, ..Facts::NONE }
    }
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &LayerNormAttrs) -> Result<(Vec<TensorMeta>, LnGeom)> {
        const OP: &str = "layer_norm";
        let expect = 1 + a.has_weight as usize + a.has_bias as usize;
        if xs.len() != expect {
            return Err(Error::invalid(OP, format!("takes {expect} tensors with these attributes, got {}", xs.len())));
        }
        let x = xs[0];
        x.expect_float(OP, "the input")?;
        check_epsilon(OP, a.epsilon)?;
        let ns = &a.normalized_shape;
        let k = ns.len();
        if k == 0 || k > x.rank() || x.dims()[x.rank() - k..] != **ns {
            return Err(Error::shape(
                OP,
                format!(
                    "normalized_shape {ns:?} must be non-empty and equal the trailing dimensions of input {:?}",
                    x.dims()
                ),
            ));
        }
        let d: usize = ns.iter().product();
        let rows: usize = x.dims()[..x.rank() - k].iter().product();
        let names = [("weight", a.has_weight), ("bias", a.has_bias)];
        for (p, (name, _)) in xs[1..].iter().zip(names.iter().filter(|(_, has)| *has)) {
            let ok = p.dims() == ns.as_slice() || p.dims() == [d];
            check_param(OP, name, x, p, ok, &format!("normalized_shape is {ns:?} (input {:?})", x.dims()))?;
        }
        let stat = x.with_shape(vec![rows]);
        Ok((vec![(*x).clone(), stat.clone(), stat], (rows, d)))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &LayerNormAttrs, &(rows, d): &LnGeom) -> Result<Vec<CpuData>> {
        let w = a.has_weight.then(|| f64s(k.x(1)));
        let b = a.has_bias.then(|| f64s(k.x(1 + a.has_weight as usize)));
        let x = k.x(0);
        match x {
            CpuData::F32(_) => ln_forward_cpu::<f32>(x, w, b, rows, d, a.epsilon),
            _ => ln_forward_cpu::<f64>(x, w, b, rows, d, a.epsilon),
        }
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &LayerNormAttrs, &(rows, d): &LnGeom) -> Result<()> {
        let ctx = k.ctx;
        let xb = k.x(0);
        // An absent weight or bias binds x in its place; the flags keep it unread.
        let wb = if a.has_weight { k.x(1) } else { xb };
        let bb = if a.has_bias { k.x(1 + a.has_weight as usize) } else { xb };
        let params = [rows as u32, d as u32, a.has_weight as u32, a.has_bias as u32, f32_param(a.epsilon)];
        let binds = [
            Bind::read(xb),
            Bind::read(wb),
            Bind::read(bb),
            Bind::write(k.y(0)),
            Bind::write(k.y(1)),
            Bind::write(k.y(2)),
        ];
        let key = ln_key(k.ins[0].dtype, k.ins.get(1).map(|m| m.dtype));
        if d >= ROWS_MIN_LEN && !ctx.rows_without_barriers(rows, d, 3) {
            let entry = if d <= ROW_CACHE_MAX_LEN { "rows_cached" } else { "rows" };
            ctx.dispatch(&LAYER_NORM, key, entry, &binds, &params, grid(ctx, rows as u64)?)
        } else {
            ctx.dispatch(&LAYER_NORM, key, "small", &binds, &params, rows as u64)
        }
    }

    fn aux_outputs(&self) -> usize {
        2
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, a: &LayerNormAttrs, _: &LnGeom) -> Result<Vec<Option<Tensor>>> {
        let (x, dy) = (g.x(0), g.g());
        let w = a.has_weight.then(|| g.x(1));
        let b = a.has_bias.then(|| g.x(1 + a.has_weight as usize));
        let need =
            Needs { x: g.needs(0), w: a.has_weight && g.needs(1), b: a.has_bias && g.needs(1 + a.has_weight as usize) };
        let (dx, dw, db) = if is_grad_enabled() {
            ln_backward_ops(x, dy, w, &a.normalized_shape, a.epsilon, need)?
        } else {
            let (mean, rstd) = (g.y(1)?, g.y(2)?);
            let mut inputs = vec![x, dy, &mean, &rstd];
            inputs.extend(w);
            grads3(apply(&LAYER_NORM_GRAD_OP, &inputs, LnGradAttrs { has_weight: w.is_some(), need })?, need)?
        };
        let dw = dw.map(|t| t.reshape(w.map(|w| w.shape().to_vec()).unwrap_or_default())).transpose()?;
        let db = db.map(|t| t.reshape(b.map(|b| b.shape().to_vec()).unwrap_or_default())).transpose()?;
        Ok(grads_vec(dx, a.has_weight, dw, a.has_bias, db))
    }
}

/// `layer_norm_grad`'s attributes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LnGradAttrs {
    has_weight: bool,
    need: Needs,
}

impl crate::ops::Attrs for LnGradAttrs {
    fn to_map(&self) -> crate::ops::AttrMap {
        crate::ops::AttrMap::new()
            .with("has_weight", self.has_weight)
            .with("need_x", self.need.x)
            .with("need_weight", self.need.w)
            .with("need_bias", self.need.b)
    }
    fn from_map(op: &'static str, m: &crate::ops::AttrMap) -> Result<Self> {
        m.check_known(op, &["has_weight", "need_x", "need_weight", "need_bias"])?;
        let need = Needs { x: m.field(op, "need_x")?, w: m.field(op, "need_weight")?, b: m.field(op, "need_bias")? };
        Ok(LnGradAttrs { has_weight: m.field(op, "has_weight")?, need })
    }
}

registry_entry!(
    /// The fused layer_norm backward from the saved statistics: inputs `[x, dy, mean, rstd,
    /// weight?]`, outputs `[dx, dweight, dbias]` (dweight / dbias flat `[D]`; unneeded ones
    /// empty).
    LAYER_NORM_GRAD_OP: LayerNormGradOp = "layer_norm_grad", LnGradAttrs, LnGeom
);

impl Op for LayerNormGradOp {
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &LnGradAttrs) -> Result<(Vec<TensorMeta>, LnGeom)> {
        const OP: &str = "layer_norm_grad";
        if xs.len() != 4 + a.has_weight as usize {
            return Err(Error::invalid(OP, format!("takes {} tensors, got {}", 4 + a.has_weight as usize, xs.len())));
        }
        let (x, dy, mean) = (xs[0], xs[1], xs[2]);
        let rows = mean.numel();
        if dy.shape != x.shape || xs[3].numel() != rows || rows == 0 && x.numel() > 0 || dy.dtype != x.dtype {
            return Err(Error::shape(
                OP,
                format!("x {:?}, dy {:?} and statistics {:?} do not match", x.dims(), dy.dims(), mean.dims()),
            ));
        }
        let d = x.numel().checked_div(rows).unwrap_or(0);
        let mut metas = grad_metas(x, a.need, &[d]);
        if a.has_weight {
            // The weight's and bias's gradients in the weight's dtype: float32 for the
            // float32 norms of an O2 model, not rounded through its float16 activations.
            for m in &mut metas[1..] {
                m.dtype = xs[4].dtype;
            }
        }
        Ok((metas, (rows, d)))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &LnGradAttrs, geom: &LnGeom) -> Result<Vec<CpuData>> {
        let w = a.has_weight.then(|| f64s(k.x(4)));
        let (mean, rstd) = (f64s(k.x(2)), f64s(k.x(3)));
        match k.x(0) {
            CpuData::F32(_) => ln_backward_cpu::<f32>(k.x(0), k.x(1), w, &mean, &rstd, *geom, a.need),
            _ => ln_backward_cpu::<f64>(k.x(0), k.x(1), w, &mean, &rstd, *geom, a.need),
        }
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &LnGradAttrs, &(rows, d): &LnGeom) -> Result<()> {
        let ctx = k.ctx;
        let (xb, gb, mb, rb) = (k.x(0), k.x(1), k.x(2), k.x(3));
        if a.need.x {
            let wb = if a.has_weight { k.x(4) } else { xb };
            let params = [rows as u32, d as u32, a.has_weight as u32];
            let binds =
                [Bind::read(xb), Bind::read(gb), Bind::read(wb), Bind::read(mb), Bind::read(rb), Bind::write(k.y(0))];
            let key = ln_key(k.ins[0].dtype, a.has_weight.then(|| k.ins[4].dtype));
            if d >= ROWS_MIN_LEN && !ctx.rows_without_barriers(rows, d, 3) {
                let entry = if d <= ROW_CACHE_MAX_LEN { "rows_cached" } else { "rows" };
                ctx.dispatch(&LAYER_NORM_GRAD, key, entry, &binds, &params, grid(ctx, rows as u64)?)?;
            } else {
                ctx.dispatch(&LAYER_NORM_GRAD, key, "small", &binds, &params, rows as u64)?;
            }
        }
        if a.need.w || a.need.b {
            // Partial column sums over chunks of rows, then one reduction over the chunks.
            let chunks = rows.div_ceil(64).clamp(1, 1024);
            let chunk_rows = rows.div_ceil(chunks);
            let pw = ctx.alloc("layer_norm_grad", 4 * (chunks * d) as u64)?;
            let pb = ctx.alloc("layer_norm_grad", 4 * (chunks * d) as u64)?;
            let params = [rows as u32, d as u32, chunk_rows as u32, chunks as u32];
            let binds =
                [Bind::read(xb), Bind::read(gb), Bind::read(mb), Bind::read(rb), Bind::write(&pw), Bind::write(&pb)];
            let key = wgsl::f16_bit(k.ins[0].dtype);
            ctx.dispatch(&LAYER_NORM_WGRAD, key, "main", &binds, &params, (chunks * d) as u64)?;
            for (need, partial, out, meta) in [(a.need.w, &pw, k.y(1), &k.outs[1]), (a.need.b, &pb, k.y(2), &k.outs[2])]
            {
                if !need {
                    continue;
                }
                crate::ops::reduce::gpu_sum_rows(ctx, partial, DType::Float32, (1, chunks, d), out, meta.dtype)?;
            }
        }
        Ok(())
    }
}

/// (y, mean, rstd) on the CPU, computing in f64.
fn ln_forward_cpu<T: Element>(
    x: &CpuData,
    w: Option<Vec<f64>>,
    b: Option<Vec<f64>>,
    rows: usize,
    d: usize,
    eps: f64,
) -> Result<Vec<CpuData>> {
    let xv = slice::<T>("layer_norm", x)?;
    let stats = par_blocks_new(2 * rows, 0.0f64, 2, |first, chunk| {
        for (k, st) in chunk.chunks_mut(2).enumerate() {
            let row = &xv[(first + k) * d..][..d];
            let mu = row.iter().map(|v| v.to_f64()).sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v.to_f64() - mu).powi(2)).sum::<f64>() / d as f64;
            st[0] = mu;
            st[1] = 1.0 / (var + eps).sqrt();
        }
    });
    let y = par_blocks_new(xv.len(), T::from_f64(0.0), d, |first, chunk| {
        for (k, yr) in chunk.chunks_mut(d).enumerate() {
            let r = first + k;
            let (mu, rs) = (stats[2 * r], stats[2 * r + 1]);
            for (j, out) in yr.iter_mut().enumerate() {
                let mut v = (xv[r * d + j].to_f64() - mu) * rs;
                if let Some(w) = &w {
                    v *= w[j];
                }
                if let Some(b) = &b {
                    v += b[j];
                }
                *out = T::from_f64(v);
            }
        }
    });
    let mean: Vec<T> = stats.iter().step_by(2).map(|&v| T::from_f64(v)).collect();
    let rstd: Vec<T> = stats.iter().skip(1).step_by(2).map(|&v| T::from_f64(v)).collect();
    Ok(vec![T::into_data(y), T::into_data(mean), T::into_data(rstd)])
}

fn ln_backward_cpu<T: Element>(
    x: &CpuData,
    g: &CpuData,
    w: Option<Vec<f64>>,
    mean: &[f64],
    rstd: &[f64],
    (rows, d): LnGeom,
    need: Needs,
) -> Result<Vec<CpuData>> {
    const OP: &str = "layer_norm_grad";
    let (xv, gv) = (slice::<T>(OP, x)?, slice::<T>(OP, g)?);
    let xhat = |r: usize, j: usize| (xv[r * d + j].to_f64() - mean[r]) * rstd[r];
    let empty = || T::into_data(Vec::new());
    let dx = if need.x {
        let out = par_blocks_new(xv.len(), T::from_f64(0.0), d, |first, chunk| {
            for (k, dr) in chunk.chunks_mut(d).enumerate() {
                let r = first + k;
                let gw = |j: usize| gv[r * d + j].to_f64() * w.as_ref().map_or(1.0, |w| w[j]);
                let a = (0..d).map(gw).sum::<f64>() / d as f64;
                let c = (0..d).map(|j| gw(j) * xhat(r, j)).sum::<f64>() / d as f64;
                for (j, out) in dr.iter_mut().enumerate() {
                    *out = T::from_f64(rstd[r] * (gw(j) - a - xhat(r, j) * c));
                }
            }
        });
        T::into_data(out)
    } else {
        empty()
    };
    let (mut sw, mut sb) = (vec![0.0f64; d], vec![0.0f64; d]);
    if need.w || need.b {
        for r in 0..rows {
            for j in 0..d {
                let gk = gv[r * d + j].to_f64();
                sw[j] += gk * xhat(r, j);
                sb[j] += gk;
            }
        }
    }
    let cast =
        |need: bool, v: Vec<f64>| if need { T::into_data(v.into_iter().map(T::from_f64).collect()) } else { empty() };
    Ok(vec![dx, cast(need.w, sw), cast(need.b, sb)])
}

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
    let attrs = LayerNormAttrs {
        normalized_shape: normalized_shape.to_vec(),
        epsilon,
        has_weight: weight.is_some(),
        has_bias: bias.is_some(),
    };
    apply1(&LAYER_NORM_OP, &with_affine(x, weight, bias), attrs)
}

/// layer_norm backward in differentiable tensor ops (for `create_graph`).
fn ln_backward_ops(
    x: &Tensor,
    g: &Tensor,
    weight: Option<&Tensor>,
    normalized_shape: &[usize],
    eps: f64,
    need: Needs,
) -> Result<Grads3> {
    let (need_x, need_w, need_b) = (need.x, need.w, need.b);
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

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&LAYER_NORM_OP, &LAYER_NORM_GRAD_OP],
    kernels: &[&LAYER_NORM, &LAYER_NORM_GRAD, &LAYER_NORM_WGRAD],
};
