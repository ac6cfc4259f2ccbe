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

/// float16 matrix products natively (f16 loads, f32 accumulation, one rounding per output)
/// and through float32 give the same bits, and the CPU's values within float16's rounding;
/// the shapes cross the entry's tiles, transposes, broadcast batches and a split reduction
/// (the 64×800·800×10 product splits K on software adapters; `split_k.rs` forces the other
/// entries' splits in float16 too).
#[test]
fn float16_matrix_products_agree_by_both_paths() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let has_f16 = paddle::gpu_info(0).unwrap().shader_f16;
    let seed = common::run_seed();
    let mut rng = Rng::new(seed);
    let cases: [(&[usize], &[usize], bool, bool); 5] = [
        (&[3, 5], &[5, 2], false, false),
        (&[130, 17], &[17, 70], false, false),
        (&[33, 20], &[40, 20], false, true),
        (&[2, 1, 65, 24], &[3, 24, 132], false, false),
        (&[64, 800], &[800, 10], false, false),
    ];
    for (xs, ys, tx, ty) in cases {
        let data = |rng: &mut Rng, s: &[usize]| rng.vec(s.iter().product(), -1.0, 1.0);
        let (xv, yv) = (data(&mut rng, xs), data(&mut rng, ys));
        let run = |place: Place| -> Vec<f64> {
            let x = common::tensor(&xv, xs, DType::Float16, place);
            let y = common::tensor(&yv, ys, DType::Float16, place);
            let out = paddle::matmul(&x, &y, tx, ty).unwrap();
            assert_eq!(out.dtype(), DType::Float16);
            values(&out)
        };
        set_native(true);
        paddle::sync().unwrap();
        let p = Profiler::start(gpu).unwrap();
        let native = run(gpu);
        let casts: u64 = p.stop().unwrap().shader("cast.wgsl").iter().map(|k| k.calls).sum();
        set_native(false);
        let via = run(gpu);
        let cpu = run(Place::Cpu);
        let what = format!("matmul {xs:?}·{ys:?} (seed {seed})");
        // The inputs' casts to float16 on the host's side are uploads, not kernels.
        assert_eq!(casts == 0, has_f16, "{what}: {casts} cast kernels natively, device SHADER_F16 {has_f16}");
        assert!(same(&native, &via), "{what}: native and through float32 differ");
        let k = if tx { xs[xs.len() - 2] } else { xs[xs.len() - 1] };
        check_allclose(&format!("{what}: GPU vs CPU"), &native, &cpu, 2e-7 * k as f64 + 1e-3, 2e-3).unwrap();
    }
    println!("{} float16 matrix products agree natively, through float32 and on the CPU", cases.len());
}

