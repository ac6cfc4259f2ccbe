//! The fusion pass: chains of elementwise ops in a program become generated kernels, and a
//! fused program computes what the unfused one does — forward chains with broadcasting,
//! and the gradient chains of a training step, with `matmul`/`conv2d` epilogues and
//! reduction prologues on the GPU place (the CPU keeps its separate vectorised kernels
//! there) — on every place; every generated kernel validates with naga; a fetched
//! intermediate keeps the chain unfused. The epilogue and prologue ops' CPU forms are
//! checked by the registry sweep.

use crate::common;

use common::{assert_close, places, values};
use dygraph::nn::{self, Forward, Layer};
use dygraph::optimizer::{Optimizer, SGD};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Place, Tensor};

/// The programs of the ops of type `op_type` a run executes.
fn programs_of(exe: &Executor, p: &Program, op_type: &str) -> Vec<String> {
    exe.ops_to_run(p)
        .unwrap()
        .into_iter()
        .filter(|o| o.op_type == op_type)
        .map(|o| match o.attrs.get("program") {
            Some(dygraph::ops::AttrValue::Str(s)) => s.clone(),
            other => panic!("fused op without a program: {other:?}"),
        })
        .collect()
}

fn fused_programs(exe: &Executor, p: &Program) -> Vec<String> {
    programs_of(exe, p, "fused_elementwise")
}

fn validate(program: &str) {
    validate_source(program, &dygraph::testing::fused_kernel_source(program).unwrap());
}

fn validate_source(program: &str, src: &str) {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{program}: {}", e.emit_to_string(src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{program}: {}", e.emit_to_string(src)));
}

#[test]
fn forward_chains_with_broadcasting_match_unfused() {
    let _generator = common::generator_lock();
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    for place in places() {
        let (main, startup) = (Program::new(), Program::new());
        let (y, z) = st::program_guard(&main, &startup, || {
            let x = st::data("x", &[-1, 6], DType::Float32).unwrap();
            let w = st::data("w", &[1, 6], DType::Float32).unwrap();
            let b = st::data("b", &[6], DType::Float32).unwrap();
            // relu(x·w + b)·0.5 + 1, then tanh of it minus x, then exp of its square root of abs
            let h = x.mul(&w).unwrap().add(&b).unwrap().relu().unwrap().scale(0.5, 1.0).unwrap();
            let y = h.tanh().unwrap().sub(&x).unwrap();
            let z = y.abs().unwrap().sqrt().unwrap().neg().unwrap().exp().unwrap().maximum(&b).unwrap();
            (y, z)
        });
        let fused = Executor::with_scope(place, Scope::new());
        let plain = Executor::with_scope(place, Scope::new());
        plain.set_fusion(false);
        let programs = fused_programs(&fused, &main);
        assert!(!programs.is_empty(), "nothing fused on {place}");
        let n_fused = fused.ops_to_run(&main).unwrap().len();
        let n_plain = plain.ops_to_run(&main).unwrap().len();
        eprintln!("{place}: {n_plain} ops → {n_fused}: {programs:?}");
        assert!(n_fused + 5 <= n_plain, "{n_plain} ops → {n_fused}");
        programs.iter().for_each(|p| validate(p));
        for rows in [4usize, 1, 0] {
            let x = common::tensor(&rng.vec(rows * 6, -2.0, 2.0), &[rows, 6], DType::Float32, Place::Cpu);
            let w = common::tensor(&rng.vec(6, -2.0, 2.0), &[1, 6], DType::Float32, Place::Cpu);
            let b = common::tensor(&rng.vec(6, -1.0, 1.0), &[6], DType::Float32, Place::Cpu);
            let feed = [("x", &x), ("w", &w), ("b", &b)];
            for run in 0..2 {
                let a = fused.run(&main, &feed, &[&z]).unwrap_or_else(|e| panic!("{place} rows {rows} run {run}: {e}"));
                let e = plain.run(&main, &feed, &[&z]).unwrap();
                let what = format!("z on {place}, {rows} rows, run {run} (seed {seed})");
                assert_close(&what, &values(&a[0]), &values(&e[0]), 1e-6);
            }
            // Fetching an intermediate the chain removes runs the unfused program.
            let a = fused.run(&main, &feed, &[&y, &z]).unwrap();
            let e = plain.run(&main, &feed, &[&y, &z]).unwrap();
            assert_close(&format!("y on {place} (seed {seed})"), &values(&a[0]), &values(&e[0]), 1e-6);
        }
    }
}

