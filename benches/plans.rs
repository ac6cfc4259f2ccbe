//! Execution plans against interpretation and eager mode on the seed's MNIST training step
//! (batch 64, Adam): wall time per step, host CPU time per step (on a GPU place the calling
//! thread's, and per kernel dispatch: what a plan removes, recording and submitting
//! included, the device waits excluded; on the CPU place every thread's: the work, the
//! pool's spinning and any other thread the process runs, such as a software adapter's),
//! dispatches per step, and the device memory a step
//! needs above the parameters (`cargo bench --bench plans`; `-- --quick` for fewer steps).
//! The CPU modes run interleaved, one step of each per round; the median and quartiles of
//! the per-round ratio follow the table (a shared VM's drift moves the means more). A second measure drains the
//! device after every step (batch 1) and reports the median host CPU per step and per
//! dispatch, submission and driver clean-up included. With `--profile`, each mode
//! then runs a few more steps under `dygraph::profiler` and prints its kernel table.
//! `-- --loop MODE SECONDS` (MODE: `eager`, `plan`, `plan-synced`, `cpu-eager`, `cpu-static`)
//! runs only that step for that long and prints its rate and host CPU per step, for an
//! external profiler such as `perf`.

use std::rc::Rc;
use std::time::{Duration, Instant};

use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, DType, Place, Tensor};

#[path = "common/mod.rs"]
mod common;

use common::{process_cpu, thread_cpu};

fn batch(place: Place, n: usize) -> (Tensor, Tensor) {
    let px: Vec<f32> = (0..n * 784).map(|i| (((i * 7) % 17) as f32 / 8.0) - 1.0).collect();
    let lb: Vec<i64> = (0..n).map(|i| ((i * 3) % 10) as i64).collect();
    let x = Tensor::from_vec(px, [n, 1, 28, 28]).unwrap().to(place).unwrap();
    (x, Tensor::from_vec(lb, [n, 1]).unwrap().to(place).unwrap())
}

/// One measured mode.
struct Row {
    mode: &'static str,
    wall_ms: f64,
    host_ms: f64,
    dispatches: Option<f64>,
    step_bytes: Option<u64>,
}

fn dispatches(place: Place) -> u64 {
    match place {
        Place::Gpu(i) => paddle::dispatch_count(i).unwrap(),
        _ => 0,
    }
}

fn settle(place: Place) {
    if let Place::Gpu(_) = place {
        paddle::sync().unwrap();
    }
}

/// Peak device bytes of `f` above what was allocated before it.
fn step_bytes(place: Place, f: &mut dyn FnMut()) -> Option<u64> {
    let Place::Gpu(i) = place else { return None };
    settle(place);
    paddle::reset_peak_memory(i).unwrap();
    let base = paddle::memory_stats(i).unwrap().allocated;
    f();
    settle(place);
    Some(paddle::memory_stats(i).unwrap().peak_allocated - base)
}

/// Seconds of warm-up steps on a hardware GPU: its driver lowers the clock after a second
/// or two idle and raises it again only under load (an H100 ran these rows at 420–975 MHz
/// instead of 1980 right after the CPU rows, and eager at 0.71–0.90 ms per step against 0.41).
const HARDWARE_WARM_S: f64 = 1.0;

/// Calls `f` for `secs` seconds of wall time, draining the device after each call.
fn warm_for(place: Place, secs: f64, f: &mut dyn FnMut()) {
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < secs {
        f();
        settle(place);
    }
}

/// Times `steps` calls of `f` after `warm.0` calls (the first compiles and captures: host work
/// that leaves the device idle) and then `warm.1` seconds of calls (wall, with the device
/// drained, and host CPU).
fn measure(place: Place, mode: &'static str, warm: (usize, f64), steps: usize, f: &mut dyn FnMut()) -> Row {
    for _ in 0..warm.0 {
        f();
    }
    settle(place);
    warm_for(place, warm.1, f);
    let d0 = dispatches(place);
    let t0 = Instant::now();
    let mut host = Duration::ZERO;
    for _ in 0..steps {
        let c = thread_cpu();
        f();
        host += thread_cpu() - c;
    }
    // Submitting the last recorded batch is host work of these steps too.
    let c = thread_cpu();
    settle(place);
    host += thread_cpu() - c;
    let wall = t0.elapsed();
    let d = dispatches(place) - d0;
    let step = step_bytes(place, f);
    Row {
        mode,
        wall_ms: wall.as_secs_f64() * 1e3 / steps as f64,
        host_ms: host.as_secs_f64() * 1e3 / steps as f64,
        dispatches: matches!(place, Place::Gpu(_)).then(|| d as f64 / steps as f64),
        step_bytes: step,
    }
}

