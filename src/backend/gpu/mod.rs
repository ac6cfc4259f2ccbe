//! The wgpu backend. Its floors, each importing only those below it:
//!
//! - leaves: `shader` (kernels and their sources), `pipeline` (the pipeline cache), `pool`
//!   (the shared and the plans' private buffer pools), `profile`, `error_flag`, `in_place`;
//! - `device` (the opened wgpu device, its limits and error capture) and `buffer` (the
//!   pooled buffer tensors hold, which returns to its pool by itself);
//! - `recorder` (the batch every dispatch goes into), `capture` (a plan capture's log),
//!   `readback`;
//! - `context` (one device's facets composed: the API ops call), then `tape` (a plan's
//!   prepared commands) and `registry` (adapters, opened contexts, the public functions).

mod buffer;
mod capture;
mod context;
mod device;
mod error_flag;
mod in_place;
mod pipeline;
mod pool;
mod profile;
mod readback;
mod recorder;
mod registry;
mod shader;
mod tape;

pub(crate) use buffer::GpuBuffer;
pub(crate) use capture::Cmd;
pub(crate) use context::GpuContext;
pub use device::GpuInfo;
pub use pool::MemoryStats;
pub(crate) use pool::PrivatePool;
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) use readback::PendingRead;
pub(crate) use recorder::{Bind, PARAMS_WORDS, grid};
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) use registry::hardware_adapter_count;
pub(crate) use registry::{context, hardware_adapter_available};
pub use registry::{
    dispatch_count, empty_cache, gpu_count, gpu_info, init_gpu, memory_stats, reset_peak_memory, set_memory_limit,
    submit_count, sync,
};
pub(crate) use shader::{Kernel, Variant, register_kernels};
pub use shader::{all_shader_variants, kernel_files, shader_files};
pub(crate) use tape::Tape;

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
