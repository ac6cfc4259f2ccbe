//! The Executor frees each intermediate value after its last reader: a chain of twenty
//! 1 MiB ops peaks at a few live buffers, not twenty, interpreted; and a plan's buffers
//! (assigned by liveness when it is captured, elementwise ops writing over an input that
//! dies there) hold two, not twenty. A first run that fails
//! while its plan is captured gives back all it allocated. A replayed run is one submission,
//! however many dispatches it holds, and the plan cache is bounded. The tests hold one lock,
//! and nothing else shares this binary, because the GPU memory and submission counters are
//! per device.

use crate::common;

use std::sync::Mutex;

use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Tensor};

/// Held by each test: the memory counters are the device's, not the test's.
static DEVICE: Mutex<()> = Mutex::new(());

/// Every element of `got` is `x[i] + 190` (the sum of the twenty offsets), exactly: the
/// inputs are multiples of 0.25 below 250.
fn assert_chain(x: &[f32], got: &Tensor) {
    let got = got.to_vec::<f32>().unwrap();
    assert_eq!(got.len(), x.len());
    for (i, (g, x)) in got.iter().zip(x).enumerate() {
        assert_eq!(*g, x + 190.0, "element {i}");
    }
}

#[test]
fn intermediates_are_freed_after_their_last_use() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _device = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 256 * 1024; // 1 MiB of float32
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let mut h = st::data("x", &[N as i64], DType::Float32).unwrap();
        for k in 0..20 {
            h = h.scale(1.0, k as f64).unwrap();
        }
        h
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    exe.set_plans(false);
    exe.set_fusion(false);
    let xs: Vec<f32> = (0..N).map(|i| (i % 997) as f32 * 0.25).collect();
    let x = Tensor::from_vec_on(xs.clone(), [N], gpu).unwrap();
    paddle::sync().unwrap();
    dygraph::reset_peak_memory(0).unwrap();
    let base = dygraph::memory_stats(0).unwrap().allocated;
    let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
    paddle::sync().unwrap();
    let peak = dygraph::memory_stats(0).unwrap().peak_allocated - base;
    let mib = 1u64 << 20;
    eprintln!("20 chained 1 MiB ops: peak {:.2} MiB above the input", peak as f64 / mib as f64);
    assert!(peak <= 3 * mib, "peak {peak} bytes: intermediates were kept alive");
    assert_chain(&xs, &out[0]);

    exe.set_plans(true);
    for _ in 0..3 {
        let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
        assert_chain(&xs, &out[0]);
    }
    let info = exe.last_plan().expect("the chain follows a plan");
    eprintln!("planned: {info:?}");
    assert_eq!(info.dispatches, 20);
    // The fetched result, and one buffer the other nineteen outputs share: each op from the
    // second to the nineteenth writes in place over its input (the first reads the feed).
    assert_eq!(info.in_place, 18, "{info:?}");
    assert!(info.buffer_bytes <= 2 * mib + mib / 4, "the plan holds {} bytes", info.buffer_bytes);

    // Fused, the chain is one kernel: the plan holds the pinned feed and the result.
    exe.set_fusion(true);
    for _ in 0..2 {
        let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
        assert_chain(&xs, &out[0]);
    }
    let info = exe.last_plan().expect("the fused chain follows a plan");
    eprintln!("planned and fused: {info:?}");
    assert_eq!((info.dispatches, info.ops), (1, 1));
    assert!(info.buffer_bytes <= 2 * mib + mib / 4, "the plan holds {} bytes", info.buffer_bytes);
}

#[test]
fn a_first_run_that_fails_during_capture_gives_its_memory_back() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _device = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let a = st::data("a", &[-1, 1024], DType::Float32).unwrap();
        let b = st::data("b", &[-1, 1024], DType::Float32).unwrap();
        a.scale(2.0, 1.0).unwrap().exp().unwrap().add(&b).unwrap()
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    let feed = |rows: usize| Tensor::from_vec_on(vec![0.5f32; rows * 1024], [rows, 1024], gpu).unwrap();
    let (a, b2, b3) = (feed(2), feed(2), feed(3));
    paddle::sync().unwrap();
    let base = dygraph::memory_stats(0).unwrap().allocated;
    // Two rows against three: the add fails after the pinned feeds and the scale's output
    // were allocated for the plan.
    for _ in 0..3 {
        let err = exe.run(&main, &[("a", &a), ("b", &b3)], &[&y]).unwrap_err().to_string();
        assert!(err.contains("add") || err.contains("fused"), "{err}");
        assert!(exe.last_plan().is_none());
        paddle::sync().unwrap();
        let held = dygraph::memory_stats(0).unwrap().allocated;
        assert_eq!(held, base, "a failed run left {} bytes allocated: {err}", held as i64 - base as i64);
    }
    // The device is not left capturing: matching feeds make a plan.
    for _ in 0..2 {
        let out = exe.run(&main, &[("a", &a), ("b", &b2)], &[&y]).unwrap();
        let want = 2f32.exp() + 0.5;
        for (i, v) in out[0].to_vec::<f32>().unwrap().iter().enumerate() {
            assert!((v - want).abs() <= 1e-5 + 1e-5 * want, "element {i}: {v} against {want}");
        }
    }
    assert!(exe.last_plan().is_some(), "matching feeds follow a plan");
    drop(exe);
    paddle::sync().unwrap();
    assert_eq!(dygraph::memory_stats(0).unwrap().allocated, base, "a dropped plan gives its memory back");
}