/// float16 convolutions natively and through float32: the forward (with bias, strided,
/// padded, grouped) and both gradients give the same bits, and the CPU's values within
/// float16's rounding; natively the forward runs no cast kernel.
#[test]
fn float16_convolutions_agree_by_both_paths() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let has_f16 = paddle::gpu_info(0).unwrap().shader_f16;
    let seed = common::run_seed();
    let mut rng = Rng::new(seed);
    // (x shape, weight shape, [stride, padding, groups])
    let cases: [([usize; 4], [usize; 4], [usize; 3]); 4] = [
        ([2, 3, 9, 9], [4, 3, 3, 3], [1, 1, 1]),
        ([1, 4, 10, 10], [6, 2, 3, 3], [2, 0, 2]),
        ([3, 5, 6, 6], [8, 5, 1, 1], [1, 0, 1]),
        ([1, 1, 12, 12], [20, 1, 5, 5], [1, 2, 1]),
    ];
    for (xs, ws, [stride, padding, groups]) in cases {
        let xv = rng.vec(xs.iter().product(), -1.0, 1.0);
        let wv = rng.vec(ws.iter().product(), -0.5, 0.5);
        let bv = rng.vec(ws[0], -0.5, 0.5);
        let opts = paddle::Conv2dOptions::new().stride(stride).padding(padding).groups(groups);
        let run = |place: Place| -> (Vec<Vec<f64>>, u64) {
            let x = common::tensor(&xv, &xs, DType::Float16, place);
            let w = common::tensor(&wv, &ws, DType::Float16, place);
            let b = common::tensor(&bv, &[ws[0]], DType::Float16, place);
            x.set_stop_gradient(false);
            w.set_stop_gradient(false);
            paddle::sync().unwrap();
            let p = place.is_gpu().then(|| Profiler::start(place).unwrap());
            let y = paddle::conv2d(&x, &w, Some(&b), &opts).unwrap();
            let casts = p.map_or(0, |p| p.stop().unwrap().shader("cast.wgsl").iter().map(|k| k.calls).sum());
            assert_eq!(y.dtype(), DType::Float16);
            let r = common::tensor(&vec![0.25; y.numel()], y.shape(), DType::Float16, place);
            (&y * &r).sum(&[], false).unwrap().backward().unwrap();
            let grad = |t: &Tensor| values(&t.grad().unwrap());
            (vec![values(&y), grad(&x), grad(&w)], casts)
        };
        set_native(true);
        let (native, casts) = run(gpu);
        set_native(false);
        let (via, _) = run(gpu);
        let (cpu, _) = run(Place::Cpu);
        let what = format!("conv2d x {xs:?} w {ws:?} stride {stride} groups {groups} (seed {seed})");
        assert_eq!(casts == 0, has_f16, "{what}: {casts} cast kernels natively, device SHADER_F16 {has_f16}");
        for ((name, n), (v, c)) in ["y", "dx", "dw"].iter().zip(&native).zip(via.iter().zip(&cpu)) {
            assert!(same(n, v), "{what}: {name} natively and through float32 differ");
            check_allclose(&format!("{what}: {name}, GPU vs CPU"), n, c, 2e-3, 3e-3).unwrap();
        }
    }
    println!("{} float16 convolutions agree natively, through float32 and on the CPU", cases.len());
}

