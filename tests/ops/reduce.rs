//! Reductions: sum, mean, prod, max, min over axes (single, lists, all, keepdim, negative),
//! argmax/argmin, logsumexp, var/std, add_n. CPU against a naive host reference, GPU
//! against CPU (long rows for the two-pass path, inner > 1 for the strided path, a leading
//! and a trailing run of axes for the one-pass `planes` entry), float64 gradchecks, GPU
//! gradients and the error cases.

use crate::common;

use common::{Rng, catch, check_close, gpu_matches_cpu, gpu_or_skip, gradcheck, places, report, tensor, values};
use dygraph::{DType, Error, Place, Result, Tensor};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
}

const KINDS: [Kind; 5] = [Kind::Sum, Kind::Mean, Kind::Prod, Kind::Max, Kind::Min];

fn apply(kind: Kind, x: &Tensor, axes: &[isize], keepdim: bool) -> Result<Tensor> {
    match kind {
        Kind::Sum => dygraph::sum(x, axes, keepdim),
        Kind::Mean => dygraph::mean(x, axes, keepdim),
        Kind::Prod => dygraph::prod(x, axes, keepdim),
        Kind::Max => dygraph::max(x, axes, keepdim),
        Kind::Min => dygraph::min(x, axes, keepdim),
    }
}

/// The reduced axes (empty = all) and the result shape.
fn reduced(shape: &[usize], axes: &[isize], keepdim: bool) -> (Vec<bool>, Vec<usize>) {
    let r = shape.len() as isize;
    let mut mask = vec![axes.is_empty(); shape.len()];
    for &a in axes {
        mask[(if a < 0 { a + r } else { a }) as usize] = true;
    }
    let out = shape.iter().zip(&mask).filter_map(|(&d, &m)| if m { keepdim.then_some(1) } else { Some(d) }).collect();
    (mask, out)
}

/// Naive host reduction: every input element folded into the output cell it maps to.
fn naive(kind: Kind, v: &[f64], shape: &[usize], axes: &[isize]) -> Vec<f64> {
    let (mask, _) = reduced(shape, axes, true);
    let kept: Vec<usize> = shape.iter().zip(&mask).map(|(&d, &m)| if m { 1 } else { d }).collect();
    let n_out: usize = kept.iter().product();
    let count = (v.len() / n_out.max(1)) as f64;
    let init = match kind {
        Kind::Sum | Kind::Mean => 0.0,
        Kind::Prod => 1.0,
        Kind::Max => f64::NEG_INFINITY,
        Kind::Min => f64::INFINITY,
    };
    let mut acc = vec![init; n_out];
    for (i, &x) in v.iter().enumerate() {
        let (mut rem, mut o, mut stride) = (i, 0, 1);
        for d in (0..shape.len()).rev() {
            let c = rem % shape[d];
            rem /= shape[d];
            if !mask[d] {
                o += c * stride;
                stride *= shape[d];
            }
        }
        let a = &mut acc[o];
        *a = match kind {
            Kind::Sum | Kind::Mean => *a + x,
            Kind::Prod => *a * x,
            Kind::Max => {
                if a.is_nan() || x.is_nan() {
                    f64::NAN
                } else {
                    a.max(x)
                }
            }
            Kind::Min => {
                if a.is_nan() || x.is_nan() {
                    f64::NAN
                } else {
                    a.min(x)
                }
            }
        };
    }
    if kind == Kind::Mean {
        acc.iter_mut().for_each(|a| *a /= count);
    }
    acc
}

/// Naive integer reduction (wrapping, as the kernels).
fn naive_int(kind: Kind, v: &[i64], shape: &[usize], axes: &[isize]) -> Vec<i64> {
    let (mask, _) = reduced(shape, axes, true);
    let kept: Vec<usize> = shape.iter().zip(&mask).map(|(&d, &m)| if m { 1 } else { d }).collect();
    let n_out: usize = kept.iter().product();
    let mut acc: Vec<i64> = vec![
        match kind {
            Kind::Sum | Kind::Mean => 0,
            Kind::Prod => 1,
            Kind::Max => i64::MIN,
            Kind::Min => i64::MAX,
        };
        n_out
    ];
    for (i, &x) in v.iter().enumerate() {
        let (mut rem, mut o, mut stride) = (i, 0, 1);
        for d in (0..shape.len()).rev() {
            let c = rem % shape[d];
            rem /= shape[d];
            if !mask[d] {
                o += c * stride;
                stride *= shape[d];
            }
        }
        let a = &mut acc[o];
        *a = match kind {
            Kind::Sum | Kind::Mean => a.wrapping_add(x),
            Kind::Prod => a.wrapping_mul(x),
            Kind::Max => (*a).max(x),
            Kind::Min => (*a).min(x),
        };
    }
    acc
}

