//! Shape and layout ops and matmul: values against index-level references on every place,
//! GPU against CPU (with gradients) in several dtypes, float64 gradchecks, and errors.

use crate::common;

use common::{Rng, catch, gpu_matches_cpu, gpu_or_skip, gradcheck, places, report, tensor, values};
use dygraph::{DType, Error, Place, Result, Sections, Tensor};

/// Every coordinate of `shape`, row-major.
fn coords(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut i| {
            let mut c = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                c[d] = i % shape[d];
                i /= shape[d];
            }
            c
        })
        .collect()
}

/// Element `c` of the row-major `v` of `shape`.
fn at(v: &[f64], shape: &[usize], c: &[usize]) -> f64 {
    let mut i = 0;
    for (d, &x) in c.iter().enumerate() {
        i = i * shape[d] + x;
    }
    v[i]
}

/// The values of `shape` given by `f(coordinate)`.
fn build(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Vec<f64> {
    coords(shape).iter().map(|c| f(c)).collect()
}

fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

fn check(what: &str, t: &Tensor, shape: &[usize], expected: &[f64]) {
    assert_eq!(t.shape(), shape, "{what}: shape");
    assert_eq!(values(t), expected, "{what}: values");
}

#[test]
fn reshape_flatten_squeeze_unsqueeze() {
    let _generator = common::generator_lock();
    for place in places() {
        let v = iota(24);
        let x = tensor(&v, &[2, 3, 4], DType::Float32, place);
        let w = |s: &str| format!("{s} on {place}");
        check(&w("reshape [0, -1]"), &dygraph::reshape(&x, &[0, -1]).unwrap(), &[2, 12], &v);
        check(&w("reshape [-1, 4]"), &dygraph::reshape(&x, &[-1, 4]).unwrap(), &[6, 4], &v);
        check(&w("reshape [4, 0, 2]"), &dygraph::reshape(&x, &[4, 0, 2]).unwrap(), &[4, 3, 2], &v);
        check(&w("reshape [24]"), &x.reshape([24]).unwrap(), &[24], &v);
        check(
            &w("reshape to 0-d"),
            &tensor(&[5.0], &[1, 1], DType::Float32, place).reshape([0usize; 0]).unwrap(),
            &[],
            &[5.0],
        );
        check(&w("flatten 1..2"), &x.flatten(1, 2).unwrap(), &[2, 12], &v);
        check(&w("flatten 0..-1"), &x.flatten(0, -1).unwrap(), &[24], &v);
        check(&w("flatten 0..1"), &x.flatten(0, 1).unwrap(), &[6, 4], &v);
        check(&w("flatten 0-d"), &tensor(&[5.0], &[], DType::Float32, place).flatten(0, -1).unwrap(), &[1], &[5.0]);

        let y = tensor(&iota(6), &[1, 3, 1, 2], DType::Float32, place);
        assert_eq!(y.squeeze(&[]).unwrap().shape(), [3, 2]);
        assert_eq!(y.squeeze(&[0]).unwrap().shape(), [3, 1, 2]);
        assert_eq!(y.squeeze(&[1]).unwrap().shape(), [1, 3, 1, 2], "a listed axis that is not 1 stays");
        assert_eq!(y.squeeze(&[-2, 0]).unwrap().shape(), [3, 2]);
        check(&w("squeeze"), &y.squeeze(&[]).unwrap(), &[3, 2], &iota(6));
        let z = tensor(&iota(6), &[2, 3], DType::Float32, place);
        assert_eq!(z.unsqueeze(&[0]).unwrap().shape(), [1, 2, 3]);
        assert_eq!(z.unsqueeze(&[-1]).unwrap().shape(), [2, 3, 1]);
        assert_eq!(z.unsqueeze(&[0, 2]).unwrap().shape(), [1, 2, 1, 3]);
        assert_eq!(z.unsqueeze(&[1, -1]).unwrap().shape(), [2, 1, 3, 1]);
        check(&w("unsqueeze"), &z.unsqueeze(&[1]).unwrap(), &[2, 1, 3], &iota(6));
    }
}

#[test]
fn transpose_flip_slice_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let xs = [2usize, 3, 4];
        let v = iota(24);
        let x = tensor(&v, &xs, DType::Float32, place);
        let w = |s: &str| format!("{s} on {place}");
        for perm in [[0usize, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1], [2, 1, 0]] {
            let out: Vec<usize> = perm.iter().map(|&p| xs[p]).collect();
            let expected = build(&out, |c| {
                let mut d = [0; 3];
                for i in 0..3 {
                    d[perm[i]] = c[i];
                }
                at(&v, &xs, &d)
            });
            check(&w(&format!("transpose {perm:?}")), &x.transpose(&perm).unwrap(), &out, &expected);
        }
        check(
            &w("t"),
            &tensor(&iota(6), &[2, 3], DType::Float32, place).t().unwrap(),
            &[3, 2],
            &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0],
        );

        for axes in [vec![0isize], vec![-1], vec![0, 2], vec![1], vec![0, 1, 2]] {
            let flipped: Vec<usize> = axes.iter().map(|&a| (a + 3) as usize % 3).collect();
            let expected = build(&xs, |c| {
                at(
                    &v,
                    &xs,
                    &(0..3).map(|d| if flipped.contains(&d) { xs[d] - 1 - c[d] } else { c[d] }).collect::<Vec<_>>(),
                )
            });
            check(&w(&format!("flip {axes:?}")), &x.flip(&axes).unwrap(), &xs, &expected);
        }

        // slice: negative bounds count from the end, out-of-range bounds clamp.
        let s = x.slice(&[2], &[-3], &[100]).unwrap();
        check(&w("slice [-3:100]"), &s, &[2, 3, 3], &build(&[2, 3, 3], |c| at(&v, &xs, &[c[0], c[1], c[2] + 1])));
        let s = x.slice(&[2], &[-100], &[2]).unwrap();
        check(&w("slice [-100:2]"), &s, &[2, 3, 2], &build(&[2, 3, 2], |c| at(&v, &xs, &[c[0], c[1], c[2]])));
        let s = x.slice(&[0, 2], &[1, 1], &[2, -1]).unwrap();
        check(&w("slice two axes"), &s, &[1, 3, 2], &build(&[1, 3, 2], |c| at(&v, &xs, &[1, c[1], c[2] + 1])));
        let s = x.slice(&[1], &[2], &[1]).unwrap();
        assert_eq!(s.shape(), [2, 0, 4], "an empty slice on {place}");
        let s = x.slice(&[-2], &[1], &[3]).unwrap();
        check(&w("slice axis -2"), &s, &[2, 2, 4], &build(&[2, 2, 4], |c| at(&v, &xs, &[c[0], c[1] + 1, c[2]])));

        // strided_slice with negative steps (numpy's a[s:e:k]).
        let a = tensor(&iota(10), &[10], DType::Float32, place);
        let ss = |s: i64, e: i64, k: i64| values(&dygraph::strided_slice(&a, &[0], &[s], &[e], &[k]).unwrap());
        assert_eq!(ss(8, 1, -3), [8.0, 5.0, 2.0], "a[8:1:-3] on {place}");
        assert_eq!(ss(-1, -11, -1), [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0], "a[-1:-11:-1]");
        assert_eq!(ss(100, -100, -2), [9.0, 7.0, 5.0, 3.0, 1.0], "a[100:-100:-2] clamps");
        assert_eq!(ss(-2, 2, -1), [8.0, 7.0, 6.0, 5.0, 4.0, 3.0], "a[-2:2:-1]");
        assert_eq!(ss(1, 8, 3), [1.0, 4.0, 7.0], "a[1:8:3]");
        assert_eq!(ss(2, 5, -1), [] as [f64; 0], "a[2:5:-1] is empty");
        let m = dygraph::strided_slice(&x, &[1, 2], &[-1, 3], &[-100, 0], &[-2, -2]).unwrap();
        check(
            &w("strided 2-D"),
            &m,
            &[2, 2, 2],
            &build(&[2, 2, 2], |c| at(&v, &xs, &[c[0], 2 - 2 * c[1], 3 - 2 * c[2]])),
        );
    }
}