#[test]
fn training_with_fused_gradient_chains_matches_unfused() {
    let _g = common::generator_lock();
    let seed = common::run_seed();
    for place in places() {
        let build = || {
            paddle::seed(seed);
            let (main, startup) = (Program::new(), Program::new());
            let loss = st::program_guard(&main, &startup, || {
                let x = st::data("x", &[-1, 8], DType::Float32).unwrap();
                let fc1 = nn::Linear::new(8, 16).unwrap();
                let fc2 = nn::Linear::new(16, 4).unwrap();
                let h = fc1.forward(&x).unwrap().sigmoid().unwrap().scale(2.0, -1.0).unwrap();
                let out = fc2.forward(&h).unwrap().tanh().unwrap();
                let loss = out.square().unwrap().mean(&[], false).unwrap();
                let mut params = fc1.parameters();
                params.extend(fc2.parameters());
                SGD::new(0.1, params).minimize(&loss).unwrap();
                loss
            });
            (main, startup, loss)
        };
        let run = |fusion: bool| -> (Vec<f64>, usize) {
            let (main, startup, loss) = build();
            let exe = Executor::with_scope(place, Scope::new());
            exe.set_fusion(fusion);
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let n = fused_programs(&exe, &main).len() + programs_of(&exe, &main, "matmul_epilogue").len();
            let mut rng = common::Rng::new(seed ^ 7);
            let x = common::tensor(&rng.vec(5 * 8, -1.0, 1.0), &[5, 8], DType::Float32, Place::Cpu);
            let losses = (0..6).flat_map(|_| values(&exe.run(&main, &[("x", &x)], &[&loss]).unwrap()[0])).collect();
            (losses, n)
        };
        let ((fused, chains), (plain, _)) = (run(true), run(false));
        eprintln!("{place}: {chains} fused chains and epilogues in the training program");
        assert!(chains >= 2, "forward and gradient chains fuse: {chains}");
        assert_close(&format!("losses on {place} (seed {seed})"), &fused, &plain, 1e-5);
        assert!(fused[5] < fused[0], "training makes progress: {fused:?}");
    }
}

#[test]
fn matmul_epilogues_match_unfused_forward_and_backward() {
    let _g = common::generator_lock();
    let seed = common::run_seed();
    for place in places() {
        let build = || {
            paddle::seed(seed);
            let (main, startup) = (Program::new(), Program::new());
            let (loss, pre, params) = st::program_guard(&main, &startup, || {
                let x = st::data("x", &[-1, 8], DType::Float32).unwrap();
                let fc1 = nn::Linear::new(8, 16).unwrap();
                let fc2 = nn::Linear::new(16, 16).unwrap();
                let fc3 = nn::Linear::new(16, 3).unwrap();
                // bias + relu; bias, scale and a second bias-like row; plain bias
                let h = fc1.forward(&x).unwrap().relu().unwrap();
                let pre = fc2.forward(&h).unwrap();
                let h = pre.scale(0.5, 0.25).unwrap().tanh().unwrap();
                let out = fc3.forward(&h).unwrap();
                let loss = out.square().unwrap().mean(&[], false).unwrap();
                let mut params = fc1.parameters();
                params.extend(fc2.parameters());
                params.extend(fc3.parameters());
                SGD::new(0.1, params.clone()).minimize(&loss).unwrap();
                (loss, pre, params)
            });
            (main, startup, loss, (pre, params))
        };
        // The losses, then every parameter after the steps (the gradients through the
        // epilogues, element by element), and the epilogue programs.
        let run = |fusion: bool, fetch_pre: bool| -> (Vec<f64>, Vec<String>) {
            let (main, startup, loss, (pre, params)) = build();
            let exe = Executor::with_scope(place, Scope::new());
            exe.set_fusion(fusion);
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let epilogues = programs_of(&exe, &main, "matmul_epilogue");
            let mut rng = common::Rng::new(seed ^ 11);
            let mut losses = Vec::new();
            for rows in [5usize, 1, 5, 3] {
                let x = common::tensor(&rng.vec(rows * 8, -1.0, 1.0), &[rows, 8], DType::Float32, Place::Cpu);
                let out = if fetch_pre {
                    exe.run(&main, &[("x", &x)], &[&loss, &pre]).unwrap()
                } else {
                    exe.run(&main, &[("x", &x)], &[&loss]).unwrap()
                };
                losses.extend(values(&out[0]));
            }
            for p in &params {
                losses.extend(values(&exe.scope().var(&p.name().unwrap()).unwrap()));
            }
            (losses, epilogues)
        };
        let ((fused, epilogues), (plain, none)) = (run(true, false), run(false, false));
        eprintln!("{place}: epilogues {epilogues:?}");
        assert!(none.is_empty(), "fusion off: {none:?}");
        if matches!(place, Place::Cpu) {
            assert!(epilogues.is_empty(), "the CPU keeps its vectorised kernels: {epilogues:?}");
            continue;
        }
        assert_eq!(epilogues.len(), 3, "each Linear's product takes its bias (and what follows) as an epilogue");
        assert!(epilogues.iter().any(|p| p.contains("u.relu")), "{epilogues:?}");
        assert!(epilogues.iter().any(|p| p.contains("u.scale") && p.contains("u.tanh")), "{epilogues:?}");
        for p in &epilogues {
            validate_source(p, &dygraph::testing::matmul_epilogue_source(p).unwrap());
        }
        assert_close(&format!("losses and parameters on {place} (seed {seed})"), &fused, &plain, 1e-5);
        // Fetching a product's chain value runs unfused, with the same losses.
        let (fetched, _) = run(true, true);
        assert_close(&format!("losses fetching the product on {place} (seed {seed})"), &fetched, &plain, 1e-5);
    }
}