/// `sum(relu(x·xᵀ) · 0.5)` in float64 from the host values of `x` (`n` rows of 64).
fn reference(x: &[f32], n: usize) -> f64 {
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..n {
            let d: f64 = (0..64).map(|k| x[i * 64 + k] as f64 * x[j * 64 + k] as f64).sum();
            s += d.max(0.0) * 0.5;
        }
    }
    s
}

/// A replayed run, its fetched value read back included, is one submission to the device;
/// each batch size has a plan of its own, and the cache holds at most sixteen, starting
/// over at the seventeenth, with every run's result right.
#[test]
fn a_replayed_run_is_one_submission_and_the_plan_cache_is_bounded() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _device = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let dygraph::Place::Gpu(index) = gpu else { panic!("not a GPU place: {gpu}") };
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 64], DType::Float32).unwrap();
        paddle::matmul(&x, &x, false, true).unwrap().relu().unwrap().scale(0.5, 0.0).unwrap().sum(&[], false).unwrap()
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    let input = |n: usize| -> Vec<f32> { (0..n * 64).map(|i| ((i * 37 % 23) as f32 - 11.0) / 8.0).collect() };
    let check = |n: usize, got: &Tensor| {
        let (got, want) = (got.to_vec::<f32>().unwrap()[0] as f64, reference(&input(n), n));
        assert!((got - want).abs() <= 1e-3 + 1e-5 * want.abs(), "batch {n}: {got} against {want}");
    };
    for n in 1..=17usize {
        let x = Tensor::from_vec_on(input(n), [n, 64], gpu).unwrap();
        paddle::sync().unwrap();
        for run in 0..3 {
            let before = paddle::submit_count(index).unwrap();
            let out = exe.run(&main, &[("x", &x)], &[&y]).unwrap();
            check(n, &out[0]);
            let submits = paddle::submit_count(index).unwrap() - before;
            let plan = exe.last_plan().unwrap_or_else(|| panic!("batch {n}: {:?}", exe.interpreted_because()));
            // The first run captures (and may submit more); the replays submit once.
            if run > 0 {
                assert_eq!(submits, 1, "batch {n}, run {run}: {submits} submissions for {plan:?}");
            }
        }
        let want = if n <= 16 { n } else { n - 16 };
        assert_eq!(exe.cached_plans(), want, "after batch size {n}");
    }
}

/// A program of more dispatches than a batch of eager work holds (512) still replays as
/// one submission: 600 products by `diag(1, −1, 1, −1)`, an even number, give `x` back.
#[test]
fn a_long_program_replays_as_one_submission() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _device = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let dygraph::Place::Gpu(index) = gpu else { panic!("not a GPU place: {gpu}") };
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let mut h = st::data("x", &[2, 4], DType::Float32).unwrap();
        let w = st::data("w", &[4, 4], DType::Float32).unwrap();
        for _ in 0..600 {
            h = h.matmul(&w).unwrap();
        }
        h
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    let xs = [0.5f32, -1.25, 3.0, 7.5, -2.0, 0.0, 1.0, -0.75];
    let x = Tensor::from_vec_on(xs.to_vec(), [2, 4], gpu).unwrap();
    let mut diag = vec![0f32; 16];
    for i in 0..4 {
        diag[i * 5] = if i % 2 == 0 { 1.0 } else { -1.0 };
    }
    let w = Tensor::from_vec_on(diag, [4, 4], gpu).unwrap();
    for run in 0..3 {
        paddle::sync().unwrap();
        let before = paddle::submit_count(index).unwrap();
        let out = exe.run(&main, &[("x", &x), ("w", &w)], &[&y]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), xs, "run {run}");
        let submits = paddle::submit_count(index).unwrap() - before;
        let plan = exe.last_plan().unwrap_or_else(|| panic!("run {run}: {:?}", exe.interpreted_because()));
        assert!(plan.dispatches >= 600, "{plan:?}");
        if run > 0 {
            assert_eq!(submits, 1, "run {run}: {submits} submissions for {plan:?}");
        }
    }
}
