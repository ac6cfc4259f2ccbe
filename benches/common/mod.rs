//! What the benches share: the calling thread's CPU time, the host cost of recording work
//! without the device's (a software adapter's worker threads run on the same cores).

use std::time::Duration;

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`; Linux).
pub fn thread_cpu() -> Duration {
    cpu_clock(3)
}

/// The CPU time of every thread of the process (`CLOCK_PROCESS_CPUTIME_ID`; Linux): what a
/// CPU-place step costs on all cores, wherever its kernels and interpreter run.
#[allow(dead_code)]
pub fn process_cpu() -> Duration {
    cpu_clock(2)
}

#[cfg(target_os = "linux")]
fn cpu_clock(clock: i32) -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    let mut t = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { clock_gettime(clock, &mut t) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The wall clock where there is no CPU clock.
#[cfg(not(target_os = "linux"))]
fn cpu_clock(_: i32) -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}