#[test]
fn conv_epilogues_match_unfused_in_training() {
    let _g = common::generator_lock();
    let seed = common::run_seed();
    for place in places() {
        let build = || {
            paddle::seed(seed);
            let (main, startup) = (Program::new(), Program::new());
            let loss = st::program_guard(&main, &startup, || {
                let x = st::data("x", &[-1, 2, 6, 6], DType::Float32).unwrap();
                let c1 = nn::Conv2D::new(2, 3, 3).unwrap();
                let c2 = nn::Conv2D::new(3, 3, 3).unwrap();
                let fc = nn::Linear::new(3 * 2 * 2, 2).unwrap();
                // conv + bias + relu; conv + bias + scale + sigmoid
                let h = c1.forward(&x).unwrap().relu().unwrap();
                let h = c2.forward(&h).unwrap().scale(0.5, 0.0).unwrap().sigmoid().unwrap();
                let out = fc.forward(&h.flatten(1, -1).unwrap()).unwrap();
                let loss = out.square().unwrap().mean(&[], false).unwrap();
                let mut params = c1.parameters();
                params.extend(c2.parameters());
                params.extend(fc.parameters());
                SGD::new(0.2, params.clone()).minimize(&loss).unwrap();
                (loss, params)
            });
            (main, startup, loss)
        };
        // The losses, then every parameter after the steps, and the epilogue programs.
        let run = |fusion: bool| -> (Vec<f64>, Vec<String>) {
            let (main, startup, (loss, params)) = build();
            let exe = Executor::with_scope(place, Scope::new());
            exe.set_fusion(fusion);
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let epilogues = programs_of(&exe, &main, "conv2d_epilogue");
            let mut rng = common::Rng::new(seed ^ 13);
            let mut losses = Vec::new();
            for rows in [3usize, 2, 3] {
                let x = common::tensor(&rng.vec(rows * 72, -1.0, 1.0), &[rows, 2, 6, 6], DType::Float32, Place::Cpu);
                losses.extend(values(&exe.run(&main, &[("x", &x)], &[&loss]).unwrap()[0]));
            }
            for p in &params {
                losses.extend(values(&exe.scope().var(&p.name().unwrap()).unwrap()));
            }
            (losses, epilogues)
        };
        let ((fused, epilogues), (plain, _)) = (run(true), run(false));
        eprintln!("{place}: conv epilogues {epilogues:?}");
        if matches!(place, Place::Cpu) {
            assert!(epilogues.is_empty(), "the CPU keeps its vectorised kernels: {epilogues:?}");
            continue;
        }
        assert_eq!(epilogues.len(), 2, "{epilogues:?}");
        assert!(epilogues.iter().any(|p| p.contains("u.relu")) && epilogues.iter().any(|p| p.contains("u.sigmoid")));
        for p in &epilogues {
            validate_source(p, &dygraph::testing::conv2d_epilogue_source(p).unwrap());
        }
        assert_close(&format!("losses and parameters on {place} (seed {seed})"), &fused, &plain, 1e-5);
    }
}

#[test]
fn reduction_prologues_match_unfused() {
    let _generator = common::generator_lock();
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    for place in places() {
        let (main, startup) = (Program::new(), Program::new());
        let (mse, dot, peak, planes) = st::program_guard(&main, &startup, || {
            let a = st::data("a", &[-1, 6], DType::Float32).unwrap();
            let b = st::data("b", &[-1, 6], DType::Float32).unwrap();
            let c = st::data("c", &[-1, 3, 40], DType::Float32).unwrap();
            let mse = a.sub(&b).unwrap().square().unwrap().mean(&[], false).unwrap();
            let dot = a.mul(&b).unwrap().scale(2.0, 0.0).unwrap().sum(&[1], true).unwrap();
            let peak = a.abs().unwrap().max(&[0], false).unwrap();
            // Axes 0 and 2 around a kept one: one pass (`planes`), but for 5000 rows on a
            // software adapter.
            let planes = c.exp().unwrap().scale(0.5, 0.0).unwrap().sum(&[0, 2], false).unwrap();
            (mse, dot, peak, planes)
        });
        let fused = Executor::with_scope(place, Scope::new());
        let plain = Executor::with_scope(place, Scope::new());
        plain.set_fusion(false);
        let programs = programs_of(&fused, &main, "reduce_prologue");
        eprintln!("{place}: prologues {programs:?}");
        if matches!(place, Place::Cpu) {
            assert!(programs.is_empty(), "the CPU keeps its vectorised kernels: {programs:?}");
            continue;
        }
        assert_eq!(programs.len(), 4, "{programs:?}");
        for p in &programs {
            validate_source(p, &dygraph::testing::reduce_prologue_source(p).unwrap());
        }
        // Equal batches take the prologue kernels; a batch of 1 against 3 broadcasts, which
        // the op computes through a temporary; 5000 rows reduce in several chunks.
        for (ra, rb) in [(3usize, 3usize), (1, 3), (5000, 5000)] {
            let a = common::tensor(&rng.vec(ra * 6, -2.0, 2.0), &[ra, 6], DType::Float32, Place::Cpu);
            let b = common::tensor(&rng.vec(rb * 6, -2.0, 2.0), &[rb, 6], DType::Float32, Place::Cpu);
            let c = common::tensor(&rng.vec(ra * 120, -2.0, 2.0), &[ra, 3, 40], DType::Float32, Place::Cpu);
            let feed = [("a", &a), ("b", &b), ("c", &c)];
            let fetch = [&mse, &dot, &peak, &planes];
            let x = fused.run(&main, &feed, &fetch).unwrap_or_else(|e| panic!("{place} {ra}×{rb}: {e}"));
            let y = plain.run(&main, &feed, &fetch).unwrap();
            for (i, (p, q)) in x.iter().zip(&y).enumerate() {
                let what = format!("output {i} on {place}, batches {ra} and {rb} (seed {seed})");
                assert_close(&what, &values(p), &values(q), 1e-5);
            }
        }
    }
}

