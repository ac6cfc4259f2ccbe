//! The random ops: `uniform` and `gaussian` (float draws), `randint`, `randperm`, each a
//! registry entry drawing from the global Philox generator (`random.rs`, which gives the
//! bit layout every place follows).

use crate::backend::cpu::CpuData;
use crate::ops::elementwise::cast::gpu_cast;
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, Half, Op, inputs};
use crate::ops::registry::{Facts, op_header, registry_entry};
use crate::random::{Stream, TWO_NEG24, TWO_NEG53, below, box_muller_f32, box_muller_f64, permutation, u64_of};
use crate::shape::IntoShape;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Place, Result, Tensor, current_place};

/// The distribution of a float random op.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Dist {
    Uniform { min: f64, max: f64 },
    Normal { mean: f64, std: f64 },
}

/// `uniform` / `gaussian`'s attributes: the shape, dtype and place, and the distribution's
/// two parameters (`min`, `max` or `mean`, `std`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FloatRandomAttrs {
    shape: Vec<usize>,
    dtype: DType,
    place: Place,
    dist: Dist,
}

impl crate::ops::Attrs for FloatRandomAttrs {
    fn to_map(&self) -> crate::ops::AttrMap {
        let m = crate::ops::AttrMap::new()
            .with("shape", self.shape.clone())
            .with("dtype", self.dtype)
            .with("place", self.place);
        match self.dist {
            Dist::Uniform { min, max } => m.with("min", min).with("max", max),
            Dist::Normal { mean, std } => m.with("mean", mean).with("std", std),
        }
    }
    fn from_map(op: &'static str, m: &crate::ops::AttrMap) -> Result<Self> {
        let dist = if op == "uniform" {
            m.check_known(op, &["shape", "dtype", "place", "min", "max"])?;
            Dist::Uniform { min: m.field(op, "min")?, max: m.field(op, "max")? }
        } else {
            m.check_known(op, &["shape", "dtype", "place", "mean", "std"])?;
            Dist::Normal { mean: m.field(op, "mean")?, std: m.field(op, "std")? }
        };
        Ok(FloatRandomAttrs {
            shape: m.field(op, "shape")?,
            dtype: m.field(op, "dtype")?,
            place: m.field(op, "place")?,
            dist,
        })
    }
}

