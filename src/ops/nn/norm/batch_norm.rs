//! `batch_norm` (`paddle.nn.functional.batch_norm`): per-channel statistics of x viewed as
//! [N, C, S]. On the GPU one workgroup per channel computes the batch mean and variance, an
//! elementwise kernel normalises; backward is one per-channel reduction (Σg, Σg·x̂, and the
//! dx coefficients) and one elementwise dx kernel.
//!
//! Running variance: as Paddle 2.x (its `batch_norm` CPU kernel), the running variance is
//! updated with the **biased** batch variance (divided by N·H·W, the variance that
//! normalises the batch): `running_var = momentum · running_var + (1 − momentum) · var`.
//! PyTorch uses the unbiased variance there; Paddle does not.
//!
//! Registry entries: `batch_norm_stats` (the batch mean, biased variance and rstd),
//! `batch_norm` (normalisation with given statistics; its gradient includes the terms
//! through the batch statistics when they came from this batch) and `batch_norm_grad` (the
//! fused gradient). The running statistics are updated with ordinary ops in between.

use super::{
    Grads3, Needs, cast_opt, check_epsilon, check_param, f32_param, f64s, grad_metas, grads_vec, grads3, slice,
    with_affine,
};
use crate::backend::cpu::{CpuData, par_blocks_new};
use crate::backend::gpu::{Bind, Kernel, grid};
use crate::ops::registry::apply::{apply, apply1};
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AttrMap, Attrs, EvalOp, EvalRewrite, EvalVar, Facts};
use crate::tensor::TensorMeta;
use crate::tensor::grad_mode::{is_grad_enabled, no_grad};
use crate::{DType, Element, Error, Result, Tensor};

pub(crate) static BATCH_NORM: Kernel = Kernel::single("batch_norm.wgsl");
pub(crate) static BATCH_NORM_APPLY: Kernel = Kernel::single("batch_norm_apply.wgsl");
pub(crate) static BATCH_NORM_GRAD: Kernel = Kernel::single("batch_norm_grad.wgsl");
pub(crate) static BATCH_NORM_DX: Kernel = Kernel::single("batch_norm_dx.wgsl");

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

fn bn_geom(op: &'static str, x: &TensorMeta) -> Result<BnGeom> {
    x.expect_float(op, "the input")?;
    if x.rank() < 2 {
        return Err(Error::shape(
            op,
            format!("input must have rank ≥ 2 ([N, C], [N, C, L], [N, C, H, W], ...), got shape {:?}", x.dims()),
        ));
    }
    Ok((x.dims()[0], x.dims()[1], x.dims()[2..].iter().product()))
}

/// `batch_norm_stats`'s attribute.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct BnStatsAttrs {
    pub epsilon: f64,
}

registry_entry!(
    /// The per-channel batch statistics of x: outputs `[mean, var, rstd]` (biased variance).
    BATCH_NORM_STATS: BatchNormStatsOp = "batch_norm_stats", BnStatsAttrs, BnGeom
);

impl Op for BatchNormStatsOp {
    fn infer(&self, xs: &[&TensorMeta], a: &BnStatsAttrs) -> Result<(Vec<TensorMeta>, BnGeom)> {
        const OP: &str = "batch_norm";
        let [x] = inputs(OP, xs)?;
        check_epsilon(OP, a.epsilon)?;
        let geom = bn_geom(OP, x)?;
        if geom.0 * geom.2 == 0 {
            return Err(Error::shape(
                OP,
                format!("batch statistics need at least one value per channel, input has shape {:?}", x.dims()),
            ));
        }
        let stat = x.with_shape(vec![geom.1]);
        Ok((vec![stat.clone(), stat.clone(), stat], geom))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &BnStatsAttrs, geom: &BnGeom) -> Result<Vec<CpuData>> {
        match k.x(0) {
            CpuData::F32(v) => Ok(bn_stats_cpu(v, *geom, a.epsilon)),
            CpuData::F64(v) => Ok(bn_stats_cpu(v, *geom, a.epsilon)),
            other => Err(Error::unsupported("batch_norm", other.dtype(), "on the CPU")),
        }
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &BnStatsAttrs, &(n, c, s): &BnGeom) -> Result<()> {
        let params = [n as u32, c as u32, s as u32, f32_param(a.epsilon)];
        let binds = [Bind::read(k.x(0)), Bind::write(k.y(0)), Bind::write(k.y(1)), Bind::write(k.y(2))];
        k.ctx.dispatch(&BATCH_NORM, 0, "stats", &binds, &params, grid(k.ctx, c as u64)?)
    }