fn ints(t: &Tensor) -> Vec<i64> {
    match t.dtype() {
        DType::Int64 => t.to_vec::<i64>().unwrap(),
        DType::Int32 => t.to_vec::<i32>().unwrap().into_iter().map(i64::from).collect(),
        d => panic!("ints() of {d}"),
    }
}

/// A named composite under test.
type Op = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

const AXES: &[&[isize]] =
    &[&[], &[0], &[1], &[2], &[-1], &[-3], &[0, 1], &[1, 2], &[0, 2], &[2, 0], &[-1, 0], &[0, 1, 2]];

/// Compares a reduction with its reference. Sums and means carry the rounding error of
/// float summation, bounded by `n·u·Σ|x|` (u the unit roundoff of the compute type), which
/// with cancelling signs can be large next to the result: they are checked against that
/// bound, the rest (no cancellation) by relative error.
#[allow(clippy::too_many_arguments)]
fn check_reduction(
    what: &str,
    kind: Kind,
    dtype: DType,
    actual: &[f64],
    expected: &[f64],
    input: &[f64],
    shape: &[usize],
    axes: &[isize],
) -> std::result::Result<(), String> {
    let (u, out_u) = match dtype {
        DType::Float64 => (1.2e-16, 1.2e-16),
        DType::Float32 => (6e-8, 6e-8),
        _ => (6e-8, 4.9e-4),
    };
    if !matches!(kind, Kind::Sum | Kind::Mean) {
        return check_close(what, actual, expected, if dtype == DType::Float16 { 3e-3 } else { 20.0 * out_u });
    }
    let abs: Vec<f64> = input.iter().map(|v| v.abs()).collect();
    let scale = naive(kind, &abs, shape, axes);
    let n = (input.len() / expected.len().max(1)) as f64;
    for (i, ((a, e), s)) in actual.iter().zip(expected).zip(&scale).enumerate() {
        let bound = n * u * s + 2.0 * out_u * e.abs();
        if (a - e).abs() > bound {
            return Err(format!(
                "{what}: element {i} is {a} but expected {e} (bound {bound:e}, seed {})",
                common::run_seed()
            ));
        }
    }
    Ok(())
}

#[test]
fn float_reductions_match_a_naive_reference_on_every_place() {
    let _generator = common::generator_lock();
    let shape = [3usize, 4, 5];
    let mut failures = Vec::new();
    for (k, &kind) in KINDS.iter().enumerate() {
        let mut rng = Rng::new(100 + k as u64);
        // Products near 1 stay inside float16's range.
        let (lo, hi) = if kind == Kind::Prod { (0.8, 1.25) } else { (-2.0, 2.0) };
        let v: Vec<f64> = rng.vec(60, lo, hi).into_iter().map(|x| x as f32 as f64).collect();
        for &axes in AXES {
            for keepdim in [false, true] {
                let expected = naive(kind, &v, &shape, axes);
                let (_, out_shape) = reduced(&shape, axes, keepdim);
                for place in places() {
                    for dtype in [DType::Float32, DType::Float64, DType::Float16] {
                        if place.is_gpu() && dtype == DType::Float64 {
                            continue;
                        }
                        let what = format!("{kind:?} {dtype} axes {axes:?} keepdim={keepdim} on {place}");
                        let x = tensor(&v, &shape, dtype, place);
                        let y = match apply(kind, &x, axes, keepdim) {
                            Ok(y) => y,
                            Err(e) => {
                                failures.push(format!("{what}: {e}"));
                                continue;
                            }
                        };
                        if y.shape() != out_shape || y.dtype() != dtype || y.place() != place {
                            failures.push(format!("{what}: got {} {:?} on {}", y.dtype(), y.shape(), y.place()));
                            continue;
                        }
                        // float16 rounds the inputs: compare with the reference of the rounded values.
                        let xv = values(&x);
                        let exp =
                            if dtype == DType::Float16 { naive(kind, &xv, &shape, axes) } else { expected.clone() };
                        failures
                            .extend(check_reduction(&what, kind, dtype, &values(&y), &exp, &xv, &shape, axes).err());
                    }
                }
            }
        }
    }
    report("float reductions", &failures);
}