#[test]
fn concat_stack_split_chunk() {
    let _generator = common::generator_lock();
    for place in places() {
        let w = |s: &str| format!("{s} on {place}");
        let a = tensor(&iota(6), &[2, 3], DType::Float32, place);
        let b = tensor(&[10.0, 11.0], &[2, 1], DType::Float32, place);
        let c = tensor(&[20.0, 21.0, 22.0], &[1, 3], DType::Float32, place);
        check(
            &w("concat axis 1"),
            &dygraph::concat(&[a.clone(), b.clone()], 1).unwrap(),
            &[2, 4],
            &[0.0, 1.0, 2.0, 10.0, 3.0, 4.0, 5.0, 11.0],
        );
        check(
            &w("concat axis -1"),
            &dygraph::concat(&[b.clone(), a.clone(), b.clone()], -1).unwrap(),
            &[2, 5],
            &[10.0, 0.0, 1.0, 2.0, 10.0, 11.0, 3.0, 4.0, 5.0, 11.0],
        );
        check(
            &w("concat axis 0"),
            &dygraph::concat(&[a.clone(), c.clone()], 0).unwrap(),
            &[3, 3],
            &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 20.0, 21.0, 22.0],
        );
        check(&w("concat one"), &dygraph::concat(std::slice::from_ref(&a), 0).unwrap(), &[2, 3], &iota(6));
        let e = tensor(&[], &[0, 3], DType::Float32, place);
        check(&w("concat empty"), &dygraph::concat(&[e, c.clone()], 0).unwrap(), &[1, 3], &[20.0, 21.0, 22.0]);

        let p = tensor(&[1.0, 2.0], &[2], DType::Float32, place);
        let q = tensor(&[3.0, 4.0], &[2], DType::Float32, place);
        check(&w("stack 0"), &dygraph::stack(&[p.clone(), q.clone()], 0).unwrap(), &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        check(&w("stack 1"), &dygraph::stack(&[p.clone(), q.clone()], 1).unwrap(), &[2, 2], &[1.0, 3.0, 2.0, 4.0]);
        check(
            &w("stack -1"),
            &dygraph::stack(&[p.clone(), q.clone(), p.clone()], -1).unwrap(),
            &[2, 3],
            &[1.0, 3.0, 1.0, 2.0, 4.0, 2.0],
        );
        let a3 = dygraph::stack(&[a.clone(), a.clone()], 1).unwrap();
        assert_eq!(a3.shape(), [2, 2, 3]);
        check(&w("stack 2-D"), &a3, &[2, 2, 3], &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);

        let x = tensor(&iota(12), &[2, 6], DType::Float32, place);
        let parts = x.split(3, 1).unwrap();
        assert_eq!(parts.len(), 3);
        check(&w("split 3 [0]"), &parts[0], &[2, 2], &[0.0, 1.0, 6.0, 7.0]);
        check(&w("split 3 [2]"), &parts[2], &[2, 2], &[4.0, 5.0, 10.0, 11.0]);
        let parts = dygraph::split(&x, [1, -1, 2], -1).unwrap();
        assert_eq!(parts.iter().map(|p| p.shape()[1]).collect::<Vec<_>>(), [1, 3, 2]);
        check(&w("split sizes [1]"), &parts[1], &[2, 3], &[1.0, 2.0, 3.0, 7.0, 8.0, 9.0]);
        let parts = dygraph::split(&x, Sections::Sizes(vec![6, 0]), 1).unwrap();
        assert_eq!(parts[1].shape(), [2, 0]);
        let parts = x.split(&[1i64, 1][..], 0).unwrap();
        check(&w("split axis 0"), &parts[1], &[1, 6], &iota(12)[6..]);
        let chunks = x.chunk(2, 1).unwrap();
        check(&w("chunk"), &chunks[1], &[2, 3], &[3.0, 4.0, 5.0, 9.0, 10.0, 11.0]);
    }
}

