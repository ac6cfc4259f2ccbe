//! The CPU kernel profiler as a mode: while `Profiler::start(Place::Cpu)` is on, every call
//! that runs on the CPU is timed on the host under its op's name, from every thread (a
//! relaxed atomic load when off). GPU kernels are timed by the device (the recorder's
//! timestamp queries), not here.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Call, Mode, Next};
use crate::{Error, Place, Result, Tensor};

pub(crate) struct Profile;

pub(crate) static PROFILE: Profile = Profile;

/// Whether CPU kernels are being timed, and their totals by op.
static CPU_ON: AtomicBool = AtomicBool::new(false);
static CPU_TOTALS: Mutex<Option<HashMap<&'static str, (u64, Duration)>>> = Mutex::new(None);

thread_local! {
    /// Set while an op's internal steps run (the casts of a float16 op computed in float32),
    /// which count as the op's own time.
    static SUSPENDED: Cell<bool> = const { Cell::new(false) };
}

fn totals() -> std::sync::MutexGuard<'static, Option<HashMap<&'static str, (u64, Duration)>>> {
    CPU_TOTALS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts timing CPU kernels; an error when a profiler is already on for the CPU.
pub(crate) fn start_cpu() -> Result<()> {
    let mut totals = totals();
    if totals.is_some() {
        return Err(Error::invalid("profiler", "a profiler is already on for the CPU"));
    }
    *totals = Some(HashMap::new());
    CPU_ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// Stops timing CPU kernels: the calls and time of each op.
pub(crate) fn stop_cpu() -> HashMap<&'static str, (u64, Duration)> {
    CPU_ON.store(false, Ordering::Relaxed);
    totals().take().unwrap_or_default()
}

/// Runs `f` with its ops' CPU time counted as the enclosing op's, not their own.
pub(crate) fn suspended<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            SUSPENDED.with(|s| s.set(self.0));
        }
    }
    let _reset = Reset(SUSPENDED.with(|s| s.replace(true)));
    f()
}

impl Mode for Profile {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        // Views and moves between places run no CPU kernel.
        if !CPU_ON.load(Ordering::Relaxed) || SUSPENDED.with(Cell::get) || call.op().view() || call.op().mixed_places()
        {
            return next.run(call);
        }
        let place = match call.inputs().first() {
            Some(t) => t.place(),
            None => call.outs()?.first().map_or(Place::Cpu, |o| o.place),
        };
        if place != Place::Cpu || call.inputs().iter().any(|t| t.is_meta() || t.is_static_var()) {
            return next.run(call);
        }
        let t = Instant::now();
        let out = next.run(call);
        let spent = t.elapsed();
        if let Some(totals) = totals().as_mut() {
            let e = totals.entry(call.op().name()).or_default();
            e.0 += 1;
            e.1 += spent;
        }
        out
    }
}
