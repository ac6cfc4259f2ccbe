//! Merged optimizer updates: several parameters' SGD, momentum or Adam updates in one
//! kernel dispatch (`merged_sgd` / `merged_momentum` / `merged_adam`), made by the eager
//! optimizers and by a GPU program's fusion pass, against float64 formulas on both places.
//! The kernel profiler counts every dispatch on the device, so these tests run one at a
//! time (`serial`) in a binary of their own.

use crate::common;

use std::sync::{Mutex, MutexGuard};

use common::values;
use dygraph::optimizer::{self, Adam, Optimizer};
use dygraph::profiler::{KernelSummary, Profiler};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{DType, Place, Tensor, nn};

/// Held by each test: no other test's dispatches reach its profiler.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The gradient values of parameter `k` (`n` elements) at `step`.
fn grad_values(k: usize, n: usize, step: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7 + k * 5 + step * 3) % 23) as f32 - 11.0) / 4.0).collect()
}

/// The rules whose adjacent updates merge.
#[derive(Clone, Copy, Debug)]
enum Rule {
    Sgd,
    Nesterov,
    Adam,
}

impl Rule {
    const ALL: [Rule; 3] = [Rule::Sgd, Rule::Nesterov, Rule::Adam];

    /// Storage buffers each parameter binds: itself, its gradient and its states.
    fn own(self) -> usize {
        match self {
            Rule::Sgd => 2,
            Rule::Nesterov => 3,
            Rule::Adam => 4,
        }
    }

    fn kernel_file(self) -> &'static str {
        match self {
            Rule::Sgd => "update/sgd.wgsl",
            Rule::Nesterov => "update/momentum.wgsl",
            Rule::Adam => "update/adam.wgsl",
        }
    }

    /// The optimizer with learning rate 0.01 over `params`.
    fn optimizer(self, params: Vec<Tensor>) -> Box<dyn Optimizer> {
        match self {
            Rule::Sgd => Box::new(optimizer::SGD::new(0.01, params)),
            Rule::Nesterov => Box::new(optimizer::Momentum::new(0.01, params).use_nesterov(true)),
            Rule::Adam => Box::new(Adam::new(0.01, params)),
        }
    }
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

/// Parameter `k` (`n` elements, all `init`) after `steps` steps of `rule` at rate `lr` with
/// gradients `grad_values(k, n, step)`, in float64.
fn expected(rule: Rule, k: usize, n: usize, init: f32, lr: f64, steps: usize) -> Vec<f64> {
    let mut p = vec![init as f64; n];
    let mut s = vec![[0.0; 2]; n];
    for t in 1..=steps {
        let g = grad_values(k, n, t - 1);
        for i in 0..n {
            p[i] = update_f64(rule, t, lr, p[i], g[i] as f64, &mut s[i]);
        }
    }
    p
}

/// The (variant, calls) of the update dispatches of runs of `runs` adjacent parameters
/// binding `own` buffers each, with `buffers` storage buffers per stage: as many parameters
/// per dispatch as fit beside the schedule and the parameter words, at most 16.
fn grouping(buffers: usize, own: usize, runs: &[usize]) -> Vec<(u32, u64)> {
    let per = ((buffers - 2) / own).clamp(1, 16);
    let mut calls = std::collections::BTreeMap::new();
    for &n in runs {
        for chunk in (0..n).collect::<Vec<_>>().chunks(per) {
            *calls.entry(chunk.len() as u32 - 1).or_insert(0u64) += 1;
        }
    }
    calls.into_iter().collect()
}

/// `rule`'s update dispatches in `summary` as (variant, calls), sorted.
fn calls(summary: &KernelSummary, rule: Rule) -> Vec<(u32, u64)> {
    let mut calls: Vec<(u32, u64)> = summary.shader(rule.kernel_file()).iter().map(|k| (k.variant, k.calls)).collect();
    calls.sort();
    calls
}

