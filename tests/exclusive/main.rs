//! Tests of process-wide state: check flags, the CPU shadow, float16's two GPU paths, subgroups on and off, the kernel profiler, memory
//! limits and counters, the device's error flag, the default place, determinism and the
//! soak's memory curves. Each holds one lock ([`exclusive`]), so no two run at once.

#![allow(clippy::duplicate_mod)] // test modules include the examples (and their shared module) they run
#![allow(clippy::module_inception)] // a test module named after the example it includes

#[path = "../common/mod.rs"]
mod common;

mod check_nan_inf;
mod determinism;
mod float16;
mod gpu_index_errors;
mod gpu_runtime;
mod memory_limits;
mod merged_updates;
mod profiler;
mod shadow;
mod soak;
mod split_k;
mod static_memory;
mod subgroups;
mod threads;

/// Held by every test of this binary for its whole run: they change or count process-wide
/// state, so none may run beside another.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
