//! Reductions: sum, mean, prod, max, min over an axis list (or all), argmax/argmin, and the
//! composites built on them (logsumexp, var, std, add_n).

use super::copy::gather_view;
use crate::autograd::record1;
use crate::backend::cpu::CpuData;
use crate::backend::cpu::reduce::reduce;
use crate::backend::gpu::{Bind, GpuBuffer, Kernel, Variant};
use crate::ops::wgsl;
use crate::shape::{View, contiguous_strides};
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

/// The value reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
}

impl Reduce {
    fn name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum",
            Reduce::Mean => "mean",
            Reduce::Prod => "prod",
            Reduce::Max => "max",
            Reduce::Min => "min",
        }
    }

    fn variant(self, dtype: DType) -> Variant {
        let t = wgsl::compute(dtype);
        let (identity, combine) = match (self, dtype) {
            (Reduce::Sum | Reduce::Mean, DType::Int64) => ("vec2<u32>(0u, 0u)", "i64_add(a, b)"),
            (Reduce::Sum | Reduce::Mean, DType::Int32) => ("0i", "a + b"),
            (Reduce::Sum | Reduce::Mean, _) => ("0.0", "a + b"),
            (Reduce::Prod, DType::Int64) => ("vec2<u32>(1u, 0u)", "i64_mul(a, b)"),
            (Reduce::Prod, DType::Int32) => ("1i", "a * b"),
            (Reduce::Prod, _) => ("1.0", "a * b"),
            (Reduce::Max, DType::Int64) => ("vec2<u32>(0u, 0x80000000u)", "i64_max(a, b)"),
            (Reduce::Max, DType::Int32) => ("bitcast<i32>(0x80000000u)", "max(a, b)"),
            (Reduce::Max, _) => ("-f32_inf()", "select(max(a, b), f32_nan(), is_nan_f(a) || is_nan_f(b))"),
            (Reduce::Min, DType::Int64) => ("vec2<u32>(0xffffffffu, 0x7fffffffu)", "i64_min(a, b)"),
            (Reduce::Min, DType::Int32) => ("2147483647i", "min(a, b)"),
            (Reduce::Min, _) => ("f32_inf()", "select(min(a, b), f32_nan(), is_nan_f(a) || is_nan_f(b))"),
        };
        let fin = if self == Reduce::Mean { "a * bitcast<f32>(params[5])" } else { "a" };
        vec![
            ("S", wgsl::storage(dtype).into()),
            ("T", t.into()),
            ("IDENTITY", identity.into()),
            ("COMBINE", combine.into()),
            ("FINAL", fin.into()),
            ("OP", self.name().into()),
        ]
    }
}

pub(crate) static REDUCE: Kernel = Kernel {
    file: "reduce.wgsl",
    variants: || {
        let mut v = Vec::new();
        for k in [Reduce::Sum, Reduce::Mean, Reduce::Prod, Reduce::Max, Reduce::Min] {
            for d in [DType::Float32, DType::Int32, DType::Int64] {
                if k == Reduce::Mean && d != DType::Float32 {
                    continue;
                }
                v.push(k.variant(d));
            }
        }
        v
    },
};

