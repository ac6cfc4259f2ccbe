//! Execution plans: a GPU Executor replays the first run's prepared commands, and every
//! replay agrees with interpreting the program op by op (an executor with plans off) —
//! training with Adam (its step-dependent factors read from a schedule tensor, so the updates
//! replay from the tape), dropout (live random ops), alternating batch
//! sizes (one plan each), a scope value replaced between runs, fetched values kept by the
//! caller, and control flow (interpreted, with the reason given). Adjacent SGD, momentum
//! and Adam updates replay as one dispatch and still follow their float64 formulas.

use crate::common;

use common::{assert_close, values};
use dygraph::nn::{self, Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, DType, Place, Tensor};

fn batch(n: usize, step: usize) -> (Tensor, Tensor) {
    let px: Vec<f32> = (0..n * 784).map(|i| (((i * 7 + step * 13) % 17) as f32 / 8.0) - 1.0).collect();
    let lb: Vec<i64> = (0..n).map(|i| ((i * 3 + step) % 10) as i64).collect();
    (Tensor::from_vec(px, [n, 1, 28, 28]).unwrap(), Tensor::from_vec(lb, [n, 1]).unwrap())
}

/// The MNIST training program with Adam: (main, startup, loss, parameters).
fn mnist_program() -> (Program, Program, Tensor, Vec<Tensor>) {
    let (main, startup) = (Program::new(), Program::new());
    let (loss, params) = st::program_guard(&main, &startup, || {
        let img = st::data("pixel", &[-1, 1, 28, 28], DType::Float32).unwrap();
        let label = st::data("label", &[-1, 1], DType::Int64).unwrap();
        let net = MnistNet::new().unwrap();
        let loss = mnist_loss(&net.forward(&img).unwrap(), &label).unwrap();
        Adam::new(1e-3, net.parameters()).minimize(&loss).unwrap();
        (loss, net.parameters())
    });
    (main, startup, loss, params)
}

/// An executor on `place` with its own scope, the startup program run.
fn executor(place: Place, startup: &Program, plans: bool) -> Executor {
    let exe = Executor::with_scope(place, Scope::new());
    exe.set_plans(plans);
    exe.run(startup, &[], &[] as &[&str]).unwrap();
    exe
}

/// Copies the values of `from`'s variables `names_from` into `to` under `names_to`.
fn copy_vars(from: &Executor, names_from: &[String], to: &Executor, names_to: &[String]) {
    for (a, b) in names_from.iter().zip(names_to) {
        to.scope().set_var(b, from.scope().var(a).unwrap().clone_data().unwrap());
    }
}

fn names(ts: &[Tensor]) -> Vec<String> {
    ts.iter().map(|t| t.name().unwrap()).collect()
}

