//! Creating tensors: from host data (`to_tensor`, `from_vec`), constants (`zeros`, `ones`,
//! `full` and their `_like`), ranges (`arange`, `linspace`, `eye`), copies (`clone_data`,
//! `assign_`) and moving between places (`to`). Random creation lives in `random.rs`. Every
//! op here but the host-data constructors is a registry entry.

use std::marker::PhantomData;

use half::f16;

use crate::backend::cpu::{CpuData, gpu_bytes};
use crate::backend::gpu::{self, Bind, GpuBuffer, GpuContext, Kernel};
use crate::ops::registry::apply::{apply, apply1};
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::{Attrs, Facts, Fusion, op_header, registry_entry};
use crate::ops::wgsl;
use crate::shape::IntoShape;
use crate::tensor::{NdArray, TensorMeta};
use crate::{DType, Element, Error, Place, Result, Scalar, Tensor, current_place};

pub(crate) static FILL: Kernel = Kernel::single("fill.wgsl");

/// Records filling the first `n` elements of `buf` (of `dtype`) with `value`.
pub(crate) fn gpu_fill(ctx: &GpuContext, buf: &GpuBuffer, dtype: DType, value: Scalar, n: usize) -> Result<()> {
    let words = gpu_bytes(dtype, n).div_ceil(4);
    let pattern: Vec<u32> = match dtype {
        DType::Float16 => {
            let h = f16::from_f64(value.to_f64()).to_bits() as u32;
            vec![h | (h << 16)]
        }
        DType::BFloat16 => {
            let h = half::bf16::from_f64(value.to_f64()).to_bits() as u32;
            vec![h | (h << 16)]
        }
        _ => wgsl::scalar_words(dtype, value),
    };
    let mut params = vec![words as u32, pattern.len() as u32];
    params.extend(&pattern);
    params.resize(4, 0);
    ctx.dispatch(&FILL, 0, "main", &[Bind::write(buf)], &params, words)
}

/// Host-computed data written into a creation op's output (small: ranges, identities).
fn host_to_gpu(k: &GpuCall<'_>, data: CpuData) -> Result<()> {
    k.ctx.write(k.y(0), &data.to_gpu_bytes())
}

/// `full`'s attributes: the shape, the fill value, the dtype and the place.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct FullAttrs {
    pub shape: Vec<usize>,
    pub value: Scalar,
    pub dtype: DType,
    pub place: Place,
}

