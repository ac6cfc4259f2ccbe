//! The host allocator's behaviour for tensor buffers. glibc's `malloc` gives blocks above
//! its mmap threshold (128 KiB, rising as such blocks are freed) their own mapping, returned
//! to the OS when freed and faulted in page by page when mapped again. A training step frees
//! and reallocates the same large buffers every step, so a step pays those page faults again
//! and again, and how many depends on the threshold's history: the seed's MNIST step on the
//! CPU measured 16.4 ms (sometimes 13) with glibc's defaults and 11.3 ms with freed blocks
//! kept in the heap for reuse. Before the first op runs, the library fixes the threshold at
//! glibc's maximum (32 MiB; larger tensors still get their own mapping) and keeps up to
//! 512 MiB of freed memory at the top of the heap. `DYGRAPH_MALLOC=default` leaves glibc's
//! settings alone. Other C libraries and platforms are not touched.

use std::sync::Once;

/// Applies the settings above once per process (glibc on Linux only).
pub(crate) fn keep_freed_blocks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var("DYGRAPH_MALLOC").is_ok_and(|v| v == "default") {
            return;
        }
        tune();
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune() {
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    // SAFETY: mallopt only adjusts allocator parameters; both values are within glibc's
    // documented ranges, and a rejected value leaves the default in place.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 512 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune() {}
