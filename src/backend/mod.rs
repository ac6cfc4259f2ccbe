//! Backends: the CPU reference backend's shared primitives and the wgpu/WGSL GPU runtime.
//! Nothing here imports a floor above it (tensors, ops, programs).

pub(crate) mod cpu;
pub(crate) mod gpu;