#[test]
fn scalar_constants_join_their_chains_on_every_place() {
    let _generator = common::generator_lock();
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    for place in places() {
        let (main, startup) = (Program::new(), Program::new());
        let (y, s) = st::program_guard(&main, &startup, || {
            let x = st::data("x", &[-1, 5], DType::Float32).unwrap();
            let s = x.sum(&[], false).unwrap();
            // 2.5 / s · 3 + 1: the fill joins the chain, which reads the sum alone.
            let y = paddle::full(&[] as &[usize], 2.5, DType::Float32).unwrap().divide(&s).unwrap();
            (y.scale(3.0, 1.0).unwrap(), s)
        });
        let fused = Executor::with_scope(place, Scope::new());
        let programs = fused_programs(&fused, &main);
        assert!(programs.iter().any(|p| p.starts_with("c.2.5 x0 b.divide")), "{place}: {programs:?}");
        assert!(fused.ops_to_run(&main).unwrap().iter().all(|o| o.op_type != "full"), "{place}: the fill runs");
        programs.iter().for_each(|p| validate(p));
        for rows in [3usize, 1] {
            let xv = rng.vec(rows * 5, 0.5, 2.0);
            let x = common::tensor(&xv, &[rows, 5], DType::Float32, Place::Cpu);
            let got = fused.run(&main, &[("x", &x)], &[&y, &s]).unwrap();
            let sum = values(&got[1])[0];
            let what = format!("y on {place}, {rows} rows (seed {seed})");
            assert_close(&what, &values(&got[0]), &[3.0 * (2.5 / sum) + 1.0], 1e-6);
            assert_close(&format!("sum, {what}"), &[sum], &[xv.iter().sum::<f64>()], 1e-5);
        }
    }
}

#[test]
fn views_and_broadcasts_join_their_chains_on_every_place() {
    let _generator = common::generator_lock();
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    for place in places() {
        let (main, startup) = (Program::new(), Program::new());
        let (a, outs) = st::program_guard(&main, &startup, || {
            let x = st::data("x", &[-1, 5], DType::Float32).unwrap();
            let a = st::data("a", &[-1, 1], DType::Float32).unwrap();
            let s = x.sum(&[], false).unwrap();
            // 1 / s as [1, 1], broadcast to x's shape, times x (a mean's gradient): one chain.
            let r = paddle::ones(&[] as &[usize], DType::Float32).unwrap().divide(&s).unwrap();
            let g = paddle::expand_as(&r.unsqueeze(&[0, 1]).unwrap(), &x).unwrap().multiply(&x).unwrap();
            // A view at the root adding a leading 1 stays out of the chain before it.
            let h = x.scale(2.0, 1.0).unwrap().tanh().unwrap().unsqueeze(&[0]).unwrap();
            // A trailing 1 moves the elements against the broadcast: no chain across it.
            let k = x.exp().unwrap().unsqueeze(&[2]).unwrap().scale(3.0, 0.0).unwrap();
            // A leading 1 that no operand has: the sum would lose it, so it joins no chain.
            let m = x.unsqueeze(&[0]).unwrap().add(&x.exp().unwrap()).unwrap();
            // A reshape to the same shape joins; a squeeze of the batch (1 in some runs) does not.
            let w = paddle::reshape(&x.exp().unwrap(), &[-1, 5]).unwrap().scale(0.5, 0.0).unwrap();
            let q = x.exp().unwrap().squeeze(&[]).unwrap().scale(2.0, 0.0).unwrap();
            // Views alone stay as they are (nothing to compute); an operand of unknown size
            // is not broadcast by the chain: a run feeding it larger than the target fails.
            let v = paddle::expand_as(&s.unsqueeze(&[0, 1]).unwrap(), &x).unwrap();
            let e = paddle::expand_as(&a, &x).unwrap().multiply(&x).unwrap();
            (a, [g, h, k, m, w, q, v, e])
        });
        let _ = a;
        let fused = Executor::with_scope(place, Scope::new());
        let programs = fused_programs(&fused, &main);
        let has = |p: &str| programs.iter().any(|q| q.starts_with(p));
        assert!(has("c.1.0 x0 b.divide s.view x1 s.expand x1 b.multiply"), "{place}: {programs:?}");
        assert!(
            has("x0 u.scale:2.0:1.0 u.tanh") && has("x0 u.exp:0.0:0.0 s.view u.scale:0.5"),
            "{place}: {programs:?}"
        );
        assert_eq!(programs.len(), 3, "{place}: {programs:?}");
        let expands = fused.ops_to_run(&main).unwrap().iter().filter(|o| o.op_type == "expand_as").count();
        assert_eq!(expands, 2, "{place}: the views-alone chain and the unknown-size operand keep theirs");
        programs.iter().for_each(|p| validate(p));
        for rows in [3usize, 1] {
            let xv = rng.vec(rows * 5, 0.5, 2.0);
            let av = rng.vec(rows, 0.5, 2.0);
            let x = common::tensor(&xv, &[rows, 5], DType::Float32, Place::Cpu);
            let a = common::tensor(&av, &[rows, 1], DType::Float32, Place::Cpu);
            let got = fused.run(&main, &[("x", &x), ("a", &a)], &outs.iter().collect::<Vec<_>>()).unwrap();
            let sum: f64 = xv.iter().sum();
            let what = |v: &str| format!("{v} on {place}, {rows} rows (seed {seed})");
            let shapes: Vec<Vec<usize>> = got.iter().map(|t| t.shape().to_vec()).collect();
            let flat = if rows == 1 { vec![5] } else { vec![rows, 5] };
            let expected = [
                vec![rows, 5],
                vec![1, rows, 5],
                vec![rows, 5, 1],
                vec![1, rows, 5],
                vec![rows, 5],
                flat,
                vec![rows, 5],
                vec![rows, 5],
            ];
            assert_eq!(shapes, expected, "{}", what("shapes"));
            let map = |f: &dyn Fn(usize, f64) -> f64| xv.iter().enumerate().map(|(i, &v)| f(i, v)).collect::<Vec<_>>();
            let formulas: [Vec<f64>; 8] = [
                map(&|_, v| v / sum),
                map(&|_, v| (2.0 * v + 1.0).tanh()),
                map(&|_, v| 3.0 * v.exp()),
                map(&|_, v| v + v.exp()),
                map(&|_, v| 0.5 * v.exp()),
                map(&|_, v| 2.0 * v.exp()),
                map(&|_, _| sum),
                map(&|i, v| av[i / 5] * v),
            ];
            for (j, f) in formulas.iter().enumerate() {
                assert_close(&what(&format!("output {j}")), &values(&got[j]), f, 1e-5);
            }
        }
        // `a` fed with 3 rows against x's 1: expand_as cannot shrink it, fused or not.
        let x = common::tensor(&rng.vec(5, 0.5, 2.0), &[1, 5], DType::Float32, Place::Cpu);
        let a = common::tensor(&rng.vec(3, 0.5, 2.0), &[3, 1], DType::Float32, Place::Cpu);
        let err = fused.run(&main, &[("x", &x), ("a", &a)], &[&outs[7]]).err();
        assert!(err.is_some_and(|e| e.to_string().contains("expand_as")), "{place}: a 3-row operand expanded to 1 row");
    }
}

