//! Meta tensors: a shape, a dtype and a place, and no data. Every registered op accepts
//! them and returns meta outputs from its meta inference alone, without running a kernel
//! (`summary`, shape checks, and the shapes of a static program's variables).

use crate::shape::checked_numel;
use crate::tensor::Storage;
use crate::{DType, Error, Place, Result, Shape, Tensor};

/// What meta inference works on: the shape, dtype and place of a tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMeta {
    /// The dimensions.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
    /// Where the tensor lives (or would live).
    pub place: Place,
}

impl TensorMeta {
    /// `Ok` for a float dtype; otherwise `op`'s typed error naming the operand's `role`.
    pub(crate) fn expect_float(&self, op: &'static str, role: &str) -> Result<()> {
        if self.dtype.is_float() {
            return Ok(());
        }
        Err(Error::unsupported(op, self.dtype, format!("for {role} (expected float16, float32 or float64)")))
    }

    /// `Ok` for int32 or int64; otherwise `op`'s typed error naming the operand's `role`.
    pub(crate) fn expect_int(&self, op: &'static str, role: &str) -> Result<()> {
        if self.dtype.is_int() {
            return Ok(());
        }
        Err(Error::unsupported(op, self.dtype, format!("for {role} (expected int32 or int64)")))
    }

    /// A meta description from its parts.
    pub fn new(shape: impl Into<Shape>, dtype: DType, place: Place) -> Self {
        TensorMeta { shape: shape.into(), dtype, place }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Element count.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The same meta with another shape.
    pub fn with_shape(&self, shape: impl Into<Shape>) -> Self {
        TensorMeta { shape: shape.into(), dtype: self.dtype, place: self.place }
    }

    /// The same meta with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> Self {
        TensorMeta { shape: self.shape.clone(), dtype, place: self.place }
    }
}

impl Tensor {
    /// A meta tensor: shape, dtype and place, no data (PyTorch's `device="meta"`). Ops on it
    /// return meta tensors computed by meta inference; reading its values is an error.
    pub fn meta(shape: impl Into<Shape>, dtype: DType, place: Place) -> Tensor {
        Tensor::from_storage(Storage::Meta(place), shape, dtype)
    }

    /// A meta tensor from a [`TensorMeta`].
    pub fn from_meta(meta: &TensorMeta) -> Tensor {
        Tensor::meta(meta.shape.clone(), meta.dtype, meta.place)
    }

    /// True for a tensor without data (see [`Tensor::meta`]).
    pub fn is_meta(&self) -> bool {
        matches!(self.storage(), Storage::Meta(_))
    }

    /// The shape, dtype and place of this tensor.
    pub fn to_meta(&self) -> TensorMeta {
        TensorMeta { shape: self.shape_ref().clone(), dtype: self.dtype(), place: self.place() }
    }
}

/// Errors unless a tensor of `dims` and `dtype` fits in host memory's address space.
pub(crate) fn check_size(op: &'static str, dims: &[usize], dtype: DType) -> Result<usize> {
    checked_numel(dims).filter(|n| n.checked_mul(dtype.size_of()).is_some_and(|b| b <= isize::MAX as usize)).ok_or_else(
        || Error::invalid(op, format!("a {dtype} tensor of shape {dims:?} is larger than the address space")),
    )
}
