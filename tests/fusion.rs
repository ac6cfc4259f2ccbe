//! The fusion pass: chains of elementwise ops in a program become generated kernels, and a
//! fused program computes what the unfused one does — forward chains with broadcasting,
//! and the gradient chains of a training step — on every place; every generated kernel
//! validates with naga; a fetched intermediate keeps the chain unfused.

mod common;

use common::{assert_close, places, values};
use dygraph::nn::{self, Forward, Layer};
use dygraph::optimizer::{Optimizer, SGD};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Place, Tensor};

fn fused_programs(exe: &Executor, p: &Program) -> Vec<String> {
    exe.ops_to_run(p)
        .unwrap()
        .into_iter()
        .filter(|o| o.op_type == "fused_elementwise")
        .map(|o| match o.attrs.get("program") {
            Some(dygraph::ops::AttrValue::Str(s)) => s.clone(),
            other => panic!("fused op without a program: {other:?}"),
        })
        .collect()
}

fn validate(program: &str) {
    let src = dygraph::ops::fused_kernel_source(program).unwrap();
    let module = naga::front::wgsl::parse_str(&src).unwrap_or_else(|e| panic!("{program}: {}", e.emit_to_string(&src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{program}: {}", e.emit_to_string(&src)));
}

#[test]
fn forward_chains_with_broadcasting_match_unfused() {
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
            let n = fused_programs(&exe, &main).len();
            let mut rng = common::Rng::new(seed ^ 7);
            let x = common::tensor(&rng.vec(5 * 8, -1.0, 1.0), &[5, 8], DType::Float32, Place::Cpu);
            let losses = (0..6).flat_map(|_| values(&exe.run(&main, &[("x", &x)], &[&loss]).unwrap()[0])).collect();
            (losses, n)
        };
        let ((fused, chains), (plain, _)) = (run(true), run(false));
        eprintln!("{place}: {chains} fused chains in the training program");
        assert!(chains >= 2, "forward and gradient chains fuse: {chains}");
        assert_close(&format!("losses on {place} (seed {seed})"), &fused, &plain, 1e-5);
        assert!(fused[5] < fused[0], "training makes progress: {fused:?}");
    }
}

#[test]
fn bad_fused_programs_are_typed_errors() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], [2]).unwrap();
    for program in ["", "x0 b.add", "x0 u.nosuch", "x0 x1", "x0 u.relu x1", "q"] {
        let err = dygraph::ops::run_op("fused_elementwise", &[&x, &x], &{
            let mut m = dygraph::ops::AttrMap::new();
            m.set("program", dygraph::ops::AttrValue::Str(program.into()));
            m
        });
        assert!(err.is_err(), "{program:?} was accepted");
    }
}