#[test]
fn expand_tile_pad() {
    let _generator = common::generator_lock();
    for place in places() {
        let w = |s: &str| format!("{s} on {place}");
        let r = tensor(&[1.0, 2.0, 3.0], &[3], DType::Float32, place);
        check(&w("expand"), &r.expand(&[2, -1]).unwrap(), &[2, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let col = tensor(&[1.0, 2.0], &[2, 1], DType::Float32, place);
        check(&w("expand col"), &col.expand(&[2, 3]).unwrap(), &[2, 3], &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        check(
            &w("broadcast_to"),
            &r.reshape([1, 3]).unwrap().broadcast_to(&[4, 3]).unwrap(),
            &[4, 3],
            &[1.0, 2.0, 3.0].repeat(4),
        );
        check(&w("broadcast_to same"), &r.broadcast_to(&[3]).unwrap(), &[3], &[1.0, 2.0, 3.0]);
        check(&w("expand to 0"), &r.expand(&[0, 3]).unwrap(), &[0, 3], &[]);

        let xs = [2usize, 3];
        let v = iota(6);
        let x = tensor(&v, &xs, DType::Float32, place);
        for (reps, out) in [
            (vec![2usize], vec![2usize, 6]),
            (vec![2, 1], vec![4, 3]),
            (vec![2, 1, 2], vec![2, 2, 6]),
            (vec![1, 1], vec![2, 3]),
        ] {
            let expected = build(&out, |c| {
                let n = c.len();
                at(&v, &xs, &[c[n - 2] % 2, c[n - 1] % 3])
            });
            check(&w(&format!("tile {reps:?}")), &x.tile(&reps).unwrap(), &out, &expected);
        }

        // pad: 2·rank values pad every axis from the first; fewer pad the last axes backwards.
        let p = dygraph::pad(&x, &[1, 0, 0, 2], 9.0).unwrap();
        let expected = build(&[3, 5], |c| if c[0] >= 1 && c[1] < 3 { at(&v, &xs, &[c[0] - 1, c[1]]) } else { 9.0 });
        check(&w("pad 2·rank"), &p, &[3, 5], &expected);
        let p = dygraph::pad(&x, &[1, 2], 0.0).unwrap();
        let expected = build(&[2, 6], |c| if (1..4).contains(&c[1]) { at(&v, &xs, &[c[0], c[1] - 1]) } else { 0.0 });
        check(&w("pad last axis"), &p, &[2, 6], &expected);
        let img = tensor(&iota(4), &[1, 1, 2, 2], DType::Float32, place);
        let p = dygraph::pad(&img, &[1, 0, 0, 1], -1.0).unwrap();
        check(
            &w("pad NCHW [left, right, top, bottom]"),
            &p,
            &[1, 1, 3, 3],
            &[-1.0, 0.0, 1.0, -1.0, 2.0, 3.0, -1.0, -1.0, -1.0],
        );
        let i = Tensor::from_vec_on(vec![1i64, 2], [2], place).unwrap();
        assert_eq!(
            dygraph::pad(&i, &[1, 1], 7.0).unwrap().to_vec::<i64>().unwrap(),
            [7, 1, 2, 7],
            "int64 pad on {place}"
        );
    }
}

/// Naive batched matmul in f64 with numpy promotion of 1-D operands and broadcast batches.
fn naive_matmul(x: &[f64], xs: &[usize], y: &[f64], ys: &[usize], tx: bool, ty: bool) -> (Vec<f64>, Vec<usize>) {
    let (xv, yv) = (xs.len() == 1, ys.len() == 1);
    let xs2: Vec<usize> = if xv { vec![1, xs[0]] } else { xs.to_vec() };
    let ys2: Vec<usize> = if yv { vec![ys[0], 1] } else { ys.to_vec() };
    let (tx, ty) = (tx && !xv, ty && !yv);
    let (xr, xc) = (xs2[xs2.len() - 2], xs2[xs2.len() - 1]);
    let (yr, yc) = (ys2[ys2.len() - 2], ys2[ys2.len() - 1]);
    let (m, k) = if tx { (xc, xr) } else { (xr, xc) };
    let n = if ty { yr } else { yc };
    let bx = &xs2[..xs2.len() - 2];
    let by = &ys2[..ys2.len() - 2];
    let nb = bx.len().max(by.len());
    let pad = |b: &[usize]| -> Vec<usize> { std::iter::repeat_n(1, nb - b.len()).chain(b.iter().copied()).collect() };
    let (px, py) = (pad(bx), pad(by));
    let batch: Vec<usize> = px.iter().zip(&py).map(|(&a, &b)| a.max(b)).collect();
    let mut out = Vec::new();
    for bc in coords(&batch) {
        let off = |p: &[usize], r: usize, c: usize| -> usize {
            let mut i = 0;
            for d in 0..nb {
                i = i * p[d] + if p[d] == 1 { 0 } else { bc[d] };
            }
            i * r * c
        };
        let (ox, oy) = (off(&px, xr, xc), off(&py, yr, yc));
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for l in 0..k {
                    let a = if tx { x[ox + l * xc + i] } else { x[ox + i * xc + l] };
                    let b = if ty { y[oy + j * yc + l] } else { y[oy + l * yc + j] };
                    s += a * b;
                }
                out.push(s);
            }
        }
    }
    let mut shape = batch;
    if !xv {
        shape.push(m);
    }
    if !yv {
        shape.push(n);
    }
    (out, shape)
}

/// (x shape, y shape, transpose_x, transpose_y) of every matmul form.
const MATMUL_FORMS: &[(&[usize], &[usize], bool, bool)] = &[
    (&[5], &[5], false, false),
    (&[3, 5], &[5], false, false),
    (&[5], &[5, 4], false, false),
    (&[3, 5], &[5, 4], false, false),
    (&[5, 3], &[5, 4], true, false),
    (&[3, 5], &[4, 5], false, true),
    (&[5, 3], &[4, 5], true, true),
    (&[2, 3, 5], &[5, 4], false, false),
    (&[3, 5], &[2, 5, 4], false, false),
    (&[2, 1, 3, 5], &[4, 5, 2], false, false),
    (&[2, 1, 5, 3], &[4, 2, 5], true, true),
    (&[2, 3, 5], &[5], false, false),
    (&[5], &[2, 5, 4], false, false),
    (&[5], &[5], true, true),
    (&[1, 5], &[5, 1], false, false),
    (&[70, 33], &[33, 65], false, false),
    (&[3, 0], &[0, 4], false, false),
];

fn abs(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| x.abs()).collect()
}

