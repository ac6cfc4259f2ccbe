//! The kernel profiler: every dispatch between `start` and `stop` is counted once under its
//! shader, eager and replayed alike, across batch submissions; the device times order a
//! large product above a tiny add; CPU kernels are counted under their ops; results are
//! unchanged under profiling; bad use is a typed error. The tests share one profiler per
//! place (and the CPU one counts every thread's ops), so they take turns.

use crate::common;

use std::sync::Mutex;

use common::{assert_close, check_exact};
use dygraph::nn::Forward;
use dygraph::profiler::Profiler;
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Place, Tensor};

static ONE_PROFILER: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_PROFILER.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn every_dispatch_is_counted_under_its_kernel() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _t = turn();
    let a = Tensor::from_vec((0..12).map(|i| i as f32).collect(), [3, 4]).unwrap().to(gpu).unwrap();
    let b = Tensor::from_vec(vec![1.0f32; 12], [3, 4]).unwrap().to(gpu).unwrap();
    let w = Tensor::from_vec((0..8).map(|i| i as f32 * 0.5).collect(), [4, 2]).unwrap().to(gpu).unwrap();
    paddle::sync().unwrap();
    let before = paddle::dispatch_count(0).unwrap();
    let p = Profiler::start(gpu).unwrap();
    let mut s = &a + &b;
    s = &s + &b;
    s = &s + &b;
    let m1 = paddle::matmul(&s, &w, false, false).unwrap();
    let m2 = paddle::matmul(&a, &w, false, false).unwrap();
    let summary = p.stop().unwrap();
    let dispatched = paddle::dispatch_count(0).unwrap() - before;
    eprintln!("{summary}");
    assert_eq!(summary.dispatches(), dispatched, "every dispatch timed once");
    assert!(summary.kernels.iter().any(|k| k.calls == 3), "the three adds under one kernel: {summary}");
    let matmuls: u64 = summary.shader("matmul.wgsl").iter().map(|k| k.calls).sum();
    assert_eq!(matmuls, 2, "{summary}");
    assert!(summary.device_time() > std::time::Duration::ZERO);
    assert!(summary.device_time() <= summary.wall, "device time within the profiled span: {summary}");
    // Hand values: s = a + 3, m = s·w and a·w with w[k][j] = (2k + j) / 2.
    let sv: Vec<f32> = (0..12).map(|i| i as f32 + 3.0).collect();
    let mm = |x: &[f32]| -> Vec<f64> {
        (0..3)
            .flat_map(|r| (0..2).map(move |j| (r, j)))
            .map(|(r, j)| (0..4).map(|k| x[r * 4 + k] as f64 * (2 * k + j) as f64 * 0.5).sum())
            .collect()
    };
    check_exact("a + b + b + b", &common::values(&s), &sv.iter().map(|&v| v as f64).collect::<Vec<_>>()).unwrap();
    assert_close("(a + 3b)·w", &common::values(&m1), &mm(&sv), 1e-6);
    let av: Vec<f32> = (0..12).map(|i| i as f32).collect();
    assert_close("a·w", &common::values(&m2), &mm(&av), 1e-6);
}

#[test]
fn a_large_product_takes_longer_than_a_tiny_add() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _t = turn();
    let x = paddle::ones_on([256, 256], DType::Float32, gpu).unwrap();
    let t = paddle::ones_on([4], DType::Float32, gpu).unwrap();
    paddle::sync().unwrap();
    // Each round is profiled on its own and the fastest of each kernel compared: a software
    // adapter's worker thread descheduled in the middle of a kernel (a CI run once timed the
    // four-element add at 4.5 ms) inflates one round, not all five.
    let (mut product, mut add) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..5 {
        let p = Profiler::start(gpu).unwrap();
        let _y = paddle::matmul(&x, &x, false, false).unwrap();
        let _u = &t + &t;
        let summary = p.stop().unwrap();
        eprintln!("{summary}");
        // A hardware GPU splits the product's reduction (a `main` and a `finish` dispatch).
        let round: std::time::Duration = summary.shader("matmul.wgsl").iter().map(|k| k.device_time).sum();
        let sum = summary.kernels.iter().find(|k| k.shader != "matmul.wgsl").expect("the add's kernel");
        product = product.min(round);
        add = add.min(sum.device_time);
    }
    // 33.5 MFLOP against four additions.
    assert!(product > add * 2, "fastest product {product:?}, fastest add {add:?}");
}

