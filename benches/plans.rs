//! Execution plans against interpretation and eager mode on the seed's MNIST training step
//! (batch 64, Adam): wall time per step, the calling thread's CPU time per step and per
//! kernel dispatch (what a plan removes), dispatches per step, and the device memory a step
//! needs above the parameters (`cargo bench --bench plans`; `-- --quick` for fewer steps).

use std::time::{Duration, Instant};

use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, DType, Place, Tensor};

#[path = "common/mod.rs"]
mod common;

use common::thread_cpu;

fn batch(place: Place) -> (Tensor, Tensor) {
    let n = 64;
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

/// Times `steps` calls of `f` after `warm` (wall, with the device drained, and host CPU).
fn measure(place: Place, mode: &'static str, warm: usize, steps: usize, f: &mut dyn FnMut()) -> Row {
    for _ in 0..warm {
        f();
    }
    settle(place);
    let d0 = dispatches(place);
    let (t0, c0) = (Instant::now(), thread_cpu());
    let mut host = Duration::ZERO;
    for _ in 0..steps {
        let c = thread_cpu();
        f();
        host += thread_cpu() - c;
    }
    settle(place);
    let wall = t0.elapsed();
    let _ = c0;
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

fn eager(place: Place, warm: usize, steps: usize) -> Row {
    paddle::seed(1);
    let (x, y) = batch(place);
    let net = paddle::guard(place, MnistNet::new).unwrap();
    let mut opt = Adam::new(1e-3, net.parameters());
    measure(place, "eager", warm, steps, &mut || {
        let loss = mnist_loss(&net.forward(&x).unwrap(), &y).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        opt.clear_grad();
    })
}

fn static_(place: Place, plans: bool, warm: usize, steps: usize) -> (Row, Option<st::PlanInfo>) {
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
    let exe = Executor::with_scope(place, Scope::new());
    exe.set_plans(plans);
    exe.run(&startup, &[], &[] as &[&str]).unwrap();
    let (x, y) = batch(place);
    let mode = if plans { "static, plan" } else { "static, interpreted" };
    let row = measure(place, mode, warm, steps, &mut || {
        exe.run(&main, &[("pixel", &x), ("label", &y)], &[&loss]).unwrap();
    });
    let info = exe.last_plan();
    let row = Row { step_bytes: row.step_bytes.map(|b| b + info.as_ref().map_or(0, |i| i.buffer_bytes)), ..row };
    (row, info)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut places = vec![(Place::Cpu, "CPU".to_string())];
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
        let e = eager(place, warm, steps);
        let (i, _) = static_(place, false, warm, steps);
        let mut rows = vec![e, i];
        if let Place::Gpu(_) = place {
            let (p, info) = static_(place, true, warm, steps);
            if let Some(info) = info {
                println!("<!-- plan: {info:?} -->");
            }
            rows.push(p);
        }
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
}
