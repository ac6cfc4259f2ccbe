//! Execution plans: a GPU Executor replays the first run's prepared commands, and every
//! replay agrees with interpreting the program op by op (an executor with plans off) —
//! training with Adam (its step-dependent factors read from a schedule tensor, so the updates
//! replay from the tape), dropout (live random ops), alternating batch
//! sizes (one plan each), a scope value replaced between runs, fetched values kept by the
//! caller, and control flow (interpreted, with the reason given). Adjacent SGD, momentum
//! and Adam updates replay as one dispatch and still follow their float64 formulas.

mod common;

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

/// The element values of feed `k` at `step`.
fn grad_values(k: usize, n: usize, step: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7 + k * 5 + step * 3) % 23) as f32 - 11.0) / 4.0).collect()
}

/// The optimizers whose adjacent updates a plan merges.
#[derive(Clone, Copy, Debug)]
enum Rule {
    Sgd,
    Nesterov,
    Adam,
}

/// `rule`'s update of one element at step `t` (from 1) in float64, Paddle's form: `s` holds
/// the element's states.
fn update_f64(rule: Rule, t: usize, lr: f64, p: f64, g: f64, s: &mut [f64; 2]) -> f64 {
    match rule {
        Rule::Sgd => p - lr * g,
        Rule::Nesterov => {
            s[0] = 0.9 * s[0] + g;
            p - lr * (g + 0.9 * s[0])
        }
        Rule::Adam => {
            let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
            s[0] = b1 * s[0] + (1.0 - b1) * g;
            s[1] = b2 * s[1] + (1.0 - b2) * g * g;
            let c2 = (1.0 - b2.powi(t as i32)).sqrt();
            p - lr * c2 / (1.0 - b1.powi(t as i32)) * s[0] / (s[1].sqrt() + eps * c2)
        }
    }
}