/// `Err` unless every `|actual − expected| ≤ tol · magnitude`, where `magnitude` is the same
/// product of the operands' absolute values (Σ|x||y|): a dot product's rounding error scales
/// with its terms, not with a result that cancels to near zero.
fn check_dot_close(
    what: &str,
    actual: &[f64],
    expected: &[f64],
    magnitude: &[f64],
    tol: f64,
) -> std::result::Result<(), String> {
    if actual.len() != expected.len() {
        return Err(format!("{what}: {} values, expected {}", actual.len(), expected.len()));
    }
    for (i, ((a, e), m)) in actual.iter().zip(expected).zip(magnitude).enumerate() {
        let err = (a - e).abs();
        // NaN anywhere fails.
        if err.is_nan() || m.is_nan() || err > tol * m {
            return Err(format!(
                "{what}: element {i} is {a} but expected {e}: error {err:e} > {tol:e} × Σ|x||y| {m:e} (seed {})",
                common::run_seed()
            ));
        }
    }
    Ok(())
}

#[test]
fn matmul_every_form_against_a_naive_reference() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    for (f, &(xs, ys, tx, ty)) in MATMUL_FORMS.iter().enumerate() {
        let mut rng = Rng::new(100 + f as u64);
        let x: Vec<f64> = rng.vec(xs.iter().product(), -1.0, 1.0).into_iter().map(|v| v as f32 as f64).collect();
        let y: Vec<f64> = rng.vec(ys.iter().product(), -1.0, 1.0).into_iter().map(|v| v as f32 as f64).collect();
        let (expected, shape) = naive_matmul(&x, xs, &y, ys, tx, ty);
        for place in places() {
            for dtype in [DType::Float32, DType::Float64, DType::Float16] {
                if place.is_gpu() && dtype == DType::Float64 {
                    continue;
                }
                let what = format!(
                    "matmul {xs:?}{} · {ys:?}{} {dtype} on {place}",
                    if tx { "ᵀ" } else { "" },
                    if ty { "ᵀ" } else { "" }
                );
                let (a, b) = (tensor(&x, xs, dtype, place), tensor(&y, ys, dtype, place));
                match dygraph::matmul(&a, &b, tx, ty) {
                    Ok(r) if r.shape() != shape.as_slice() => {
                        failures.push(format!("{what}: shape {:?} != {shape:?}", r.shape()))
                    }
                    Ok(r) if r.dtype() != dtype => failures.push(format!("{what}: dtype {}", r.dtype())),
                    Ok(r) => {
                        let (exp, tol) = match dtype {
                            DType::Float16 => (naive_matmul(&values(&a), xs, &values(&b), ys, tx, ty).0, 3e-3),
                            DType::Float64 => (expected.clone(), 1e-12),
                            _ => (expected.clone(), 1e-5),
                        };
                        let magnitude = naive_matmul(&abs(&values(&a)), xs, &abs(&values(&b)), ys, tx, ty).0;
                        failures.extend(check_dot_close(&what, &values(&r), &exp, &magnitude, tol).err());
                    }
                    Err(e) => failures.push(format!("{what}: {e}")),
                }
            }
        }
    }
    // K = 0 gives zeros (numpy), also from a reused pooled GPU buffer holding garbage.
    for place in places() {
        let junk = tensor(&[7.0; 12], &[3, 4], DType::Float32, place);
        drop(junk);
        let z = dygraph::matmul(
            &tensor(&[], &[3, 0], DType::Float32, place),
            &tensor(&[], &[0, 4], DType::Float32, place),
            false,
            false,
        )
        .unwrap();
        assert_eq!((z.shape(), values(&z)), (&[3usize, 4][..], vec![0.0; 12]), "K = 0 on {place}");
    }
    report("matmul forms", &failures);
}