/// Where a reduction reads: `src` viewed as (outer, len, inner), and the result shapes.
struct Plan {
    src: Tensor,
    outer: usize,
    len: usize,
    inner: usize,
    keep_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

fn plan(op: &'static str, x: &Tensor, axes: &[isize]) -> Result<Plan> {
    let dims = x.shape();
    let axes = x.shape_ref().axes(op, axes)?;
    let keep_shape: Vec<usize> = dims.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
    let out_shape: Vec<usize> = dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
    if axes.is_empty() {
        return Ok(Plan { src: x.clone(), outer: x.numel(), len: 1, inner: 1, keep_shape, out_shape });
    }
    let (a0, a1) = (axes[0], axes[axes.len() - 1]);
    if a1 - a0 + 1 == axes.len() {
        return Ok(Plan {
            src: x.clone(),
            outer: dims[..a0].iter().product(),
            len: dims[a0..=a1].iter().product(),
            inner: dims[a1 + 1..].iter().product(),
            keep_shape,
            out_shape,
        });
    }
    // Non-adjacent axes: move the kept axes first, the reduced ones last.
    let perm: Vec<usize> = (0..dims.len()).filter(|i| !axes.contains(i)).chain(axes.iter().copied()).collect();
    let strides = contiguous_strides(dims);
    let view = View {
        shape: perm.iter().map(|&p| dims[p]).collect(),
        strides: perm.iter().map(|&p| strides[p] as isize).collect(),
        offset: 0,
    };
    Ok(Plan {
        src: gather_view(x, &view)?,
        outer: out_shape.iter().product(),
        len: axes.iter().map(|&a| dims[a]).product(),
        inner: 1,
        keep_shape,
        out_shape,
    })
}

/// Float reductions straight off the typed slice, accumulating in f64.
fn float_reduce<T: Copy + Sync + Into<f64>>(kind: Reduce, xs: &[T], g: (usize, usize, usize)) -> Vec<f64> {
    let nan_max = |a: f64, x: f64| if a.is_nan() || x.is_nan() { f64::NAN } else { a.max(x) };
    let nan_min = |a: f64, x: f64| if a.is_nan() || x.is_nan() { f64::NAN } else { a.min(x) };
    match kind {
        Reduce::Sum => reduce(xs, g, 0.0, |a, x: T| a + x.into(), |a, b| a + b),
        Reduce::Mean => {
            reduce(xs, g, 0.0, |a, x: T| a + x.into(), |a, b| a + b).into_iter().map(|s| s / g.1 as f64).collect()
        }
        Reduce::Prod => reduce(xs, g, 1.0, |a, x: T| a * x.into(), |a, b| a * b),
        Reduce::Max => reduce(xs, g, f64::NEG_INFINITY, |a, x: T| nan_max(a, x.into()), nan_max),
        Reduce::Min => reduce(xs, g, f64::INFINITY, |a, x: T| nan_min(a, x.into()), nan_min),
    }
}

/// Integer reductions with wrapping i64 arithmetic.
fn int_reduce<T: Copy + Sync + Into<i64>>(kind: Reduce, xs: &[T], g: (usize, usize, usize)) -> Vec<i64> {
    match kind {
        Reduce::Sum | Reduce::Mean => reduce(xs, g, 0i64, |a, x: T| a.wrapping_add(x.into()), |a, b| a.wrapping_add(b)),
        Reduce::Prod => reduce(xs, g, 1i64, |a, x: T| a.wrapping_mul(x.into()), |a, b| a.wrapping_mul(b)),
        Reduce::Max => reduce(xs, g, i64::MIN, |a, x: T| a.max(x.into()), |a, b| a.max(b)),
        Reduce::Min => reduce(xs, g, i64::MAX, |a, x: T| a.min(x.into()), |a, b| a.min(b)),
    }
}

fn cpu_reduce(kind: Reduce, d: &CpuData, g: (usize, usize, usize)) -> Option<CpuData> {
    Some(match d {
        CpuData::F32(v) => CpuData::F32(float_reduce(kind, v, g).into_iter().map(|x| x as f32).collect()),
        CpuData::F64(v) => CpuData::F64(float_reduce(kind, v, g)),
        CpuData::I64(v) => CpuData::I64(int_reduce(kind, v, g)),
        CpuData::I32(v) => CpuData::I32(int_reduce(kind, v, g).into_iter().map(|x| x as i32).collect()),
        _ => return None,
    })
}

fn gpu_reduce(
    kind: Reduce,
    buf: &GpuBuffer,
    dtype: DType,
    (outer, len, inner): (usize, usize, usize),
) -> Result<GpuBuffer> {
    let ctx = &buf.ctx;
    let scale = (1.0f32 / len.max(1) as f32).to_bits();
    let bytes = |n: usize| crate::backend::cpu::gpu_bytes(dtype, n);
    if inner == 1 && len >= 32 {
        let chunks = if outer < 64 && len > 8192 { len.div_ceil(4096).min(1024) } else { 1 };
        let chunk_len = len.div_ceil(chunks);
        let out = ctx.alloc(kind.name(), bytes(outer * chunks))?;
        let params = [outer as u32, len as u32, 1, chunks as u32, chunk_len as u32, scale];
        let pass1 = if chunks > 1 && kind == Reduce::Mean { Reduce::Sum } else { kind };
        let groups = crate::backend::gpu::grid(ctx, (outer * chunks) as u64)?;
        ctx.dispatch(&REDUCE, &pass1.variant(dtype), "rows", &[Bind::read(buf), Bind::write(&out)], &params, groups)?;
        if chunks == 1 {
            return Ok(out);
        }
        let fin = ctx.alloc(kind.name(), bytes(outer))?;
        let params = [outer as u32, chunks as u32, 1, 1, chunks as u32, scale];
        let groups = crate::backend::gpu::grid(ctx, outer as u64)?;
        ctx.dispatch(&REDUCE, &kind.variant(dtype), "rows", &[Bind::read(&out), Bind::write(&fin)], &params, groups)?;
        return Ok(fin);
    }
    let out = ctx.alloc(kind.name(), bytes(outer * inner))?;
    let params = [outer as u32, len as u32, inner as u32, 1, len as u32, scale];
    ctx.dispatch_1d(
        &REDUCE,
        &kind.variant(dtype),
        "strided",
        &[Bind::read(buf), Bind::write(&out)],
        &params,
        (outer * inner) as u64,
    )?;
    Ok(out)
}

fn reduce_op(kind: Reduce, x: &Tensor, axes: &[isize], keepdim: bool) -> Result<Tensor> {
    let op = kind.name();
    match (kind, x.dtype()) {
        (Reduce::Mean, d) if !d.is_float() => {
            return Err(Error::unsupported(op, d, "(mean needs a float tensor; cast first)"));
        }
        (Reduce::Sum, DType::Bool | DType::Int32) => {
            return reduce_op(kind, &x.cast(DType::Int64)?, axes, keepdim);
        }
        (_, DType::Bool) => {
            return Err(Error::unsupported(op, DType::Bool, "(cast to an integer or float type first)"));
        }
        (_, DType::Float16) => {
            return reduce_op(kind, &x.cast(DType::Float32)?, axes, keepdim)?.cast(DType::Float16);
        }
        _ => {}
    }
    // Non-adjacent axes (a bias gradient's [0, 2, 3]): reduce each run of adjacent axes in
    // turn, last first, instead of transposing a copy. Exact for every kind (a mean of equal-
    // sized means is the mean).
    let norm = x.shape_ref().axes(op, axes)?;
    let runs: Vec<Vec<usize>> = norm.iter().fold(Vec::new(), |mut runs: Vec<Vec<usize>>, &a| {
        match runs.last_mut() {
            Some(r) if *r.last().expect("runs are non-empty") + 1 == a => r.push(a),
            _ => runs.push(vec![a]),
        }
        runs
    });
    if runs.len() > 1 {
        let mut y = x.clone();
        for run in runs.iter().rev() {
            let run: Vec<isize> = run.iter().map(|&a| a as isize).collect();
            y = reduce_op(kind, &y, &run, true)?;
        }
        if keepdim {
            return Ok(y);
        }
        let shape: Vec<usize> =
            x.shape().iter().enumerate().filter(|(i, _)| !norm.contains(i)).map(|(_, &d)| d).collect();
        return y.reshape(shape);
    }
    let p = plan(op, x, axes)?;
    if p.len == 0 && matches!(kind, Reduce::Max | Reduce::Min) && p.outer * p.inner > 0 {
        return Err(Error::shape(
            op,
            format!("zero-size reduction over axes {axes:?} of {:?} has no identity", x.shape()),
        ));
    }
    let geom = (p.outer, p.len, p.inner);
    let shape = if keepdim { p.keep_shape.clone() } else { p.out_shape.clone() };
    let out = match p.src.backend() {
        Backend::Cpu(d) => {
            Tensor::from_cpu(cpu_reduce(kind, &d, geom).ok_or_else(|| Error::unsupported(op, x.dtype(), ""))?, shape)
        }
        Backend::Gpu(b) => {
            if p.outer * p.inner == 0 {
                crate::zeros_on(&shape, x.dtype(), x.place())?
            } else if p.len == 0 {
                let fill = match kind {
                    Reduce::Prod => 1.0,
                    Reduce::Mean => f64::NAN,
                    _ => 0.0,
                };
                crate::full_on(&shape, fill, x.dtype(), x.place())?
            } else {
                Tensor::from_gpu(gpu_reduce(kind, b, x.dtype(), geom)?, shape, x.dtype())
            }
        }
    };
    if !out.dtype().is_float() {
        return Ok(out);
    }
    let (xs, y, keep, len) = (x.clone(), out.downgrade(), p.keep_shape, p.len);
    Ok(record1(op, &[x], out, move |c| {
        let g = c.grad().with_shape(keep.clone()).broadcast_to(xs.shape())?;
        let gx = match kind {
            Reduce::Sum => g,
            Reduce::Mean => g.scale(1.0 / len as f64, 0.0)?,
            Reduce::Prod => g.mul(&y.upgrade()?.with_shape(keep.clone()).broadcast_to(xs.shape())?)?.div(&xs)?,
            Reduce::Max | Reduce::Min => {
                let best = y.upgrade()?.with_shape(keep.clone());
                g.mul(&xs.equal(&best.broadcast_to(xs.shape())?)?.cast(g.dtype())?)?
            }
        };
        Ok(vec![Some(gx)])
    }))
}

/// Sum over `axis` (all axes when empty). bool/int32 sum to int64, as Paddle.
pub fn sum(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(Reduce::Sum, x, axis, keepdim)
}

/// Mean over `axis` (all when empty); float tensors only.
pub fn mean(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(Reduce::Mean, x, axis, keepdim)
}

/// Product over `axis` (all when empty).
pub fn prod(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(Reduce::Prod, x, axis, keepdim)
}

/// Maximum over `axis` (all when empty); the gradient goes to every element equal to the
/// maximum, as Paddle.
pub fn max(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(Reduce::Max, x, axis, keepdim)
}

/// Minimum over `axis` (all when empty); ties as `max`.
pub fn min(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(Reduce::Min, x, axis, keepdim)
}

pub(crate) static ARGREDUCE: Kernel = Kernel {
    file: "argreduce.wgsl",
    variants: || {
        let mut v = Vec::new();
        for largest in [true, false] {
            for d in [DType::Float32, DType::Int32, DType::Int64] {
                v.push(arg_variant(largest, d));
            }
        }
        v
    },
};

fn arg_variant(largest: bool, dtype: DType) -> Variant {
    let better = match (largest, dtype) {
        (true, DType::Int64) => "i64_lt(b, a)",
        (false, DType::Int64) => "i64_lt(a, b)",
        (true, DType::Int32) => "a > b",
        (false, DType::Int32) => "a < b",
        (true, _) => "a > b || (is_nan_f(a) && !is_nan_f(b))",
        (false, _) => "a < b || (is_nan_f(a) && !is_nan_f(b))",
    };
    vec![("S", wgsl::storage(dtype).into()), ("BETTER", better.into())]
}

fn arg_reduce(op: &'static str, largest: bool, x: &Tensor, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
    match x.dtype() {
        DType::Float16 | DType::Bool => {
            return arg_reduce(op, largest, &x.cast(DType::Float32)?, axis, keepdim);
        }
        DType::Float64 if x.place().is_gpu() => unreachable!("float64 never lives on a GPU"),
        _ => {}
    }
    let (src, geom, shape) = match axis {
        None => {
            let shape = if keepdim { vec![1; x.ndim()] } else { vec![] };
            (x.clone(), (1, x.numel(), 1), shape)
        }
        Some(a) => {
            let ax = x.shape_ref().axis(op, a)?;
            let (o, l, i) = x.shape_ref().around(ax);
            let mut shape = x.shape().to_vec();
            if keepdim {
                shape[ax] = 1;
            } else {
                shape.remove(ax);
            }
            (x.clone(), (o, l, i), shape)
        }
    };
    if geom.1 == 0 {
        return Err(Error::shape(op, format!("attempt to get {op} of an empty axis of {:?}", x.shape())));
    }
    let out = match src.backend() {
        Backend::Cpu(d) => {
            let n = d.len();
            let vals: Vec<f64> = (0..n).map(|i| d.get_f64(i)).collect();
            let ints: Vec<i64> = if x.dtype().is_int() { (0..n).map(|i| d.get_i64(i)).collect() } else { Vec::new() };
            let (o, l, inner) = geom;
            let idx: Vec<i64> = (0..o * inner)
                .map(|k| {
                    let (oo, ii) = (k / inner, k % inner);
                    let at = |r: usize| (oo * l + r) * inner + ii;
                    let mut best = 0;
                    for r in 1..l {
                        let better = if x.dtype().is_int() {
                            if largest { ints[at(r)] > ints[at(best)] } else { ints[at(r)] < ints[at(best)] }
                        } else {
                            let (v, b) = (vals[at(r)], vals[at(best)]);
                            (if largest { v > b } else { v < b }) || (v.is_nan() && !b.is_nan())
                        };
                        if better {
                            best = r;
                        }
                    }
                    best as i64
                })
                .collect();
            Tensor::from_cpu(CpuData::I64(idx), shape)
        }
        Backend::Gpu(b) => {
            let ctx = &b.ctx;
            let outputs = geom.0 * geom.2;
            let out = ctx.alloc(op, 8 * outputs as u64)?;
            let params = [geom.0 as u32, geom.1 as u32, geom.2 as u32];
            ctx.dispatch_1d(
                &ARGREDUCE,
                &arg_variant(largest, x.dtype()),
                "main",
                &[Bind::read(b), Bind::write(&out)],
                &params,
                outputs as u64,
            )?;
            Tensor::from_gpu(out, shape, DType::Int64)
        }
    };
    Ok(out)
}

/// Index of the maximum along `axis` (over the flattened tensor when `None`), int64.
pub fn argmax(x: &Tensor, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
    arg_reduce("argmax", true, x, axis, keepdim)
}

/// Index of the minimum along `axis` (over the flattened tensor when `None`), int64.
pub fn argmin(x: &Tensor, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
    arg_reduce("argmin", false, x, axis, keepdim)
}

/// `log(Σ exp(x))` over `axis`, computed stably (max subtracted first).
pub fn logsumexp(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    x.expect_float("logsumexp")?;
    x.shape_ref().axes("logsumexp", axis)?;
    let m = crate::autograd::no_grad(|| max(x, axis, true))?;
    // A row of -inf would give NaN; shift by 0 there instead.
    let m = crate::autograd::no_grad(|| {
        let finite = m.isfinite()?;
        crate::where_(&finite, &m, &m.zeros_like()?)
    })?;
    let s = sum(&x.sub(&m)?.exp()?, axis, true)?.log()?.add(&m)?;
    if keepdim { Ok(s) } else { squeeze_axes(&s, x, axis) }
}

fn squeeze_axes(s: &Tensor, x: &Tensor, axis: &[isize]) -> Result<Tensor> {
    let axes = x.shape_ref().axes("reduce", axis)?;
    let shape: Vec<usize> = x.shape().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
    s.reshape(shape)
}

/// Variance over `axis`; `unbiased` divides by N−1 (Paddle's default).
pub fn var(x: &Tensor, axis: &[isize], unbiased: bool, keepdim: bool) -> Result<Tensor> {
    x.expect_float("var")?;
    let axes = x.shape_ref().axes("var", axis)?;
    let n: usize = axes.iter().map(|&a| x.shape()[a]).product();
    let m = mean(x, axis, true)?;
    let d = if unbiased { n.saturating_sub(1) } else { n };
    let ss = sum(&x.sub(&m)?.square()?, axis, keepdim)?;
    ss.scale(1.0 / d as f64, 0.0)
}

/// Standard deviation over `axis`; `unbiased` as `var`.
pub fn std(x: &Tensor, axis: &[isize], unbiased: bool, keepdim: bool) -> Result<Tensor> {
    x.expect_float("std")?;
    x.shape_ref().axes("std", axis)?;
    var(x, axis, unbiased, keepdim)?.sqrt()
}

/// Sum of a list of equally shaped tensors (`paddle.add_n`).
pub fn add_n(xs: &[Tensor]) -> Result<Tensor> {
    let (first, rest) = xs.split_first().ok_or_else(|| Error::invalid("add_n", "needs at least one tensor"))?;
    let mut acc = first.clone();
    for (i, x) in rest.iter().enumerate() {
        first.same_place("add_n", x)?;
        first.same_dtype("add_n", x)?;
        if x.shape() != first.shape() {
            return Err(Error::shape(
                "add_n",
                format!("tensor {} has shape {:?} but tensor 0 has {:?}", i + 1, x.shape(), first.shape()),
            ));
        }
        acc = acc.add(x)?;
    }
    Ok(acc)
}

/// Paddle 1.x name of `add_n`.
pub fn sums(xs: &[Tensor]) -> Result<Tensor> {
    add_n(xs)
}

/// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
pub(crate) fn sum_to_shape(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let lead = g.ndim() - shape.len();
    let axes: Vec<isize> = (0..g.ndim())
        .filter(|&i| i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1))
        .map(|i| i as isize)
        .collect();
    let s = if axes.is_empty() { g.clone() } else { sum(g, &axes, true)? };
    s.reshape(shape)
}