/// Parameters of loss Σ sum(p_k · x_k), whose gradients are the feeds, trained for three
/// steps by SGD, Nesterov momentum and Adam: a plan merging the updates, one with merging
/// (and fusion) off, and the CPU all match the rule in float64. `PlanInfo::merged` and the
/// profiler's calls by variant (key k updates k + 1 parameters) show how they merged: each
/// run of adjacent updates of the same settings in dispatches of as many parameters as the
/// device's storage buffers allow (2, 3 or 4 each, plus the schedule and the parameter
/// words), at most 16. `slow` learns at half the rate: its update has other settings and
/// runs alone.
fn merged_updates_follow_their_formulas(shapes: &[&[usize]], slow: Option<usize>) {
    use dygraph::nn::{Initializer, ParamAttr};
    use dygraph::optimizer::{Momentum, SGD};
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = common::generator_lock();
    let buffers = dygraph::gpu_info(0).unwrap().max_storage_buffers_per_stage as usize;
    let runs: Vec<usize> = match slow {
        Some(s) => [s, 1, shapes.len() - s - 1].into_iter().filter(|&n| n > 0).collect(),
        None => vec![shapes.len()],
    };
    // (variant, calls) of a replay and the updates merged away, for `own` bindings each.
    let grouping = |own: usize| {
        let per = ((buffers - 2) / own).clamp(1, 16);
        let mut calls = std::collections::BTreeMap::new();
        let mut merged = 0;
        for &n in &runs {
            for chunk in (0..n).collect::<Vec<_>>().chunks(per) {
                *calls.entry(chunk.len() as u32 - 1).or_insert(0u64) += 1;
                merged += chunk.len() - 1;
            }
        }
        (calls.into_iter().collect::<Vec<_>>(), merged)
    };
    println!("{buffers} storage buffers per stage; runs of adjacent updates {runs:?}");
    let lr_mult = |k: usize| if Some(k) == slow { 0.5 } else { 1.0 };
    let init = |k: usize| 0.1 * (k as f64 + 1.0);
    // One program per executor: an optimizer's step count belongs to its program.
    let program = |rule: Rule| {
        let (main, startup) = (Program::new(), Program::new());
        let loss = st::program_guard(&main, &startup, || {
            let mut loss: Option<Tensor> = None;
            let mut params = Vec::new();
            for (k, shape) in shapes.iter().enumerate() {
                let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
                let x = st::data(&format!("x{k}"), &dims, DType::Float32).unwrap();
                let attr = ParamAttr { name: Some(format!("p{k}")), learning_rate: lr_mult(k), ..ParamAttr::default() };
                let p = nn::create_parameter(shape, DType::Float32, &attr, &Initializer::Constant(init(k))).unwrap();
                // d loss / d p_k = x_k.
                let term = p.mul(&x).unwrap().sum(&[], false).unwrap();
                loss = Some(match loss {
                    None => term,
                    Some(l) => l.add(&term).unwrap(),
                });
                params.push(p);
            }
            let loss = loss.unwrap();
            match rule {
                Rule::Sgd => SGD::new(0.01, params).minimize(&loss).unwrap(),
                Rule::Nesterov => Momentum::new(0.01, params).use_nesterov(true).minimize(&loss).unwrap(),
                Rule::Adam => Adam::new(0.01, params).minimize(&loss).unwrap(),
            };
            loss
        });
        (main, startup, loss)
    };
    let feeds = |step: usize, place: Place| -> Vec<(String, Tensor)> {
        shapes
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let n = s.iter().product();
                (format!("x{k}"), Tensor::from_vec(grad_values(k, n, step), s.to_vec()).unwrap().to(place).unwrap())
            })
            .collect()
    };
    let expected = |rule: Rule, k: usize, steps: usize| -> Vec<f64> {
        let n: usize = shapes[k].iter().product();
        let mut p = vec![init(k) as f32 as f64; n];
        let mut s = vec![[0.0; 2]; n];
        for t in 1..=steps {
            let g = grad_values(k, n, t - 1);
            for i in 0..n {
                p[i] = update_f64(rule, t, 0.01 * lr_mult(k), p[i], g[i] as f64, &mut s[i]);
            }
        }
        p
    };
    let own = |rule: Rule| match rule {
        Rule::Sgd => 2,
        Rule::Nesterov => 3,
        Rule::Adam => 4,
    };
    let file = |rule: Rule| match rule {
        Rule::Sgd => "optim/sgd.wgsl",
        Rule::Nesterov => "optim/momentum.wgsl",
        Rule::Adam => "optim/adam.wgsl",
    };
    for rule in [Rule::Sgd, Rule::Nesterov, Rule::Adam] {
        for (place, merging) in [(gpu, true), (gpu, false), (Place::Cpu, true)] {
            let (main, startup, loss) = program(rule);
            let exe = Executor::with_scope(place, Scope::new());
            exe.set_fusion(merging);
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let step = |step: usize| {
                let f = feeds(step, place);
                let refs: Vec<(&str, &Tensor)> = f.iter().map(|(n, t)| (n.as_str(), t)).collect();
                exe.run(&main, &refs, &[&loss]).unwrap();
            };
            for s in 0..3 {
                step(s);
            }
            if place.is_gpu() {
                let plan = exe.last_plan().unwrap_or_else(|| panic!("no plan ({:?})", exe.interpreted_because()));
                assert_eq!(plan.merged, if merging { grouping(own(rule)).1 } else { 0 }, "{rule:?}: {plan:?}");
            }
            for (k, shape) in shapes.iter().enumerate() {
                let got = values(&exe.scope().var(&format!("p{k}")).unwrap());
                let what = format!("{rule:?}: p{k} {shape:?} after 3 steps on {place:?}, merging {merging}");
                if let Err(m) = common::check_allclose(&what, &got, &expected(rule, k, 3), 1e-6, 1e-5) {
                    panic!("{m}");
                }
            }
            if place.is_gpu() {
                // One more replay under the kernel profiler: the update's dispatches by
                // variant (key k updates k + 1 parameters).
                let profiler =
                    dygraph::profiler::Profiler::start(place).expect("the kernel profiler on the test adapter");
                step(3);
                let summary = profiler.stop().unwrap();
                let mut calls: Vec<(u32, u64)> =
                    summary.shader(file(rule)).iter().map(|k| (k.variant, k.calls)).collect();
                calls.sort();
                let want = if merging { grouping(own(rule)).0 } else { vec![(0, shapes.len() as u64)] };
                assert_eq!(calls, want, "{rule:?}: update dispatches (variant, calls) of a replay, merging {merging}");
            }
        }
    }
}

#[test]
fn adjacent_updates_merge_into_one_dispatch_and_follow_their_formulas() {
    // Sizes around the workgroup (256): a scalar, several partial workgroups, a 2-D weight.
    // With 14 storage buffers or more the six updates run as [0, 1, 2], [3], [4, 5].
    let shapes: [&[usize]; 6] = [&[1], &[300], &[7, 37], &[257], &[64], &[5]];
    merged_updates_follow_their_formulas(&shapes, Some(3));
}

#[test]
fn many_updates_merge_as_far_as_the_bindings_allow() {
    // Eighteen adjacent updates: up to 16 per dispatch (Adam's 16 bind 66 buffers) where the
    // device allows, fewer where it does not.
    let sizes: Vec<[usize; 1]> = (0..18).map(|k| [1 + (k * 37) % 300]).collect();
    let shapes: Vec<&[usize]> = sizes.iter().map(|s| s.as_slice()).collect();
    merged_updates_follow_their_formulas(&shapes, None);
}
