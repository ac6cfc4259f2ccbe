//! Reductions: sum, mean, prod, max, min over an axis list (or all) and argmax/argmin, each
//! a registry entry, and the composites built on them (logsumexp, var, std, add_n).

use crate::backend::cpu::CpuData;
use crate::backend::cpu::reduce::reduce;
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel, Variant};
use crate::ops::elementwise::cast::gpu_cast;
use crate::ops::epilogue::{Epilogue, EpilogueTable};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::op_header;
use crate::ops::registry::{AmpList, Facts, PrologueHost};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Scalar, Tensor};

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
    const ALL: [Reduce; 5] = [Reduce::Sum, Reduce::Mean, Reduce::Prod, Reduce::Max, Reduce::Min];

    /// The kernel variant key of this reduction over `dtype`.
    fn key(self, dtype: DType) -> u32 {
        self as u32 * 8 + dtype.code()
    }

    fn from_key(key: u32) -> Reduce {
        Reduce::ALL[(key / 8) as usize % 5]
    }

    fn name(self) -> &'static str {
        match self {
            Reduce::Sum => "sum",
            Reduce::Mean => "mean",
            Reduce::Prod => "prod",
            Reduce::Max => "max",
            Reduce::Min => "min",
        }
    }

    /// The substitutions for accumulating in `dtype`'s compute type, reading `src` and
    /// writing `dst` elements (WGSL storage types: `dtype`'s, or `f16` in the float16 forms).
    fn variant(self, dtype: DType, src: &str, dst: &str) -> Variant {
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
            ("S", src.into()),
            ("D", dst.into()),
            ("T", t.into()),
            ("IDENTITY", identity.into()),
            ("COMBINE", combine.into()),
            ("FINAL", fin.into()),
            ("OP", self.name().into()),
        ]
    }
}

/// Variant keys: `kind·8 + dtype`, plus 64 × the number of a float32 prologue; the float16
/// forms (devices with `SHADER_F16`) are float32's key with [`wgsl::F16_OPERANDS`] (f16
/// elements read) and [`wgsl::F16_RESULT`] (f16 results written): f32 accumulation, and f32
/// partial results between passes, so each output is rounded once.
pub(crate) static REDUCE: Kernel = Kernel {
    file: "reduce.wgsl",
    keys: || {
        let mut v = Vec::new();
        for k in [Reduce::Sum, Reduce::Mean, Reduce::Prod, Reduce::Max, Reduce::Min] {
            for d in [DType::Float32, DType::Int32, DType::Int64] {
                if k == Reduce::Mean && d != DType::Float32 {
                    continue;
                }
                v.push(k.key(d));
            }
        }
        for k in Reduce::ALL {
            v.extend(wgsl::f16_product_keys(k.key(DType::Float32)));
        }
        for number in PROLOGUES.numbers().into_iter().skip(1) {
            v.extend(Reduce::ALL.map(|k| k.key(DType::Float32) + 64 * number));
        }
        v
    },
    variant: |key| {
        let (key, mut v, src, dst) = wgsl::f16_product_types(key);
        let dtype = DType::from_code(key % 8);
        let storage = |element: &'static str| if element == "f16" { element } else { wgsl::storage(dtype) };
        v.extend(PROLOGUES.variant(key / 64));
        v.extend(Reduce::from_key(key % 64).variant(dtype, storage(src), storage(dst)));
        v
    },
};

/// The prologues `reduce.wgsl` has run (extra inputs bind after `dst`).
pub(crate) static PROLOGUES: EpilogueTable = EpilogueTable::prologues(2);

/// `sum`/`mean`/`prod`/`max`/`min`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ReduceAttrs {
    /// Axes to reduce (all when empty).
    pub axis: Vec<isize>,
    pub keepdim: bool,
}

/// A value reduction over an axis list (one registry entry per kind).
pub(crate) struct ReduceOp(Reduce);