/// Parameters of loss Σ sum(p_k · x_k), whose gradients are the feeds, trained for three
/// steps by SGD, Nesterov momentum and Adam: a plan merging the updates, the interpreted
/// Executor merging them, a plan with merging (and fusion) off, and the CPU all match the
/// rule in float64. The merged ops the fusion pass made, `PlanInfo::merged` and the
/// profiler's calls by variant (key k updates k + 1 parameters) show how they merged: each
/// run of adjacent updates of the same settings in dispatches of as many parameters as the
/// device's storage buffers allow (2, 3 or 4 each, plus the schedule and the parameter
/// words), at most 16. `slow` learns at half the rate: its update has other settings and
/// runs alone.
fn merged_updates_follow_their_formulas(shapes: &[&[usize]], slow: Option<usize>) {
    use dygraph::nn::{Initializer, ParamAttr};
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = serial();
    let buffers = dygraph::gpu_info(0).unwrap().max_storage_buffers_per_stage as usize;
    let runs: Vec<usize> = match slow {
        Some(s) => [s, 1, shapes.len() - s - 1].into_iter().filter(|&n| n > 0).collect(),
        None => vec![shapes.len()],
    };
    let grouping = |own: usize| grouping(buffers, own, &runs);
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
            rule.optimizer(params).minimize(&loss).unwrap();
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
    for rule in Rule::ALL {
        // (place, fusion and merging on, plans on)
        for (place, merging, plans) in
            [(gpu, true, true), (gpu, true, false), (gpu, false, true), (Place::Cpu, true, true)]
        {
            let (main, startup, loss) = program(rule);
            let exe = Executor::with_scope(place, Scope::new());
            exe.set_fusion(merging);
            exe.set_plans(plans);
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let step = |step: usize| {
                let f = feeds(step, place);
                let refs: Vec<(&str, &Tensor)> = f.iter().map(|(n, t)| (n.as_str(), t)).collect();
                exe.run(&main, &refs, &[&loss]).unwrap();
            };
            for s in 0..3 {
                step(s);
            }
            let merged_ops = exe.ops_to_run(&main).unwrap().iter().filter(|o| o.op_type.starts_with("merged_")).count();
            // One merged op per run of two updates or more; it splits into dispatches itself.
            let merges = merging && place.is_gpu();
            let want_ops = if merges { runs.iter().filter(|&&n| n > 1).count() } else { 0 };
            assert_eq!(merged_ops, want_ops, "{rule:?}: merged ops to run on {place:?}, merging {merging}");
            if place.is_gpu() && plans {
                let plan = exe.last_plan().unwrap_or_else(|| panic!("no plan ({:?})", exe.interpreted_because()));
                let merged_away: usize = runs.iter().map(|n| n - 1).sum();
                assert_eq!(plan.merged, if merging { merged_away } else { 0 }, "{rule:?}: {plan:?}");
            }
            for (k, shape) in shapes.iter().enumerate() {
                let got = values(&exe.scope().var(&format!("p{k}")).unwrap());
                let what =
                    format!("{rule:?}: p{k} {shape:?} after 3 steps on {place:?}, merging {merging}, plans {plans}");
                if let Err(m) = common::check_allclose(
                    &what,
                    &got,
                    &expected(rule, k, shape.iter().product(), init(k) as f32, 0.01 * lr_mult(k), 3),
                    1e-6,
                    1e-5,
                ) {
                    panic!("{m}");
                }
            }
            if place.is_gpu() {
                // One more run (a replay, or interpreted) under the kernel profiler: the
                // update's dispatches by variant (key k updates k + 1 parameters).
                let profiler = Profiler::start(place).expect("the kernel profiler on the test adapter");
                step(3);
                let summary = profiler.stop().unwrap();
                let calls = calls(&summary, rule);
                let want = if merging { grouping(rule.own()) } else { vec![(0, shapes.len() as u64)] };
                assert_eq!(
                    calls, want,
                    "{rule:?}: update dispatches (variant, calls) of a run, merging {merging}, plans {plans}"
                );
            }
        }
    }
}

#[test]
fn adjacent_updates_merge_into_one_dispatch_and_follow_their_formulas() {
    let _exclusive = crate::exclusive();
    // Sizes around the workgroup (256): a scalar, several partial workgroups, a 2-D weight.
    // With 14 storage buffers or more the six updates run as [0, 1, 2], [3], [4, 5].
    let shapes: [&[usize]; 6] = [&[1], &[300], &[7, 37], &[257], &[64], &[5]];
    merged_updates_follow_their_formulas(&shapes, Some(3));
}

