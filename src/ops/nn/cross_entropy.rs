//! `cross_entropy_with_softmax` (Paddle's op of that name, behind
//! `paddle.nn.functional.cross_entropy` with hard labels): each line's loss `−logp[label]` in
//! one op, with a fused gradient `cross_entropy_with_softmax_grad`. With `use_softmax`, logp
//! is the log-softmax of the logits along the axis and `dx = (softmax − onehot)·dloss`;
//! without (the input holds probabilities, as `fluid.layers.cross_entropy`), logp is
//! `log(x)` at the label and `dx = −dloss / x` there, 0 elsewhere. Ignored lines give 0.
//!
//! The composed form (log_softmax or log, a label mask, take_along_axis, neg, mul, and the
//! gradients of each) took 8 kernels forward and 6 backward; this takes 2 (1 without
//! softmax) and 1. On the GPU the log-softmax is softmax.wgsl's kernel and each value is
//! computed as the composed form computes it, and `pick` (one invocation per line) records an
//! out-of-range label in the device's error flag. Outputs: `[loss, log_softmax, valid]`, the
//! last two auxiliary (`log_softmax` is empty without softmax; `valid` is 1 where the label
//! is not `ignore_index`: what a mean divides by).

use super::softmax::{self, SOFTMAX};
use crate::backend::cpu::{CpuData, float_kernel, par_chunks_new};
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::index::{index_keys, index_variant};
use crate::ops::registry::apply::{apply, apply1};
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::tensor::grad_mode::is_grad_enabled;
use crate::{DType, Element, Error, Result, Tensor};

/// Keys: the label dtype's code, with [`wgsl::F16_ELEMENTS`] for float16 logits.
pub(crate) static CROSS_ENTROPY: Kernel = Kernel {
    file: "cross_entropy.wgsl",
    keys: || wgsl::with_f16_keys(index_keys()),
    variant: |key| {
        let (code, mut v) = wgsl::element_variant(key);
        v.extend(index_variant(DType::from_code(code)));
        v
    },
};

/// The attributes of both entries.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct CrossEntropyAttrs {
    pub axis: isize,
    pub ignore_index: i64,
    /// The input holds logits (log-softmax taken here), not probabilities.
    pub use_softmax: bool,
}

/// `(outer, C, inner)` around the class axis.
type Geom = (usize, usize, usize);

registry_entry!(
    /// Hard-label softmax cross entropy: inputs `[logits, label]` (label: int32 or int64,
    /// the logits' shape with 1 on the class axis), outputs `[loss, log_softmax, valid]`.
    CROSS_ENTROPY_WITH_SOFTMAX_OP: CrossEntropyWithSoftmaxOp = "cross_entropy_with_softmax", CrossEntropyAttrs, Geom
);

registry_entry!(
    /// The fused gradient: inputs `[log_softmax (the probabilities without softmax), label,
    /// dloss]`, output dx.
    CROSS_ENTROPY_WITH_SOFTMAX_GRAD_OP: CrossEntropyWithSoftmaxGradOp = "cross_entropy_with_softmax_grad",
    CrossEntropyAttrs,
    Geom
);

/// The geometry, after checking that `label` has `x`'s shape with 1 on the class axis.
fn geom_of(op: &'static str, x: &TensorMeta, label: &TensorMeta, axis: isize) -> Result<Geom> {
    x.expect_float(op, "the logits")?;
    label.expect_int(op, "hard labels")?;
    if x.rank() == 0 {
        return Err(Error::shape(op, "the logits must have a class axis (got a 0-D tensor)"));
    }
    let ax = x.shape.axis(op, axis)?;
    let mut expect = x.dims().to_vec();
    expect[ax] = 1;
    if label.dims() != expect.as_slice() {
        return Err(Error::shape(
            op,
            format!("labels {:?} do not fit logits {:?} (expected {expect:?})", label.dims(), x.dims()),
        ));
    }
    Ok(x.shape.around(ax))
}

/// The label of line `k`, `None` when it is `ignore_index`, or the typed error for one
/// outside `[0, C)`.
fn label_at(op: &'static str, label: &CpuData, k: usize, classes: usize, ignore: i64) -> Result<Option<usize>> {
    let v = label.get_i64(k);
    if v == ignore {
        return Ok(None);
    }
    if v < 0 || v as u64 >= classes as u64 {
        return Err(Error::invalid(
            op,
            format!("label {v} is out of range for {classes} classes (valid 0..{classes}, or ignore_index {ignore})"),
        ));
    }
    Ok(Some(v as usize))
}

/// The flat index of class `c` on line `k` of an `(outer, C, inner)` view.
fn at((_, classes, inner): Geom, k: usize, c: usize) -> usize {
    ((k / inner) * classes + c) * inner + k % inner
}

/// The params' words of `ignore_index` (its two's complement, as the kernels read labels).
fn ignore_words(ignore: i64) -> [u32; 2] {
    [ignore as u64 as u32, (ignore as u64 >> 32) as u32]
}