#[test]
fn adam_training_replays_match_interpretation() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = common::generator_lock();
    let seed = common::run_seed();
    paddle::seed(seed);
    // Two identical programs: run hooks (Adam's step count) belong to a program.
    let (main, startup, loss, params) = mnist_program();
    let (main_i, startup_i, loss_i, params_i) = mnist_program();
    let planned = executor(gpu, &startup, true);
    let interpreted = executor(gpu, &startup_i, false);
    copy_vars(&planned, &names(&params), &interpreted, &names(&params_i));
    let mut kept = Vec::new();
    for step in 0..8 {
        let (x, y) = batch(if step % 2 == 0 { 8 } else { 5 }, step);
        let a = planned.run(&main, &[("pixel", &x), ("label", &y)], &[&loss]).unwrap();
        let info = planned.last_plan();
        let b = interpreted.run(&main_i, &[("pixel", &x), ("label", &y)], &[&loss_i]).unwrap();
        assert!(interpreted.last_plan().is_none());
        let info = info.unwrap_or_else(|| panic!("step {step}: no plan ({:?})", planned.interpreted_because()));
        assert!(info.dispatches > 30, "{info:?}");
        assert_eq!(info.live_ops, 0, "the Adam updates replay from the tape: {info:?}");
        if step == 1 {
            eprintln!("plan of the MNIST Adam step: {info:?}");
        }
        assert_close(&format!("loss at step {step} (seed {seed})"), &values(&a[0]), &values(&b[0]), 1e-6);
        kept.push((values(&a[0]), a[0].clone()));
    }
    // Fetched values are copies: later runs did not overwrite them.
    for (i, (v, t)) in kept.iter().enumerate() {
        assert_eq!(&values(t), v, "fetched loss {i} changed after later runs");
    }
    for (p, q) in names(&params).iter().zip(names(&params_i)) {
        let (a, b) = (planned.scope().var(p).unwrap(), interpreted.scope().var(&q).unwrap());
        assert_close(&format!("{p} after 8 steps (seed {seed})"), &values(&a), &values(&b), 1e-6);
    }
    // A value replaced in the scope between runs is what the next replay reads.
    let (w, w_i) = (params[0].name().unwrap(), params_i[0].name().unwrap());
    let fresh = paddle::full_like(&planned.scope().var(&w).unwrap(), 0.01).unwrap();
    planned.scope().set_var(&w, fresh.clone_data().unwrap());
    interpreted.scope().set_var(&w_i, fresh.clone_data().unwrap());
    let (x, y) = batch(8, 99);
    let a = planned.run(&main, &[("pixel", &x), ("label", &y)], &[&loss]).unwrap();
    assert!(planned.last_plan().is_some());
    let b = interpreted.run(&main_i, &[("pixel", &x), ("label", &y)], &[&loss_i]).unwrap();
    assert_close(&format!("loss after replacing {w} (seed {seed})"), &values(&a[0]), &values(&b[0]), 1e-6);
}

#[test]
fn dropout_draws_fresh_masks_in_replays() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = common::generator_lock();
    let seed = common::run_seed();
    let (main, startup) = (Program::new(), Program::new());
    let out = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 64], DType::Float32).unwrap();
        let fc = nn::Linear::new(64, 32).unwrap();
        let h = nn::Dropout::new(0.5).forward(&fc.forward(&x).unwrap()).unwrap();
        h.relu().unwrap().sum(&[], false).unwrap()
    });
    let planned = executor(gpu, &startup, true);
    let interpreted = executor(gpu, &startup, false);
    copy_vars(&planned, &planned.scope().names(), &interpreted, &planned.scope().names());
    let x = paddle::ones([4, 64], DType::Float32).unwrap();
    let run = |exe: &Executor| -> Vec<f64> {
        paddle::seed(seed);
        (0..4).flat_map(|_| values(&exe.run(&main, &[("x", &x)], &[&out]).unwrap()[0])).collect()
    };
    let (a, b) = (run(&planned), run(&interpreted));
    let info = planned.last_plan().expect("the dropout program follows a plan");
    assert_eq!(info.live_ops, 1, "dropout runs live: {info:?}");
    assert_close(&format!("4 runs with dropout (seed {seed})"), &a, &b, 1e-6);
    assert!(a[0] != a[1] || a[1] != a[2], "every replay draws a new mask: {a:?}");
}

#[test]
fn control_flow_is_interpreted_with_the_reason() {
    let _generator = common::generator_lock();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let (main, startup) = (Program::new(), Program::new());
    let out = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[2], DType::Float32).unwrap();
        let pred = x.sum(&[], false).unwrap().greater_than(&paddle::zeros([1], DType::Float32).unwrap()).unwrap();
        let y: Tensor = st::cond(&pred, || x.scale(2.0, 0.0), || x.scale(-1.0, 0.0)).unwrap();
        y
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    exe.run(&startup, &[], &[] as &[&str]).unwrap();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], [2]).unwrap();
    for _ in 0..2 {
        let y = exe.run(&main, &[("x", &x)], &[&out]).unwrap();
        assert_eq!(values(&y[0]), vec![2.0, 4.0]);
        assert!(exe.last_plan().is_none());
        let why = exe.interpreted_because().expect("a reason");
        assert!(why.contains("control flow"), "{why}");
    }
}