#[test]
fn bad_fused_programs_are_typed_errors() {
    let _generator = common::generator_lock();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], [2]).unwrap();
    let program_attr = |program: &str| {
        let mut m = dygraph::ops::AttrMap::new();
        m.set("program", dygraph::ops::AttrValue::Str(program.into()));
        m
    };
    // An input index past usize (once an overflow) and past the input limit, too.
    let huge = format!("x0 x{} b.add", usize::MAX);
    for program in [
        "",
        "x0 b.add",
        "x0 u.nosuch",
        "x0 x1",
        "x0 u.relu x1",
        "q",
        "x0 x6 b.add",
        "x-1",
        &huge,
        "c.one x0 b.add",
        "c.1.0",
    ] {
        let err = dygraph::ops::run_op("fused_elementwise", &[&x, &x], &program_attr(program));
        match err {
            Err(dygraph::Error::InvalidArgument { op: "fused_elementwise", .. }) => {}
            other => panic!("{program:?}: {:?}", other.map(|_| "accepted")),
        }
    }
    // A bad chain inside an epilogue or a prologue names that op.
    for (op, inputs) in [("matmul_epilogue", vec![&x, &x]), ("reduce_prologue", vec![&x])] {
        let mut attrs = program_attr(&huge);
        if op == "matmul_epilogue" {
            attrs.set("transpose_x", dygraph::ops::AttrValue::Bool(false));
            attrs.set("transpose_y", dygraph::ops::AttrValue::Bool(false));
        } else {
            attrs.set("reduce", dygraph::ops::AttrValue::Str("sum".into()));
            attrs.set("axis", dygraph::ops::AttrValue::Ints(vec![0]));
            attrs.set("keepdim", dygraph::ops::AttrValue::Bool(false));
        }
        let err = dygraph::ops::run_op(op, &inputs, &attrs).map(|_| "accepted");
        assert!(
            matches!(&err, Err(dygraph::Error::InvalidArgument { op: o, msg }) if *o == op && msg.contains("bad input token")),
            "{op}: {err:?}"
        );
    }
    // An epilogue input that would broadcast the product, or too few inputs: typed errors.
    let a = Tensor::from_vec(vec![1.0f32; 6], [2, 3]).unwrap();
    let b = Tensor::from_vec(vec![1.0f32; 12], [3, 4]).unwrap();
    let big = Tensor::from_vec(vec![1.0f32; 12], [3, 4]).unwrap();
    let attrs = |program: &str| {
        let mut m = dygraph::ops::AttrMap::new();
        m.set("transpose_x", dygraph::ops::AttrValue::Bool(false));
        m.set("transpose_y", dygraph::ops::AttrValue::Bool(false));
        m.set("program", dygraph::ops::AttrValue::Str(program.into()));
        m
    };
    for (inputs, program) in
        [(vec![&a, &b, &big], "x0 x1 b.add"), (vec![&a, &b], "x0 x1 b.add"), (vec![&a], "x0 u.relu")]
    {
        let err = dygraph::ops::run_op("matmul_epilogue", &inputs, &attrs(program));
        let msg = err.expect_err(&format!("{program:?} on {} inputs was accepted", inputs.len())).to_string();
        assert!(msg.contains("matmul"), "{msg}");
    }
}

/// Bit patterns with every NaN alike (the kernels may produce different NaN payloads).
fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| if x.is_nan() { f64::NAN.to_bits() } else { x.to_bits() }).collect()
}