pub(crate) static SUM: ReduceOp = ReduceOp(Reduce::Sum);
pub(crate) static MEAN: ReduceOp = ReduceOp(Reduce::Mean);
pub(crate) static PROD: ReduceOp = ReduceOp(Reduce::Prod);
pub(crate) static MAX: ReduceOp = ReduceOp(Reduce::Max);
pub(crate) static MIN: ReduceOp = ReduceOp(Reduce::Min);

/// How a reduction runs: one pass per run of adjacent reduced axes (last run first, each
/// over `(outer, len, inner)` of the previous pass's result), the input converted to
/// `compute` first (bool/int32 sums accumulate in int64), and the shape with the reduced
/// axes kept as 1 (the gradient's broadcast shape). When the axes are a leading and a
/// trailing run around kept ones (a conv bias gradient: 0, 2, 3 of NCHW), `planes` is that
/// `(outer, kept, inner)`, which the GPU reduces in one pass.
pub(crate) struct ReducePlan {
    passes: Vec<(usize, usize, usize)>,
    planes: Option<(usize, usize, usize)>,
    compute: DType,
    axes: Vec<usize>,
}

op_header!(ReduceOp: ReduceAttrs, ReducePlan; |op| op.0.name());

impl Op for ReduceOp {
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, x: &[&TensorMeta], a: &ReduceAttrs) -> Result<(Vec<TensorMeta>, ReducePlan)> {
        let (kind, op) = (self.0, self.0.name());
        let [x] = inputs(op, x)?;
        let compute = match (kind, x.dtype) {
            (Reduce::Mean, d) if !d.is_float() => {
                return Err(Error::unsupported(op, d, "(mean needs a float tensor; cast first)"));
            }
            (Reduce::Sum, DType::Bool | DType::Int32) => DType::Int64,
            (_, DType::Bool) => {
                return Err(Error::unsupported(op, DType::Bool, "(cast to an integer or float type first)"));
            }
            (_, d) => d,
        };
        let axes = x.shape.axes(op, &a.axis)?;
        let dims = x.dims();
        let keep_shape: Vec<usize> =
            dims.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
        let out_shape: Vec<usize> =
            dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
        let len: usize = axes.iter().map(|&i| dims[i]).product();
        if len == 0
            && matches!(kind, Reduce::Max | Reduce::Min)
            && x.numel() == 0
            && out_shape.iter().product::<usize>() > 0
        {
            return Err(Error::shape(
                op,
                format!("zero-size reduction over axes {:?} of {:?} has no identity", a.axis, dims),
            ));
        }
        // Runs of adjacent axes; each pass reduces one run of the running shape.
        let runs: Vec<Vec<usize>> = axes.iter().fold(Vec::new(), |mut runs: Vec<Vec<usize>>, &ax| {
            match runs.last_mut() {
                Some(r) if r.last().is_some_and(|&l| l + 1 == ax) => r.push(ax),
                _ => runs.push(vec![ax]),
            }
            runs
        });
        let mut cur = dims.to_vec();
        let mut passes = Vec::new();
        for run in runs.iter().rev() {
            let (a0, a1) = (run[0], run[run.len() - 1]);
            passes.push((cur[..a0].iter().product(), cur[a0..=a1].iter().product(), cur[a1 + 1..].iter().product()));
            for &ax in run {
                cur[ax] = 1;
            }
        }
        if passes.is_empty() {
            passes.push((x.numel(), 1, 1));
        }
        let planes = match runs.as_slice() {
            [lead, trail] if lead[0] == 0 && trail.last() == Some(&(dims.len() - 1)) => {
                let (kept_from, kept_to) = (lead[lead.len() - 1] + 1, trail[0]);
                let size = |r: std::ops::Range<usize>| dims[r].iter().product::<usize>();
                Some((size(0..kept_from), size(kept_from..kept_to), size(kept_to..dims.len())))
            }
            _ => None,
        };
        let shape = if a.keepdim { keep_shape.clone() } else { out_shape };
        let out = TensorMeta::new(shape, compute, x.place);
        Ok((vec![out], ReducePlan { passes, planes, compute, axes }))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &ReduceAttrs, p: &ReducePlan) -> Result<Vec<CpuData>> {
        Ok(vec![self.run_cpu(k.x(0), p)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &ReduceAttrs, p: &ReducePlan) -> Result<()> {
        self.run_gpu(k.ctx, k.x(0), &k.ins[0], p, k.y(0), Epilogue::default())
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn facts(&self) -> Facts {
        let host = PrologueHost { fused: &super::reduce_prologue::REDUCE_PROLOGUE, fits: super::reduce_prologue::fits };
        // Paddle's reduce_sum, mean/reduce_mean and reduce_prod are on float16's black list.
        let amp = if matches!(self.0, Reduce::Sum | Reduce::Mean | Reduce::Prod) {
            AmpList::BlackFloat16
        } else {
            AmpList::Gray
        };
        Facts { prologue: Some(host), amp, ..Facts::NONE }
    }

    fn backward(&self, g: &GradCall<'_>, _: &ReduceAttrs, p: &ReducePlan) -> Result<Vec<Option<Tensor>>> {
        let x = g.x(0);
        let axes: Vec<isize> = p.axes.iter().map(|&a| a as isize).collect();
        // The reduced axes put back as size 1 (no sizes recorded: programs fit any batch).
        let kept = |t: &Tensor| -> Result<Tensor> {
            if t.ndim() == x.ndim() || axes.is_empty() { Ok(t.clone()) } else { t.unsqueeze(&axes) }
        };
        let gk = || -> Result<Tensor> { crate::expand_as(&kept(g.g())?, x) };
        let gx = || -> Result<Tensor> {
            Ok(match self.0 {
                Reduce::Sum => gk()?,
                Reduce::Mean => {
                    let len: usize = p.axes.iter().map(|&a| x.shape()[a]).product();
                    if crate::shape::is_unknown(len) {
                        // The count is known only when the program runs.
                        let count = crate::ones_like(x)?.sum(&axes, true)?;
                        gk()?.div(&count)?
                    } else {
                        gk()?.scale(1.0 / len as f64, 0.0)?
                    }
                }
                Reduce::Prod => prod_grad(x, &gk()?, &axes)?,
                Reduce::Max | Reduce::Min => {
                    // Paddle splits the gradient evenly among tied extrema.
                    let best = kept(&g.y(0)?)?;
                    let mask = x.equal(&crate::expand_as(&best, x)?)?.cast(x.dtype())?;
                    let count = mask.sum(&axes, true)?;
                    gk()?.mul(&mask)?.div(&count)?
                }
            })
        };
        Ok(vec![g.grad_if(0, gx)?])
    }
}

impl ReduceOp {
    /// The reduction of `x` on the CPU, pass by pass.
    pub(crate) fn run_cpu(&self, x: &CpuData, p: &ReducePlan) -> Result<CpuData> {
        let mut data: Option<CpuData> = None;
        for &geom in &p.passes {
            let src = data.as_ref().unwrap_or(x);
            let next = cpu_reduce(self.0, src, geom, p.compute)
                .ok_or_else(|| Error::unsupported(self.0.name(), src.dtype(), "on the CPU"))?;
            data = Some(next);
        }
        data.ok_or_else(|| Error::invalid(self.0.name(), "no reduction pass"))
    }

    /// The reduction of `src` (described by `meta`) into `out` on the GPU, the first pass
    /// reading its elements through the prologue `pro` (float32 only).
    pub(crate) fn run_gpu(
        &self,
        ctx: &std::sync::Arc<GpuContext>,
        src: &GpuBuffer,
        meta: &TensorMeta,
        p: &ReducePlan,
        out: &GpuBuffer,
        pro: Epilogue<'_>,
    ) -> Result<()> {
        let kind = self.0;
        let cast;
        let mut src: &GpuBuffer = src;
        if meta.dtype != p.compute {
            cast = gpu_cast(ctx, src, meta.dtype, p.compute, meta.numel())?;
            src = &cast;
        }
        // float16 (on devices with SHADER_F16) accumulates as float32 does, the first pass
        // reading f16 elements and the last writing f16 results.
        let (compute, half) = match p.compute {
            DType::Float16 => (DType::Float32, wgsl::F16_OPERANDS | wgsl::F16_RESULT),
            d => (d, 0),
        };
        // One pass where the passes' first would take a workgroup per row of the inner run
        // (32 elements or more): always on a hardware GPU. A software adapter's barrier-free
        // first pass over many such rows beats a workgroup per kept index (lavapipe, the
        // MNIST step's two conv bias gradients: about 1.1 ms per step in two passes each,
        // 1.8 ms in one each).
        if let Some((outer, kept, inner)) = p.planes
            && inner >= 32
            && outer * kept > 0
            && !ctx.rows_without_barriers(outer * kept, inner, 28)
        {
            return gpu_rows(kind, ctx, src, compute, half, (kept, outer * inner), Some(inner), out, pro);
        }
        let mut temp: Option<GpuBuffer> = None;
        let mut pro = Some(pro);
        for (i, &geom) in p.passes.iter().enumerate() {
            let input = temp.as_ref().unwrap_or(src);
            let first = pro.take().unwrap_or_default();
            let reads = if i == 0 { half & wgsl::F16_OPERANDS } else { 0 };
            if i + 1 == p.passes.len() {
                return gpu_reduce(kind, ctx, input, compute, reads | half & wgsl::F16_RESULT, geom, out, first);
            }
            let next = ctx.alloc(kind.name(), crate::backend::cpu::gpu_bytes(compute, geom.0 * geom.2))?;
            gpu_reduce(kind, ctx, input, compute, reads, geom, &next, first)?;
            temp = Some(next);
        }
        Ok(())
    }
}

/// The reduction registry entry called `name`, if it is one.
pub(crate) fn reduce_entry(name: &str) -> Option<&'static ReduceOp> {
    [&SUM, &MEAN, &PROD, &MAX, &MIN].into_iter().find(|op| op.0.name() == name)
}

/// The gradient of a product over `axes` with `dy` broadcast to `x`'s shape: the product of
/// the other elements, finite where `x` has zeros (`dy·y/x` would give NaN there).
fn prod_grad(x: &Tensor, dy: &Tensor, axes: &[isize]) -> Result<Tensor> {
    let is_zero = x.equal_scalar(0.0)?;
    let z = is_zero.cast(x.dtype())?;
    let zeros_in_group = crate::expand_as(&z.sum(axes, true)?, x)?;
    let safe = crate::where_(&is_zero, &crate::ones_like(x)?, x)?;
    let nonzero_prod = crate::expand_as(&safe.prod(axes, true)?, x)?;
    let none = nonzero_prod.div(&safe)?;
    let one = z.mul(&nonzero_prod)?;
    let other = crate::where_(&zeros_in_group.equal_scalar(1.0)?, &one, &x.zeros_like()?)?;
    dy.mul(&crate::where_(&zeros_in_group.equal_scalar(0.0)?, &none, &other)?)
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

/// One pass over `(outer, len, inner)` of `d`, giving `out` (the accumulation dtype).
fn cpu_reduce(kind: Reduce, d: &CpuData, g: (usize, usize, usize), out: DType) -> Option<CpuData> {
    Some(match d {
        CpuData::F32(v) => CpuData::F32(float_reduce(kind, v, g).into_iter().map(|x| x as f32).collect()),
        CpuData::F64(v) => CpuData::F64(float_reduce(kind, v, g)),
        CpuData::I64(v) => CpuData::I64(int_reduce(kind, v, g)),
        CpuData::I32(v) if out == DType::Int64 => CpuData::I64(int_reduce(kind, v, g)),
        CpuData::I32(v) => CpuData::I32(int_reduce(kind, v, g).into_iter().map(|x| x as i32).collect()),
        CpuData::Bool(v) => {
            let ints: Vec<i64> = v.iter().map(|&b| b as i64).collect();
            CpuData::I64(int_reduce(kind, &ints, g))
        }
        CpuData::F16(_) | CpuData::BF16(_) => return None,
    })
}

/// `dst[o, i] = Σ src[o, :, i]` on the GPU (column sums of partial results), `src` of
/// `dtype` and `dst` of `dtype` or, from float32, float16 (each sum rounded once).
pub(crate) fn gpu_sum_rows(
    ctx: &std::sync::Arc<GpuContext>,
    src: &GpuBuffer,
    dtype: DType,
    geom: (usize, usize, usize),
    dst: &GpuBuffer,
    dst_dtype: DType,
) -> Result<()> {
    let half = match (dtype, dst_dtype) {
        (DType::Float32, DType::Float16) => wgsl::F16_RESULT,
        (a, b) if a == b => 0,
        (a, b) => return Err(Error::unsupported("sum", b, format!("as the GPU column sums of {a}"))),
    };
    gpu_reduce(Reduce::Sum, ctx, src, dtype, half, geom, dst, Epilogue::default())
}

/// One pass on the GPU: `dst[o, i] = reduce(load(o, :, i))`, reading `buf`'s elements
/// through the prologue `pro` (the identity by default), accumulating in `dtype`; `half`
/// holds the float16 bits of a float32 pass reading or writing f16 elements.
#[allow(clippy::too_many_arguments)]
fn gpu_reduce(
    kind: Reduce,
    ctx: &std::sync::Arc<GpuContext>,
    buf: &GpuBuffer,
    dtype: DType,
    half: u32,
    (outer, len, inner): (usize, usize, usize),
    dst: &GpuBuffer,
    pro: Epilogue<'_>,
) -> Result<()> {
    if outer * inner == 0 {
        return Ok(());
    }
    if len == 0 {
        let fill = match kind {
            Reduce::Prod => Scalar::Int(1),
            Reduce::Mean => Scalar::Float(f64::NAN),
            _ => Scalar::Int(0),
        };
        let written = if half & wgsl::F16_RESULT != 0 { DType::Float16 } else { dtype };
        return crate::ops::creation::gpu_fill(ctx, dst, written, fill, outer * inner);
    }
    // On software adapters, many short rows take one invocation each, summed in order.
    if inner == 1 && len >= 32 && !ctx.rows_without_barriers(outer, len, 28) {
        return gpu_rows(kind, ctx, buf, dtype, half, (outer, len), None, dst, pro);
    }
    let scale = (1.0f32 / len.max(1) as f32).to_bits();
    let mut params = vec![outer as u32, len as u32, inner as u32, 1, len as u32, scale];
    pro.append_params(kind.name(), &mut params)?;
    let key = (kind.key(dtype) + 64 * pro.number) | half;
    ctx.dispatch(&REDUCE, key, "strided", &reading(buf, dst, &pro), &params, (outer * inner) as u64)
}

/// The bindings of a pass reading `buf` through the prologue `pro` into `out`.
fn reading<'a>(buf: &'a GpuBuffer, out: &'a GpuBuffer, pro: &'a Epilogue<'_>) -> Vec<Bind<'a>> {
    let mut binds = vec![Bind::read(buf), Bind::write(out)];
    binds.extend(pro.extras.iter().map(|x| Bind::read(x)));
    binds
}

/// `dst[o] = reduce(row o)` over `rows` rows of `len` elements, a workgroup per row (and per
/// chunk of a long row, the chunks' results combined by a second pass). Row o is contiguous,
/// or with `planes = Some(inner)` the elements whose middle index is o in `buf` viewed as
/// `(len / inner, rows, inner)` (`planes` in reduce.wgsl). `half` as [`gpu_reduce`]'s; the
/// chunks' partial results are `dtype`'s.
#[allow(clippy::too_many_arguments)]
fn gpu_rows(
    kind: Reduce,
    ctx: &std::sync::Arc<GpuContext>,
    buf: &GpuBuffer,
    dtype: DType,
    half: u32,
    (rows, len): (usize, usize),
    planes: Option<usize>,
    dst: &GpuBuffer,
    pro: Epilogue<'_>,
) -> Result<()> {
    let scale = (1.0f32 / len.max(1) as f32).to_bits();
    // A long row splits into chunks of 4,096 or more while the rows alone are too few
    // workgroups to fill a GPU: contiguous rows below 64 of them, planes up to 1,024
    // workgroups in all (a kept index's elements are often many: 32×64×112×112 keeps 64).
    let chunks = match planes {
        _ if len <= 8192 => 1,
        None if rows < 64 => len.div_ceil(4096).min(1024),
        None => 1,
        Some(_) => len.div_ceil(4096).min(1024usize.div_ceil(rows)),
    };
    let chunk_len = len.div_ceil(chunks);
    let pass1 = if chunks > 1 && kind == Reduce::Mean { Reduce::Sum } else { kind };
    let mut params = vec![rows as u32, len as u32, planes.unwrap_or(1) as u32, chunks as u32, chunk_len as u32, scale];
    pro.append_params(kind.name(), &mut params)?;
    let groups = crate::backend::gpu::grid(ctx, (rows * chunks) as u64)?;
    let key = pass1.key(dtype) + 64 * pro.number;
    let entry = if planes.is_some() { "planes" } else { "rows" };
    if chunks == 1 {
        return ctx.dispatch(&REDUCE, key | half, entry, &reading(buf, dst, &pro), &params, groups);
    }
    let key = key | half & wgsl::F16_OPERANDS;
    let partial = ctx.alloc(kind.name(), crate::backend::cpu::gpu_bytes(dtype, rows * chunks))?;
    ctx.dispatch(&REDUCE, key, entry, &reading(buf, &partial, &pro), &params, groups)?;
    let params = [rows as u32, chunks as u32, 1, 1, chunks as u32, scale];
    let groups = crate::backend::gpu::grid(ctx, rows as u64)?;
    let key = kind.key(dtype) | half & wgsl::F16_RESULT;
    ctx.dispatch(&REDUCE, key, "rows", &[Bind::read(&partial), Bind::write(dst)], &params, groups)
}

fn reduce_op(op: &'static ReduceOp, x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    apply1(op, &[x], ReduceAttrs { axis: axis.to_vec(), keepdim })
}

/// Sum over `axis` (all axes when empty). bool/int32 sum to int64, as Paddle.
pub fn sum(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(&SUM, x, axis, keepdim)
}

/// Mean over `axis` (all when empty); float tensors only.
pub fn mean(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(&MEAN, x, axis, keepdim)
}

/// Product over `axis` (all when empty).
pub fn prod(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(&PROD, x, axis, keepdim)
}

/// Maximum over `axis` (all when empty); the gradient is split evenly among the elements
/// equal to the maximum, as Paddle.
pub fn max(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(&MAX, x, axis, keepdim)
}

/// Minimum over `axis` (all when empty); ties as `max`.
pub fn min(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    reduce_op(&MIN, x, axis, keepdim)
}

pub(crate) static ARGREDUCE: Kernel = Kernel {
    file: "argreduce.wgsl",
    keys: || {
        let mut v = Vec::new();
        for largest in [true, false] {
            for d in [DType::Float32, DType::Int32, DType::Int64] {
                v.push(arg_key(largest, d));
            }
        }
        v
    },
    variant: |key| arg_variant(key >= 8, DType::from_code(key % 8)),
};

fn arg_key(largest: bool, dtype: DType) -> u32 {
    largest as u32 * 8 + dtype.code()
}

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

/// `argmax`/`argmin`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ArgAttrs {
    /// The axis (the flattened tensor when `None`).
    pub axis: Option<isize>,
    pub keepdim: bool,
}

/// Index of the extremum along an axis (`largest` picks argmax), int64.
pub(crate) struct ArgReduceOp {
    name: &'static str,
    largest: bool,
}

pub(crate) static ARGMAX: ArgReduceOp = ArgReduceOp { name: "argmax", largest: true };
pub(crate) static ARGMIN: ArgReduceOp = ArgReduceOp { name: "argmin", largest: false };

/// `(outer, len, inner)` around the reduced axis.
type AxisSplit = (usize, usize, usize);

op_header!(ArgReduceOp: ArgAttrs, AxisSplit; |op| op.name);

impl Op for ArgReduceOp {
    fn infer(&self, x: &[&TensorMeta], a: &ArgAttrs) -> Result<(Vec<TensorMeta>, (usize, usize, usize))> {
        let op = self.name;
        let [x] = inputs(op, x)?;
        let (geom, shape) = match a.axis {
            None => ((1, x.numel(), 1), if a.keepdim { vec![1; x.rank()] } else { vec![] }),
            Some(ax) => {
                let ax = x.shape.axis(op, ax)?;
                let mut shape = x.dims().to_vec();
                if a.keepdim {
                    shape[ax] = 1;
                } else {
                    shape.remove(ax);
                }
                (x.shape.around(ax), shape)
            }
        };
        if geom.1 == 0 {
            return Err(Error::shape(op, format!("attempt to get {op} of an empty axis of {:?}", x.dims())));
        }
        Ok((vec![TensorMeta::new(shape, DType::Int64, x.place)], geom))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &ArgAttrs, &(o, l, inner): &(usize, usize, usize)) -> Result<Vec<CpuData>> {
        let (d, largest) = (k.x(0), self.largest);
        let n = d.len();
        let is_int = d.dtype().is_int();
        let vals: Vec<f64> = if is_int { Vec::new() } else { (0..n).map(|i| d.get_f64(i)).collect() };
        let ints: Vec<i64> = if is_int { (0..n).map(|i| d.get_i64(i)).collect() } else { Vec::new() };
        let idx: Vec<i64> = (0..o * inner)
            .map(|k| {
                let (oo, ii) = (k / inner, k % inner);
                let at = |r: usize| (oo * l + r) * inner + ii;
                let mut best = 0;
                for r in 1..l {
                    let better = if is_int {
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
        Ok(vec![CpuData::I64(idx)])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &ArgAttrs, geom: &(usize, usize, usize)) -> Result<()> {
        let ctx = k.ctx;
        let dtype = k.ins[0].dtype;
        let cast;
        let (src, dtype) = if dtype == DType::Bool {
            cast = gpu_cast(ctx, k.x(0), dtype, DType::Float32, k.ins[0].numel())?;
            (&cast, DType::Float32)
        } else {
            (k.x(0), dtype)
        };
        let outputs = geom.0 * geom.2;
        let params = [geom.0 as u32, geom.1 as u32, geom.2 as u32];
        let binds = [Bind::read(src), Bind::write(k.y(0))];
        ctx.dispatch(&ARGREDUCE, arg_key(self.largest, dtype), "main", &binds, &params, outputs as u64)
    }
}

/// Index of the maximum along `axis` (over the flattened tensor when `None`), int64.
pub fn argmax(x: &Tensor, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
    apply1(&ARGMAX, &[x], ArgAttrs { axis, keepdim })
}

/// Index of the minimum along `axis` (over the flattened tensor when `None`), int64.
pub fn argmin(x: &Tensor, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
    apply1(&ARGMIN, &[x], ArgAttrs { axis, keepdim })
}

/// `log(Σ exp(x))` over `axis`, computed stably (max subtracted first).
pub fn logsumexp(x: &Tensor, axis: &[isize], keepdim: bool) -> Result<Tensor> {
    x.expect_float("logsumexp")?;
    x.shape_ref().axes("logsumexp", axis)?;
    let m = crate::tensor::grad_mode::no_grad(|| max(x, axis, true))?;
    // A row of -inf would give NaN; shift by 0 there instead.
    let m = crate::tensor::grad_mode::no_grad(|| {
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

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&SUM, &MEAN, &PROD, &MAX, &MIN, &ARGMAX, &ARGMIN],
    kernels: &[&REDUCE, &ARGREDUCE],
};