#[test]
fn linear_and_dot() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], DType::Float32, place);
        let w = tensor(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2], DType::Float32, place);
        let b = tensor(&[10.0, 20.0], &[2], DType::Float32, place);
        check(
            &format!("linear on {place}"),
            &dygraph::linear(&x, &w, Some(&b)).unwrap(),
            &[2, 2],
            &[14.0, 25.0, 20.0, 31.0],
        );
        check(
            &format!("linear no bias on {place}"),
            &dygraph::linear(&x, &w, None).unwrap(),
            &[2, 2],
            &[4.0, 5.0, 10.0, 11.0],
        );
        let p = tensor(&[1.0, 2.0, 3.0], &[3], DType::Float32, place);
        check(&format!("dot on {place}"), &dygraph::dot(&p, &p).unwrap(), &[], &[14.0]);
        check(&format!("row-wise dot on {place}"), &dygraph::dot(&x, &x).unwrap(), &[2], &[14.0, 77.0]);
        check(&format!("x.matmul on {place}"), &x.matmul(&p).unwrap(), &[2], &[14.0, 32.0]);
    }
}

#[test]
fn data_movement_matches_between_gpu_and_cpu_in_every_dtype() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    type Op = Box<dyn Fn(&Tensor) -> Result<Tensor>>;
    let ops: Vec<(&str, Op)> = vec![
        ("transpose", Box::new(|x: &Tensor| x.transpose(&[2, 0, 1]))),
        ("flip", Box::new(|x: &Tensor| x.flip(&[0, 2]))),
        ("slice", Box::new(|x: &Tensor| x.slice(&[1, 2], &[1, -5], &[100, -1]))),
        ("strided_slice", Box::new(|x: &Tensor| dygraph::strided_slice(x, &[2, 0], &[-2, 2], &[0, -100], &[-3, -1]))),
        ("concat", Box::new(|x: &Tensor| dygraph::concat(&[x.clone(), x.flip(&[1])?, x.clone()], 1))),
        ("stack", Box::new(|x: &Tensor| dygraph::stack(&[x.clone(), x.flip(&[2])?], 2))),
        ("split", Box::new(|x: &Tensor| Ok(dygraph::split(x, [2, -1], 0)?.remove(1)))),
        ("expand", Box::new(|x: &Tensor| x.slice(&[1], &[0], &[1])?.expand(&[2, 3, 5, 7, 11]))),
        ("tile", Box::new(|x: &Tensor| x.tile(&[2, 1, 3]))),
        ("pad", Box::new(|x: &Tensor| dygraph::pad(x, &[1, 2, 0, 3, 4, 0], 5.0))),
        ("pad trailing", Box::new(|x: &Tensor| dygraph::pad(x, &[3, 1], -1.0))),
        ("reshape + transpose", Box::new(|x: &Tensor| x.reshape([5, 77])?.t())),
    ];
    let shape = [5usize, 7, 11];
    let mut failures = Vec::new();
    for dtype in [DType::Float32, DType::Float16, DType::Int32, DType::Int64, DType::Bool] {
        let mut rng = Rng::new(200 + dtype as u64);
        let v: Vec<f64> = match dtype {
            DType::Bool => rng.ints(385, 0, 2).into_iter().map(|x| x as f64).collect(),
            DType::Int64 => rng.ints(385, -(1 << 50), 1 << 50).into_iter().map(|x| x as f64).collect(),
            DType::Int32 => rng.ints(385, -(1 << 30), 1 << 30).into_iter().map(|x| x as f64).collect(),
            _ => rng.vec(385, -3.0, 3.0),
        };
        for (name, op) in &ops {
            let what = format!("{name} {dtype}");
            match (op(&tensor(&v, &shape, dtype, Place::Cpu)), op(&tensor(&v, &shape, dtype, g))) {
                (Ok(c), Ok(d)) => {
                    if c.shape() != d.shape() || c.dtype() != d.dtype() || d.dtype() != dtype {
                        failures.push(format!(
                            "{what}: {} {:?} vs {} {:?}",
                            d.dtype(),
                            d.shape(),
                            c.dtype(),
                            c.shape()
                        ));
                    } else if values(&c) != values(&d) {
                        failures.push(format!("{what}: values differ between GPU and CPU"));
                    }
                }
                (Err(e), _) | (_, Err(e)) => failures.push(format!("{what}: {e}")),
            }
        }
    }
    report("data movement GPU vs CPU", &failures);
}