/// On each place, `max_pool(relu(x))` runs as `relu(max_pool(x))` with its gradient
/// reordered to match, and gives the same bits as the program as written, forward and
/// backward: overlapping and padded windows, adaptive windows, ties, all-negative windows,
/// zeros of both signs, infinities and NaN in the input and in the pooled gradient. Fetching
/// the relu output runs the program as written. The loss with special values is NaN by
/// construction, so a second, finite loss over the first image is compared too: bit for bit
/// on the CPU, within tolerance on a GPU (float32), where the fused program may sum it with
/// its product as a prologue; the pooled values and the input gradient bit for bit on both.
#[test]
fn relu_moves_after_max_pooling_bit_for_bit() {
    let _generator = common::generator_lock();
    for place in places() {
        relu_after_max_pooling(place);
    }
}

fn relu_after_max_pooling(place: Place) {
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    type Pool = fn(&Tensor) -> paddle::Result<Tensor>;
    let pools: [(&str, &str, Pool); 3] = [
        ("2x2 stride 2", "max_pool2d", |h| paddle::max_pool2d(h, &nn::Pool2dOptions::new(2))),
        ("3x3 stride 1 padding 1", "max_pool2d", |h| {
            paddle::max_pool2d(h, &nn::Pool2dOptions::new(3).stride(1).padding(1))
        }),
        ("adaptive 4x4", "adaptive_max_pool2d", |h| paddle::adaptive_max_pool2d(h, 4)),
    ];
    let mut x = rng.vec(2 * 2 * 6 * 6, -1.0, 1.0);
    let at = |n: usize, c: usize, y: usize, x: usize| ((n * 2 + c) * 6 + y) * 6 + x;
    for y in 0..3 {
        for xx in 0..3 {
            x[at(0, 0, y, xx)] = -0.25 - (y * 3 + xx) as f64 / 16.0; // an all-negative corner
        }
    }
    (x[at(0, 1, 2, 2)], x[at(0, 1, 2, 3)], x[at(0, 1, 3, 2)]) = (0.75, 0.75, 0.75); // ties
    (x[at(1, 0, 4, 4)], x[at(1, 0, 4, 5)], x[at(1, 0, 5, 4)], x[at(1, 0, 5, 5)]) = (0.0, -0.0, -0.5, -0.0);
    (x[at(1, 1, 0, 1)], x[at(1, 1, 5, 5)], x[at(0, 0, 5, 5)]) = (f64::NAN, f64::INFINITY, f64::NEG_INFINITY);
    let dtypes = if place.is_gpu() { &[DType::Float32][..] } else { &[DType::Float32, DType::Float64] };
    for &dtype in dtypes {
        for (what, pool_type, pool) in pools {
            let (main, startup) = (Program::new(), Program::new());
            let (r, p, loss, gx, finite) = st::program_guard(&main, &startup, || {
                let x = st::data("x", &[-1, 2, 6, 6], dtype).unwrap();
                x.set_stop_gradient(false);
                let r = x.relu().unwrap();
                let p = pool(&r).unwrap();
                // The pooled gradient is `w`: any value, special ones included.
                let dims: Vec<i64> = std::iter::once(-1).chain(p.shape()[1..].iter().map(|&d| d as i64)).collect();
                let w = st::data("w", &dims, dtype).unwrap();
                let loss = p.multiply(&w).unwrap().sum(&[], false).unwrap();
                let gx = st::gradients(std::slice::from_ref(&loss), &[x], None).unwrap().remove(0).unwrap();
                // The first image's pooled values hold no NaN or infinity.
                let first = p.slice(&[0], &[0], &[1]).unwrap();
                let v = st::data("v", &first.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(), dtype).unwrap();
                let finite = first.multiply(&v).unwrap().sum(&[], false).unwrap();
                (r, p, loss, gx, finite)
            });
            let xt = common::tensor(&x, &[2, 2, 6, 6], dtype, Place::Cpu);
            let p_shape: Vec<usize> = std::iter::once(2).chain(p.shape()[1..].iter().copied()).collect();
            let n: usize = p_shape.iter().product();
            let mut wv = rng.vec(n, -1.0, 1.0);
            for (k, v) in wv.iter_mut().enumerate() {
                match k % 19 {
                    3 => *v = f64::INFINITY,
                    7 => *v = -0.0,
                    11 => *v = f64::NAN,
                    13 => *v = f64::NEG_INFINITY,
                    _ => {}
                }
            }
            let wt = common::tensor(&wv, &p_shape, dtype, Place::Cpu);
            let v_shape: Vec<usize> = std::iter::once(1).chain(p.shape()[1..].iter().copied()).collect();
            let vt = common::tensor(&rng.vec(v_shape.iter().product(), -1.0, 1.0), &v_shape, dtype, Place::Cpu);
            let run = |fusion: bool, fetch: &[&Tensor]| -> (Vec<Vec<f64>>, Vec<(String, String)>) {
                let exe = Executor::with_scope(place, Scope::new());
                exe.set_fusion(fusion);
                exe.run(&startup, &[], &[] as &[&str]).unwrap();
                let order = exe
                    .ops_to_run(&main)
                    .unwrap()
                    .into_iter()
                    .map(|o| {
                        let program = match o.attrs.get("program") {
                            Some(dygraph::ops::AttrValue::Str(s)) => s.clone(),
                            _ => String::new(),
                        };
                        (o.op_type, program)
                    })
                    .collect();
                let out = exe.run(&main, &[("x", &xt), ("w", &wt), ("v", &vt)], fetch).unwrap();
                (out.iter().map(values).collect(), order)
            };
            let case = format!("{what}, {dtype}, {place:?} (seed {seed})");
            let ((moved, order), (written, written_order)) =
                (run(true, &[&p, &loss, &gx, &finite]), run(false, &[&p, &loss, &gx, &finite]));
            // The first op computing `t` (itself, or a fused op whose program holds it).
            let pos = |o: &[(String, String)], t: &str| {
                o.iter()
                    .position(|(op, program)| op == t || program.split(' ').any(|tok| tok == format!("b.{t}")))
                    .unwrap_or_else(|| panic!("{case}: no {t} in {o:?}"))
            };
            assert!(pos(&written_order, "relu") < pos(&written_order, pool_type), "{case}: {written_order:?}");
            assert!(pos(&order, pool_type) < pos(&order, "relu"), "{case}: relu moves after the pooling: {order:?}");
            assert!(pos(&written_order, "pool2d_max_grad") < pos(&written_order, "relu_grad"), "{case}");
            assert!(pos(&order, "relu_grad") < pos(&order, "pool2d_max_grad"), "{case}: {order:?}");
            let names = ["pooled", "loss", "input gradient", "finite loss"];
            for (name, (a, b)) in names.iter().zip(moved.iter().zip(&written)) {
                if *name == "finite loss" && place.is_gpu() {
                    let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 + 1e-5 * b.abs();
                    assert!(a.iter().zip(b).all(|(&a, &b)| close(a, b)), "{case}: finite loss {a:?} vs {b:?}");
                } else {
                    assert_eq!(bits(a), bits(b), "{case}: {name}, rewritten vs as written");
                }
            }
            assert!(written[1][0].is_nan() && written[3][0].is_finite() && written[3][0] != 0.0, "{case}: {written:?}");
            let g = &written[2];
            assert!(g.iter().any(|&v| v.is_finite() && v != 0.0) && g.contains(&0.0), "{case}: {g:?}");
            let (fetched, _) = run(true, &[&r, &p]);
            let relu: Vec<f64> =
                xt.to_f64_vec().unwrap().iter().map(|&v| if v > 0.0 || v.is_nan() { v } else { 0.0 }).collect();
            assert_eq!(bits(&fetched[0]), bits(&relu), "{case}: fetched relu output");
            assert_eq!(bits(&fetched[1]), bits(&written[0]), "{case}: pooled, relu output fetched");
        }
    }
}

