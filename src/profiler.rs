//! The kernel profiler (Paddle's `paddle.profiler`, summarised by kernel): between
//! `Profiler::start` and `Profiler::stop`, how long a GPU spent in each shader (eager
//! dispatches and replayed Programs alike), or on the CPU place how long each op's kernel ran.
//!
//! ```no_run
//! use dygraph::{self as paddle, Place, profiler::Profiler};
//! # fn main() -> paddle::Result<()> {
//! let x = paddle::ones_on([1024, 1024], paddle::DType::Float32, Place::Gpu(0))?;
//! let p = Profiler::start(Place::Gpu(0))?;
//! let y = paddle::matmul(&x, &x, false, false)?.relu()?;
//! paddle::sync()?;
//! let summary = p.stop()?;
//! println!("{summary}");
//! # let _ = y; Ok(()) }
//! ```
//!
//! On a GPU, each dispatch is timed by the device's timestamps around a compute pass of its own, and
//! each submitted batch is read back before the next is recorded: a profiled step runs
//! slower than an unprofiled one, while the kernel times themselves are the device's. The
//! adapter must offer timestamp queries (Vulkan, Metal and DX12 drivers generally do); in
//! the browser the profiler is unavailable, since it reads timestamps back synchronously. A
//! timestamp readback that fails (a lost device) is returned by the operation that submitted
//! the batch, and timing stops there.
//!
//! On the CPU place each registered op's kernel is timed on the host (wall time, its worker
//! threads included), from every thread of the process; a `KernelTime` then has `shader`
//! `"cpu"` and the op's name as `entry` (not in the browser, which has no such clock).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::gpu::{GpuContext, context};
use crate::{Error, Place, Result};

/// Kernel timing on one GPU or on the CPU, on from `start` to `stop` (or until dropped).
pub struct Profiler {
    target: Target,
    started: Instant,
    on: bool,
}

enum Target {
    Gpu(Arc<GpuContext>),
    Cpu,
}

impl Profiler {
    /// Finishes the work recorded on `place` so far and starts timing every kernel it
    /// runs. Errors: an adapter without timestamp queries, a GPU in the browser, or a
    /// profiler already on for that place.
    pub fn start(place: Place) -> Result<Profiler> {
        let target = match place {
            Place::Gpu(index) => {
                let ctx = context(index)?;
                ctx.start_profiling()?;
                Target::Gpu(ctx)
            }
            Place::Cpu => {
                if cfg!(target_arch = "wasm32") {
                    return Err(Error::invalid("profiler", "the browser has no clock for timing CPU kernels"));
                }
                crate::ops::registry::dispatch::profile::start_cpu()?;
                Target::Cpu
            }
        };
        Ok(Profiler { target, started: Instant::now(), on: true })
    }

    /// Turns timing off: each kernel's (shader, entry, variant, calls, time).
    fn finish(&self) -> Result<Vec<KernelTime>> {
        Ok(match &self.target {
            Target::Gpu(ctx) => ctx
                .stop_profiling()?
                .into_iter()
                .map(|(label, t)| KernelTime {
                    shader: label.file,
                    entry: label.entry,
                    variant: label.key,
                    calls: t.calls,
                    device_time: Duration::from_secs_f64(t.nanos.max(0.0) * 1e-9),
                })
                .collect(),
            Target::Cpu => crate::ops::registry::dispatch::profile::stop_cpu()
                .into_iter()
                .map(|(op, (calls, time))| KernelTime {
                    shader: "cpu",
                    entry: op,
                    variant: 0,
                    calls,
                    device_time: time,
                })
                .collect(),
        })
    }

    /// Waits for the recorded work, turns timing off and returns each kernel's calls and
    /// device time.
    pub fn stop(mut self) -> Result<KernelSummary> {
        self.on = false;
        let mut kernels = self.finish()?;
        kernels.sort_by_key(|k| std::cmp::Reverse(k.device_time));
        let device = match &self.target {
            Target::Gpu(ctx) => format!("{} ({:?})", ctx.info.name, ctx.info.backend),
            Target::Cpu => "CPU".to_string(),
        };
        Ok(KernelSummary { device, wall: self.started.elapsed(), kernels })
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        if self.on {
            // Turning timing off must not fail a drop; the summary is simply not kept.
            let _ = self.finish();
        }
    }
}

/// One kernel's share of a profile: a shader file's entry point in one variant (a
/// specialisation: dtype, tile size, fused epilogue...), or on the CPU one op's kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The shader file below `shaders/`, e.g. `"conv2d.wgsl"`; `"cpu"` on the CPU place.
    pub shader: &'static str,
    /// The entry point; on the CPU place the op's name.
    pub entry: &'static str,
    /// The variant key the kernel's op asked for; bit 31 set where the kernel ran its
    /// subgroup form (devices with `SUBGROUP`, `FLAGS_use_subgroups` on).
    pub variant: u32,
    /// Dispatches.
    pub calls: u64,
    /// Device time summed over the dispatches (on the CPU place, the kernels' wall time).
    pub device_time: Duration,
}

/// What a `Profiler` measured: kernels by device time, longest first.
#[derive(Clone, Debug)]
pub struct KernelSummary {
    /// The adapter, e.g. "NVIDIA H100 80GB HBM3 (Vulkan)", or "CPU".
    pub device: String,
    /// Host time from `start` to `stop`.
    pub wall: Duration,
    pub kernels: Vec<KernelTime>,
}

impl KernelSummary {
    /// Device time of every kernel together.
    pub fn device_time(&self) -> Duration {
        self.kernels.iter().map(|k| k.device_time).sum()
    }

    /// Dispatches timed.
    pub fn dispatches(&self) -> u64 {
        self.kernels.iter().map(|k| k.calls).sum()
    }

    /// The kernels of one shader file, longest first.
    pub fn shader(&self, file: &str) -> Vec<&KernelTime> {
        self.kernels.iter().filter(|k| k.shader == file).collect()
    }
}

impl fmt::Display for KernelSummary {
    /// A Markdown table: kernel, calls, total and mean µs, share of the device time.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.device_time().as_secs_f64();
        writeln!(
            f,
            "{}: {} kernel calls, {:.1} µs of kernels in {:.1} ms",
            self.device,
            self.dispatches(),
            total * 1e6,
            self.wall.as_secs_f64() * 1e3
        )?;
        writeln!(f, "| kernel | entry | variant | calls | total µs | mean µs | share |")?;
        writeln!(f, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")?;
        for k in &self.kernels {
            let t = k.device_time.as_secs_f64();
            writeln!(
                f,
                "| {} | {} | {} | {} | {:.2} | {:.3} | {:.1}% |",
                k.shader,
                k.entry,
                k.variant,
                k.calls,
                t * 1e6,
                t * 1e6 / k.calls.max(1) as f64,
                if total > 0.0 { 100.0 * t / total } else { 0.0 }
            )?;
        }
        Ok(())
    }
}