/// The CPU `(loss, valid)` from the log-softmax, or from the probabilities without softmax.
fn cpu_pick<T: Element>(src: &[T], label: &CpuData, a: &CrossEntropyAttrs, geom: Geom) -> Result<(Vec<T>, Vec<T>)> {
    let (outer, classes, inner) = geom;
    let lines = outer * inner;
    let (mut loss, mut valid) = (vec![T::from_f64(0.0); lines], vec![T::from_f64(0.0); lines]);
    for k in 0..lines {
        if let Some(c) = label_at("cross_entropy_with_softmax", label, k, classes, a.ignore_index)? {
            let v = src[at(geom, k, c)].to_f64();
            // −log(p) rounds as the composed −(log p) does: rounding is symmetric.
            loss[k] = T::from_f64(if a.use_softmax { -v } else { -v.ln() });
            valid[k] = T::from_f64(1.0);
        }
    }
    Ok((loss, valid))
}

impl Op for CrossEntropyWithSoftmaxOp {
    fn facts(&self) -> Facts {
        // Paddle's `softmax_with_cross_entropy`.
        Facts { amp: AmpList::BlackFloat16, ..Facts::NONE }
    }
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &CrossEntropyAttrs) -> Result<(Vec<TensorMeta>, Geom)> {
        const OP: &str = "cross_entropy_with_softmax";
        let [x, label] = inputs(OP, xs)?;
        let geom = geom_of(OP, x, label, a.axis)?;
        let line = x.with_shape(label.dims().to_vec());
        let logp = if a.use_softmax { (*x).clone() } else { x.with_shape(vec![0]) };
        Ok((vec![line.clone(), logp, line], geom))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &CrossEntropyAttrs, geom: &Geom) -> Result<Vec<CpuData>> {
        const OP: &str = "cross_entropy_with_softmax";
        let logp = a.use_softmax.then(|| softmax::cpu_forward(OP, true, k.x(0), *geom)).transpose()?;
        let (loss, valid) = match logp.as_ref().unwrap_or(k.x(0)) {
            CpuData::F32(v) => cpu_pick(v, k.x(1), a, *geom).map(|(l, m)| (CpuData::F32(l), CpuData::F32(m)))?,
            CpuData::F64(v) => cpu_pick(v, k.x(1), a, *geom).map(|(l, m)| (CpuData::F64(l), CpuData::F64(m)))?,
            other => return Err(Error::unsupported(OP, other.dtype(), "on the CPU")),
        };
        let logp = logp.unwrap_or_else(|| empty_like(k.x(0)));
        Ok(vec![loss, logp, valid])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &CrossEntropyAttrs, &(outer, classes, inner): &Geom) -> Result<()> {
        let logp = if a.use_softmax {
            let logp = k.y(1);
            softmax::dispatch(
                k.ctx,
                &SOFTMAX,
                1 | wgsl::f16_bit(k.ins[0].dtype),
                &[Bind::read(k.x(0)), Bind::write(logp)],
                (outer, classes, inner),
            )?;
            logp
        } else {
            k.x(0)
        };
        let (code, flag) = k.ctx.index_flag("cross_entropy_with_softmax");
        let [lo, hi] = ignore_words(a.ignore_index);
        let lines = outer * inner;
        let params = [lines as u32, classes as u32, inner as u32, lo, hi, a.use_softmax as u32, code];
        let binds = [Bind::read(logp), Bind::read(k.x(1)), Bind::write(k.y(0)), Bind::write(k.y(2)), Bind::flag(&flag)];
        let key = k.ins[1].dtype.code() | wgsl::f16_bit(k.ins[0].dtype);
        k.ctx.dispatch(&CROSS_ENTROPY, key, "pick", &binds, &params, lines as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn aux_outputs(&self) -> usize {
        2
    }

    fn backward(&self, g: &GradCall<'_>, a: &CrossEntropyAttrs, _: &Geom) -> Result<Vec<Option<Tensor>>> {
        let gx = || -> Result<Tensor> {
            let (x, label, dloss) = (g.x(0), g.x(1), g.g());
            if is_grad_enabled() {
                // create_graph: (softmax − onehot)·dloss, or −dloss / x at the label and 0
                // elsewhere, 0 on ignored lines, in ordinary tensor ops, so the gradient can be
                // differentiated again. Masks select (not multiply), so an ignored line or a 0
                // probability off the label gives 0, as the fused kernel does.
                let ax = x.shape_ref().axis("cross_entropy_with_softmax", a.axis)?;
                let mut shape = vec![1; x.ndim()];
                shape[ax] = x.shape()[ax];
                let classes = crate::arange_on(0, shape[ax] as i64, 1, label.dtype(), x.place())?.reshape(shape)?;
                let hit = label.equal(&classes)?;
                let valid = crate::expand_as(&g.y(2)?.not_equal_scalar(0)?, x)?;
                let zeros = x.zeros_like()?;
                let dx = if a.use_softmax {
                    softmax::softmax(x, a.axis)?.sub(&hit.cast(x.dtype())?)?.mul(dloss)?
                } else {
                    // The division sees 1 off the label, so no 0/0 reaches the graph.
                    let safe = crate::where_(&hit, x, &crate::ones_like(x)?)?;
                    crate::where_(&hit, &dloss.neg()?.div(&safe)?, &zeros)?
                };
                crate::where_(&valid, &dx, &zeros)
            } else {
                let src = if a.use_softmax { g.y(1)? } else { x.clone() };
                apply1(&CROSS_ENTROPY_WITH_SOFTMAX_GRAD_OP, &[&src, label, &dloss.cast(src.dtype())?], a.clone())
            }
        };
        Ok(vec![g.grad_if(0, gx)?, None])
    }
}

impl Op for CrossEntropyWithSoftmaxGradOp {
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &CrossEntropyAttrs) -> Result<(Vec<TensorMeta>, Geom)> {
        const OP: &str = "cross_entropy_with_softmax_grad";
        let [logp, label, dloss] = inputs(OP, xs)?;
        let geom = geom_of(OP, logp, label, a.axis)?;
        if dloss.dims() != label.dims() || dloss.dtype != logp.dtype {
            return Err(Error::shape(
                OP,
                format!("loss gradient {:?} {} must be {:?} {}", dloss.dims(), dloss.dtype, label.dims(), logp.dtype),
            ));
        }
        Ok((vec![(*logp).clone()], geom))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &CrossEntropyAttrs, geom: &Geom) -> Result<Vec<CpuData>> {
        const OP: &str = "cross_entropy_with_softmax_grad";
        let (outer, classes, inner) = *geom;
        let label = k.x(1);
        let labels = (0..outer * inner)
            .map(|line| label_at(OP, label, line, classes, a.ignore_index))
            .collect::<Result<Vec<_>>>()?;
        Ok(vec![
            float_kernel!(OP; src = k.x(0), dloss = k.x(2) => grad_rows(src, dloss, &labels, *geom, a.use_softmax))?,
        ])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &CrossEntropyAttrs, &(outer, classes, inner): &Geom) -> Result<()> {
        let [lo, hi] = ignore_words(a.ignore_index);
        let total = outer * classes * inner;
        let (code, flag) = k.ctx.index_flag("cross_entropy_with_softmax_grad");
        let params = [total as u32, classes as u32, inner as u32, lo, hi, a.use_softmax as u32, code];
        let binds =
            [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::read(k.x(2)), Bind::write(k.y(0)), Bind::flag(&flag)];
        let key = k.ins[1].dtype.code() | wgsl::f16_bit(k.ins[0].dtype);
        k.ctx.dispatch(&CROSS_ENTROPY, key, "grad", &binds, &params, total as u64)
    }
}