/// The MNIST pattern on each place: a convolution with its bias, relu, 2×2 max pooling. On a
/// GPU the written program runs relu in the convolution's epilogue and the rewritten one after
/// the pooling; the pooled values and the input gradient keep their bits either way (fusion on
/// against off), the parameter gradients agree within tolerance (their reductions may fuse).
#[test]
fn conv_relu_pooling_keeps_its_bits_when_relu_moves() {
    let _g = common::generator_lock();
    let seed = common::run_seed();
    for place in places() {
        let build = || {
            paddle::seed(seed);
            let (main, startup) = (Program::new(), Program::new());
            let fetched = st::program_guard(&main, &startup, || {
                let x = st::data("x", &[-1, 2, 10, 10], DType::Float32).unwrap();
                x.set_stop_gradient(false);
                let conv = nn::Conv2D::new(2, 4, 3).unwrap();
                let p =
                    paddle::max_pool2d(&conv.forward(&x).unwrap().relu().unwrap(), &nn::Pool2dOptions::new(2)).unwrap();
                let w = st::data("w", &[-1, 4, 4, 4], DType::Float32).unwrap();
                let loss = p.multiply(&w).unwrap().sum(&[], false).unwrap();
                let mut wrt = vec![x];
                wrt.extend(conv.parameters());
                let grads = st::gradients(std::slice::from_ref(&loss), &wrt, None).unwrap();
                let mut fetched = vec![p];
                fetched.extend(grads.into_iter().map(Option::unwrap));
                fetched
            });
            (main, startup, fetched)
        };
        let mut rng = common::Rng::new(seed ^ 29);
        let x = common::tensor(&rng.vec(3 * 200, -1.0, 1.0), &[3, 2, 10, 10], DType::Float32, Place::Cpu);
        let w = common::tensor(&rng.vec(3 * 64, -1.0, 1.0), &[3, 4, 4, 4], DType::Float32, Place::Cpu);
        let run = |fusion: bool| {
            let (main, startup, fetched) = build();
            let exe = Executor::with_scope(place, Scope::new());
            exe.set_fusion(fusion);
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let order: Vec<String> = exe.ops_to_run(&main).unwrap().into_iter().map(|o| o.op_type).collect();
            let refs: Vec<&Tensor> = fetched.iter().collect();
            let out = exe.run(&main, &[("x", &x), ("w", &w)], &refs).unwrap();
            (out.iter().map(values).collect::<Vec<_>>(), order)
        };
        let ((moved, order), (written, _)) = (run(true), run(false));
        let case = format!("{place:?} (seed {seed})");
        let pos = |t: &str| order.iter().position(|s| s == t).unwrap_or_else(|| panic!("{case}: no {t} in {order:?}"));
        assert!(pos("max_pool2d") < pos("relu"), "{case}: relu moves after the pooling: {order:?}");
        for (k, name) in ["pooled", "input gradient"].iter().enumerate() {
            assert_eq!(bits(&moved[k]), bits(&written[k]), "{case}: {name}");
        }
        assert!(moved[0].contains(&0.0) && moved[0].iter().any(|&v| v > 0.0), "{case}: {:?}", moved[0]);
        for (k, name) in [(2, "filter gradient"), (3, "bias gradient")] {
            assert_close(&format!("{case}: {name}"), &moved[k], &written[k], 1e-5);
        }
    }
}