#[test]
fn integer_reductions_are_exact() {
    let _generator = common::generator_lock();
    let shape = [3usize, 4, 5];
    let mut failures = Vec::new();
    for (k, &kind) in KINDS.iter().enumerate().filter(|(_, k)| **k != Kind::Mean) {
        for dtype in [DType::Int32, DType::Int64] {
            let mut rng = Rng::new(200 + k as u64 * 2 + dtype as u64);
            let (lo, hi) = match (kind, dtype) {
                (Kind::Prod, _) => (-3, 4),
                (_, DType::Int32) => (-2_000_000_000, 2_000_000_000),
                _ => (-4_000_000_000_000_000, 4_000_000_000_000_000),
            };
            let v = rng.ints(60, lo, hi);
            for &axes in AXES {
                let expected = naive_int(kind, &v, &shape, axes);
                // int32 sums are int64 (as Paddle); the rest keep the dtype and wrap like it.
                let out_dtype = if kind == Kind::Sum { DType::Int64 } else { dtype };
                let expected: Vec<i64> = if out_dtype == DType::Int32 {
                    expected.iter().map(|&e| e as i32 as i64).collect()
                } else {
                    expected
                };
                for place in places() {
                    let what = format!("{kind:?} {dtype} axes {axes:?} on {place}");
                    let x = match dtype {
                        DType::Int32 => {
                            dygraph::Tensor::from_vec_on(v.iter().map(|&e| e as i32).collect::<Vec<_>>(), shape, place)
                        }
                        _ => dygraph::Tensor::from_vec_on(v.clone(), shape, place),
                    }
                    .unwrap();
                    match apply(kind, &x, axes, false) {
                        Ok(y) if y.dtype() != out_dtype => failures.push(format!("{what}: dtype {}", y.dtype())),
                        Ok(y) if ints(&y) != expected => {
                            failures.push(format!("{what}: {:?} != {:?}", ints(&y), expected))
                        }
                        Ok(_) => {}
                        Err(e) => failures.push(format!("{what}: {e}")),
                    }
                }
            }
        }
    }
    report("integer reductions", &failures);
}

#[test]
fn int32_and_bool_sums_are_int64() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = Tensor::from_vec_on(vec![2_000_000_000i32, 2_000_000_000, 2_000_000_000, -5], [2, 2], place).unwrap();
        let s = x.sum(&[], false).unwrap();
        assert_eq!(s.dtype(), DType::Int64);
        assert_eq!(s.to_vec::<i64>().unwrap(), [5_999_999_995], "int32 sum overflows 32 bits on {place}");
        assert_eq!(x.sum(&[0], false).unwrap().to_vec::<i64>().unwrap(), [4_000_000_000, 1_999_999_995]);
        let b = dygraph::to_tensor_on([true, false, true, true], place).unwrap();
        let c = b.sum(&[], false).unwrap();
        assert_eq!((c.dtype(), c.to_vec::<i64>().unwrap()), (DType::Int64, vec![3]), "bool sum on {place}");
        let e = b.prod(&[], false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "prod", dtype: DType::Bool, .. }), "{e}");
    }
}