#[test]
fn batches_past_the_submission_bound_and_plan_replays_are_counted() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _t = turn();
    // 600 dispatches without a readback: the recorder submits a batch of 512 on the way.
    let one = paddle::ones_on([64], DType::Float32, gpu).unwrap();
    let p = Profiler::start(gpu).unwrap();
    let mut acc = one.clone();
    for _ in 0..600 {
        acc = &acc + &one;
    }
    let summary = p.stop().unwrap();
    assert_eq!(summary.dispatches(), 600, "{summary}");
    check_exact("600 adds", &common::values(&acc), &[601.0; 64]).unwrap();

    // A Program replayed from its plan is profiled dispatch by dispatch too.
    let (main, startup) = (Program::new(), Program::new());
    let (y, fc_w, fc_b) = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 4], DType::Float32).unwrap();
        let fc = dygraph::nn::Linear::new(4, 3).unwrap();
        (fc.forward(&x).unwrap().relu().unwrap(), fc.weight.name().unwrap(), fc.bias.as_ref().unwrap().name().unwrap())
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    exe.run(&startup, &[], &[] as &[&str]).unwrap();
    let x = Tensor::from_vec(vec![0.5f32; 8], [2, 4]).unwrap();
    let first = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
    assert!(exe.last_plan().is_some(), "{:?}", exe.interpreted_because());
    paddle::sync().unwrap();
    let before = paddle::dispatch_count(0).unwrap();
    let p = Profiler::start(gpu).unwrap();
    let again = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
    let summary = p.stop().unwrap();
    eprintln!("{summary}");
    let replayed = paddle::dispatch_count(0).unwrap() - before;
    assert!(replayed > 0);
    assert_eq!(summary.dispatches(), replayed, "{summary}");
    // fc(x) = relu(x·W + b), from the scope's parameters (float64 on the host).
    let w = common::values(&exe.scope().var(&fc_w).unwrap());
    let b = common::values(&exe.scope().var(&fc_b).unwrap());
    let expect: Vec<f64> =
        (0..6).map(|i| ((0..4).map(|k| 0.5 * w[k * 3 + i % 3]).sum::<f64>() + b[i % 3]).max(0.0)).collect();
    assert_close("replayed relu(x·W + b)", &common::values(&again[0]), &expect, 1e-6);
    check_exact("replay against the first run", &common::values(&again[0]), &common::values(&first[0])).unwrap();
}

#[test]
fn cpu_kernels_are_counted_under_their_ops() {
    let _exclusive = crate::exclusive();
    let _t = turn();
    // On the CPU whatever the default place (the suite also runs with the GPU as default).
    let a = Tensor::from_vec_on((0..12).map(|i| i as f32).collect(), [3, 4], Place::Cpu).unwrap();
    let w = Tensor::from_vec_on((0..8).map(|i| i as f32 * 0.5).collect(), [4, 2], Place::Cpu).unwrap();
    let p = Profiler::start(Place::Cpu).unwrap();
    let s = &(&a + &a) + &a;
    let m = paddle::matmul(&s, &w, false, false).unwrap();
    let summary = p.stop().unwrap();
    eprintln!("{summary}");
    assert_eq!(summary.device, "CPU");
    let calls =
        |op: &str| summary.kernels.iter().filter(|k| k.shader == "cpu" && k.entry == op).map(|k| k.calls).sum::<u64>();
    assert_eq!((calls("add"), calls("matmul")), (2, 1), "{summary}");
    assert!(summary.device_time() <= summary.wall, "{summary}");
    // 3a·w by hand: row r of 3a is 3(4r..4r+3); w[k][j] = (2k + j) / 2.
    let expect: Vec<f64> = (0..3)
        .flat_map(|r| (0..2).map(move |j| (0..4).map(|k| 3.0 * (4 * r + k) as f64 * (2 * k + j) as f64 * 0.5).sum()))
        .collect();
    check_exact("3a·w on the CPU", &common::values(&m), &expect).unwrap();
    // Off again: nothing more is counted, and a new CPU profiler starts.
    let _ = &a + &a;
    let p = Profiler::start(Place::Cpu).unwrap();
    assert!(Profiler::start(Place::Cpu).err().expect("one CPU profiler").to_string().contains("already on"));
    assert_eq!(p.stop().unwrap().dispatches(), 0);
}

#[test]
fn misuse_is_a_typed_error() {
    let _exclusive = crate::exclusive();
    let _t = turn();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let p = Profiler::start(gpu).unwrap();
    let e = Profiler::start(gpu).err().expect("one profiler per device");
    assert!(e.to_string().contains("already on"), "{e}");
    drop(p);
    // Dropping a profiler turns timing off: a new one starts, and it counts only its own.
    let p = Profiler::start(gpu).unwrap();
    assert_eq!(p.stop().unwrap().dispatches(), 0);
}