    fn facts(&self) -> Facts {
        Facts { eval: Some(EvalRewrite { running: 2, form: stats_eval_form }), ..Facts::NONE }
    }
}

/// The statistics in an evaluation program: `mean = assign(running_mean)` and
/// `rstd = rsqrt(running_var + epsilon)`; the batch variance is no longer computed.
fn stats_eval_form(attrs: &AttrMap) -> Option<Vec<EvalOp>> {
    let a = BnStatsAttrs::from_map("batch_norm_stats", attrs).ok()?;
    let shifted = EvalVar::Temp { id: 0, like: 2 };
    let op = |op_type, input, output, attrs| EvalOp { op_type, inputs: vec![input], outputs: vec![output], attrs };
    Some(vec![
        op("assign", EvalVar::Running(0), EvalVar::Output(0), AttrMap::new()),
        op("scale", EvalVar::Running(1), shifted, AttrMap::new().with("scale", 1.0).with("bias", a.epsilon)),
        op("rsqrt", shifted, EvalVar::Output(2), AttrMap::new()),
    ])
}

/// Per-channel (mean, biased variance, rstd) on the CPU, in f64.
fn bn_stats_cpu<T: Element>(xv: &[T], (n, c, s): BnGeom, eps: f64) -> Vec<CpuData> {
    let m = (n * s) as f64;
    let stats = par_blocks_new(3 * c, 0.0f64, 3, |first, chunk| {
        for (k, st) in chunk.chunks_mut(3).enumerate() {
            let ch = first + k;
            let planes = || (0..n).flat_map(move |i| xv[(i * c + ch) * s..][..s].iter().map(|v| v.to_f64()));
            let mu = planes().sum::<f64>() / m;
            let var = planes().map(|v| (v - mu) * (v - mu)).sum::<f64>() / m;
            st.copy_from_slice(&[mu, var, 1.0 / (var + eps).sqrt()]);
        }
    });
    (0..3).map(|o| T::into_data((0..c).map(|ch| T::from_f64(stats[3 * ch + o])).collect())).collect()
}

/// `batch_norm`'s attributes: whether the statistics are this batch's (the gradient then
/// flows through them), epsilon (for the create_graph gradient), and the optional inputs.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct BatchNormAttrs {
    pub batch_stats: bool,
    pub epsilon: f64,
    pub has_weight: bool,
    pub has_bias: bool,
}

registry_entry!(
    /// `y = (x − mean[c]) · rstd[c] · weight[c] + bias[c]`: inputs `[x, mean, rstd, weight?,
    /// bias?]`.
    BATCH_NORM_OP: BatchNormOp = "batch_norm", BatchNormAttrs, BnGeom
);

