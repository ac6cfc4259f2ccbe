//! float16 on the GPU by both paths: native kernels (WGSL `f16` elements, f32 arithmetic,
//! where the device has `SHADER_F16`) and through float32 (`FLAGS_native_float16` off, as on
//! devices without the feature). Every elementwise op that takes float16 gives the same
//! values both ways and the CPU's within float16's tolerance, and the profiler sees which
//! path ran: no casts around the op natively, two or three through float32. The flag is
//! process-wide, so these tests run in the exclusive binary.

use crate::common;

use common::{Rng, check_allclose, values};
use dygraph::profiler::Profiler;
use dygraph::{self as paddle, DType, Place, Tensor};

/// Turns native float16 back on when a test ends, however it ends.
struct NativeAgain;

impl Drop for NativeAgain {
    fn drop(&mut self) {
        paddle::set_flags(&[("FLAGS_native_float16", "1")]).unwrap();
    }
}

fn set_native(on: bool) {
    paddle::set_flags(&[("FLAGS_native_float16", if on { "1" } else { "0" })]).unwrap();
}

fn half(v: &[f64], place: Place) -> Tensor {
    common::tensor(v, &[v.len()], DType::Float16, place)
}

/// NaN-equal element comparison.
fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

#[test]
fn every_float16_elementwise_op_agrees_by_both_paths() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let seed = common::run_seed();
    let mut rng = Rng::new(seed);
    let n = 37;
    let mut a = rng.vec(n, -3.0, 3.0);
    a[..4].copy_from_slice(&[0.0, -0.0, 1.0, 70000.0]); // 70000 overflows float16 to inf
    let b = rng.vec(n, 0.5, 2.0);
    let params = [0.5, 2.0];
    let mut checked = 0;
    for op in paddle::elementwise_ops().into_iter().filter(|o| o.dtypes.contains(&DType::Float16)) {
        let run = |place: Place| -> Vec<f64> {
            let (x, y) = (half(&a, place), half(&b, place));
            let inputs: Vec<&Tensor> = if op.arity == 1 { vec![&x] } else { vec![&x, &y] };
            let out = paddle::apply_elementwise(op.name, &inputs, params).unwrap();
            let want = if op.returns_bool { DType::Bool } else { DType::Float16 };
            assert_eq!(out.dtype(), want, "{} on {place}", op.name);
            values(&out)
        };
        set_native(true);
        let native = run(gpu);
        set_native(false);
        let via = run(gpu);
        let cpu = run(Place::Cpu);
        let what = format!("{} (seed {seed})", op.name);
        assert!(same(&native, &via), "{what}: native {native:?}\n  through float32 {via:?}");
        check_allclose(&format!("{what}: GPU vs CPU"), &native, &cpu, 2e-3, 2e-3).unwrap();
        checked += 1;
    }
    println!("{checked} float16 elementwise ops agree natively, through float32 and on the CPU");
    assert!(checked >= 50, "only {checked} ops take float16");
}

#[test]
fn the_profiler_sees_which_float16_path_ran() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let has_f16 = paddle::gpu_info(0).unwrap().shader_f16;
    let (x, y) = (half(&[1.0, 2.0, 3.0], gpu), half(&[0.5, 0.25, 4.0], gpu));
    // (casts, elementwise kernels) one exp and one add dispatch.
    let count = |native: bool| -> (u64, u64) {
        set_native(native);
        paddle::sync().unwrap();
        let p = Profiler::start(gpu).unwrap();
        let e = x.exp().unwrap();
        let s = e.add(&y).unwrap();
        let summary = p.stop().unwrap();
        assert_eq!(values(&s), [3.21875, 7.640625, 24.078125], "exp(x) + y in float16 ({summary})");
        let calls = |file: &str| summary.shader(file).iter().map(|k| k.calls).sum::<u64>();
        (calls("cast.wgsl"), calls("unary.wgsl") + calls("binary.wgsl") + calls("binary_vec4.wgsl"))
    };
    // Through float32: exp casts up and back, add casts both inputs up and its result back.
    assert_eq!(count(false), (5, 2), "FLAGS_native_float16 off");
    let want = if has_f16 { (0, 2) } else { (5, 2) };
    assert_eq!(count(true), want, "FLAGS_native_float16 on, device SHADER_F16 {has_f16}");
    assert_eq!(paddle::get_flags(&["FLAGS_native_float16"]).unwrap()[0].1, "1");
    assert!(paddle::set_flags(&[("FLAGS_native_float16", "maybe")]).is_err());
}
