//! einsum against explicit loops (and its gradients by finite differences); sampling
//! (`bernoulli`, `multinomial`) by frequencies under a printed seed; counting and selection
//! (`histogram`, `bincount`, `nonzero`, `masked_select`, `unique`) against hand values; every
//! place.

use crate::common;

use common::{Rng, assert_close, places, values};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

/// `Σ` over every assignment of `letters` (sizes in `sizes`) of the product of the operands
/// at their letters, written out for the equations the test uses.
fn einsum_ref(eq: &str, ops: &[(&[f64], &[usize])]) -> (Vec<f64>, Vec<usize>) {
    let (lhs, out) = eq.split_once("->").unwrap();
    let terms: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let out: Vec<char> = out.chars().collect();
    let mut letters: Vec<char> = terms.iter().flatten().copied().collect();
    letters.sort();
    letters.dedup();
    let size =
        |c: char| terms.iter().zip(ops).find_map(|(t, (_, s))| t.iter().position(|&d| d == c).map(|i| s[i])).unwrap();
    let out_shape: Vec<usize> = out.iter().map(|&c| size(c)).collect();
    let mut result = vec![0.0; out_shape.iter().product::<usize>().max(1)];
    let total: usize = letters.iter().map(|&c| size(c)).product();
    for flat in 0..total {
        let mut rem = flat;
        let mut at = std::collections::HashMap::new();
        for &c in letters.iter().rev() {
            at.insert(c, rem % size(c));
            rem /= size(c);
        }
        let index = |t: &[char], s: &[usize]| t.iter().zip(s).fold(0, |acc, (c, d)| acc * d + at[c]);
        let prod: f64 = terms.iter().zip(ops).map(|(t, (v, s))| v[index(t, s)]).product();
        result[index(&out, &out_shape)] += prod;
    }
    (result, out_shape)
}

#[test]
fn einsum_matches_loops_and_differentiates() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 51);
    let cases: Vec<(&str, Vec<Vec<usize>>)> = vec![
        ("ij,jk->ik", vec![vec![2, 3], vec![3, 4]]),
        ("bij,bjk->bik", vec![vec![2, 2, 3], vec![2, 3, 2]]),
        ("bhqd,bhkd->bhqk", vec![vec![1, 2, 3, 4], vec![1, 2, 5, 4]]),
        ("i,i->", vec![vec![5], vec![5]]),
        ("i,j->ij", vec![vec![3], vec![2]]),
        ("ij->ji", vec![vec![2, 3]]),
        ("ijk->j", vec![vec![2, 3, 4]]),
        ("ij,jk,kl->il", vec![vec![2, 3], vec![3, 2], vec![2, 4]]),
        ("ijk,ik->j", vec![vec![2, 3, 4], vec![2, 4]]),
    ];
    for place in places() {
        for (eq, shapes) in &cases {
            let data: Vec<Vec<f64>> = shapes.iter().map(|s| rng.vec(s.iter().product(), -1.0, 1.0)).collect();
            let ts: Vec<Tensor> =
                data.iter().zip(shapes).map(|(d, s)| common::tensor(d, s, DType::Float32, place)).collect();
            let refs: Vec<&Tensor> = ts.iter().collect();
            let got = paddle::einsum(eq, &refs).unwrap();
            let ops: Vec<(&[f64], &[usize])> =
                data.iter().zip(shapes).map(|(d, s)| (d.as_slice(), s.as_slice())).collect();
            let (want, shape) = einsum_ref(eq, &ops);
            assert_eq!(got.shape(), shape.as_slice(), "{eq} on {place}");
            assert_close(&format!("{eq} on {place}"), &values(&got), &want, 1e-5);
        }
    }
    // Implicit output: letters used once, alphabetical.
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]).unwrap();
    assert_eq!(values(&paddle::einsum("ij,jk", &[&a, &a]).unwrap()), [7.0, 10.0, 15.0, 22.0]);
    let mut failures = Vec::new();
    for (eq, shapes) in [
        ("bij,bjk->bik", vec![vec![2, 2, 3], vec![2, 3, 2]]),
        ("ij,jk,kl->il", vec![vec![2, 3], vec![3, 2], vec![2, 2]]),
    ] {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec(s.iter().product(), -1.0, 1.0), s.clone())).collect();
        let f = move |t: &[Tensor]| paddle::einsum(eq, &t.iter().collect::<Vec<_>>());
        failures.extend(common::gradcheck(eq, &f, &inputs).err());
    }
    common::report("einsum gradchecks", &failures);
    let b = Tensor::from_vec(vec![1.0f32; 6], [2, 3]).unwrap();
    assert!(paddle::einsum("ij,jk->ik", &[&a, &b]).is_ok());
    assert!(matches!(paddle::einsum("ij,kl->ik", &[&a]), Err(Error::InvalidArgument { .. })));
    // A diagonal needs equal sizes (tests/einsum.rs covers the supported forms).
    assert!(matches!(paddle::einsum("ii->i", &[&b]), Err(Error::InvalidArgument { .. })));
    assert!(matches!(paddle::einsum("ij,ij->i", &[&a, &b]), Err(Error::Shape { .. })));
    // An ellipsis covering axes must appear in the output.
    let c = Tensor::from_vec(vec![1.0f32; 12], [2, 2, 3]).unwrap();
    assert!(matches!(paddle::einsum("...ij->ij", &[&c]), Err(Error::InvalidArgument { .. })));
}