#[test]
fn known_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], DType::Float32, place);
        let v = |t: Result<Tensor>| values(&t.unwrap());
        assert_eq!(v(x.sum(&[], false)), [21.0], "on {place}");
        assert_eq!(v(x.sum(&[0], false)), [5.0, 7.0, 9.0]);
        assert_eq!(v(x.sum(&[1], false)), [6.0, 15.0]);
        assert_eq!(v(x.sum(&[-1], true)), [6.0, 15.0]);
        assert_eq!(x.sum(&[-1], true).unwrap().shape(), [2, 1]);
        assert_eq!(x.sum(&[], true).unwrap().shape(), [1, 1]);
        assert_eq!(x.sum(&[], false).unwrap().shape(), [] as [usize; 0]);
        assert_eq!(v(x.mean(&[1], false)), [2.0, 5.0]);
        assert_eq!(v(x.prod(&[0], false)), [4.0, 10.0, 18.0]);
        assert_eq!(v(x.max(&[0], false)), [4.0, 5.0, 6.0]);
        assert_eq!(v(x.min(&[1], false)), [1.0, 4.0]);
        assert_eq!(v(x.max(&[], false)), [6.0]);
        let n = tensor(&[1.0, f64::NAN, 3.0, 0.0, -1.0, 2.0], &[2, 3], DType::Float32, place);
        let m = v(n.max(&[1], false));
        assert!(m[0].is_nan() && m[1] == 2.0, "max propagates NaN on {place}: {m:?}");
        let m = v(n.min(&[1], false));
        assert!(m[0].is_nan() && m[1] == -1.0, "min propagates NaN on {place}: {m:?}");

        let y = tensor(&[1.0, 2.0, 3.0, 4.0], &[4], DType::Float32, place);
        check_close("var unbiased", &v(y.var(&[], true, false)), &[5.0 / 3.0], 1e-7).unwrap();
        check_close("var biased", &v(y.var(&[], false, false)), &[1.25], 1e-7).unwrap();
        check_close("std unbiased", &v(y.std(&[], true, false)), &[(5.0f64 / 3.0).sqrt()], 1e-7).unwrap();
        check_close("std biased", &v(y.std(&[0], false, true)), &[1.25f64.sqrt()], 1e-7).unwrap();
        assert_eq!(y.std(&[0], false, true).unwrap().shape(), [1]);
        let z = tensor(&[1.0, 3.0, 2.0, 6.0], &[2, 2], DType::Float32, place);
        check_close("var axis 1", &v(z.var(&[1], true, false)), &[2.0, 8.0], 1e-7).unwrap();

        let l =
            tensor(&[0.0, 0.0, 1000.0, 1000.0, f64::NEG_INFINITY, f64::NEG_INFINITY], &[3, 2], DType::Float32, place);
        let r = v(l.logsumexp(&[1], false));
        check_close(&format!("logsumexp on {place}"), &r[..2], &[2f64.ln(), 1000.0 + 2f64.ln()], 1e-7).unwrap();
        assert_eq!(r[2], f64::NEG_INFINITY, "logsumexp of a row of -inf on {place}");
        assert_eq!(l.logsumexp(&[1], true).unwrap().shape(), [3, 1]);
        check_close(
            "logsumexp all",
            &v(l.slice(&[0], &[0], &[2]).unwrap().logsumexp(&[], false)),
            &[1000.0 + 2f64.ln()],
            1e-7,
        )
        .unwrap();

        let a = tensor(&[1.0, 2.0], &[2], DType::Float32, place);
        let b = tensor(&[10.0, 20.0], &[2], DType::Float32, place);
        let c = tensor(&[100.0, 200.0], &[2], DType::Float32, place);
        assert_eq!(v(dygraph::add_n(&[a.clone(), b.clone(), c.clone()])), [111.0, 222.0]);
        assert_eq!(v(dygraph::sums(&[a.clone(), b.clone()])), [11.0, 22.0]);
        assert_eq!(v(dygraph::add_n(std::slice::from_ref(&a))), [1.0, 2.0]);
    }
}