impl Tensor {
    /// `sum` as a method (`&[]` for all axes).
    pub fn sum(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        sum(self, axis, keepdim)
    }

    /// `mean` as a method.
    pub fn mean(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        mean(self, axis, keepdim)
    }

    /// `prod` as a method.
    pub fn prod(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        prod(self, axis, keepdim)
    }

    /// `max` as a method.
    pub fn max(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        max(self, axis, keepdim)
    }

    /// `min` as a method.
    pub fn min(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        min(self, axis, keepdim)
    }

    /// `argmax` as a method.
    pub fn argmax(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        argmax(self, axis, keepdim)
    }

    /// `argmin` as a method.
    pub fn argmin(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        argmin(self, axis, keepdim)
    }

    /// `logsumexp` as a method.
    pub fn logsumexp(&self, axis: &[isize], keepdim: bool) -> Result<Tensor> {
        logsumexp(self, axis, keepdim)
    }

    /// `var` as a method.
    pub fn var(&self, axis: &[isize], unbiased: bool, keepdim: bool) -> Result<Tensor> {
        var(self, axis, unbiased, keepdim)
    }

    /// `std` as a method.
    pub fn std(&self, axis: &[isize], unbiased: bool, keepdim: bool) -> Result<Tensor> {
        std(self, axis, unbiased, keepdim)
    }
}