/// Named value lists of a case.
type Named = Vec<(&'static str, Vec<f64>)>;

/// The cast kernels `op` dispatches on `place` (none on the CPU), and its result.
fn casts_of<T>(place: Place, op: impl FnOnce() -> T) -> (T, u64) {
    if !place.is_gpu() {
        return (op(), 0);
    }
    paddle::sync().unwrap();
    let p = Profiler::start(place).unwrap();
    let out = op();
    let casts = p.stop().unwrap().shader("cast.wgsl").iter().map(|k| k.calls).sum();
    (out, casts)
}

/// Runs `f` on the GPU natively and through float32 and on the CPU, and checks that the
/// native values are the through-float32 bits and the CPU's within `tol`, and that the
/// native forward (the casts `f` counts with [`casts_of`]) took no cast kernel where the
/// device has `SHADER_F16`.
fn by_both_paths(what: &str, gpu: Place, tol: f64, f: &dyn Fn(Place) -> (Named, u64)) {
    let has_f16 = paddle::gpu_info(0).unwrap().shader_f16;
    set_native(true);
    let (native, casts) = f(gpu);
    set_native(false);
    let (via, _) = f(gpu);
    let (cpu, _) = f(Place::Cpu);
    assert_eq!(casts == 0, has_f16, "{what}: {casts} cast kernels natively, device SHADER_F16 {has_f16}");
    for (((name, n), (_, v)), (_, c)) in native.iter().zip(&via).zip(&cpu) {
        assert!(same(n, v), "{what}: {name} natively {n:?}\n  through float32 {v:?}");
        check_allclose(&format!("{what}: {name}, GPU vs CPU"), n, c, tol, tol).unwrap();
    }
}

/// The row kernels (softmax, log_softmax, cross entropy, layer norm, forward and backward)
/// in float16 natively and through float32 give the same bits, and the CPU's values within
/// float16's rounding; natively no cast kernel runs. The shapes reach each kernel's entries:
/// per-line loops (short rows, a middle axis), one workgroup per row with the row in
/// registers, and longer rows read in passes.
#[test]
fn float16_row_kernels_agree_by_both_paths() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let seed = common::run_seed();
    let mut rng = Rng::new(seed);
    let shapes: [&[usize]; 4] = [&[5, 7], &[3, 6, 4], &[4, 300], &[2, 2500]];
    let mut checked = 0;
    for shape in shapes {
        let n: usize = shape.iter().product();
        let xv = rng.vec(n, -4.0, 4.0);
        let rv = rng.vec(n, -1.0, 1.0);
        let last = *shape.last().unwrap();
        for (name, axis) in [("softmax", -1isize), ("log_softmax", -1), ("softmax", 1)] {
            let run = |place: Place| {
                let x = common::tensor(&xv, shape, DType::Float16, place);
                x.set_stop_gradient(false);
                let (y, casts) =
                    casts_of(place, || if name == "softmax" { x.softmax(axis) } else { x.log_softmax(axis) }.unwrap());
                assert_eq!(y.dtype(), DType::Float16);
                let r = common::tensor(&rv, shape, DType::Float16, place);
                (&y * &r).sum(&[], false).unwrap().backward().unwrap();
                (vec![("y", values(&y)), ("dx", values(&x.grad().unwrap()))], casts)
            };
            by_both_paths(&format!("{name} axis {axis} of {shape:?} (seed {seed})"), gpu, 3e-3, &run);
            checked += 1;
        }
        // Cross entropy over the last axis, one line's label ignored.
        let lines = n / last;
        let mut labels: Vec<f64> =
            (0..lines).map(|_| (rng.vec(1, 0.0, last as f64)[0] as usize).min(last - 1) as f64).collect();
        labels[0] = -100.0;
        let mut label_shape = shape.to_vec();
        *label_shape.last_mut().unwrap() = 1;
        let probs: Vec<f64> = rng.vec(n, 0.05, 1.0);
        for use_softmax in [true, false] {
            let run = |place: Place| {
                let src = if use_softmax { &xv } else { &probs };
                let x = common::tensor(src, shape, DType::Float16, place);
                x.set_stop_gradient(false);
                let label = common::tensor(&labels, &label_shape, DType::Int64, place);
                let opts = paddle::nn::CrossEntropyOptions {
                    reduction: paddle::nn::Reduction::None,
                    use_softmax,
                    ..Default::default()
                };
                let (loss, casts) =
                    casts_of(place, || paddle::nn::functional::cross_entropy(&x, &label, &opts).unwrap());
                assert_eq!(loss.dtype(), DType::Float16);
                let r = common::tensor(&rv[..lines], loss.shape(), DType::Float16, place);
                (&loss * &r).sum(&[], false).unwrap().backward().unwrap();
                (vec![("loss", values(&loss)), ("dx", values(&x.grad().unwrap()))], casts)
            };
            by_both_paths(
                &format!("cross_entropy use_softmax {use_softmax} of {shape:?} (seed {seed})"),
                gpu,
                3e-3,
                &run,
            );
            checked += 1;
        }
        // Layer norm over the last axis: float32 weight and bias (an O2 model's norms) and
        // float16 ones.
        let wv = rng.vec(last, 0.5, 1.5);
        let bv = rng.vec(last, -0.5, 0.5);
        for param_dtype in [DType::Float32, DType::Float16] {
            let run = |place: Place| {
                let x = common::tensor(&xv, shape, DType::Float16, place);
                let w = common::tensor(&wv, &[last], param_dtype, place);
                let b = common::tensor(&bv, &[last], param_dtype, place);
                for t in [&x, &w, &b] {
                    t.set_stop_gradient(false);
                }
                let (y, casts) = casts_of(place, || paddle::layer_norm(&x, &[last], Some(&w), Some(&b), 1e-5).unwrap());
                assert_eq!(y.dtype(), DType::Float16);
                let r = common::tensor(&rv, shape, DType::Float16, place);
                (&y * &r).sum(&[], false).unwrap().backward().unwrap();
                let grad = |t: &Tensor| values(&t.grad().unwrap());
                assert_eq!(w.grad().unwrap().dtype(), param_dtype);
                (vec![("y", values(&y)), ("dx", grad(&x)), ("dw", grad(&w)), ("db", grad(&b))], casts)
            };
            // dw and db sum over the rows in float16 on the CPU's side of the comparison.
            let tol = 3e-3 * (n / last) as f64;
            by_both_paths(&format!("layer_norm of {shape:?}, {param_dtype} weight (seed {seed})"), gpu, tol, &run);
            checked += 1;
        }
    }
    println!("{checked} float16 row-kernel cases agree natively, through float32 and on the CPU");
}