#[test]
fn argmax_and_argmin() {
    let _generator = common::generator_lock();
    for place in places() {
        for dtype in [DType::Float32, DType::Float16, DType::Int32, DType::Int64] {
            let x = tensor(&[1.0, 3.0, 3.0, 2.0, 2.0, 1.0], &[2, 3], dtype, place);
            let at = format!("{dtype} on {place}");
            let am = x.argmax(Some(1), false).unwrap();
            assert_eq!(am.dtype(), DType::Int64);
            assert_eq!(am.to_vec::<i64>().unwrap(), [1, 0], "argmax ties go to the first, {at}");
            assert_eq!(x.argmin(Some(-1), false).unwrap().to_vec::<i64>().unwrap(), [0, 2], "{at}");
            assert_eq!(x.argmax(Some(0), false).unwrap().to_vec::<i64>().unwrap(), [1, 0, 0], "{at}");
            assert_eq!(x.argmin(Some(0), true).unwrap().shape(), [1, 3]);
            let all = x.argmax(None, false).unwrap();
            assert_eq!((all.shape().to_vec(), all.to_vec::<i64>().unwrap()), (vec![], vec![1]), "{at}");
            assert_eq!(x.argmin(None, true).unwrap().shape(), [1, 1]);
            assert_eq!(x.argmin(None, false).unwrap().to_vec::<i64>().unwrap(), [0]);
        }
        // NaN counts as the extreme and its first occurrence wins (numpy).
        let n = tensor(&[1.0, f64::NAN, 3.0, f64::NAN], &[4], DType::Float32, place);
        assert_eq!(n.argmax(Some(0), false).unwrap().to_vec::<i64>().unwrap(), [1], "argmax NaN on {place}");
        assert_eq!(n.argmin(Some(0), false).unwrap().to_vec::<i64>().unwrap(), [1], "argmin NaN on {place}");
        let b = dygraph::to_tensor_on([false, true, true], place).unwrap();
        assert_eq!(b.argmax(None, false).unwrap().to_vec::<i64>().unwrap(), [1], "bool argmax on {place}");
    }
}

#[test]
fn argmax_and_argmin_match_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let mut failures = Vec::new();
    for (s, shape) in [vec![37usize], vec![5, 40], vec![4, 33, 6], vec![2, 3, 300]].iter().enumerate() {
        let n: usize = shape.iter().product();
        for dtype in [DType::Float32, DType::Int32, DType::Int64, DType::Float16] {
            let mut rng = Rng::new(300 + s as u64 * 8 + dtype as u64);
            // Few distinct values, so ties are everywhere.
            let v: Vec<f64> = rng.ints(n, -4, 5).into_iter().map(|x| x as f64).collect();
            let axes: Vec<Option<isize>> =
                std::iter::once(None).chain((0..shape.len() as isize).map(Some)).chain([Some(-1)]).collect();
            for axis in axes {
                for largest in [true, false] {
                    let what = format!("arg{} {dtype} {shape:?} axis {axis:?}", if largest { "max" } else { "min" });
                    let f = |p: Place| {
                        let x = tensor(&v, shape, dtype, p);
                        if largest { x.argmax(axis, false) } else { x.argmin(axis, false) }
                            .unwrap()
                            .to_vec::<i64>()
                            .unwrap()
                    };
                    let (c, d) = (f(Place::Cpu), f(g));
                    if c != d {
                        failures.push(format!("{what}: GPU {d:?} vs CPU {c:?}"));
                    }
                }
            }
        }
    }
    report("argmax/argmin GPU vs CPU", &failures);
}