/// The median host CPU of one step of `f` plus draining the device (recording, submitting,
/// the driver's clean-up of the finished batch and the index-flag readback; the waits
/// themselves use no CPU on Linux, where `thread_cpu` is the thread clock), and the dispatches
/// per step. Run on a batch of one, so a software adapter's kernels barely compete with the
/// host for the cores.
fn synced_host(steps: usize, f: &mut dyn FnMut()) -> (f64, f64) {
    for _ in 0..5 {
        f();
        settle(Place::Gpu(0));
    }
    let d0 = dispatches(Place::Gpu(0));
    let mut cpu: Vec<f64> = (0..steps)
        .map(|_| {
            let c = thread_cpu();
            f();
            settle(Place::Gpu(0));
            (thread_cpu() - c).as_secs_f64() * 1e6
        })
        .collect();
    let d = (dispatches(Place::Gpu(0)) - d0) as f64 / steps as f64;
    cpu.sort_by(f64::total_cmp);
    (cpu[steps / 2], d)
}

/// One measured step.
type Step = Box<dyn FnMut()>;

/// Runs `steps` steps of `f` under the kernel profiler and prints the kernels' device time
/// per step (the profiler's own passes and readbacks slow the steps, not the kernels).
fn profile(place: Place, mode: &str, steps: usize, f: &mut dyn FnMut()) {
    let hardware = matches!(place, Place::Gpu(_)) && paddle::gpu_info(0).is_ok_and(|i| !i.device_type.contains("Cpu"));
    f();
    settle(place);
    warm_for(place, if hardware { HARDWARE_WARM_S } else { 0.0 }, f);
    let p = match dygraph::profiler::Profiler::start(place) {
        Ok(p) => p,
        Err(e) => return println!("<!-- {mode}: no kernel profile ({e}) -->"),
    };
    for _ in 0..steps {
        f();
    }
    match p.stop() {
        Ok(s) => println!(
            "\n{mode}: {:.1} µs of kernels per step over {steps} steps\n{s}",
            s.device_time().as_secs_f64() * 1e6 / steps as f64
        ),
        Err(e) => println!("<!-- {mode}: the profile failed ({e}) -->"),
    }
}

/// An eager training step on `place` over a batch of `n`.
fn eager_step(place: Place, n: usize) -> Step {
    paddle::seed(1);
    let (x, y) = batch(place, n);
    let net = paddle::guard(place, MnistNet::new).unwrap();
    let mut opt = Adam::new(1e-3, net.parameters());
    Box::new(move || {
        let loss = mnist_loss(&net.forward(&x).unwrap(), &y).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        opt.clear_grad();
    })
}

/// The same step as a static program on `place`, with its executor (plans on or off).
fn static_step(place: Place, plans: bool, n: usize) -> (Step, Rc<Executor>) {
    paddle::seed(1);
    let (main, startup) = (Program::new(), Program::new());
    let loss = st::program_guard(&main, &startup, || {
        let img = st::data("pixel", &[-1, 1, 28, 28], DType::Float32).unwrap();
        let label = st::data("label", &[-1, 1], DType::Int64).unwrap();
        let net = MnistNet::new().unwrap();
        let loss = mnist_loss(&net.forward(&img).unwrap(), &label).unwrap();
        Adam::new(1e-3, net.parameters()).minimize(&loss).unwrap();
        loss
    });
    let exe = Rc::new(Executor::with_scope(place, Scope::new()));
    exe.set_plans(plans);
    exe.run(&startup, &[], &[] as &[&str]).unwrap();
    let (x, y) = batch(place, n);
    let e = exe.clone();
    let step = Box::new(move || {
        e.run(&main, &[("pixel", &x), ("label", &y)], &[&loss]).unwrap();
    });
    (step, exe)
}