/// A constant tensor (`paddle.full`; `zeros` and `ones` are entries of their own so that
/// errors name the function called).
pub(crate) struct FullOp(&'static str);

pub(crate) static FULL: FullOp = FullOp("full");
pub(crate) static ZEROS: FullOp = FullOp("zeros");
pub(crate) static ONES: FullOp = FullOp("ones");

op_header!(FullOp: FullAttrs, (); |op| op.0);

impl Op for FullOp {
    fn infer(&self, x: &[&TensorMeta], a: &FullAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let [] = inputs(self.0, x)?;
        if !a.dtype.is_float() && !a.value.to_f64().is_finite() {
            return Err(Error::invalid(
                self.0,
                format!("fill value {:?} cannot be represented in {}", a.value.to_f64(), a.dtype),
            ));
        }
        Ok((vec![TensorMeta::new(a.shape.clone(), a.dtype, a.place)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &FullAttrs, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![a.value.fill(a.dtype, k.outs[0].numel())])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &FullAttrs, _: &()) -> Result<()> {
        gpu_fill(k.ctx, k.y(0), a.dtype, a.value, k.outs[0].numel())
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn facts(&self) -> Facts {
        Facts { fusion: Some(Fusion::Constant { value: "value" }), ..Facts::NONE }
    }
}

/// `full_like`'s attribute: the fill value.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct FullLikeAttrs {
    pub value: Scalar,
}

registry_entry!(
    /// `value` everywhere with the input's shape, dtype and place (`paddle.full_like`). The
    /// shape is read from the input when the op runs, so a static program built with an
    /// unknown batch fills the batch it is fed.
    FULL_LIKE: FullLikeOp = "full_like", FullLikeAttrs, ()
);

impl Op for FullLikeOp {
    fn infer(&self, x: &[&TensorMeta], a: &FullLikeAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let [x] = inputs("full_like", x)?;
        if !x.dtype.is_float() && !a.value.to_f64().is_finite() {
            return Err(Error::invalid(
                "full_like",
                format!("fill value {:?} cannot be represented in {}", a.value.to_f64(), x.dtype),
            ));
        }
        Ok((vec![(*x).clone()], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &FullLikeAttrs, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![a.value.fill(k.outs[0].dtype, k.outs[0].numel())])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &FullLikeAttrs, _: &()) -> Result<()> {
        gpu_fill(k.ctx, k.y(0), k.outs[0].dtype, a.value, k.outs[0].numel())
    }

    fn reads_data(&self, _: usize) -> bool {
        false
    }

    fn half(&self) -> Half {
        Half::Native
    }
}

/// The attributes of an op whose values the host computes from the attributes alone
/// (`arange`, `linspace`, `eye`; the GPU kernel uploads them).
pub(crate) trait HostValues: Attrs {
    /// The output, validated (errors name the op).
    fn meta(&self) -> Result<TensorMeta>;
    /// The `n` values of the output.
    fn values(&self, n: usize) -> CpuData;
}

/// The registry entry of a [`HostValues`] op.
pub(crate) struct HostValuesOp<A>(&'static str, PhantomData<A>);

impl<A> HostValuesOp<A> {
    const fn new(name: &'static str) -> Self {
        HostValuesOp(name, PhantomData)
    }
}

op_header!(impl<A: HostValues> HostValuesOp<A>: A, (); |op| op.0);

impl<A: HostValues> Op for HostValuesOp<A> {
    fn infer(&self, xs: &[&TensorMeta], a: &A) -> Result<(Vec<TensorMeta>, ())> {
        let [] = inputs(self.0, xs)?;
        let out = a.meta()?;
        Ok((vec![out], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &A, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![a.values(k.outs[0].numel())])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &A, _: &()) -> Result<()> {
        host_to_gpu(k, a.values(k.outs[0].numel()))
    }

    fn half(&self) -> Half {
        Half::Native
    }
}

/// `arange`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ArangeAttrs {
    pub start: Scalar,
    pub end: Scalar,
    pub step: Scalar,
    pub dtype: DType,
    pub place: Place,
}

/// Evenly stepped values (`paddle.arange`).
pub(crate) static ARANGE: HostValuesOp<ArangeAttrs> = HostValuesOp::new("arange");

impl ArangeAttrs {
    /// The number of values, validated.
    fn len(&self) -> Result<usize> {
        const OP: &str = "arange";
        if self.dtype.is_int() {
            let (s, e, st) = (self.start, self.end, self.step);
            for (what, v) in [("start", s), ("end", e), ("step", st)] {
                if !v.to_f64().is_finite() {
                    return Err(Error::invalid(OP, format!("{what} must be finite, got {}", v.to_f64())));
                }
            }
            let (s, e, st) = (s.to_i64(), e.to_i64(), st.to_i64());
            if st == 0 {
                return Err(Error::invalid(OP, format!("integer step {:?} truncates to zero", self.step)));
            }
            let (span, st128) = (e as i128 - s as i128, st as i128);
            let n =
                if (span > 0) == (st128 > 0) && span != 0 { (span.abs() + st128.abs() - 1) / st128.abs() } else { 0 };
            let (lo, hi) = if self.dtype == DType::Int32 {
                (i32::MIN as i128, i32::MAX as i128)
            } else {
                (i64::MIN as i128, i64::MAX as i128)
            };
            let in_range = |v: i128| (lo..=hi).contains(&v);
            if n > (isize::MAX / 8) as i128
                || (n > 0 && !(in_range(s as i128) && in_range(s as i128 + (n - 1) * st128)))
            {
                return Err(Error::invalid(OP, format!("[{s}, {e}) by {st} has too many values for {}", self.dtype)));
            }
            Ok(n as usize)
        } else {
            let (s, e, st) = (self.start.to_f64(), self.end.to_f64(), self.step.to_f64());
            if !(s.is_finite() && e.is_finite() && st.is_finite()) {
                return Err(Error::invalid(OP, format!("start {s}, end {e} and step {st} must be finite")));
            }
            if st == 0.0 {
                return Err(Error::invalid(OP, "step must not be zero"));
            }
            let n = ((e - s) / st).ceil().max(0.0);
            if n >= (isize::MAX as usize / 8) as f64 {
                return Err(Error::invalid(OP, format!("[{s}, {e}) by {st} has too many values")));
            }
            Ok(n as usize)
        }
    }
}

impl HostValues for ArangeAttrs {
    fn meta(&self) -> Result<TensorMeta> {
        Ok(TensorMeta::new(vec![self.len()?], self.dtype, self.place))
    }

    fn values(&self, n: usize) -> CpuData {
        if self.dtype.is_int() {
            let (s, st) = (self.start.to_i64(), self.step.to_i64());
            CpuData::from_i64(self.dtype, (0..n as i64).map(|i| s.wrapping_add(i.wrapping_mul(st))))
        } else {
            let (s, st) = (self.start.to_f64(), self.step.to_f64());
            CpuData::from_f64(self.dtype, (0..n).map(|i| s + i as f64 * st))
        }
    }
}

/// `linspace`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct LinspaceAttrs {
    pub start: f64,
    pub stop: f64,
    pub num: usize,
    pub dtype: DType,
    pub place: Place,
}

/// `arange` on an explicit place.
pub fn arange_on(
    start: impl Into<Scalar>,
    end: impl Into<Scalar>,
    step: impl Into<Scalar>,
    dtype: DType,
    place: Place,
) -> Result<Tensor> {
    let (start, end, step) = (start.into(), end.into(), step.into());
    apply1(&ARANGE, &[], ArangeAttrs { start, end, step, dtype, place })
}

/// `num` evenly spaced values from `start` to `stop` inclusive (`paddle.linspace`).
pub(crate) static LINSPACE: HostValuesOp<LinspaceAttrs> = HostValuesOp::new("linspace");

impl HostValues for LinspaceAttrs {
    fn meta(&self) -> Result<TensorMeta> {
        if !(self.start.is_finite() && self.stop.is_finite()) {
            return Err(Error::invalid(
                "linspace",
                format!("start {} and stop {} must be finite", self.start, self.stop),
            ));
        }
        Ok(TensorMeta::new(vec![self.num], self.dtype, self.place))
    }

    fn values(&self, _: usize) -> CpuData {
        let num = self.num;
        let step = if num > 1 { (self.stop - self.start) / (num - 1) as f64 } else { 0.0 };
        CpuData::from_f64(
            self.dtype,
            (0..num).map(|i| if i + 1 == num && num > 1 { self.stop } else { self.start + i as f64 * step }),
        )
    }
}

/// `eye`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct EyeAttrs {
    pub rows: usize,
    pub cols: usize,
    pub dtype: DType,
    pub place: Place,
}

/// An identity matrix (`paddle.eye`).
pub(crate) static EYE: HostValuesOp<EyeAttrs> = HostValuesOp::new("eye");

impl HostValues for EyeAttrs {
    fn meta(&self) -> Result<TensorMeta> {
        Ok(TensorMeta::new(vec![self.rows, self.cols], self.dtype, self.place))
    }

    fn values(&self, _: usize) -> CpuData {
        let m = self.cols;
        CpuData::from_i64(self.dtype, (0..self.rows * m).map(|k| (k / m == k % m) as i64))
    }
}

/// `to`'s attribute: the destination.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ToAttrs {
    pub place: Place,
}

registry_entry!(
    /// A copy on another place (`x.to(place)`, Paddle's `x.cuda()` / `x.cpu()`).
    TO: ToOp = "to", ToAttrs, ()
);

impl Op for ToOp {
    fn infer(&self, x: &[&TensorMeta], a: &ToAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let [x] = inputs("to", x)?;
        Ok((vec![TensorMeta::new(x.shape.clone(), x.dtype, a.place)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &ToAttrs, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![k.x(0).clone()])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &ToAttrs, _: &()) -> Result<()> {
        let bytes = gpu_bytes(k.ins[0].dtype, k.ins[0].numel()).div_ceil(4) * 4;
        k.ctx.copy(k.x(0), 0, k.y(0), 0, bytes)
    }

    fn custom(&self, x: &[&Tensor], _: &ToAttrs, _: &(), outs: &[TensorMeta]) -> Option<Result<Vec<Tensor>>> {
        if x[0].place() == outs[0].place {
            return None;
        }
        Some((|| {
            let data = x[0].to_cpu_data("to")?;
            Ok(vec![Tensor::from_data_on(data, outs[0].shape.dims().to_vec(), outs[0].place)?])
        })())
    }

    fn mixed_places(&self) -> bool {
        true
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &ToAttrs, _: &()) -> Result<Vec<Option<Tensor>>> {
        let from = g.x(0).place();
        Ok(vec![g.grad_if(0, || g.g().to(from))?])
    }
}

registry_entry!(
    /// A copy sharing no memory (`paddle.assign`, `x.clone()`).
    ASSIGN: AssignOp = "assign", (), ()
);

impl Op for AssignOp {
    fn infer(&self, x: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, ())> {
        let [x] = inputs("assign", x)?;
        Ok((vec![(*x).clone()], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &(), _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![k.x(0).clone()])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &(), _: &()) -> Result<()> {
        let bytes = gpu_bytes(k.ins[0].dtype, k.ins[0].numel()).div_ceil(4) * 4;
        k.ctx.copy(k.x(0), 0, k.y(0), 0, bytes)
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &(), _: &()) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g.grad_if(0, || Ok(g.g().clone()))?])
    }
}

registry_entry!(
    /// Overwrites input 0's data with input 1's, in place (`x.assign_(src)`, optimizers and
    /// running statistics): no outputs, not recorded.
    ASSIGN_INPLACE: AssignInplaceOp = "assign_", (), ()
);

impl Op for AssignInplaceOp {
    fn infer(&self, x: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, ())> {
        const OP: &str = "assign_";
        let [dst, src] = inputs(OP, x)?;
        if dst.dtype != src.dtype {
            return Err(Error::DTypeMismatch { op: OP, lhs: dst.dtype, rhs: src.dtype });
        }
        if dst.shape != src.shape {
            return Err(Error::shape(OP, format!("source shape {:?} differs from {:?}", src.dims(), dst.dims())));
        }
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &(), _: &()) -> Result<Vec<CpuData>> {
        let src = k.x(1).clone();
        *k.x_mut(0) = src;
        Ok(Vec::new())
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &(), _: &()) -> Result<()> {
        let bytes = gpu_bytes(k.ins[0].dtype, k.ins[0].numel()).div_ceil(4) * 4;
        k.ctx.copy(k.x(1), 0, k.x(0), 0, bytes)
    }

    fn inplace(&self, _: usize) -> Vec<usize> {
        vec![0]
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn facts(&self) -> Facts {
        Facts { assigns: true, ..Facts::NONE }
    }
}

impl Tensor {
    /// A tensor on `place` holding `data` with `shape`.
    pub(crate) fn from_data_on(data: CpuData, shape: Vec<usize>, place: Place) -> Result<Tensor> {
        match place {
            Place::Cpu => Ok(Tensor::from_cpu(data, shape)),
            Place::Gpu(i) => {
                wgsl::check_gpu_dtype("to_tensor", data.dtype(), place)?;
                let ctx = gpu::context(i)?;
                let dtype = data.dtype();
                let buf = ctx.upload("to_tensor", &data.to_gpu_bytes())?;
                Ok(Tensor::from_gpu(buf, shape, dtype))
            }
        }
    }

    /// A tensor of `shape` holding `data` (row-major) on the current place.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl IntoShape) -> Result<Tensor> {
        Tensor::from_vec_on(data, shape, current_place()?)
    }

    /// `from_vec` on an explicit place.
    pub fn from_vec_on<T: Element>(data: Vec<T>, shape: impl IntoShape, place: Place) -> Result<Tensor> {
        let shape = shape.into_dims("from_vec")?;
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::shape(
                "from_vec",
                format!("{} elements do not fill shape {shape:?} ({n} elements)", data.len()),
            ));
        }
        Tensor::from_data_on(T::into_data(data), shape, place)
    }

    /// A copy on `place` (`x.to(place)`, Paddle's `x.cuda()` / `x.cpu()`); gradients flow
    /// back to the original place.
    pub fn to(&self, place: Place) -> Result<Tensor> {
        if self.place() == place {
            return Ok(self.clone());
        }
        apply1(&TO, &[self], ToAttrs { place })
    }

    /// A copy on the CPU place.
    pub fn cpu(&self) -> Result<Tensor> {
        self.to(Place::Cpu)
    }
}