type F = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

/// Differentiable cases: name, op, input shapes.
fn grad_cases() -> Vec<(&'static str, F, Vec<Vec<usize>>)> {
    vec![
        (
            "reshape",
            Box::new(|x: &[Tensor]| dygraph::reshape(&x[0], &[0, -1]).and_then(|t| t.scale(2.0, 0.0))),
            vec![vec![2, 3, 2]],
        ),
        ("flatten", Box::new(|x: &[Tensor]| x[0].flatten(0, 1)?.square()), vec![vec![2, 3, 2]]),
        (
            "squeeze/unsqueeze",
            Box::new(|x: &[Tensor]| x[0].squeeze(&[])?.unsqueeze(&[0, 2])?.square()),
            vec![vec![2, 1, 3]],
        ),
        ("transpose", Box::new(|x: &[Tensor]| x[0].transpose(&[2, 0, 1])?.square()), vec![vec![2, 3, 2]]),
        ("flip", Box::new(|x: &[Tensor]| x[0].flip(&[0, -1])?.square()), vec![vec![2, 3, 2]]),
        ("slice", Box::new(|x: &[Tensor]| x[0].slice(&[1, 2], &[1, -1], &[100, 2])?.square()), vec![vec![2, 3, 2]]),
        (
            "strided_slice",
            Box::new(|x: &[Tensor]| dygraph::strided_slice(&x[0], &[1], &[-1], &[-100], &[-2])?.square()),
            vec![vec![2, 5, 2]],
        ),
        (
            "concat",
            Box::new(|x: &[Tensor]| dygraph::concat(&[x[0].clone(), x[1].square()?, x[0].clone()], 1)),
            vec![vec![2, 2], vec![2, 3]],
        ),
        (
            "stack",
            Box::new(|x: &[Tensor]| dygraph::stack(&[x[0].clone(), x[1].square()?], -1)),
            vec![vec![2, 3], vec![2, 3]],
        ),
        (
            "split",
            Box::new(|x: &[Tensor]| {
                let p = dygraph::split(&x[0], [1, -1], 1)?;
                p[0].square()?.add(&p[1].sum(&[1], true)?)
            }),
            vec![vec![2, 4]],
        ),
        (
            "chunk",
            Box::new(|x: &[Tensor]| {
                let p = x[0].chunk(2, 0)?;
                p[0].mul(&p[1])
            }),
            vec![vec![4, 3]],
        ),
        ("expand", Box::new(|x: &[Tensor]| x[0].expand(&[3, -1, 2])?.square()), vec![vec![2, 1]]),
        ("broadcast_to", Box::new(|x: &[Tensor]| x[0].broadcast_to(&[2, 3, 4])?.square()), vec![vec![3, 1]]),
        ("tile", Box::new(|x: &[Tensor]| x[0].tile(&[2, 1, 3])?.square()), vec![vec![2, 2]]),
        ("pad", Box::new(|x: &[Tensor]| dygraph::pad(&x[0], &[1, 0, 2, 1], 3.0)?.square()), vec![vec![2, 3]]),
        ("pad trailing", Box::new(|x: &[Tensor]| dygraph::pad(&x[0], &[2, 1], 0.5)?.square()), vec![vec![2, 3]]),
        ("matmul", Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, false)), vec![vec![3, 4], vec![4, 2]]),
        (
            "matmul tx",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], true, false)),
            vec![vec![4, 3], vec![4, 2]],
        ),
        (
            "matmul ty",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, true)),
            vec![vec![3, 4], vec![2, 4]],
        ),
        (
            "matmul tx ty",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], true, true)),
            vec![vec![4, 3], vec![2, 4]],
        ),
        (
            "matmul vec·vec",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, false)),
            vec![vec![4], vec![4]],
        ),
        (
            "matmul mat·vec",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, false)),
            vec![vec![3, 4], vec![4]],
        ),
        (
            "matmul vec·mat",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, false)),
            vec![vec![4], vec![4, 2]],
        ),
        (
            "matmul batched broadcast",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, false)),
            vec![vec![2, 1, 3, 4], vec![3, 4, 2]],
        ),
        (
            "matmul batched tx ty",
            Box::new(|x: &[Tensor]| dygraph::matmul(&x[0], &x[1], true, true)),
            vec![vec![2, 4, 3], vec![2, 4]],
        ),
        (
            "linear",
            Box::new(|x: &[Tensor]| dygraph::linear(&x[0], &x[1], Some(&x[2]))),
            vec![vec![3, 4], vec![4, 2], vec![2]],
        ),
        ("dot", Box::new(|x: &[Tensor]| dygraph::dot(&x[0], &x[1])), vec![vec![3, 4], vec![3, 4]]),
    ]
}