#[test]
fn a_buffer_bound_twice_in_a_dispatch_replays() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    // One capture per device at a time: the other tests' captures would make this run
    // interpreted.
    let _g = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    let out = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 4], DType::Float32).unwrap();
        let h = x.matmul(&x.transpose(&[1, 0]).unwrap()).unwrap();
        // h · h binds one buffer twice; the matmuls around it write the arena.
        let sq = h.mul(&h).unwrap();
        sq.matmul(&h).unwrap().sum(&[], false).unwrap()
    });
    let planned = Executor::with_scope(gpu, Scope::new());
    let plain = Executor::with_scope(gpu, Scope::new());
    plain.set_plans(false);
    for s in 0..3 {
        let x = Tensor::from_vec((0..12).map(|i| (i + s) as f32 / 7.0).collect::<Vec<f32>>(), [3, 4]).unwrap();
        let a = planned.run(&main, &[("x", &x)], &[&out]).unwrap();
        let b = plain.run(&main, &[("x", &x)], &[&out]).unwrap();
        assert_close(&format!("run {s}"), &values(&a[0]), &values(&b[0]), 1e-5);
    }
    assert!(planned.last_plan().is_some(), "{:?}", planned.interpreted_because());
    drop(startup);
}

#[test]
fn a_fetched_feed_is_the_value_fed_in_every_replay() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    let (x, y) = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 3], DType::Float32).unwrap();
        let y = x.exp().unwrap().sum(&[], false).unwrap();
        (x, y)
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    for s in 0..4 {
        let v: Vec<f32> = (0..6).map(|i| (i * (s + 1)) as f32 / 10.0).collect();
        let fed = Tensor::from_vec(v.clone(), [2, 3]).unwrap().to(gpu).unwrap();
        let out = exe.run(&main, &[("x", &fed)], &[&x, &y]).unwrap();
        let want: Vec<f64> = v.iter().map(|&a| a as f64).collect();
        assert_close(&format!("fetched feed, run {s}"), &values(&out[0]), &want, 0.0);
        let sum: f64 = v.iter().map(|&a| (a as f64).exp()).sum();
        assert_close(&format!("y, run {s}"), &values(&out[1]), &[sum], 1e-6);
    }
    assert!(exe.last_plan().is_some(), "{:?}", exe.interpreted_because());
    drop(startup);
}

#[test]
fn replays_bind_each_runs_feed_buffer() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    let y = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 3], DType::Float32).unwrap();
        x.scale(2.0, 1.0).unwrap().sum(&[], false).unwrap()
    });
    let exe = Executor::with_scope(gpu, Scope::new());
    let fed = |s: f32| Tensor::from_vec(vec![s, s + 1.0, s + 2.0], [1, 3]).unwrap().to(gpu).unwrap();
    // Two feeds alive at once (a replay must not reuse the other's bindings), then one
    // overwritten in place (the same buffer, new values).
    let (a, b) = (fed(1.0), fed(10.0));
    for (run, (x, first)) in [(&a, 1.0f32), (&b, 10.0), (&a, 1.0), (&a, 1.0), (&b, 10.0)].into_iter().enumerate() {
        let out = exe.run(&main, &[("x", x)], &[&y]).unwrap();
        let want = (0..3).map(|i| 2.0 * (first + i as f32) as f64 + 1.0).sum::<f64>();
        assert_close(&format!("run {run}"), &values(&out[0]), &[want], 1e-6);
    }
    a.assign_(&fed(-4.0)).unwrap();
    let out = exe.run(&main, &[("x", &a)], &[&y]).unwrap();
    assert_close("after an in-place write", &values(&out[0]), &[2.0 * (-4.0 - 3.0 - 2.0) + 3.0], 1e-6);
    assert!(exe.last_plan().is_some(), "{:?}", exe.interpreted_because());
    drop(startup);
}

/// `rows` rows of 1,024 float32 values in [-1, 1], different for each `salt`.
fn rows_of(rows: usize, salt: usize) -> Vec<f32> {
    (0..rows * 1024).map(|i| (((i * 37 + salt * 101) % 199) as f32 / 99.0) - 1.0).collect()
}