#[test]
fn reductions_match_between_gpu_and_cpu_on_every_path() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    // (shape, axes): long rows (> 8192, few rows) take the chunked two-pass path; inner > 1
    // and short rows take the strided path; many rows take the one-pass row path, except
    // on a software adapter, where 256 rows or more of up to 4096 take the strided path.
    // Axes that are a leading and a trailing run take the one-pass `planes` entry where the
    // inner run has 32 elements or more: shorter than, equal to and longer than a workgroup,
    // chunked (from a start inside an inner run), and on a software adapter not for 1,280
    // rows of 576; a short inner run takes the axis passes.
    let cases: &[(&[usize], &[isize])] = &[
        (&[3, 20000], &[1]),
        (&[1, 50000], &[-1]),
        (&[70, 9000], &[1]),
        (&[20000], &[]),
        (&[40, 300, 5], &[1]),
        (&[6, 7, 8], &[0]),
        (&[300, 40], &[1]),
        (&[100, 500], &[1]),
        (&[9, 10], &[1]),
        (&[4, 5, 6, 7], &[1, 3]),
        (&[4, 5, 6, 7], &[0, 2, 3]),
        (&[50, 3, 200], &[0, 2]),
        (&[64, 20, 24, 24], &[0, 2, 3]),
        (&[3, 70, 256], &[0, 2]),
        (&[3, 4, 300], &[0, 2]),
        (&[40, 3, 300], &[0, 2]),
        (&[2, 3, 4, 5, 40], &[0, 1, 3, 4]),
        (&[7, 3, 5], &[0, 2]),
        (&[33, 2, 1, 1], &[0, 2, 3]),
    ];
    let mut failures = Vec::new();
    for (c, &(shape, axes)) in cases.iter().enumerate() {
        let n: usize = shape.iter().product();
        for (k, &kind) in KINDS.iter().enumerate() {
            let mut rng = Rng::new(400 + c as u64 * 8 + k as u64);
            // Positive values keep float sums free of cancellation; products of ±1 with as many
            // 2s as halves are exact.
            let v: Vec<f64> = if kind == Kind::Prod {
                (0..n)
                    .map(|i| {
                        if i % 97 == 3 {
                            2.0
                        } else if i % 97 == 50 {
                            0.5
                        } else if rng.uniform(0.0, 1.0) < 0.5 {
                            -1.0
                        } else {
                            1.0
                        }
                    })
                    .collect()
            } else {
                rng.vec(n, 0.5, 1.5)
            };
            for dtype in [DType::Float32, DType::Int32, DType::Int64] {
                if kind == Kind::Mean && dtype != DType::Float32 {
                    continue;
                }
                let v: Vec<f64> = if dtype.is_int() {
                    if kind == Kind::Prod {
                        v.iter().map(|x| x.round().clamp(-1.0, 2.0)).collect()
                    } else {
                        rng.ints(n, -1_000_000, 1_000_000).into_iter().map(|x| x as f64).collect()
                    }
                } else {
                    v.clone()
                };
                let what = format!("{kind:?} {dtype} {shape:?} axes {axes:?}");
                let run = |p: Place| {
                    apply(kind, &tensor(&v, shape, dtype, p), axes, false).map(|t| (t.shape().to_vec(), values(&t)))
                };
                match (run(Place::Cpu), run(g)) {
                    (Ok((sc, c)), Ok((sd, d))) => {
                        if sc != sd {
                            failures.push(format!("{what}: shapes {sd:?} vs {sc:?}"));
                        } else if dtype.is_int() {
                            if c != d {
                                failures.push(format!(
                                    "{what}: GPU {:?} vs CPU {:?}",
                                    &d[..d.len().min(8)],
                                    &c[..c.len().min(8)]
                                ));
                            }
                        } else {
                            failures.extend(check_close(&format!("{what} GPU vs CPU"), &d, &c, 1e-5).err());
                        }
                    }
                    (Err(e), _) | (_, Err(e)) => failures.push(format!("{what}: {e}")),
                }
            }
        }
    }
    report("reductions GPU vs CPU", &failures);
}

#[test]
fn composites_match_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(500);
    let v = rng.vec(4 * 5 * 6, -2.0, 2.0);
    let inputs = [(v, vec![4usize, 5, 6])];
    let fs: Vec<(&str, Op)> = vec![
        ("logsumexp all", Box::new(|x: &[Tensor]| x[0].logsumexp(&[], false))),
        ("logsumexp [1]", Box::new(|x: &[Tensor]| x[0].logsumexp(&[1], false))),
        ("logsumexp [0, 2] keepdim", Box::new(|x: &[Tensor]| x[0].logsumexp(&[0, 2], true))),
        ("var [2] unbiased", Box::new(|x: &[Tensor]| x[0].var(&[2], true, false))),
        ("var [0, 1] biased", Box::new(|x: &[Tensor]| x[0].var(&[0, 1], false, true))),
        ("std all", Box::new(|x: &[Tensor]| x[0].std(&[], true, false))),
        ("std [-1] biased", Box::new(|x: &[Tensor]| x[0].std(&[-1], false, false))),
        ("add_n", Box::new(|x: &[Tensor]| dygraph::add_n(&[x[0].clone(), x[0].scale(2.0, 1.0)?, x[0].square()?]))),
    ];
    let mut failures = Vec::new();
    for (name, f) in &fs {
        failures.extend(catch(name, || gpu_matches_cpu(name, f.as_ref(), &inputs, true, 1e-5)));
    }
    report("composites GPU vs CPU", &failures);
}