/// Host data `to_tensor` accepts: scalars, slices, Vecs, arrays (nested up to 3-D) and
/// `NdArray`s of `f32`, `f64`, `f16`, `i32`, `i64` and `bool`.
pub trait TensorData {
    /// The elements and the shape.
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)>;
}

impl<T: Element> TensorData for T {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        Ok((T::into_data(vec![self]), vec![]))
    }
}

impl<T: Element> TensorData for &[T] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        Ok((T::into_data(self.to_vec()), vec![self.len()]))
    }
}

impl<T: Element> TensorData for Vec<T> {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        let n = self.len();
        Ok((T::into_data(self), vec![n]))
    }
}

impl<T: Element> TensorData for &Vec<T> {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        self.as_slice().into_parts()
    }
}

impl<T: Element, const N: usize> TensorData for [T; N] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        Ok((T::into_data(self.to_vec()), vec![N]))
    }
}

impl<T: Element, const N: usize> TensorData for &[T; N] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        Ok((T::into_data(self.to_vec()), vec![N]))
    }
}

impl<T: Element, const N: usize, const M: usize> TensorData for &[[T; N]; M] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        Ok((T::into_data(self.iter().flatten().copied().collect()), vec![M, N]))
    }
}

impl<T: Element, const N: usize, const M: usize> TensorData for [[T; N]; M] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        (&self).into_parts()
    }
}