/// Uniform or normal floats (`paddle.uniform` / `paddle.gaussian` and their shorthands).
pub(crate) struct FloatRandomOp(&'static str);

pub(crate) static UNIFORM: FloatRandomOp = FloatRandomOp("uniform");
pub(crate) static GAUSSIAN: FloatRandomOp = FloatRandomOp("gaussian");

fn check_finite(op: &'static str, what: &str, v: f64) -> Result<()> {
    if !v.is_finite() {
        return Err(Error::invalid(op, format!("{what} must be finite, got {v}")));
    }
    Ok(())
}

op_header!(FloatRandomOp: FloatRandomAttrs, (); |op| op.0);

impl Op for FloatRandomOp {
    fn infer(&self, xs: &[&TensorMeta], a: &FloatRandomAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let op = self.0;
        let [] = inputs(op, xs)?;
        if !a.dtype.is_float() {
            return Err(Error::unsupported(op, a.dtype, "(expected float16, float32 or float64)"));
        }
        match a.dist {
            Dist::Uniform { min, max } => {
                check_finite(op, "min", min)?;
                check_finite(op, "max", max)?;
                if min > max {
                    return Err(Error::invalid(op, format!("min {min} is greater than max {max}")));
                }
            }
            Dist::Normal { mean, std } => {
                check_finite(op, "mean", mean)?;
                check_finite(op, "std", std)?;
                if std < 0.0 {
                    return Err(Error::invalid(op, format!("std must be non-negative, got {std}")));
                }
            }
        }
        Ok((vec![TensorMeta::new(a.shape.clone(), a.dtype, a.place)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &FloatRandomAttrs, _: &()) -> Result<Vec<CpuData>> {
        let n = k.outs[0].numel();
        let data = match a.dtype {
            DType::Float64 => CpuData::F64(random_f64(n, a.dist)),
            DType::Float16 => CpuData::F16(random_f32(n, a.dist).into_iter().map(half::f16::from_f32).collect()),
            DType::BFloat16 => CpuData::BF16(random_f32(n, a.dist).into_iter().map(half::bf16::from_f32).collect()),
            _ => CpuData::F32(random_f32(n, a.dist)),
        };
        Ok(vec![data])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &FloatRandomAttrs, _: &()) -> Result<()> {
        let n = k.outs[0].numel();
        let stream = Stream::for_elements(n, 4);
        let (entry, p, q) = match a.dist {
            Dist::Uniform { min, max } => ("uniform", (max - min) as f32, min as f32),
            Dist::Normal { mean, std } => ("normal", mean as f32, std as f32),
        };
        let extra = [p.to_bits(), q.to_bits()];
        if a.dtype.is_half() {
            let tmp = k.ctx.alloc(self.0, 4 * n as u64)?;
            stream.dispatch(k.ctx, entry, n, DType::Float32, &extra, &tmp)?;
            let half = gpu_cast(k.ctx, &tmp, DType::Float32, a.dtype, n)?;
            return k.ctx.copy(&half, 0, k.y(0), 0, crate::backend::cpu::gpu_bytes(a.dtype, n).div_ceil(4) * 4);
        }
        stream.dispatch(k.ctx, entry, n, DType::Float32, &extra, k.y(0))
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn facts(&self) -> Facts {
        Facts { random: true, ..Facts::NONE }
    }
}

/// `n` float32 draws of `dist` (32-bit layout).
fn random_f32(n: usize, dist: Dist) -> Vec<f32> {
    let stream = Stream::for_elements(n, 4);
    let mut out = vec![0.0f32; n];
    match dist {
        Dist::Uniform { min, max } => {
            let (scale, shift) = ((max - min) as f32, min as f32);
            stream.fill(&mut out, 4, |w, l| (w[l] >> 8) as f32 * TWO_NEG24 * scale + shift)
        }
        Dist::Normal { mean, std } => {
            let (mean, std) = (mean as f32, std as f32);
            stream.fill(&mut out, 4, |w, l| {
                let p = l / 2;
                let (c, s) = box_muller_f32(w[2 * p], w[2 * p + 1]);
                (if l % 2 == 0 { c } else { s }) * std + mean
            })
        }
    }
    out
}

/// `n` float64 draws of `dist` (64-bit layout).
fn random_f64(n: usize, dist: Dist) -> Vec<f64> {
    let stream = Stream::for_elements(n, 2);
    let mut out = vec![0.0f64; n];
    match dist {
        Dist::Uniform { min, max } => {
            let scale = max - min;
            stream.fill(&mut out, 2, |w, h| (u64_of(w, h) >> 11) as f64 * TWO_NEG53 * scale + min)
        }
        Dist::Normal { mean, std } => stream.fill(&mut out, 2, |w, h| {
            let (c, s) = box_muller_f64(u64_of(w, 0), u64_of(w, 1));
            (if h == 0 { c } else { s }) * std + mean
        }),
    }
    out
}

/// A float tensor of `dist` on `place`.
fn float_random(op: &'static str, shape: Vec<usize>, dtype: DType, place: Place, dist: Dist) -> Result<Tensor> {
    let entry = if matches!(dist, Dist::Uniform { .. }) { &UNIFORM } else { &GAUSSIAN };
    apply1(entry, &[], FloatRandomAttrs { shape, dtype, place, dist }).map_err(|e| e.called_as(entry.0, op))
}

/// Uniform float32 values in `[0, 1)` of `shape` on the current place (`paddle.rand`).
pub fn rand(shape: impl IntoShape) -> Result<Tensor> {
    rand_on(shape, current_place()?)
}

/// [`rand`] on an explicit place.
pub fn rand_on(shape: impl IntoShape, place: Place) -> Result<Tensor> {
    float_random("rand", shape.into_dims("rand")?, DType::Float32, place, Dist::Uniform { min: 0.0, max: 1.0 })
}

/// Standard-normal float32 values of `shape` on the current place (`paddle.randn`).
pub fn randn(shape: impl IntoShape) -> Result<Tensor> {
    randn_on(shape, current_place()?)
}

/// [`randn`] on an explicit place.
pub fn randn_on(shape: impl IntoShape, place: Place) -> Result<Tensor> {
    float_random("randn", shape.into_dims("randn")?, DType::Float32, place, Dist::Normal { mean: 0.0, std: 1.0 })
}

/// Standard-normal values of `dtype` (float16/32/64) (`paddle.standard_normal`).
pub fn standard_normal(shape: impl IntoShape, dtype: DType) -> Result<Tensor> {
    standard_normal_on(shape, dtype, current_place()?)
}

/// [`standard_normal`] on an explicit place.
pub fn standard_normal_on(shape: impl IntoShape, dtype: DType, place: Place) -> Result<Tensor> {
    let shape = shape.into_dims("standard_normal")?;
    float_random("standard_normal", shape, dtype, place, Dist::Normal { mean: 0.0, std: 1.0 })
}

/// Uniform values in `[min, max)` of `dtype` (float16/32/64) (`paddle.uniform`). With float
/// rounding a value may equal `max` when the range is wide relative to its magnitude.
pub fn uniform(shape: impl IntoShape, dtype: DType, min: f64, max: f64) -> Result<Tensor> {
    uniform_on(shape, dtype, min, max, current_place()?)
}

/// [`uniform`] on an explicit place.
pub fn uniform_on(shape: impl IntoShape, dtype: DType, min: f64, max: f64, place: Place) -> Result<Tensor> {
    float_random("uniform", shape.into_dims("uniform")?, dtype, place, Dist::Uniform { min, max })
}

/// Normal values with `mean` and standard deviation `std`, float32 (`paddle.normal` with
/// scalar mean and std).
pub fn normal(mean: f64, std: f64, shape: impl IntoShape) -> Result<Tensor> {
    normal_on(mean, std, shape, current_place()?)
}

/// [`normal`] on an explicit place.
pub fn normal_on(mean: f64, std: f64, shape: impl IntoShape, place: Place) -> Result<Tensor> {
    gaussian_on(shape, mean, std, DType::Float32, place)
}

/// Normal values of `dtype` (float16/32/64) with `mean` and `std` (Paddle's `gaussian`).
pub fn gaussian(shape: impl IntoShape, mean: f64, std: f64, dtype: DType) -> Result<Tensor> {
    gaussian_on(shape, mean, std, dtype, current_place()?)
}

/// [`gaussian`] on an explicit place.
pub fn gaussian_on(shape: impl IntoShape, mean: f64, std: f64, dtype: DType, place: Place) -> Result<Tensor> {
    float_random("normal", shape.into_dims("normal")?, dtype, place, Dist::Normal { mean, std })
}

/// Uniform values in `[0, 1)` with `x`'s shape, dtype (a float type) and place.
pub fn rand_like(x: &Tensor) -> Result<Tensor> {
    float_random("rand_like", x.shape().to_vec(), x.dtype(), x.place(), Dist::Uniform { min: 0.0, max: 1.0 })
}

/// Standard-normal values with `x`'s shape, dtype (a float type) and place.
pub fn randn_like(x: &Tensor) -> Result<Tensor> {
    float_random("randn_like", x.shape().to_vec(), x.dtype(), x.place(), Dist::Normal { mean: 0.0, std: 1.0 })
}

/// Uniform integers in `[low, high)` of `dtype` (int32 or int64) (`paddle.randint`).
pub fn randint(low: i64, high: i64, shape: impl IntoShape, dtype: DType) -> Result<Tensor> {
    randint_on(low, high, shape, dtype, current_place()?)
}

/// [`randint`] on an explicit place.
pub fn randint_on(low: i64, high: i64, shape: impl IntoShape, dtype: DType, place: Place) -> Result<Tensor> {
    let shape = shape.into_dims("randint")?;
    apply1(&RANDINT, &[], RandintAttrs { low, high, shape, dtype, place })
}

/// `randint`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct RandintAttrs {
    pub low: i64,
    pub high: i64,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub place: Place,
}

registry_entry!(
    /// Uniform integers in `[low, high)` (`paddle.randint`).
    RANDINT: RandintOp = "randint", RandintAttrs, ()
);

impl Op for RandintOp {
    fn infer(&self, xs: &[&TensorMeta], a: &RandintAttrs) -> Result<(Vec<TensorMeta>, ())> {
        const OP: &str = "randint";
        let [] = inputs(OP, xs)?;
        if !a.dtype.is_int() {
            return Err(Error::unsupported(OP, a.dtype, "(expected int32 or int64)"));
        }
        let (low, high) = (a.low, a.high);
        if low >= high {
            return Err(Error::invalid(OP, format!("low {low} must be less than high {high}")));
        }
        if a.dtype == DType::Int32 && (low < i32::MIN as i64 || high - 1 > i32::MAX as i64) {
            return Err(Error::invalid(OP, format!("[{low}, {high}) does not fit int32")));
        }
        Ok((vec![TensorMeta::new(a.shape.clone(), a.dtype, a.place)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &RandintAttrs, _: &()) -> Result<Vec<CpuData>> {
        let n = k.outs[0].numel();
        let range = a.high.wrapping_sub(a.low) as u64;
        let stream = Stream::for_elements(n, 2);
        let low = a.low;
        let value = |w: &[u32; 4], h: usize| low.wrapping_add(below(u64_of(w, h), range) as i64);
        Ok(vec![if a.dtype == DType::Int32 {
            let mut out = vec![0i32; n];
            stream.fill(&mut out, 2, |w, h| value(w, h) as i32);
            CpuData::I32(out)
        } else {
            let mut out = vec![0i64; n];
            stream.fill(&mut out, 2, value);
            CpuData::I64(out)
        }])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &RandintAttrs, _: &()) -> Result<()> {
        let n = k.outs[0].numel();
        let range = a.high.wrapping_sub(a.low) as u64;
        let stream = Stream::for_elements(n, 2);
        let entry = if a.dtype == DType::Int32 { "randint_i32" } else { "randint_i64" };
        let low = a.low;
        let extra = [low as u32, (low >> 32) as u32, range as u32, (range >> 32) as u32];
        stream.dispatch(k.ctx, entry, n, a.dtype, &extra, k.y(0))
    }

    fn facts(&self) -> Facts {
        Facts { random: true, ..Facts::NONE }
    }
}

/// A random permutation of `0..n` (`paddle.randperm`), of `dtype` (int32, int64, float16/32/64).
/// Fisher–Yates on the host driven by the Philox stream (draw `k` is the 64-bit word of element
/// `k`, swapping position `n − 1 − k` with `below(word, n − k)`), then uploaded: the shuffle is
/// an inherently sequential O(n) loop.
pub fn randperm(n: usize, dtype: DType) -> Result<Tensor> {
    randperm_on(n, dtype, current_place()?)
}

/// [`randperm`] on an explicit place.
pub fn randperm_on(n: usize, dtype: DType, place: Place) -> Result<Tensor> {
    apply1(&RANDPERM, &[], RandpermAttrs { n, dtype, place })
}

/// `randperm`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct RandpermAttrs {
    pub n: usize,
    pub dtype: DType,
    pub place: Place,
}

registry_entry!(
    /// A random permutation of `0..n` (`paddle.randperm`).
    RANDPERM: RandpermOp = "randperm", RandpermAttrs, ()
);

impl Op for RandpermOp {
    fn infer(&self, xs: &[&TensorMeta], a: &RandpermAttrs) -> Result<(Vec<TensorMeta>, ())> {
        const OP: &str = "randperm";
        let [] = inputs(OP, xs)?;
        if a.dtype == DType::Bool {
            return Err(Error::unsupported(OP, a.dtype, "(expected an integer or float dtype)"));
        }
        if a.dtype == DType::Int32 && a.n > i32::MAX as usize {
            return Err(Error::invalid(OP, format!("n = {} does not fit int32", a.n)));
        }
        // The host shuffle holds one usize per element.
        crate::tensor::check_size(OP, &[a.n], DType::Int64)?;
        Ok((vec![TensorMeta::new(vec![a.n], a.dtype, a.place)], ()))
    }

    fn cpu(&self, _: &mut CpuCall<'_>, a: &RandpermAttrs, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![CpuData::from_i64(a.dtype, permutation(a.n).into_iter().map(|v| v as i64))])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &RandpermAttrs, _: &()) -> Result<()> {
        let data = CpuData::from_i64(a.dtype, permutation(a.n).into_iter().map(|v| v as i64));
        k.ctx.write(k.y(0), &data.to_gpu_bytes())
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn facts(&self) -> Facts {
        Facts { random: true, ..Facts::NONE }
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&UNIFORM, &GAUSSIAN, &RANDINT, &RANDPERM],
    kernels: &[&crate::random::RANDOM],
};