#[test]
fn maximum_and_minimum_split_the_gradient_at_ties() {
    let _generator = common::generator_lock();
    for place in places() {
        let a = tensor(&[1.0, 2.0, 3.0], &[3], DType::Float32, place);
        let b = tensor(&[1.0, 5.0, 0.0], &[3], DType::Float32, place);
        a.set_stop_gradient(false);
        b.set_stop_gradient(false);
        a.maximum(&b).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&a.grad().unwrap()), [0.5, 0.0, 1.0], "maximum, a, on {place}");
        assert_eq!(values(&b.grad().unwrap()), [0.5, 1.0, 0.0], "maximum, b, on {place}");
        a.clear_gradient();
        b.clear_gradient();
        a.minimum(&b).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&a.grad().unwrap()), [0.5, 1.0, 0.0], "minimum, a, on {place}");
        assert_eq!(values(&b.grad().unwrap()), [0.5, 0.0, 1.0], "minimum, b, on {place}");
    }
}

#[test]
fn max_and_min_gradients_split_evenly_among_tied_elements() {
    let _generator = common::generator_lock();
    // Paddle 3.x divides the gradient by the number of tied extrema.
    for place in places() {
        let x = tensor(&[1.0, 3.0, 3.0, 2.0, 0.0, 0.0], &[2, 3], DType::Float32, place);
        x.set_stop_gradient(false);
        x.max(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&x.grad().unwrap()), [0.0, 0.5, 0.5, 0.0, 0.0, 0.0], "max over all on {place}");
        x.clear_gradient();
        x.min(&[1], false).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&x.grad().unwrap()), [1.0, 0.0, 0.0, 0.0, 0.5, 0.5], "min over axis 1 on {place}");
    }
}

#[test]
fn gradcheck_in_float64() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    let shape = vec![3usize, 4, 2];
    let mut case = 0;
    for (k, &kind) in KINDS.iter().enumerate() {
        for &axes in &[&[][..], &[1], &[-1], &[0, 2], &[0, 1]] {
            for keepdim in [false, true] {
                case += 1;
                let mut rng = Rng::new(600 + case);
                // Distinct values (no ties for max/min), away from zero for prod's x/y rule.
                let mut v = rng.vec_away_from_zero(24, -2.0, 2.0, 0.2);
                if matches!(kind, Kind::Max | Kind::Min) {
                    v = (0..24).map(|i| (i as f64 * 0.37).sin() * 2.0 + i as f64 * 0.01).collect();
                }
                let name = format!("{kind:?} axes {axes:?} keepdim={keepdim} (#{k})");
                let f = move |x: &[Tensor]| apply(kind, &x[0], axes, keepdim);
                failures.extend(gradcheck(&name, &f, &[(v, shape.clone())]).err());
            }
        }
    }
    let mut rng = Rng::new(700);
    let v = rng.vec(24, -2.0, 2.0);
    let composites: Vec<(&str, Op)> = vec![
        ("logsumexp all", Box::new(|x: &[Tensor]| x[0].logsumexp(&[], false))),
        ("logsumexp [1]", Box::new(|x: &[Tensor]| x[0].logsumexp(&[1], false))),
        ("logsumexp [0, 2] keepdim", Box::new(|x: &[Tensor]| x[0].logsumexp(&[0, 2], true))),
        ("var [1] unbiased", Box::new(|x: &[Tensor]| x[0].var(&[1], true, false))),
        ("var all biased", Box::new(|x: &[Tensor]| x[0].var(&[], false, false))),
        ("std [0, 2]", Box::new(|x: &[Tensor]| x[0].std(&[0, 2], true, true))),
        ("std [-1] biased", Box::new(|x: &[Tensor]| x[0].std(&[-1], false, false))),
        ("add_n", Box::new(|x: &[Tensor]| dygraph::add_n(&[x[0].clone(), x[0].square()?, x[0].clone()]))),
    ];
    for (name, f) in &composites {
        failures.extend(gradcheck(name, f.as_ref(), &[(v.clone(), shape.clone())]).err());
    }
    report("reduction gradchecks", &failures);
}