impl Op for BatchNormOp {
    fn facts(&self) -> Facts {
        Facts { amp_by_first: true, ..Facts::NONE }
    }
    fn infer(&self, xs: &[&TensorMeta], a: &BatchNormAttrs) -> Result<(Vec<TensorMeta>, BnGeom)> {
        const OP: &str = "batch_norm";
        let expect = 3 + a.has_weight as usize + a.has_bias as usize;
        if xs.len() != expect {
            return Err(Error::invalid(OP, format!("takes {expect} tensors with these attributes, got {}", xs.len())));
        }
        let x = xs[0];
        let geom = bn_geom(OP, x)?;
        let c = geom.1;
        let expected = format!("expected [{c}] (the channels of input {:?})", x.dims());
        let names = ["mean", "rstd", "weight", "bias"];
        let present = [true, true, a.has_weight, a.has_bias];
        let named = names.iter().zip(present).filter(|(_, p)| *p).map(|(n, _)| *n);
        for (p, name) in xs[1..].iter().zip(named) {
            check_param(OP, name, x, p, p.dims() == [c], &expected)?;
        }
        Ok((vec![(*x).clone()], geom))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &BatchNormAttrs, geom: &BnGeom) -> Result<Vec<CpuData>> {
        let (mean, rstd) = (f64s(k.x(1)), f64s(k.x(2)));
        let w = a.has_weight.then(|| f64s(k.x(3)));
        let b = a.has_bias.then(|| f64s(k.x(3 + a.has_weight as usize)));
        Ok(vec![match k.x(0) {
            CpuData::F32(v) => bn_apply_cpu(v, &mean, &rstd, w, b, *geom),
            CpuData::F64(v) => bn_apply_cpu(v, &mean, &rstd, w, b, *geom),
            other => return Err(Error::unsupported("batch_norm", other.dtype(), "on the CPU")),
        }])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &BatchNormAttrs, &(_, c, s): &BnGeom) -> Result<()> {
        let xb = k.x(0);
        let wb = if a.has_weight { k.x(3) } else { xb };
        let bb = if a.has_bias { k.x(3 + a.has_weight as usize) } else { xb };
        let n = k.ins[0].numel();
        let params = [n as u32, c as u32, s as u32, a.has_weight as u32, a.has_bias as u32];
        let binds = [
            Bind::read(xb),
            Bind::read(k.x(1)),
            Bind::read(k.x(2)),
            Bind::read(wb),
            Bind::read(bb),
            Bind::write(k.y(0)),
        ];
        k.ctx.dispatch(&BATCH_NORM_APPLY, 0, "main", &binds, &params, n as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, a: &BatchNormAttrs, geom: &BnGeom) -> Result<Vec<Option<Tensor>>> {
        let (x, dy, mean, rstd) = (g.x(0), g.g(), g.x(1), g.x(2));
        let w = a.has_weight.then(|| g.x(3));
        let wi = 3;
        let bi = 3 + a.has_weight as usize;
        let need = Needs { x: g.needs(0), w: a.has_weight && g.needs(wi), b: a.has_bias && g.needs(bi) };
        let (dx, dw, db) = if is_grad_enabled() {
            bn_backward_ops(x, dy, w, mean, rstd, a.batch_stats, a.epsilon, need)?
        } else if x.numel() == 0 {
            let zc = |n: bool| -> Result<Option<Tensor>> {
                if n { Ok(Some(crate::zeros_on([geom.1], x.dtype(), x.place())?)) } else { Ok(None) }
            };
            (if need.x { Some(x.zeros_like()?) } else { None }, zc(need.w)?, zc(need.b)?)
        } else {
            let mut inputs = vec![x, dy, mean, rstd];
            inputs.extend(w);
            let attrs = BnGradAttrs { batch_stats: a.batch_stats, has_weight: w.is_some(), need };
            grads3(apply(&BATCH_NORM_GRAD_OP, &inputs, attrs)?, need)?
        };
        let mut v = vec![dx, None, None];
        v.extend(grads_vec(None, a.has_weight, dw, a.has_bias, db).into_iter().skip(1));
        Ok(v)
    }
}

fn bn_apply_cpu<T: Element>(
    xv: &[T],
    mean: &[f64],
    rstd: &[f64],
    w: Option<Vec<f64>>,
    b: Option<Vec<f64>>,
    (_, c, s): BnGeom,
) -> CpuData {
    let y = par_blocks_new(xv.len(), T::from_f64(0.0), s, |first, chunk| {
        for (k, plane) in chunk.chunks_mut(s).enumerate() {
            let q = first + k;
            let ch = q % c;
            let scale = rstd[ch] * w.as_ref().map_or(1.0, |w| w[ch]);
            let shift = b.as_ref().map_or(0.0, |b| b[ch]);
            for (j, out) in plane.iter_mut().enumerate() {
                *out = T::from_f64((xv[q * s + j].to_f64() - mean[ch]) * scale + shift);
            }
        }
    });
    T::into_data(y)
}

/// `batch_norm_grad`'s attributes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BnGradAttrs {
    batch_stats: bool,
    has_weight: bool,
    need: Needs,
}

impl crate::ops::Attrs for BnGradAttrs {
    fn to_map(&self) -> crate::ops::AttrMap {
        crate::ops::AttrMap::new()
            .with("batch_stats", self.batch_stats)
            .with("has_weight", self.has_weight)
            .with("need_x", self.need.x)
            .with("need_weight", self.need.w)
            .with("need_bias", self.need.b)
    }
    fn from_map(op: &'static str, m: &crate::ops::AttrMap) -> Result<Self> {
        m.check_known(op, &["batch_stats", "has_weight", "need_x", "need_weight", "need_bias"])?;
        let need = Needs { x: m.field(op, "need_x")?, w: m.field(op, "need_weight")?, b: m.field(op, "need_bias")? };
        Ok(BnGradAttrs { batch_stats: m.field(op, "batch_stats")?, has_weight: m.field(op, "has_weight")?, need })
    }
}

