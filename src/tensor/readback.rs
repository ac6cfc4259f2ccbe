//! Host readback: `to_vec`, `numpy`, `item` and their async forms. The async forms work on
//! every target; the blocking ones return `Error::WouldBlock` on wasm.

use std::fmt;

use crate::backend::cpu::CpuData;
use crate::tensor::Storage;
use crate::{Element, Error, Result, Tensor};

/// A host array with its shape: what `numpy()` returns.
#[derive(Clone, Debug, PartialEq)]
pub struct NdArray<T> {
    /// Elements in row-major order.
    pub data: Vec<T>,
    /// Dimensions.
    pub shape: Vec<usize>,
}

impl<T: Element> fmt::Display for NdArray<T> {
    /// numpy's `str()` layout: `[ 5  9 15]`, `[[1. 2.]\n [3. 4.]]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&super::display::numpy_str(&self.data, &self.shape))
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn block_on<F: std::future::Future>(op: &'static str, f: F) -> Result<F::Output> {
    let _ = op;
    Ok(pollster::block_on(f))
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn block_on<F: std::future::Future>(op: &'static str, _f: F) -> Result<F::Output> {
    Err(Error::WouldBlock { op })
}

fn meta_has_no_data(t: &Tensor) -> Error {
    if let Some(name) = t.var_ref().map(|v| v.program.var_name(v.id)) {
        return Error::invalid(
            "readback",
            format!("{name} is a static variable of a Program and has no data: fetch it with Executor::run"),
        );
    }
    Error::invalid(
        "readback",
        format!("a meta tensor (shape {:?}, {}, {}) has no data to read", t.shape(), t.dtype(), t.place()),
    )
}

impl Tensor {
    /// The data as host storage (a copy), asynchronously.
    pub(crate) async fn to_cpu_data_async(&self) -> Result<CpuData> {
        let (buf, ctx) = match self.storage() {
            Storage::Cpu(d) => return Ok(d.read().unwrap_or_else(|e| e.into_inner()).clone()),
            Storage::Gpu(b) => (b.clone(), crate::backend::gpu::context(b.device)?),
            Storage::Meta(_) | Storage::Var(_) => return Err(meta_has_no_data(self)),
        };
        let n = self.numel();
        let bytes = ctx.read(&buf, crate::backend::cpu::gpu_bytes(self.dtype(), n)).await?;
        Ok(CpuData::from_gpu_bytes(self.dtype(), n, &bytes))
    }

    pub(crate) fn to_cpu_data(&self, op: &'static str) -> Result<CpuData> {
        match self.storage() {
            Storage::Cpu(d) => return Ok(d.read().unwrap_or_else(|e| e.into_inner()).clone()),
            Storage::Meta(_) | Storage::Var(_) => return Err(meta_has_no_data(self)),
            Storage::Gpu(_) => {}
        }
        block_on(op, self.to_cpu_data_async())?
    }

    fn typed<T: Element>(&self, op: &'static str, data: CpuData) -> Result<Vec<T>> {
        T::from_data(data).map_err(|d| Error::DTypeMismatch { op, lhs: d.dtype(), rhs: T::DTYPE })
    }

    fn check_type<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE != self.dtype() {
            return Err(Error::invalid(
                op,
                format!("tensor has dtype {} but {} was requested; cast() it first", self.dtype(), T::DTYPE),
            ));
        }
        Ok(())
    }

    /// The elements as a host Vec, asynchronously. `T` must match the dtype.
    pub async fn to_vec_async<T: Element>(&self) -> Result<Vec<T>> {
        self.check_type::<T>("to_vec")?;
        let data = self.to_cpu_data_async().await?;
        self.typed("to_vec", data)
    }

    /// The elements as a host Vec (blocks until the GPU is done). `T` must match the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_type::<T>("to_vec")?;
        let data = self.to_cpu_data("to_vec")?;
        self.typed("to_vec", data)
    }

    /// The data and shape as a host array (Paddle's `numpy()`).
    pub fn numpy<T: Element>(&self) -> Result<NdArray<T>> {
        Ok(NdArray { data: self.to_vec()?, shape: self.shape().to_vec() })
    }

    /// `numpy()`, asynchronously.
    pub async fn numpy_async<T: Element>(&self) -> Result<NdArray<T>> {
        Ok(NdArray { data: self.to_vec_async().await?, shape: self.shape().to_vec() })
    }

    /// The single element of a one-element tensor.
    pub fn item<T: Element>(&self) -> Result<T> {
        self.check_item()?;
        Ok(self.to_vec::<T>()?[0])
    }

    /// `item()`, asynchronously.
    pub async fn item_async<T: Element>(&self) -> Result<T> {
        self.check_item()?;
        Ok(self.to_vec_async::<T>().await?[0])
    }

    fn check_item(&self) -> Result<()> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "item",
                format!("only one-element tensors can be converted to a scalar, got shape {:?}", self.shape()),
            ));
        }
        Ok(())
    }

    /// The elements converted to f64, whatever the dtype (test and display helper).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let d = self.to_cpu_data("to_f64_vec")?;
        Ok((0..d.len()).map(|i| d.get_f64(i)).collect())
    }

    /// Async `to_f64_vec`.
    pub async fn to_f64_vec_async(&self) -> Result<Vec<f64>> {
        let d = self.to_cpu_data_async().await?;
        Ok((0..d.len()).map(|i| d.get_f64(i)).collect())
    }

    /// True when the dtype is float16/32/64.
    pub fn is_floating_point(&self) -> bool {
        self.dtype().is_float()
    }
}