/// The reductions in float16 natively (f16 elements read, f32 accumulation and partial
/// results, one rounding per output) and through float32 give the same bits, and the CPU's
/// within float16's rounding, with their gradients; natively no cast kernel runs. The cases
/// reach one pass per output, a workgroup per row, a long row split into chunks, the planes
/// of a conv bias gradient and two passes over separate axes.
#[test]
fn float16_reductions_agree_by_both_paths() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let seed = common::run_seed();
    let mut rng = Rng::new(seed);
    let cases: [(&[usize], &[isize]); 6] = [
        (&[5, 7], &[1]),
        (&[3, 6, 4], &[1]),
        (&[4, 300], &[-1]),
        (&[20000], &[]),
        (&[4, 8, 6, 6], &[0, 2, 3]),
        (&[2, 3, 4, 5], &[1, 3]),
    ];
    let mut checked = 0;
    for (shape, axes) in cases {
        let n: usize = shape.iter().product();
        let xv = rng.vec(n, 0.5, 1.5);
        for kind in ["sum", "mean", "max", "min", "prod"] {
            if kind == "prod" && n > 100 {
                continue; // a long product of values near 1 under- or overflows float16
            }
            let run = |place: Place| {
                let x = common::tensor(&xv, shape, DType::Float16, place);
                x.set_stop_gradient(false);
                let (y, casts) = casts_of(place, || {
                    match kind {
                        "sum" => x.sum(axes, false),
                        "mean" => x.mean(axes, false),
                        "max" => x.max(axes, false),
                        "min" => x.min(axes, false),
                        _ => x.prod(axes, false),
                    }
                    .unwrap()
                });
                assert_eq!(y.dtype(), DType::Float16, "{kind}");
                y.sum(&[], false).unwrap().backward().unwrap();
                (vec![("y", values(&y)), ("dx", values(&x.grad().unwrap()))], casts)
            };
            by_both_paths(&format!("{kind} over {axes:?} of {shape:?} (seed {seed})"), gpu, 2e-3, &run);
            checked += 1;
        }
    }
    println!("{checked} float16 reductions agree natively, through float32 and on the CPU");
}

/// Pooling in float16 natively and through float32: max (tiling and overlapping windows,
/// so both backward entries run), average (padded, not exclusive) and the adaptive forms,
/// forward and backward, give the same bits and the CPU's values within float16's rounding;
/// natively the forward runs no cast kernel.
#[test]
fn float16_pooling_agrees_by_both_paths() {
    let _exclusive = crate::exclusive();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let _again = NativeAgain;
    let seed = common::run_seed();
    let mut rng = Rng::new(seed);
    let shape = [2, 3, 9, 9];
    let xv = rng.vec(shape.iter().product(), -2.0, 2.0);
    let cases = ["max 3", "max 3 stride 2", "avg 3 padded", "adaptive avg 4", "adaptive max 4"];
    for case in cases {
        let run = |place: Place| {
            let x = common::tensor(&xv, &shape, DType::Float16, place);
            x.set_stop_gradient(false);
            let (y, casts) = casts_of(place, || {
                match case {
                    "max 3" => paddle::max_pool2d(&x, &paddle::Pool2dOptions::new(3)),
                    "max 3 stride 2" => paddle::max_pool2d(&x, &paddle::Pool2dOptions::new(3).stride(2)),
                    "avg 3 padded" => {
                        paddle::avg_pool2d(&x, &paddle::Pool2dOptions::new(3).stride(2).padding(1).exclusive(false))
                    }
                    "adaptive avg 4" => paddle::adaptive_avg_pool2d(&x, 4),
                    _ => paddle::adaptive_max_pool2d(&x, 4),
                }
                .unwrap()
            });
            assert_eq!(y.dtype(), DType::Float16, "{case}");
            let r = common::tensor(&rng_values(y.numel()), y.shape(), DType::Float16, place);
            (&y * &r).sum(&[], false).unwrap().backward().unwrap();
            (vec![("y", values(&y)), ("dx", values(&x.grad().unwrap()))], casts)
        };
        by_both_paths(&format!("{case} pooling of {shape:?} (seed {seed})"), gpu, 2e-3, &run);
    }
    println!("{} float16 pooling cases agree natively, through float32 and on the CPU", cases.len());
}

/// Fixed values in [-1, 1) for an upstream gradient of `n` elements.
fn rng_values(n: usize) -> Vec<f64> {
    (0..n).map(|i| ((i * 37 % 101) as f64) / 50.5 - 1.0).collect()
}