registry_entry!(
    /// The fused batch_norm backward: inputs `[x, dy, mean, rstd, weight?]`, outputs `[dx,
    /// dweight, dbias]` (unneeded ones empty). One per-channel reduction (Σg, Σg·x̂) and one
    /// elementwise pass for dx; `batch_stats` adds the terms through the batch statistics.
    BATCH_NORM_GRAD_OP: BatchNormGradOp = "batch_norm_grad", BnGradAttrs, BnGeom
);

impl Op for BatchNormGradOp {
    fn infer(&self, xs: &[&TensorMeta], a: &BnGradAttrs) -> Result<(Vec<TensorMeta>, BnGeom)> {
        const OP: &str = "batch_norm_grad";
        if xs.len() != 4 + a.has_weight as usize {
            return Err(Error::invalid(OP, format!("takes {} tensors, got {}", 4 + a.has_weight as usize, xs.len())));
        }
        let x = xs[0];
        let geom = bn_geom(OP, x)?;
        if xs[1].shape != x.shape || xs[1].dtype != x.dtype || xs[2..].iter().any(|p| p.dims() != [geom.1]) {
            return Err(Error::shape(
                OP,
                format!("x {:?}, dy {:?} and the statistics do not match", x.dims(), xs[1].dims()),
            ));
        }
        Ok((grad_metas(x, a.need, &[geom.1]), geom))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &BnGradAttrs, geom: &BnGeom) -> Result<Vec<CpuData>> {
        let (mean, rstd) = (f64s(k.x(2)), f64s(k.x(3)));
        let w = a.has_weight.then(|| f64s(k.x(4)));
        match k.x(0) {
            CpuData::F32(_) => bn_backward_cpu::<f32>(k.x(0), k.x(1), w, &mean, &rstd, a.batch_stats, *geom, a.need),
            _ => bn_backward_cpu::<f64>(k.x(0), k.x(1), w, &mean, &rstd, a.batch_stats, *geom, a.need),
        }
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &BnGradAttrs, &(n, c, s): &BnGeom) -> Result<()> {
        const OP: &str = "batch_norm_grad";
        let ctx = k.ctx;
        let (xb, gb, mb, rb) = (k.x(0), k.x(1), k.x(2), k.x(3));
        let dw = if a.need.w { None } else { Some(ctx.alloc(OP, 4 * c as u64)?) };
        let db = if a.need.b { None } else { Some(ctx.alloc(OP, 4 * c as u64)?) };
        let coef = ctx.alloc(OP, 12 * c as u64)?;
        let params = [n as u32, c as u32, s as u32, a.batch_stats as u32];
        let binds = [
            Bind::read(xb),
            Bind::read(gb),
            Bind::read(mb),
            Bind::read(rb),
            Bind::write(dw.as_ref().unwrap_or(k.y(1))),
            Bind::write(db.as_ref().unwrap_or(k.y(2))),
            Bind::write(&coef),
        ];
        ctx.dispatch(&BATCH_NORM_GRAD, 0, "main", &binds, &params, grid(ctx, c as u64)?)?;
        if a.need.x {
            let total = k.ins[0].numel();
            let wb = if a.has_weight { k.x(4) } else { xb };
            let params = [total as u32, c as u32, s as u32, a.has_weight as u32];
            let binds = [
                Bind::read(xb),
                Bind::read(gb),
                Bind::read(mb),
                Bind::read(wb),
                Bind::read(&coef),
                Bind::write(k.y(0)),
            ];
            ctx.dispatch(&BATCH_NORM_DX, 0, "main", &binds, &params, total as u64)?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn bn_backward_cpu<T: Element>(
    x: &CpuData,
    g: &CpuData,
    w: Option<Vec<f64>>,
    mean: &[f64],
    rstd: &[f64],
    batch_stats: bool,
    (n, c, s): BnGeom,
    need: Needs,
) -> Result<Vec<CpuData>> {
    const OP: &str = "batch_norm_grad";
    let (xv, gv) = (slice::<T>(OP, x)?, slice::<T>(OP, g)?);
    let m = (n * s) as f64;
    // Per channel: Σg, Σg·x̂.
    let sums = par_blocks_new(2 * c, 0.0f64, 2, |first, chunk| {
        for (k, st) in chunk.chunks_mut(2).enumerate() {
            let ch = first + k;
            let (mu, rs) = (mean[ch], rstd[ch]);
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
    let empty = || T::into_data(Vec::new());
    let dx = if need.x {
        let out = par_blocks_new(xv.len(), T::from_f64(0.0), s, |first, chunk| {
            for (k, plane) in chunk.chunks_mut(s).enumerate() {
                let q = first + k;
                let ch = q % c;
                let (mu, rs) = (mean[ch], rstd[ch]);
                let k0 = rs * w.as_ref().map_or(1.0, |w| w[ch]);
                let (k1, k2) = if batch_stats { (sums[2 * ch] / m, rs * sums[2 * ch + 1] / m) } else { (0.0, 0.0) };
                for (j, out) in plane.iter_mut().enumerate() {
                    let at = q * s + j;
                    *out = T::from_f64(k0 * (gv[at].to_f64() - k1 - (xv[at].to_f64() - mu) * k2));
                }
            }
        });
        T::into_data(out)
    } else {
        empty()
    };
    let pick = |need: bool, o: usize| {
        if need { T::into_data((0..c).map(|ch| T::from_f64(sums[2 * ch + o])).collect()) } else { empty() }
    };
    Ok(vec![dx, pick(need.w, 1), pick(need.b, 0)])
}

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
    let geom = bn_geom(OP, &x.to_meta())?;
    check_epsilon(OP, options.epsilon)?;
    if !(0.0..=1.0).contains(&options.momentum) {
        return Err(Error::invalid(OP, format!("momentum must be in [0, 1], got {}", options.momentum)));
    }
    let channels = geom.1;
    let expected = format!("expected [{channels}] (the channels of input {:?})", x.shape());
    for (name, p) in [("running_mean", running_mean), ("running_var", running_var)] {
        x.same_place(OP, p)?;
        if !p.dtype().is_float() {
            return Err(Error::unsupported(OP, p.dtype(), format!("for {name} (expected a float tensor)")));
        }
        if p.shape() != [channels] {
            return Err(Error::shape(OP, format!("{name} has shape {:?} but {expected}", p.shape())));
        }
    }
    if x.dtype().is_half() {
        let (w, b) = (cast_opt(weight, DType::Float32)?, cast_opt(bias, DType::Float32)?);
        let y = batch_norm(&x.cast(DType::Float32)?, running_mean, running_var, w.as_ref(), b.as_ref(), options)?;
        return y.cast(x.dtype());
    }
    let batch_stats = options.use_global_stats.map_or(options.training, |g| !g);
    let (dtype, eps) = (x.dtype(), options.epsilon);
    let (mean, rstd) = if batch_stats {
        let stats = apply(&BATCH_NORM_STATS, &[x], BnStatsAttrs { epsilon: eps })?;
        let [mean, var, rstd] = <[Tensor; 3]>::try_from(stats).map_err(|_| Error::invalid(OP, "statistics"))?;
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
        // Copies of the running statistics: a later in-place update must not change what
        // this op's backward sees.
        no_grad(|| -> Result<(Tensor, Tensor)> {
            Ok((running_mean.cast(dtype)?.clone_data()?, running_var.cast(dtype)?.scale(1.0, eps)?.rsqrt()?))
        })?
    };
    let attrs = BatchNormAttrs { batch_stats, epsilon: eps, has_weight: weight.is_some(), has_bias: bias.is_some() };
    let mut inputs = with_affine(x, weight, bias);
    inputs.splice(1..1, [&mean, &rstd]);
    apply1(&BATCH_NORM_OP, &inputs, attrs)
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
    need: Needs,
) -> Result<Grads3> {
    let (need_x, need_w, need_b) = (need.x, need.w, need.b);
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

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&BATCH_NORM_STATS, &BATCH_NORM_OP, &BATCH_NORM_GRAD_OP],
    kernels: &[&BATCH_NORM, &BATCH_NORM_APPLY, &BATCH_NORM_GRAD, &BATCH_NORM_DX],
};