#[test]
fn many_updates_merge_as_far_as_the_bindings_allow() {
    let _exclusive = crate::exclusive();
    // Eighteen adjacent updates: up to 16 per dispatch (Adam's 16 bind 66 buffers) where the
    // device allows, fewer where it does not.
    let sizes: Vec<[usize; 1]> = (0..18).map(|k| [1 + (k * 37) % 300]).collect();
    let shapes: Vec<&[usize]> = sizes.iter().map(|s| s.as_slice()).collect();
    merged_updates_follow_their_formulas(&shapes, None);
}

/// Eager steps on a GPU update adjacent parameters of one learning rate in merged
/// dispatches, as many per dispatch as the device's storage buffers allow; every parameter
/// still follows its rule's float64 formula, and a parameter at another learning rate
/// splits the run.
#[test]
fn eager_gpu_steps_merge_adjacent_updates() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = serial();
    let buffers = dygraph::gpu_info(0).unwrap().max_storage_buffers_per_stage as usize;
    let sizes: Vec<usize> = (0..18).map(|k| 1 + (k * 37) % 300).collect();
    // Parameter 11 learns at half the rate: the runs are [0..11], [11], [12..18].
    let slow = 11;
    let runs = [11usize, 1, 6];
    let init = |k: usize| 0.1 * (k as f32 + 1.0);
    for rule in Rule::ALL {
        let params: Vec<Tensor> = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let p = Tensor::from_vec_on(vec![init(k); n], [n], gpu).unwrap();
                p.set_stop_gradient(false);
                p
            })
            .collect();
        params[slow].set_learning_rate_multiplier(0.5);
        let mut opt = rule.optimizer(params.clone());
        let step = |opt: &mut Box<dyn Optimizer>, s: usize| {
            for (k, p) in params.iter().enumerate() {
                // d/dp Σ p·g = g.
                let g = Tensor::from_vec_on(grad_values(k, sizes[k], s), [sizes[k]], gpu).unwrap();
                p.mul(&g).unwrap().sum(&[], false).unwrap().backward().unwrap();
            }
            opt.step().unwrap();
            opt.clear_grad();
        };
        for s in 0..3 {
            step(&mut opt, s);
        }
        for (k, p) in params.iter().enumerate() {
            let lr = 0.01 * if k == slow { 0.5 } else { 1.0 };
            let want = expected(rule, k, sizes[k], init(k), lr, 3);
            let what = format!("{rule:?}: parameter {k} ({} elements) after 3 eager steps", sizes[k]);
            if let Err(m) = common::check_allclose(&what, &values(p), &want, 1e-6, 1e-5) {
                panic!("{m}");
            }
        }
        let profiler = Profiler::start(gpu).expect("the kernel profiler on the test adapter");
        step(&mut opt, 3);
        let summary = profiler.stop().unwrap();
        assert_eq!(
            calls(&summary, rule),
            grouping(buffers, rule.own(), &runs),
            "{rule:?}: one step's update dispatches (variant, calls), {buffers} storage buffers per stage"
        );
    }
}

