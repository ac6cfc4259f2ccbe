//! The memory behind a tensor: host data, a GPU buffer, or no data at all (a meta tensor, or
//! a variable of a static program, which the floors above define behind [`Deferred`]).

use std::any::Any;
use std::sync::{Arc, RwLock};

use crate::Place;
use crate::backend::cpu::CpuData;
use crate::backend::gpu::GpuBuffer;

/// A value computed later by something above this floor (a static program's variable): it
/// reports the place tensors of it show, and is downcast by its owner.
pub(crate) trait Deferred: Any + Send + Sync {
    /// The place the tensor reports while the value does not exist.
    fn place(&self) -> Place;
    /// The value as its owner's type.
    fn as_any(&self) -> &dyn Any;
}

/// The memory behind a tensor. Cloning shares it (reshape-like ops are zero-copy).
#[derive(Clone)]
pub(crate) enum Storage {
    Cpu(Arc<RwLock<CpuData>>),
    Gpu(Arc<GpuBuffer>),
    /// No data: a meta tensor (shape, dtype and place only).
    Meta(Place),
    /// No data: a variable of a static program.
    Var(Arc<dyn Deferred>),
}

impl Storage {
    pub fn place(&self) -> Place {
        match self {
            Storage::Cpu(_) => Place::Cpu,
            Storage::Gpu(b) => Place::Gpu(b.device),
            Storage::Meta(p) => *p,
            Storage::Var(v) => v.place(),
        }
    }

    #[allow(dead_code)]
    pub fn same_memory(&self, other: &Storage) -> bool {
        match (self, other) {
            (Storage::Cpu(a), Storage::Cpu(b)) => Arc::ptr_eq(a, b),
            (Storage::Gpu(a), Storage::Gpu(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}