impl<T: Element, const N: usize, const M: usize, const L: usize> TensorData for &[[[T; N]; M]; L] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        Ok((T::into_data(self.iter().flatten().flatten().copied().collect()), vec![L, M, N]))
    }
}

impl<T: Element> TensorData for &[Vec<T>] {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        let cols = self.first().map_or(0, |r| r.len());
        if let Some((i, r)) = self.iter().enumerate().find(|(_, r)| r.len() != cols) {
            return Err(Error::shape(
                "to_tensor",
                format!("ragged nested list: row 0 has {cols} elements but row {i} has {}", r.len()),
            ));
        }
        Ok((T::into_data(self.iter().flatten().copied().collect()), vec![self.len(), cols]))
    }
}

impl<T: Element> TensorData for Vec<Vec<T>> {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        self.as_slice().into_parts()
    }
}

impl<T: Element> TensorData for NdArray<T> {
    fn into_parts(self) -> Result<(CpuData, Vec<usize>)> {
        if crate::shape::checked_numel(&self.shape) != Some(self.data.len()) {
            return Err(Error::shape(
                "to_tensor",
                format!("NdArray of shape {:?} holds {} elements", self.shape, self.data.len()),
            ));
        }
        Ok((T::into_data(self.data), self.shape))
    }
}