#[test]
fn gradients_match_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    if gpu_or_skip().is_none() {
        return;
    }
    let mut failures = Vec::new();
    for (k, &kind) in KINDS.iter().enumerate() {
        for (a, &axes) in [&[][..], &[1], &[0, 2], &[-1]].iter().enumerate() {
            let mut rng = Rng::new(800 + k as u64 * 8 + a as u64);
            // Positive values: no cancellation in the float32 sums being compared.
            let v = rng.vec(5 * 6 * 7, 0.3, 2.0);
            let name = format!("{kind:?} axes {axes:?}");
            let f = move |x: &[Tensor]| apply(kind, &x[0], axes, false);
            failures.extend(catch(&name, || gpu_matches_cpu(&name, &f, &[(v, vec![5, 6, 7])], true, 1e-5)));
        }
    }
    report("reduction gradients GPU vs CPU", &failures);
}

#[test]
fn empty_reductions() {
    let _generator = common::generator_lock();
    for place in places() {
        let e = tensor(&[], &[0, 3], DType::Float32, place);
        let v = |t: Result<Tensor>| values(&t.unwrap());
        assert_eq!(v(e.sum(&[], false)), [0.0], "sum of empty on {place}");
        assert_eq!(v(e.sum(&[0], false)), [0.0, 0.0, 0.0]);
        assert_eq!(v(e.prod(&[0], false)), [1.0, 1.0, 1.0]);
        assert!(v(e.mean(&[0], false)).iter().all(|m| m.is_nan()), "mean over an empty axis is NaN on {place}");
        assert_eq!(e.sum(&[1], false).unwrap().shape(), [0]);
        assert_eq!(e.max(&[1], false).unwrap().shape(), [0], "max over a non-empty axis of an empty tensor");
        let err = e.max(&[0], false).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "max", .. }), "{err}");
        assert!(err.to_string().contains("[0, 3]"), "{err}");
        let err = e.argmax(Some(0), false).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "argmax", .. }), "{err}");
        // Axes around a kept one (the one-pass `planes` shape) over an empty batch.
        let p = tensor(&[], &[0, 3, 40], DType::Float32, place);
        assert_eq!(v(p.sum(&[0, 2], false)), [0.0; 3], "sum over an empty batch on {place}");
        assert_eq!(v(p.prod(&[0, 2], false)), [1.0; 3], "prod over an empty batch on {place}");
        let m = p.mean(&[0, 2], false).unwrap();
        assert!(m.shape() == [3] && values(&m).iter().all(|m| m.is_nan()), "mean over an empty batch on {place}");
        let ei = Tensor::from_vec_on(Vec::<i64>::new(), [0], place).unwrap();
        assert_eq!(ei.sum(&[], false).unwrap().to_vec::<i64>().unwrap(), [0]);
    }
}

#[test]
fn errors() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = tensor(&[1.0; 6], &[2, 3], DType::Float32, place);
        let e = x.sum(&[2], false).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "sum", axis: 2, rank: 2, .. }), "{e}");
        assert!(e.to_string().contains("sum") && e.to_string().contains("[2, 3]"), "{e}");
        let e = x.mean(&[-3], false).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "mean", axis: -3, .. }), "{e}");
        let e = x.max(&[0, -2], false).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "max", .. }), "duplicate axis: {e}");
        assert!(e.to_string().contains("twice"), "{e}");
        let e = x.argmax(Some(5), false).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "argmax", axis: 5, .. }), "{e}");
        let e = x.var(&[3], true, false).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "var", .. }), "{e}");
        let i = Tensor::from_vec_on(vec![1i64, 2], [2], place).unwrap();
        let e = i.mean(&[], false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "mean", dtype: DType::Int64, .. }), "{e}");
        assert!(e.to_string().contains("mean") && e.to_string().contains("int64"), "{e}");
        let e = i.logsumexp(&[], false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "logsumexp", .. }), "{e}");
        let e = i.var(&[], true, false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "var", .. }), "{e}");
        let e = dygraph::add_n(&[]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "add_n", .. }), "{e}");
        let y = tensor(&[1.0; 3], &[3], DType::Float32, place);
        let e = dygraph::add_n(&[x.clone(), y]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "add_n", .. }), "{e}");
        assert!(e.to_string().contains("[3]") && e.to_string().contains("[2, 3]"), "{e}");
    }
}