/// `merged_sgd` called directly (as a program's fusion pass emits it): a parameter given
/// twice is a typed error on every place, and eighteen parameters, more than one dispatch
/// takes on any device (16 at most), all update, in the dispatches the device's capacity
/// implies.
#[test]
fn a_merged_update_rejects_a_repeated_parameter_and_splits_at_the_device_limit() {
    let _exclusive = crate::exclusive();
    use dygraph::ops::{AttrMap, run_op};
    let _g = serial();
    let attrs = AttrMap::new().with("lr", 0.1).with("weight_decay", 0.0);
    for place in common::places() {
        let t = |v: &[f32]| Tensor::from_vec_on(v.to_vec(), [v.len()], place).unwrap();
        let (p, q) = (t(&[1.0, 2.0, 3.0]), t(&[0.5]));
        let (g1, gq, g2) = (t(&[1.0, -1.0, 0.5]), t(&[2.0]), t(&[0.5, 0.5, -4.0]));
        let err = run_op("merged_sgd", &[&p, &g1, &q, &gq, &p, &g2], &attrs).unwrap_err();
        assert!(err.to_string().contains("merged_sgd") && err.to_string().contains("shares memory"), "{err}");
        common::assert_close(&format!("p untouched on {place}"), &values(&p), &[1.0, 2.0, 3.0], 0.0);
        let sizes: Vec<usize> = (0..18).map(|k| 1 + (k * 53) % 300).collect();
        let params: Vec<Tensor> = sizes.iter().map(|&n| t(&vec![1.0; n])).collect();
        let grads: Vec<Tensor> = sizes.iter().enumerate().map(|(k, &n)| t(&grad_values(k, n, 0))).collect();
        let inputs: Vec<&Tensor> = params.iter().zip(&grads).flat_map(|(p, g)| [p, g]).collect();
        let profiler = place.is_gpu().then(|| Profiler::start(place).unwrap());
        run_op("merged_sgd", &inputs, &attrs).unwrap();
        for (k, p) in params.iter().enumerate() {
            let want = expected(Rule::Sgd, k, sizes[k], 1.0, 0.1, 1);
            common::assert_close(&format!("parameter {k} of 18 on {place}"), &values(p), &want, 1e-6);
        }
        if let (Place::Gpu(i), Some(profiler)) = (place, profiler) {
            let buffers = dygraph::gpu_info(i).unwrap().max_storage_buffers_per_stage as usize;
            let summary = profiler.stop().unwrap();
            assert_eq!(
                calls(&summary, Rule::Sgd),
                grouping(buffers, Rule::Sgd.own(), &[18]),
                "eighteen parameters, {buffers} storage buffers per stage"
            );
        }
    }
}

/// Two parameters whose gradients are one buffer (`p2`'s is a reshaped view of `p1`'s): the
/// fusion pass merges their updates, and the merged op binds the shared gradient twice, read
/// only, interpreted and replayed; both follow SGD in float64.
#[test]
fn updates_whose_gradients_share_a_buffer_merge() {
    let _exclusive = crate::exclusive();
    use dygraph::nn::{Initializer, ParamAttr};
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _g = serial();
    for plans in [false, true] {
        let (main, startup) = (Program::new(), Program::new());
        let loss = st::program_guard(&main, &startup, || {
            let x = st::data("x", &[4], DType::Float32).unwrap();
            let param = |name: &str, shape: &[usize], v: f64| {
                let attr = ParamAttr { name: Some(name.into()), ..ParamAttr::default() };
                nn::create_parameter(shape, DType::Float32, &attr, &Initializer::Constant(v)).unwrap()
            };
            let (p1, p2) = (param("p1", &[4], 0.5), param("p2", &[2, 2], -0.25));
            // d loss / d p1 = x, d loss / d p2 = reshape(x): the same values, one buffer.
            let loss = p1.add(&p2.reshape([4]).unwrap()).unwrap().mul(&x).unwrap().sum(&[], false).unwrap();
            optimizer::SGD::new(0.01, vec![p1, p2]).minimize(&loss).unwrap();
            loss
        });
        let exe = Executor::with_scope(gpu, Scope::new());
        exe.set_plans(plans);
        exe.run(&startup, &[], &[] as &[&str]).unwrap();
        let ops = exe.ops_to_run(&main).unwrap();
        assert!(
            ops.iter().any(|o| o.op_type == "merged_sgd"),
            "{:?}",
            ops.iter().map(|o| &o.op_type).collect::<Vec<_>>()
        );
        for step in 0..3 {
            let x = Tensor::from_vec(grad_values(0, 4, step), [4]).unwrap().to(gpu).unwrap();
            exe.run(&main, &[("x", &x)], &[&loss]).unwrap();
        }
        if plans {
            let plan = exe.last_plan().unwrap_or_else(|| panic!("no plan ({:?})", exe.interpreted_because()));
            assert_eq!(plan.merged, 1, "{plan:?}");
        }
        for (name, init) in [("p1", 0.5), ("p2", -0.25)] {
            let got = values(&exe.scope().var(name).unwrap());
            let want = expected(Rule::Sgd, 0, 4, init, 0.01, 3);
            if let Err(m) = common::check_allclose(&format!("{name}, plans {plans}"), &got, &want, 1e-6, 1e-5) {
                panic!("{m}");
            }
        }
    }
}