/// The CPU modes measured step by step in turn (one step of each per round), so the drift
/// of a shared machine falls on every mode alike: wall and host CPU time per step.
/// Also returns the median and quartiles of the first mode's time over the last's within
/// each round.
fn interleaved(modes: Vec<(&'static str, Step)>, warm: usize, steps: usize) -> (Vec<Row>, String) {
    let mut modes = modes;
    for (_, f) in modes.iter_mut() {
        for _ in 0..warm {
            f();
        }
    }
    let mut wall = vec![Duration::ZERO; modes.len()];
    let mut host = vec![Duration::ZERO; modes.len()];
    let mut ratios = Vec::with_capacity(steps);
    for _ in 0..steps {
        let mut round = Vec::with_capacity(modes.len());
        for (i, (_, f)) in modes.iter_mut().enumerate() {
            let (t, c) = (Instant::now(), process_cpu());
            f();
            host[i] += process_cpu() - c;
            round.push(t.elapsed());
            wall[i] += round[i];
        }
        ratios.push(round[0].as_secs_f64() / round[round.len() - 1].as_secs_f64());
    }
    // A shared VM's drift moves the means; the ratio within each round moves less.
    ratios.sort_by(f64::total_cmp);
    let q = |f: f64| ratios[((ratios.len() - 1) as f64 * f).round() as usize];
    let spread = format!(
        "{} ÷ {} within each round: median {:.3}, quartiles {:.3}–{:.3} over {steps} rounds",
        modes[0].0,
        modes[modes.len() - 1].0,
        q(0.5),
        q(0.25),
        q(0.75)
    );
    let per = |d: Duration| d.as_secs_f64() * 1e3 / steps as f64;
    let rows = modes
        .iter()
        .enumerate()
        .map(|(i, (mode, _))| Row {
            mode,
            wall_ms: per(wall[i]),
            host_ms: per(host[i]),
            dispatches: None,
            step_bytes: None,
        })
        .collect();
    (rows, spread)
}

/// The host cost per dispatch of wgpu itself on the first adapter, with no framework code:
/// one prebuilt pipeline, 50 prebuilt bind groups, `set_pipeline` + `set_bind_group` +
/// `dispatch_workgroups` per dispatch, 500 dispatches per submission (what a plan's replay
/// does), the calling thread's CPU time per dispatch including `finish` and `submit`.
fn wgpu_floor_us() -> Option<f64> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .ok()?;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor::default())).ok()?;
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
             @compute @workgroup_size(64)
             fn main(@builtin(global_invocation_id) g: vec3<u32>) {
                 if (g.x < arrayLength(&x)) { x[g.x] = x[g.x] + 1.0; }
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let buffers: Vec<wgpu::Buffer> = (0..8)
        .map(|_| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 1024,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        })
        .collect();
    let groups: Vec<wgpu::BindGroup> = (0..50)
        .map(|i| {
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.get_bind_group_layout(0),
                entries: &[wgpu::BindGroupEntry { binding: 0, resource: buffers[i % 8].as_entire_binding() }],
            })
        })
        .collect();
    let batch = |n: usize| {
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for i in 0..n {
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &groups[i % groups.len()], &[]);
                pass.dispatch_workgroups(4, 1, 1);
            }
        }
        queue.submit([enc.finish()]);
    };
    batch(500);
    device.poll(wgpu::PollType::wait_indefinitely()).ok()?;
    let (batches, per) = (20, 500);
    let t0 = thread_cpu();
    for _ in 0..batches {
        batch(per);
    }
    let cpu = thread_cpu() - t0;
    device.poll(wgpu::PollType::wait_indefinitely()).ok()?;
    Some(cpu.as_secs_f64() * 1e6 / (batches * per) as f64)
}