/// Hard-label cross entropy along `axis`: `(loss, valid)`, each with the input's shape and 1
/// on the axis; `loss` is `−log_softmax(input)[label]` (`use_softmax`) or `−log(input[label])`,
/// and both are 0 where `label == ignore_index`. `label` has the input's shape with 1 on the
/// axis.
pub(crate) fn cross_entropy_with_softmax(
    input: &Tensor,
    label: &Tensor,
    axis: isize,
    ignore_index: i64,
    use_softmax: bool,
) -> Result<(Tensor, Tensor)> {
    let attrs = CrossEntropyAttrs { axis, ignore_index, use_softmax };
    let out = apply(&CROSS_ENTROPY_WITH_SOFTMAX_OP, &[input, label], attrs)?;
    let [loss, _, valid] = <[Tensor; 3]>::try_from(out)
        .map_err(|_| Error::invalid("cross_entropy_with_softmax", "expected three outputs"))?;
    Ok((loss, valid))
}

/// The CPU gradient, in f64 as the composed gradients take it, with d = −dloss on a line
/// whose label is not ignored: log_softmax_grad of the one-hot dlogp, onehot·d − exp(logp)·d;
/// without softmax, log's d / p at the label and 0 elsewhere.
fn grad_rows<T: Element>(src: &[T], dloss: &[T], labels: &[Option<usize>], geom: Geom, softmax: bool) -> Vec<T> {
    let (_, classes, inner) = geom;
    par_chunks_new(src.len(), T::from_f64(0.0), 1 << 14, |start, chunk| {
        for (j, out) in chunk.iter_mut().enumerate() {
            let i = start + j;
            let line = (i / (classes * inner)) * inner + i % inner;
            let Some(c) = labels[line] else { continue };
            let (d, hit, v) = (-dloss[line].to_f64(), (i / inner) % classes == c, src[i].to_f64());
            *out = T::from_f64(match (softmax, hit) {
                (true, true) => d - v.exp() * d,
                (true, false) => 0.0 - v.exp() * d,
                (false, true) => d / v,
                (false, false) => 0.0,
            });
        }
    })
}

/// An empty `CpuData` of `d`'s dtype.
fn empty_like(d: &CpuData) -> CpuData {
    match d {
        CpuData::F64(_) => CpuData::F64(Vec::new()),
        _ => CpuData::F32(Vec::new()),
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&CROSS_ENTROPY_WITH_SOFTMAX_OP, &CROSS_ENTROPY_WITH_SOFTMAX_GRAD_OP],
    kernels: &[&CROSS_ENTROPY],
};
