//! The `Tensor` handle: a cheap clone (`Arc` inside) over CPU or GPU storage, with its
//! shape, dtype and autograd state.

pub(crate) mod checkpoint;
mod display;
pub(crate) mod grad_mode;
pub(crate) mod graph;
mod meta;
pub use meta::TensorMeta;
pub(crate) use meta::check_size;
mod readback;
pub use readback::NdArray;
mod state_dict;
pub use state_dict::StateDict;
mod storage;
pub(crate) use storage::{Deferred, Storage};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

pub use display::{PrintOptions, set_printoptions};

use crate::backend::cpu::CpuData;
use crate::backend::gpu::GpuBuffer;
use crate::{DType, Error, Place, Result, Shape};
use graph::GradMeta;

/// An n-dimensional array on a place (CPU or GPU), with Paddle's eager semantics.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) inner: Arc<TensorInner>,
}

pub(crate) struct TensorInner {
    pub storage: Storage,
    pub shape: Shape,
    pub dtype: DType,
    pub meta: Mutex<GradMeta>,
    /// Counts in-place writes to the memory; shared by every tensor viewing the same memory
    /// (reshapes, `detach`), so autograd can tell when a saved tensor was modified.
    pub version: Arc<AtomicU64>,
}

/// Tensors alive now (handles sharing one tensor count once): what `live_tensors` reports.
static LIVE_TENSORS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for TensorInner {
    fn drop(&mut self) {
        LIVE_TENSORS.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The number of tensors alive in this process (every place; views and `detach`ed handles
/// are tensors of their own). A leak check: it returns to its earlier value once a model,
/// its optimizer and their results are dropped.
pub fn live_tensors() -> usize {
    LIVE_TENSORS.load(std::sync::atomic::Ordering::Relaxed)
}

impl Tensor {
    pub(crate) fn from_storage(storage: Storage, shape: impl Into<Shape>, dtype: DType) -> Tensor {
        Tensor::sharing_version(storage, shape, dtype, Arc::new(AtomicU64::new(0)))
    }

    fn sharing_version(storage: Storage, shape: impl Into<Shape>, dtype: DType, version: Arc<AtomicU64>) -> Tensor {
        let meta = Mutex::new(GradMeta::default());
        LIVE_TENSORS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Tensor { inner: Arc::new(TensorInner { storage, shape: shape.into(), dtype, meta, version }) }
    }

    /// How many in-place writes the memory has seen (Paddle's `inplace_version`).
    pub fn inplace_version(&self) -> u64 {
        self.inner.version.load(Ordering::Acquire)
    }

    /// Records an in-place write to the memory.
    pub(crate) fn bump_version(&self) {
        self.inner.version.fetch_add(1, Ordering::AcqRel);
    }

    /// The identity of this tensor handle's shared state (equal exactly when `same_tensor`).
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }

    /// The identity of the memory's version counter (equal for views of one memory).
    pub(crate) fn version_id(&self) -> usize {
        Arc::as_ptr(&self.inner.version) as usize
    }

    pub(crate) fn from_cpu(data: CpuData, shape: impl Into<Shape>) -> Tensor {
        let dtype = data.dtype();
        Tensor::from_storage(Storage::Cpu(Arc::new(std::sync::RwLock::new(data))), shape, dtype)
    }

    pub(crate) fn from_gpu(buf: GpuBuffer, shape: impl Into<Shape>, dtype: DType) -> Tensor {
        Tensor::from_storage(Storage::Gpu(Arc::new(buf)), shape, dtype)
    }

    /// The dimensions (Paddle's `x.shape`).
    pub fn shape(&self) -> &[usize] {
        &self.inner.shape.0
    }

    pub(crate) fn shape_ref(&self) -> &Shape {
        &self.inner.shape
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.inner.shape.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.inner.shape.numel()
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// Where the data lives.
    pub fn place(&self) -> Place {
        self.inner.storage.place()
    }

    pub(crate) fn storage(&self) -> &Storage {
        &self.inner.storage
    }

    pub(crate) fn grad_meta(&self) -> MutexGuard<'_, GradMeta> {
        self.inner.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A tensor sharing this one's memory with another shape (same element count).
    pub(crate) fn with_shape(&self, shape: impl Into<Shape>) -> Tensor {
        Tensor::sharing_version(self.inner.storage.clone(), shape, self.inner.dtype, self.inner.version.clone())
    }

    /// A weak handle, for backward closures that need an op's own output without keeping
    /// it alive (which would be a reference cycle).
    pub(crate) fn downgrade(&self) -> WeakTensor {
        WeakTensor(Arc::downgrade(&self.inner))
    }

    /// True when both handles point at the same tensor.
    pub fn same_tensor(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.numel() == 0
    }

    /// Errors unless `other` is on the same place. A program variable has no place until an
    /// Executor runs it (and moves what it reads to its own place), so it matches any.
    pub(crate) fn same_place(&self, op: &'static str, other: &Tensor) -> Result<()> {
        let (a, b) = (self.place(), other.place());
        if a != b && !self.is_static_var() && !other.is_static_var() {
            return Err(Error::PlaceMismatch { op, lhs: a, rhs: b });
        }
        Ok(())
    }

    /// Errors unless `other` has the same dtype.
    pub(crate) fn same_dtype(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(Error::DTypeMismatch { op, lhs: self.dtype(), rhs: other.dtype() });
        }
        Ok(())
    }

    /// Errors unless the dtype is a float type.
    pub(crate) fn expect_float(&self, op: &'static str) -> Result<()> {
        self.to_meta().expect_float(op, "the input")
    }
}

/// A weak reference to a tensor (see `Tensor::downgrade`).
#[derive(Clone)]
pub(crate) struct WeakTensor(Weak<TensorInner>);

impl WeakTensor {
    pub fn upgrade(&self) -> Result<Tensor> {
        self.0
            .upgrade()
            .map(|inner| Tensor { inner })
            .ok_or_else(|| Error::Autograd("a tensor saved for backward was freed".into()))
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