#[test]
fn elementwise_ops_replay_in_place_and_match_float64_formulas() {
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    let (kept, out) = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 1024], DType::Float32).unwrap();
        let bias = st::data("bias", &[1024], DType::Float32).unwrap();
        // h1 reads the feed (never written over); tanh writes over h1.
        let h1 = x.scale(2.0, 0.5).unwrap();
        let h2 = h1.tanh().unwrap();
        // Made while h1's place holds h2 and read at the end: that place must stay taken
        // until its chain's last value dies, or `late` would be written over.
        let late = x.scale(0.5, 0.2).unwrap();
        // A broadcast add (binary.wgsl's `rows` entry) over h2, binding the fed bias, whose
        // bind group each run rebuilds. h3, bound twice below, stays out of the arena: the
        // scale making it is not written in place, nor the product over it.
        let h3 = h2.add(&bias).unwrap().scale(1.0, 0.25).unwrap();
        let h4 = h3.mul(&h3).unwrap();
        // h4 is read again by h6: h5 may not be written over it; h6 is written over h5.
        let h5 = h4.scale(-1.0, 0.5).unwrap();
        let h6 = h5.mul(&h4).unwrap();
        // The row sums, scaled in place (unary.wgsl: rows of 3 or 5, no vec4 form), die where
        // they broadcast into a full-size output: that output may not take their place.
        let s = h6.sum(&[1], true).unwrap();
        let h7 = s.scale(1e-3, 0.0).unwrap().add(&h6).unwrap();
        // `kept` is fetched: what reads it last may not write over it. `where` writes over h6.
        let kept = h7.sigmoid().unwrap();
        let m = kept.greater_than(&late).unwrap();
        let out = dygraph::where_(&m, &kept, &h6).unwrap().scale(3.0, -1.0).unwrap();
        (kept, out)
    });
    let formula = |x: &[f32], bias: &[f32]| -> (Vec<f64>, Vec<f64>) {
        let mut kept = Vec::new();
        let mut out = Vec::new();
        for row in x.chunks(1024) {
            let h6: Vec<f64> = row
                .iter()
                .zip(bias)
                .map(|(&v, &b)| {
                    let h3 = (2.0 * v as f64 + 0.5).tanh() + b as f64 + 0.25;
                    let h4 = h3 * h3;
                    (0.5 - h4) * h4
                })
                .collect();
            let s: f64 = h6.iter().sum();
            for (&h6, &v) in h6.iter().zip(row) {
                let k = 1.0 / (1.0 + (-(h6 + 1e-3 * s)).exp());
                let late = 0.5 * v as f64 + 0.2;
                kept.push(k);
                out.push(3.0 * if k > late { k } else { h6 } - 1.0);
            }
        }
        (kept, out)
    };
    for fused in [false, true] {
        let exe = Executor::with_scope(gpu, Scope::new());
        exe.set_fusion(fused);
        for (run, rows) in [3usize, 3, 3, 5, 5].into_iter().enumerate() {
            let (xv, bv) = (rows_of(rows, run), rows_of(1, run + 7));
            let x = Tensor::from_vec(xv.clone(), [rows, 1024]).unwrap().to(gpu).unwrap();
            let bias = Tensor::from_vec(bv.clone(), [1024]).unwrap().to(gpu).unwrap();
            let got = exe.run(&main, &[("x", &x), ("bias", &bias)], &[&kept, &out]).unwrap();
            let (want_kept, want_out) = formula(&xv, &bv);
            let what = format!("fused {fused}, run {run} ({rows} rows)");
            assert_close(&format!("{what}: kept"), &values(&got[0]), &want_kept, 1e-5);
            assert_close(&format!("{what}: out"), &values(&got[1]), &want_out, 1e-4);
        }
        let info = exe.last_plan().unwrap_or_else(|| panic!("{:?}", exe.interpreted_because()));
        eprintln!("fused {fused}: {info:?}");
        if fused {
            assert!(info.in_place >= 1, "{info:?}");
        } else {
            // tanh, the broadcast add, h6's product, the sums' scale and `where`.
            assert_eq!(info.in_place, 5, "{info:?}");
        }
    }
    drop(startup);
}