/// The rewrite needs the relu output to be read by the pooling and relu's gradient only: a
/// second reader keeps the program as written.
#[test]
fn relu_read_elsewhere_stays_before_the_pooling() {
    let _generator = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    st::program_guard(&main, &startup, || {
        let x = st::data("x", &[-1, 1, 4, 4], DType::Float32).unwrap();
        x.set_stop_gradient(false);
        let r = x.relu().unwrap();
        let p = paddle::max_pool2d(&r, &nn::Pool2dOptions::new(2)).unwrap();
        let loss = p.sum(&[], false).unwrap().add(&r.mean(&[], false).unwrap()).unwrap();
        st::gradients(std::slice::from_ref(&loss), &[x], None).unwrap();
    });
    let exe = Executor::new(Place::Cpu);
    let order: Vec<String> = exe.ops_to_run(&main).unwrap().into_iter().map(|o| o.op_type).collect();
    let pos = |t: &str| order.iter().position(|s| s == t).unwrap_or_else(|| panic!("no {t} in {order:?}"));
    assert!(pos("relu") < pos("max_pool2d"), "{order:?}");
}

/// Saves `main` (fed `x`, fetching `fetch`) as an inference model in a folder named after
/// `test`, rewrites the model's text with `edit`, and loads and runs it on each place with
/// `xs` fed as `x`: each place's first fetched value.
fn run_edited(
    test: &str,
    (main, x, fetch): (&Program, &Tensor, &[&Tensor]),
    edit: impl Fn(&str) -> String,
    xs: &[f32],
) -> Vec<(Place, Vec<f64>)> {
    let dir = std::env::temp_dir().join(format!("dygraph-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("m");
    let exe = Executor::with_scope(Place::Cpu, Scope::new());
    st::save_inference_model(&prefix, &[x], fetch, &exe, main).unwrap();
    let model = prefix.with_extension("pdmodel");
    let text = std::fs::read_to_string(&model).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changed nothing:\n{text}");
    std::fs::write(&model, edited).unwrap();
    let out = places()
        .into_iter()
        .map(|place| {
            let exe = Executor::with_scope(place, Scope::new());
            let m = st::load_inference_model(&prefix, &exe).unwrap();
            let feed = Tensor::from_vec_on(xs.to_vec(), [xs.len()], place).unwrap();
            (place, values(&exe.run(&m.program, &[("x", &feed)], &m.fetch_names).unwrap()[0]))
        })
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    out
}

/// The text with `from` renamed `to` in op lines (and fetch lines when `fetches`), and the
/// fetch lines naming `drop` removed.
fn rename(text: &str, from: &str, to: &str, fetches: bool, drop: Option<&str>) -> String {
    text.lines()
        .filter(|l| drop.is_none_or(|d| *l != format!("fetch {d}")))
        .map(|l| {
            if l.starts_with("op ") || (fetches && l.starts_with("fetch ")) {
                l.replace(from, to)
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// A loaded program may write a value twice (the text format allows it). Here `a = exp(x)`
/// feeds `b = 2a`, and a later op writes `a = 3x`: the chain must read the first `a`, as
/// the unfused program does, not whichever op wrote `a` last.
#[test]
fn a_value_written_twice_is_not_fused_through() {
    let _generator = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    let (x, a, b, z) = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[4], DType::Float32).unwrap();
        let a = x.exp().unwrap();
        let b = a.scale(2.0, 0.0).unwrap();
        let z = x.scale(3.0, 0.0).unwrap();
        (x, a, b, z)
    });
    let (a_name, z_name) = (a.name().unwrap(), z.name().unwrap());
    // `z`'s op now writes `a`, and only `b` is fetched.
    let xs = [0.5f32, -1.0, 2.0, 0.0];
    let edit = |text: &str| rename(text, &z_name, &a_name, false, Some(&z_name));
    let want: Vec<f64> = xs.iter().map(|&v| 2.0 * (v as f64).exp()).collect();
    for (place, got) in run_edited("written-twice", (&main, &x, &[&b, &z]), edit, &xs) {
        assert_close(&format!("b on {place}"), &got, &want, 1e-5);
    }
}

/// A loaded program may also overwrite a value that its chain read: here the fed `x` in
/// `a = exp(x); x = 2a`. The chain must not look for `x`'s producer among its own ops (once
/// an endless recursion): fetching `x` gives 2·exp of the fed value.
#[test]
fn a_fed_value_its_chain_overwrites_is_not_fused_through() {
    let _generator = common::generator_lock();
    let (main, startup) = (Program::new(), Program::new());
    let (x, b) = st::program_guard(&main, &startup, || {
        let x = st::data("x", &[4], DType::Float32).unwrap();
        let b = x.exp().unwrap().scale(2.0, 0.0).unwrap();
        (x, b)
    });
    let (x_name, b_name) = (x.name().unwrap(), b.name().unwrap());
    // `b`'s op now writes `x`, which is fetched.
    let xs = [0.5f32, -1.0, 2.0, 0.0];
    let edit = |text: &str| rename(text, &b_name, &x_name, true, None);
    let want: Vec<f64> = xs.iter().map(|&v| 2.0 * (v as f64).exp()).collect();
    for (place, got) in run_edited("overwritten-feed", (&main, &x, &[&b]), edit, &xs) {
        assert_close(&format!("x on {place}"), &got, &want, 1e-5);
    }
}
