//! The wgpu backend: adapter registry and device contexts, the buffer pool, the pipeline
//! cache, the recorder every dispatch goes through, and async readback.

mod capture;
mod context;
mod error_flag;
mod in_place;
mod pipeline;
mod pool;
mod profile;
mod recorder;
mod shader;

pub(crate) use capture::{Cmd, PrivatePool, Tape};
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) use context::hardware_adapter_count;
pub(crate) use context::{GpuBuffer, GpuContext, context, hardware_adapter_available};
pub use context::{
    GpuInfo, dispatch_count, empty_cache, gpu_count, gpu_info, init_gpu, memory_stats, reset_peak_memory,
    set_memory_limit, submit_count, sync,
};
pub use pool::MemoryStats;
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) use recorder::PendingRead;
pub(crate) use recorder::{Bind, PARAMS_WORDS, grid};
pub(crate) use shader::{Kernel, Variant, register_kernels};
pub use shader::{all_shader_variants, kernel_files, shader_files};

/// Locks `m`, taking the data of a poisoned lock too: a panic on one thread does not make
/// the device unusable for the others.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads per workgroup of the 1-D kernels.
pub(crate) const WORKGROUP: u32 = 256;

/// Eager dispatches recorded before the batch is submitted anyway (a replayed tape goes in
/// whole, after any pending work past this bound).
pub(crate) const MAX_PENDING: u32 = 512;

/// Elements each invocation of a row kernel's `rows_cached` entry holds in registers
/// (`{{CACHED}}` in the shaders): rows up to `ROW_CACHE × WORKGROUP` take that entry.
pub(crate) const ROW_CACHE: u32 = 4;

/// The longest row a `rows_cached` entry takes.
pub(crate) const ROW_CACHE_MAX_LEN: usize = (ROW_CACHE * WORKGROUP) as usize;