#[test]
fn gradcheck_in_float64() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    for (i, (name, f, shapes)) in grad_cases().into_iter().enumerate() {
        let mut rng = Rng::new(300 + i as u64);
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.into_iter().map(|s| (rng.vec(s.iter().product(), -2.0, 2.0), s)).collect();
        failures.extend(gradcheck(name, f.as_ref(), &inputs).err());
    }
    report("shape-op gradchecks", &failures);
}

#[test]
fn gradients_match_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    if gpu_or_skip().is_none() {
        return;
    }
    let mut failures = Vec::new();
    for (i, (name, f, shapes)) in grad_cases().into_iter().enumerate() {
        let mut rng = Rng::new(400 + i as u64);
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.into_iter().map(|s| (rng.vec(s.iter().product(), -2.0, 2.0), s)).collect();
        let tol = if name.starts_with("matmul") || name == "linear" || name == "dot" { 1e-4 } else { 1e-5 };
        failures.extend(catch(name, || gpu_matches_cpu(name, f.as_ref(), &inputs, true, tol)));
    }
    // A matmul large enough for several 64×64 tiles and a ragged K.
    let mut rng = Rng::new(499);
    let inputs = vec![(rng.vec(130 * 37, -1.0, 1.0), vec![130, 37]), (rng.vec(37 * 70, -1.0, 1.0), vec![37, 70])];
    let f = |x: &[Tensor]| dygraph::matmul(&x[0], &x[1], false, false);
    failures.extend(catch("matmul 130x37x70", || gpu_matches_cpu("matmul 130x37x70", &f, &inputs, true, 1e-4)));
    report("shape-op gradients GPU vs CPU", &failures);
}

