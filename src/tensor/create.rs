//! Creating tensors: from host data (`to_tensor`, `from_vec`), constants (`zeros`, `ones`,
//! `full` and their `_like`), ranges (`arange`, `linspace`, `eye`), and moving between
//! places (`to`). Random creation lives in `random.rs`.

use half::f16;

use crate::autograd::record1;
use crate::backend::cpu::{CpuData, gpu_bytes};
use crate::backend::gpu::{self, Bind, Kernel};
use crate::ops::wgsl;
use crate::shape::IntoShape;
use crate::tensor::{Backend, NdArray};
use crate::{DType, Element, Error, Place, Result, Scalar, Tensor, current_place};

pub(crate) static FILL: Kernel = Kernel { file: "fill.wgsl", variants: || vec![vec![]] };

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
        let data = self.to_cpu_data("to")?;
        let out = Tensor::from_data_on(data, self.shape().to_vec(), place)?;
        if !self.dtype().is_float() {
            return Ok(out);
        }
        let from = self.place();
        Ok(record1("to", &[self], out, move |c| Ok(vec![Some(c.grad().to(from)?)])))
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

/// `full_on` reporting errors (negative dimensions, device limits) as `op`.
fn fill_on(op: &'static str, shape: impl IntoShape, value: Scalar, dtype: DType, place: Place) -> Result<Tensor> {
    let shape = shape.into_dims(op)?;
    let n: usize = shape.iter().product();
    match place {
        Place::Cpu => Ok(Tensor::from_cpu(value.fill(dtype, n), shape)),
        Place::Gpu(i) => {
            wgsl::check_gpu_dtype(op, dtype, place)?;
            let ctx = gpu::context(i)?;
            let bytes = gpu_bytes(dtype, n);
            let buf = ctx.alloc(op, bytes)?;
            let words = bytes.div_ceil(4);
            let pattern: Vec<u32> = match dtype {
                DType::Float16 => {
                    let h = f16::from_f64(value.to_f64()).to_bits() as u32;
                    vec![h | (h << 16)]
                }
                _ => wgsl::scalar_words(dtype, value),
            };
            let mut params = vec![words as u32, pattern.len() as u32];
            params.extend(&pattern);
            params.resize(4, 0);
            ctx.dispatch_1d(&FILL, &vec![], "main", &[Bind::write(&buf)], &params, words)?;
            Ok(Tensor::from_gpu(buf, shape, dtype))
        }
    }
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
    full_on(x.shape(), value, x.dtype(), x.place())
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
    let (start, end, step) = (start.into(), end.into(), step.into());
    if step.to_f64() == 0.0 {
        return Err(Error::invalid("arange", "step must not be zero"));
    }
    let data = if dtype.is_int() {
        let (s, e, st) = (start.to_i64(), end.to_i64(), step.to_i64());
        if st == 0 {
            return Err(Error::invalid("arange", format!("integer step {step:?} truncates to zero")));
        }
        let n = ((e - s) as f64 / st as f64).ceil().max(0.0) as usize;
        CpuData::from_i64(dtype, (0..n as i64).map(|i| s + i * st))
    } else {
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        let n = ((e - s) / st).ceil().max(0.0) as usize;
        CpuData::from_f64(dtype, (0..n).map(|i| s + i as f64 * st))
    };
    let n = data.len();
    Tensor::from_data_on(data, vec![n], current_place()?)
}

/// `num` evenly spaced values from `start` to `stop` inclusive (`paddle.linspace`).
pub fn linspace(start: f64, stop: f64, num: usize, dtype: DType) -> Result<Tensor> {
    let step = if num > 1 { (stop - start) / (num - 1) as f64 } else { 0.0 };
    let data = CpuData::from_f64(
        dtype,
        (0..num).map(|i| if i + 1 == num && num > 1 { stop } else { start + i as f64 * step }),
    );
    Tensor::from_data_on(data, vec![num], current_place()?)
}

/// An `n × m` matrix with ones on the diagonal (`paddle.eye`; `m` defaults to `n`).
pub fn eye(n: usize, m: Option<usize>, dtype: DType) -> Result<Tensor> {
    let m = m.unwrap_or(n);
    let data = CpuData::from_i64(dtype, (0..n * m).map(|k| (k / m == k % m) as i64));
    Tensor::from_data_on(data, vec![n, m], current_place()?)
}

impl Tensor {
    /// A new tensor with the same data on the same place, never sharing memory.
    pub fn clone_data(&self) -> Result<Tensor> {
        match self.backend() {
            Backend::Cpu(d) => Ok(Tensor::from_cpu(d.clone(), self.shape())),
            Backend::Gpu(b) => {
                let bytes = gpu_bytes(self.dtype(), self.numel()).div_ceil(4) * 4;
                let out = b.ctx.alloc("clone", bytes)?;
                b.ctx.copy(b, 0, &out, 0, bytes)?;
                Ok(Tensor::from_gpu(out, self.shape(), self.dtype()))
            }
        }
    }
}

impl Tensor {
    /// Overwrites this tensor's data in place with `src`'s (same shape, dtype and place);
    /// every tensor sharing the memory sees the new values. Not recorded by autograd (used
    /// by optimizers and running statistics under `no_grad`).
    pub fn assign_(&self, src: &Tensor) -> Result<()> {
        const OP: &str = "assign_";
        self.same_place(OP, src)?;
        self.same_dtype(OP, src)?;
        if self.shape() != src.shape() {
            return Err(Error::shape(OP, format!("source shape {:?} differs from {:?}", src.shape(), self.shape())));
        }
        match (self.storage(), src.storage()) {
            (crate::backend::Storage::Cpu(dst), crate::backend::Storage::Cpu(s)) => {
                if std::sync::Arc::ptr_eq(dst, s) {
                    return Ok(());
                }
                let data = s.read().unwrap_or_else(|e| e.into_inner()).clone();
                *dst.write().unwrap_or_else(|e| e.into_inner()) = data;
                Ok(())
            }
            (crate::backend::Storage::Gpu(dst), crate::backend::Storage::Gpu(s)) => {
                if std::sync::Arc::ptr_eq(dst, s) {
                    return Ok(());
                }
                let bytes = gpu_bytes(self.dtype(), self.numel()).div_ceil(4) * 4;
                dst.ctx.copy(s, 0, dst, 0, bytes)
            }
            _ => unreachable!("places were checked equal"),
        }
    }
}
