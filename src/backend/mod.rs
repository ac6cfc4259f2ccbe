//! Backends: the CPU reference backend and the wgpu/WGSL GPU backend, and the `Storage`
//! a tensor points at (one or the other).

pub(crate) mod cpu;
pub(crate) mod gpu;

use std::sync::{Arc, RwLock};

use crate::Place;

/// The memory behind a tensor. Cloning shares it (reshape-like ops are zero-copy).
#[derive(Clone)]
pub(crate) enum Storage {
    Cpu(Arc<RwLock<cpu::CpuData>>),
    Gpu(Arc<gpu::GpuBuffer>),
    /// No data: a meta tensor (shape, dtype and place only).
    Meta(Place),
    /// No data: a variable of a static program.
    Var(Arc<crate::static_::VarRef>),
}

impl Storage {
    pub fn place(&self) -> Place {
        match self {
            Storage::Cpu(_) => Place::Cpu,
            Storage::Gpu(b) => Place::Gpu(b.ctx.index),
            Storage::Meta(p) => *p,
            Storage::Var(_) => crate::static_::BUILD_PLACE,
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