#[test]
fn errors() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = tensor(&iota(6), &[2, 3], DType::Float32, place);
        let msg = |e: &Error| e.to_string();

        let e = dygraph::reshape(&x, &[4, 2]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
        assert!(msg(&e).contains("[2, 3]") && msg(&e).contains("[4, 2]"), "{e}");
        let e = dygraph::reshape(&x, &[-1, -1]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
        let e = dygraph::reshape(&x, &[-1, 4]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }) && msg(&e).contains("[2, 3]"), "{e}");
        let e = dygraph::reshape(&x, &[-2, 3]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "reshape", .. }), "{e}");
        let e = x.reshape([-1i64, 3]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "reshape", .. }), "{e}");

        let y = tensor(&iota(4), &[2, 2], DType::Float32, place);
        let e = dygraph::concat(&[x.clone(), y.clone()], 0).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "concat", .. }), "{e}");
        assert!(msg(&e).contains("[2, 2]") && msg(&e).contains("[2, 3]"), "{e}");
        let e = dygraph::concat(&[], 0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "concat", .. }), "{e}");
        let e = dygraph::concat(&[x.clone(), x.cast(DType::Int64).unwrap()], 0).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "concat", .. }), "{e}");
        let e = dygraph::concat(&[x.clone(), x.clone()], 2).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "concat", axis: 2, .. }), "{e}");
        let e = dygraph::stack(&[x.clone(), y.clone()], 0).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "stack", .. }), "{e}");

        let a = tensor(&iota(12), &[3, 4], DType::Float32, place);
        let b = tensor(&iota(15), &[3, 5], DType::Float32, place);
        let e = dygraph::matmul(&a, &b, false, false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");
        assert!(msg(&e).contains("[3, 4]") && msg(&e).contains("[3, 5]"), "matmul must name both shapes: {e}");
        let e = dygraph::matmul(
            &tensor(&iota(3), &[3], DType::Float32, place),
            &tensor(&iota(4), &[4], DType::Float32, place),
            false,
            false,
        )
        .unwrap_err();
        assert!(msg(&e).contains("[3]") && msg(&e).contains("[4]"), "{e}");
        let e = dygraph::matmul(
            &tensor(&iota(24), &[2, 3, 4], DType::Float32, place),
            &tensor(&iota(60), &[3, 4, 5], DType::Float32, place),
            false,
            false,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "matmul", .. }), "batch dims 2 vs 3: {e}");
        let e =
            dygraph::matmul(&a.cast(DType::Int64).unwrap(), &a.cast(DType::Int64).unwrap(), false, true).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "matmul", dtype: DType::Int64, .. }), "{e}");
        let e = dygraph::matmul(&tensor(&[1.0], &[], DType::Float32, place), &a, false, false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");

        let t3 = tensor(&iota(24), &[2, 3, 4], DType::Float32, place);
        for perm in [&[0usize, 1][..], &[0, 1, 1], &[0, 1, 3], &[2, 1, 0, 3]] {
            let e = t3.transpose(perm).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { op: "transpose", .. }), "{perm:?}: {e}");
            assert!(msg(&e).contains(&format!("{perm:?}")) && msg(&e).contains("[2, 3, 4]"), "{e}");
        }

        let e = x.squeeze(&[2]).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "squeeze", .. }), "{e}");
        let e = x.unsqueeze(&[4]).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "unsqueeze", .. }), "{e}");
        let e = x.unsqueeze(&[0, 0]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "unsqueeze", .. }), "{e}");
        let e = x.flatten(1, 0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "flatten", .. }), "{e}");
        let e = x.split(2, 1).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "split", .. }), "{e}");
        let e = x.split([1, 1], 1).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "split", .. }), "{e}");
        let e = x.split([-1, -1], 1).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "split", .. }), "{e}");
        let e = x.split(0, 1).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "split", .. }), "{e}");
        let e = x.broadcast_to(&[3, 3]).unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "broadcast_to", .. }), "{e}");
        let e = x.broadcast_to(&[1, 3]).unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "broadcast_to", .. }), "broadcasting down is an error: {e}");
        let e = x.expand(&[3]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "expand", .. }), "{e}");
        let e = dygraph::strided_slice(&x, &[0], &[0], &[1], &[0]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "slice", .. }), "{e}");
        let e = x.slice(&[0, 1], &[0], &[1]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "slice", .. }), "{e}");
        let e = x.slice(&[2], &[0], &[1]).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "slice", .. }), "{e}");
        let e = dygraph::pad(&x, &[1, 1, 1], 0.0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "pad", .. }), "{e}");
        let e = x.flip(&[3]).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "flip", .. }), "{e}");
    }
}