/// `--loop MODE SECONDS`: one step (GPU or CPU) run alone for `SECONDS`, for an external profiler.
fn step_loop(mode: &str, secs: f64) {
    let (mut step, synced): (Step, bool) = match mode {
        "eager" => (eager_step(Place::Gpu(0), 64), false),
        "plan" => (static_step(Place::Gpu(0), true, 64).0, false),
        "plan-synced" => (static_step(Place::Gpu(0), true, 1).0, true),
        "cpu-eager" => (eager_step(Place::Cpu, 64), false),
        "cpu-static" => (static_step(Place::Cpu, false, 64).0, false),
        _ => return println!("--loop takes eager, plan, plan-synced, cpu-eager or cpu-static, not {mode}"),
    };
    let place = if mode.starts_with("cpu") { Place::Cpu } else { Place::Gpu(0) };
    // The CPU place's work runs on every thread (a program on the kernels' pool).
    let clock = if place == Place::Cpu { process_cpu } else { thread_cpu };
    for _ in 0..10 {
        step();
    }
    settle(place);
    let (t0, c0, d0) = (Instant::now(), clock(), dispatches(place));
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        step();
        if synced {
            settle(place);
        }
        n += 1;
    }
    settle(place);
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), (clock() - c0).as_secs_f64());
    let (per, d) = (cpu * 1e6 / n as f64, (dispatches(place) - d0) as f64 / n as f64);
    let per_dispatch =
        if d > 0.0 { format!(", {d:.0} dispatches, {:.2} µs per dispatch", per / d) } else { String::new() };
    println!("{mode}: {n} steps, {:.3} ms wall and {per:.1} µs host CPU per step{per_dispatch}", wall * 1e3 / n as f64);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--loop") {
        let secs = args.get(i + 2).and_then(|s| s.parse().ok()).unwrap_or(5.0);
        return step_loop(args.get(i + 1).map_or("", |s| s.as_str()), secs);
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let profiled = std::env::args().any(|a| a == "--profile");
    let mut profiles: Vec<(&str, Step)> = Vec::new();
    let mut places = vec![(Place::Cpu, "CPU".to_string())];
    let mut notes: Vec<String> = Vec::new();
    match paddle::gpu_info(0) {
        Ok(info) => places.push((Place::Gpu(0), format!("GPU ({}, {})", info.name, info.backend))),
        Err(e) => println!("no GPU adapter ({e}): the GPU rows are left out"),
    }
    println!(
        "| place | mode | wall ms/step | host CPU ms/step | dispatches/step | host µs/dispatch | device bytes/step | vs eager |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (place, name) in places {
        let software = paddle::gpu_info(0).map(|i| i.device_type.contains("Cpu")).unwrap_or(false);
        let (warm, steps) = match (place, quick, software) {
            (Place::Gpu(_), true, true) => (2, 3),
            (Place::Gpu(_), false, true) => (3, 10),
            (_, true, _) => (3, 10),
            _ => (10, 60),
        };
        let warm_s = if matches!(place, Place::Gpu(_)) && !software { HARDWARE_WARM_S } else { 0.0 };
        let rows = match place {
            Place::Gpu(_) => {
                let mut eager = eager_step(place, 64);
                let mut rows = vec![measure(place, "eager", (warm, warm_s), steps, &mut eager)];
                profiles.push(("eager", eager));
                for (mode, plans) in [("static, interpreted", false), ("static, plan", true)] {
                    let (mut step, exe) = static_step(place, plans, 64);
                    let row = measure(place, mode, (warm, warm_s), steps, &mut step);
                    let info = exe.last_plan();
                    if let Some(info) = &info {
                        println!("<!-- plan: {info:?} -->");
                    }
                    // The plan's own buffers and arena are held between steps.
                    let held = info.as_ref().map_or(0, |i| i.buffer_bytes);
                    rows.push(Row { step_bytes: row.step_bytes.map(|b| b + held), ..row });
                    profiles.push((mode, step));
                }
                rows
            }
            _ => {
                let (rows, spread) = interleaved(
                    vec![("eager", eager_step(place, 64)), ("static, interpreted", static_step(place, false, 64).0)],
                    warm,
                    steps,
                );
                notes.push(format!("{name}: {spread}"));
                rows
            }
        };
        let eager_ms = rows[0].wall_ms;
        for r in &rows {
            let per = r.dispatches.map_or("–".into(), |d| format!("{:.2}", r.host_ms * 1e3 / d));
            println!(
                "| {name} | {} | {:.2} | {:.3} | {} | {per} | {} | {:.2}× |",
                r.mode,
                r.wall_ms,
                r.host_ms,
                r.dispatches.map_or("–".into(), |d| format!("{d:.0}")),
                r.step_bytes.map_or("–".into(), |b| format!("{:.2} MiB", b as f64 / (1 << 20) as f64)),
                eager_ms / r.wall_ms
            );
        }
    }
    for note in &notes {
        println!("\n{note}");
    }
    if profiled {
        for (mode, mut step) in profiles {
            profile(Place::Gpu(0), mode, 10, &mut step);
        }
        profile(Place::Cpu, "CPU eager", 10, &mut eager_step(Place::Cpu, 64));
        profile(Place::Cpu, "CPU static, interpreted", 10, &mut static_step(Place::Cpu, false, 64).0);
    }
    if paddle::gpu_info(0).is_ok() {
        let steps = if quick { 30 } else { 200 };
        println!(
            "\nHost CPU per step, the device drained after every step (a loop that syncs each step), batch 1, median of {steps}:"
        );
        for (mode, mut step) in
            [("eager", eager_step(Place::Gpu(0), 1)), ("static, plan", static_step(Place::Gpu(0), true, 1).0)]
        {
            let (us, d) = synced_host(steps, &mut step);
            println!("- {mode}: {us:.0} µs per step, {d:.0} dispatches, {:.2} µs per dispatch", us / d);
        }
    }
    if let Some(us) = wgpu_floor_us() {
        println!(
            "\nwgpu alone on this adapter: {us:.2} µs of host CPU per dispatch (prebuilt pipeline and bind \
             groups, 500 dispatches per submission)"
        );
    }
}