/// A tensor from host data on the current place (`paddle.to_tensor`). Its dtype follows the
/// Rust element type (`i64` → int64, `f32` → float32); `stop_gradient` is true.
pub fn to_tensor(data: impl TensorData) -> Result<Tensor> {
    to_tensor_on(data, current_place()?)
}

/// `to_tensor` on an explicit place.
pub fn to_tensor_on(data: impl TensorData, place: Place) -> Result<Tensor> {
    let (data, shape) = data.into_parts()?;
    Tensor::from_data_on(data, shape, place)
}

/// A tensor of `shape` filled with `value` on `place`.
pub fn full_on(shape: impl IntoShape, value: impl Into<Scalar>, dtype: DType, place: Place) -> Result<Tensor> {
    fill_on("full", shape, value.into(), dtype, place)
}

/// `full_on` reporting shape errors (negative dimensions) as `op`.
fn fill_on(op: &'static str, shape: impl IntoShape, value: Scalar, dtype: DType, place: Place) -> Result<Tensor> {
    let shape = shape.into_dims(op)?;
    let entry = match op {
        "zeros" => &ZEROS,
        "ones" => &ONES,
        _ => &FULL,
    };
    apply1(entry, &[], FullAttrs { shape, value, dtype, place })
}

/// A tensor of `shape` filled with `value` on the current place (`paddle.full`).
pub fn full(shape: impl IntoShape, value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
    full_on(shape, value, dtype, current_place()?)
}