#[test]
fn bernoulli_and_multinomial_draw_in_proportion() {
    let _g = common::generator_lock();
    for place in places() {
        paddle::seed(common::run_seed());
        let p = paddle::full_on([4000usize], 0.3, DType::Float32, place).unwrap();
        let draws = values(&paddle::bernoulli(&p).unwrap());
        assert!(draws.iter().all(|&v| v == 0.0 || v == 1.0));
        let mean = draws.iter().sum::<f64>() / 4000.0;
        assert!((mean - 0.3).abs() < 0.04, "bernoulli mean {mean} on {place}");

        let probs = common::tensor(&[1.0, 2.0, 7.0, 0.0], &[4], DType::Float32, place);
        let s = paddle::multinomial(&probs, 3000, true).unwrap();
        assert_eq!((s.shape(), s.dtype()), (&[3000usize][..], DType::Int64));
        let v = values(&s);
        let freq = |k: f64| v.iter().filter(|&&x| x == k).count() as f64 / 3000.0;
        for (k, want) in [(0.0, 0.1), (1.0, 0.2), (2.0, 0.7)] {
            assert!((freq(k) - want).abs() < 0.04, "class {k}: {} vs {want} on {place}", freq(k));
        }
        assert_eq!(freq(3.0), 0.0, "a zero weight is never drawn");
        // Without replacement: distinct classes per row, never the zero-weight one first.
        let rows = common::tensor(&[1.0, 1.0, 1.0, 0.0, 5.0, 1.0, 1.0, 1.0], &[2, 4], DType::Float32, place);
        let s = values(&paddle::multinomial(&rows, 3, false).unwrap());
        for r in s.chunks(3) {
            let mut sorted = r.to_vec();
            sorted.sort_by(f64::total_cmp);
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "{r:?}");
        }
        assert!(!s[..3].contains(&3.0), "row 0 drew its zero-weight class: {s:?}");
        assert!(paddle::multinomial(&rows, 5, false).is_err());
    }
}

#[test]
fn histogram_bincount_nonzero_masked_select_unique_match_hand_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = common::tensor(&[1.0, 2.0, 1.0, 4.0, 2.5, -1.0, 4.0], &[7], DType::Float32, place);
        // Bins of width 1 over [1, 4]: [1,2) [2,3) [3,4]; -1 is outside.
        assert_eq!(values(&paddle::histogram(&x, 3, 1.0, 4.0).unwrap()), [2.0, 2.0, 2.0]);
        assert_eq!(values(&paddle::histogram(&x, 5, 0.0, 0.0).unwrap()), [1.0, 0.0, 2.0, 2.0, 2.0]);

        let ints = Tensor::from_vec_on(vec![1i64, 3, 1, 0], [4], place).unwrap();
        assert_eq!(values(&paddle::bincount(&ints, None, 0).unwrap()), [1.0, 2.0, 0.0, 1.0]);
        assert_eq!(values(&paddle::bincount(&ints, None, 6).unwrap()).len(), 6);
        let w = common::tensor(&[0.5, 1.0, 0.25, 2.0], &[4], DType::Float32, place);
        assert_eq!(values(&paddle::bincount(&ints, Some(&w), 0).unwrap()), [2.0, 0.75, 0.0, 1.0]);
        let neg = Tensor::from_vec_on(vec![1i64, -1], [2], place).unwrap();
        assert!(paddle::bincount(&neg, None, 0).is_err());

        let m = common::tensor(&[0.0, 3.0, 0.0, -1.0, 0.0, 2.0], &[2, 3], DType::Float32, place);
        let nz = paddle::nonzero(&m).unwrap();
        assert_eq!(nz.shape(), &[3, 2]);
        assert_eq!(values(&nz), [0.0, 1.0, 1.0, 0.0, 1.0, 2.0]);

        let mask = m.greater_than_scalar(0.0).unwrap();
        assert_eq!(values(&paddle::masked_select(&m, &mask).unwrap()), [3.0, 2.0]);
        let row = Tensor::from_vec_on(vec![true, false, true], [3], place).unwrap();
        assert_eq!(values(&paddle::masked_select(&m, &row).unwrap()), [0.0, 0.0, -1.0, 2.0]);

        let u = paddle::unique(&x).unwrap();
        assert_eq!(values(&u.values), [-1.0, 1.0, 2.0, 2.5, 4.0]);
        assert_eq!(values(&u.counts), [1.0, 2.0, 1.0, 1.0, 2.0]);
        assert_eq!(values(&u.inverse), [1.0, 2.0, 1.0, 4.0, 3.0, 0.0, 4.0]);
    }
    // masked_select's gradient reaches the selected elements only.
    let x = Tensor::from_vec_on(vec![1.0f64, -2.0, 3.0], [3], Place::Cpu).unwrap();
    x.set_stop_gradient(false);
    paddle::masked_select(&x, &x.greater_than_scalar(0.0).unwrap())
        .unwrap()
        .sum(&[], false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(values(&x.grad().unwrap()), [1.0, 0.0, 1.0]);
}