/// Zeros on `place`.
pub fn zeros_on(shape: impl IntoShape, dtype: DType, place: Place) -> Result<Tensor> {
    fill_on("zeros", shape, Scalar::Int(0), dtype, place)
}

/// Ones on `place`.
pub fn ones_on(shape: impl IntoShape, dtype: DType, place: Place) -> Result<Tensor> {
    fill_on("ones", shape, Scalar::Int(1), dtype, place)
}

/// Zeros on the current place (`paddle.zeros`).
pub fn zeros(shape: impl IntoShape, dtype: DType) -> Result<Tensor> {
    fill_on("zeros", shape, Scalar::Int(0), dtype, current_place()?)
}

/// Ones on the current place (`paddle.ones`).
pub fn ones(shape: impl IntoShape, dtype: DType) -> Result<Tensor> {
    fill_on("ones", shape, Scalar::Int(1), dtype, current_place()?)
}

/// `value` everywhere, with `x`'s shape, dtype and place.
pub fn full_like(x: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
    apply1(&FULL_LIKE, &[x], FullLikeAttrs { value: value.into() })
}

/// Zeros with `x`'s shape, dtype and place.
pub fn zeros_like(x: &Tensor) -> Result<Tensor> {
    full_like(x, 0i64)
}

/// Ones with `x`'s shape, dtype and place.
pub fn ones_like(x: &Tensor) -> Result<Tensor> {
    full_like(x, 1i64)
}

/// Values from `start` to `end` (exclusive) by `step` (`paddle.arange`).
pub fn arange(
    start: impl Into<Scalar>,
    end: impl Into<Scalar>,
    step: impl Into<Scalar>,
    dtype: DType,
) -> Result<Tensor> {
    arange_on(start, end, step, dtype, current_place()?)
}

/// `num` evenly spaced values from `start` to `stop` inclusive (`paddle.linspace`).
pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Result<Tensor> {
    apply1(&LINSPACE, &[], LinspaceAttrs { start, stop, num, dtype, place: current_place()? })
}

/// An `n × m` matrix with ones on the diagonal (`paddle.eye`; `m` defaults to `n`).
pub fn eye(n: usize, m: Option<usize>, dtype: DType) -> Result<Tensor> {
    apply1(&EYE, &[], EyeAttrs { rows: n, cols: m.unwrap_or(n), dtype, place: current_place()? })
}

impl Tensor {
    /// A new tensor with the same data on the same place, never sharing memory
    /// (`paddle.assign`); gradients flow through it.
    pub fn clone_data(&self) -> Result<Tensor> {
        apply1(&ASSIGN, &[self], ())
    }

    /// Overwrites this tensor's data in place with `src`'s (same shape, dtype and place);
    /// every tensor sharing the memory sees the new values. Not recorded by autograd (used
    /// by optimizers and running statistics under `no_grad`).
    pub fn assign_(&self, src: &Tensor) -> Result<()> {
        if self.storage().same_memory(src.storage()) && self.shape() == src.shape() && self.dtype() == src.dtype() {
            return Ok(());
        }
        apply(&ASSIGN_INPLACE, &[self, src], ())?;
        Ok(())
    }

    /// `assign_` from a tensor that may be on another place: a host value is written
    /// straight into a device tensor's buffer (one command, ordered with the pending work).
    pub(crate) fn assign_from(&self, src: &Tensor) -> Result<()> {
        if let (crate::tensor::Storage::Gpu(b), Place::Cpu) = (self.storage(), src.place())
            && self.shape() == src.shape()
            && self.dtype() == src.dtype()
        {
            self.bump_version();
            return gpu::context(b.device)?.write(b, &src.to_cpu_data("assign_")?.to_gpu_bytes());
        }
        self.assign_(&src.to(self.place())?)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&FULL, &ZEROS, &ONES, &FULL_LIKE, &ARANGE, &LINSPACE, &EYE, &TO, &ASSIGN, &ASSIGN_INPLACE],
    kernels: &[&FILL],
};
