//! einsum's ellipsis (`...`, broadcast batch axes) and repeated letters (diagonals, traces)
//! against an independent float64 reference by explicit loops, on every place; their
//! gradients by finite differences; and the typed errors of bad equations.

use crate::common;

use common::{Rng, assert_close, places, values};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

/// Σ over every assignment of the labels of the product of the operands at their labels,
/// written out as loops. `eq` has an explicit output (`->`); `...` stands for the axes an
/// operand's letters leave, right-aligned across the operands (digits label them here), and
/// an axis of size 1 broadcasts against a larger one. A letter repeated within one operand
/// reads the same index on each of its axes (the diagonal).
fn einsum_ref(eq: &str, ops: &[(&[f64], &[usize])]) -> (Vec<f64>, Vec<usize>) {
    let (lhs, rhs) = eq.split_once("->").expect("the reference needs an explicit output");
    let terms: Vec<&str> = lhs.split(',').collect();
    assert_eq!(terms.len(), ops.len());
    let width_of = |t: &str, ndim: usize| if t.contains("...") { ndim + 3 - t.len() } else { 0 };
    let widths: Vec<usize> = terms.iter().zip(ops).map(|(t, (_, s))| width_of(t, s.len())).collect();
    let w = widths.iter().copied().max().unwrap_or(0);
    let expand = |t: &str, e: usize| -> Vec<char> {
        match t.split_once("...") {
            Some((a, b)) => a.chars().chain((w - e..w).map(|j| char::from(b'0' + j as u8))).chain(b.chars()).collect(),
            None => t.chars().collect(),
        }
    };
    let labels: Vec<Vec<char>> = terms.iter().zip(&widths).map(|(t, &e)| expand(t, e)).collect();
    for (l, (_, s)) in labels.iter().zip(ops) {
        assert_eq!(l.len(), s.len(), "reference: {eq} does not fit shape {s:?}");
    }
    let out = expand(rhs, w);
    let mut all: Vec<char> = labels.iter().flatten().copied().collect();
    all.sort();
    all.dedup();
    // A label's size: the largest of its axes (the others are equal or 1).
    let size = |c: char| -> usize {
        labels
            .iter()
            .zip(ops)
            .flat_map(|(l, (_, s))| l.iter().zip(s.iter()).filter(move |(d, _)| **d == c).map(|(_, &n)| n))
            .max()
            .unwrap()
    };
    let sizes: Vec<usize> = all.iter().map(|&c| size(c)).collect();
    let out_shape: Vec<usize> = out.iter().map(|&c| size(c)).collect();
    let mut result = vec![0.0; out_shape.iter().product::<usize>()];
    let total: usize = sizes.iter().product();
    let mut at = vec![0usize; 128];
    for flat in 0..total {
        let mut rem = flat;
        for (&c, &n) in all.iter().zip(&sizes).rev() {
            at[c as usize] = rem % n;
            rem /= n;
        }
        let mut prod = 1.0;
        for (l, (v, s)) in labels.iter().zip(ops) {
            let mut index = 0;
            for (&c, &n) in l.iter().zip(s.iter()) {
                index = index * n + if n == 1 { 0 } else { at[c as usize] };
            }
            prod *= v[index];
        }
        let mut index = 0;
        for (&c, &n) in out.iter().zip(&out_shape) {
            index = index * n + at[c as usize];
        }
        result[index] += prod;
    }
    (result, out_shape)
}

/// Checks `einsum(eq)` (or `einsum(eq_run)` when the two differ, e.g. an implicit output)
/// against the reference of `eq` on every place, for random float32 inputs of `shapes`.
fn check_cases(rng: &mut Rng, cases: &[(&str, &str, Vec<Vec<usize>>)]) {
    let mut failures = Vec::new();
    for place in places() {
        for (eq_run, eq, shapes) in cases {
            let data: Vec<Vec<f64>> = shapes.iter().map(|s| rng.vec(s.iter().product(), -1.0, 1.0)).collect();
            failures.extend(common::catch(&format!("{eq_run} {shapes:?} on {place}"), || {
                let ts: Vec<Tensor> =
                    data.iter().zip(shapes).map(|(d, s)| common::tensor(d, s, DType::Float32, place)).collect();
                let refs: Vec<&Tensor> = ts.iter().collect();
                let got = paddle::einsum(eq_run, &refs).unwrap();
                let ops: Vec<(&[f64], &[usize])> =
                    data.iter().zip(shapes).map(|(d, s)| (d.as_slice(), s.as_slice())).collect();
                let (want, shape) = einsum_ref(eq, &ops);
                assert_eq!(got.shape(), shape.as_slice(), "shape");
                assert_eq!(got.place(), place, "place");
                assert_close("values", &values(&got), &want, 1e-5);
            }));
        }
    }
    common::report("einsum against loops", &failures);
}

#[test]
fn einsum_ellipsis_matches_loops_on_every_place() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 0xE11);
    let s = |v: &[&[usize]]| v.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    let cases: Vec<(&str, &str, Vec<Vec<usize>>)> = vec![
        // Batched matmul over two broadcast batch axes; the second operand has one.
        ("...ij,...jk->...ik", "...ij,...jk->...ik", s(&[&[2, 3, 4, 5], &[3, 5, 2]])),
        // A size-1 batch axis broadcasts against 3.
        ("...ij,...jk->...ik", "...ij,...jk->...ik", s(&[&[2, 1, 4, 5], &[3, 5, 2]])),
        ("...ij,...jk->...ik", "...ij,...jk->...ik", s(&[&[4, 5], &[2, 5, 3]])),
        ("...i->...", "...i->...", s(&[&[2, 3, 4]])),
        ("i...->...i", "i...->...i", s(&[&[3, 2, 4]])),
        ("i...->...", "i...->...", s(&[&[3, 2, 4]])),
        // Ellipsis at the end and in the middle, of different widths.
        ("ij...,jk...->ik...", "ij...,jk...->ik...", s(&[&[2, 3, 4], &[3, 2, 1, 4]])),
        ("i...j,j...->i...", "i...j,j...->i...", s(&[&[2, 3, 4], &[4, 3]])),
        // Pure broadcasting product, three operands (the last one with no ellipsis axes
        // beyond its own).
        ("...,...->...", "...,...->...", s(&[&[2, 1, 3], &[4, 3]])),
        ("...i,...i,...->...i", "...i,...i,...->...i", s(&[&[1, 3, 2], &[4, 1, 2], &[3]])),
        // An ellipsis that covers no axis, in the operand, in the output, or both.
        ("...ij->ji", "...ij->ji", s(&[&[2, 3]])),
        ("...ij->...ji", "...ij->...ji", s(&[&[2, 3]])),
        ("ij,jk->...ik", "ij,jk->...ik", s(&[&[2, 3], &[3, 2]])),
        // The ellipsis axes may be reordered around letters and summed with them.
        ("b...d,b...d->...b", "b...d,b...d->...b", s(&[&[2, 3, 1, 4], &[2, 3, 5, 4]])),
        // Operands without an ellipsis beside ones with it.
        ("...ij,j->...i", "...ij,j->...i", s(&[&[2, 3, 4], &[4]])),
        // Implicit output: the ellipsis axes first, then the letters used once, alphabetically.
        ("...ij,...jk", "...ij,...jk->...ik", s(&[&[2, 3, 4], &[2, 4, 5]])),
        ("...ji", "...ji->...ij", s(&[&[2, 3, 4]])),
        ("k...j,...jk", "k...j,...jk->...", s(&[&[2, 3, 4], &[1, 4, 2]])),
        ("b...ca", "b...ca->...abc", s(&[&[2, 3, 4, 1]])),
    ];
    check_cases(&mut rng, &cases);
}

#[test]
fn einsum_diagonals_match_loops_on_every_place() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 0xD1A);
    let s = |v: &[&[usize]]| v.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    let cases: Vec<(&str, &str, Vec<Vec<usize>>)> = vec![
        ("ii->i", "ii->i", s(&[&[3, 3]])),
        ("ii->", "ii->", s(&[&[4, 4]])),
        ("ii->i", "ii->i", s(&[&[1, 1]])),
        ("iij->j", "iij->j", s(&[&[3, 3, 2]])),
        ("bii->bi", "bii->bi", s(&[&[2, 3, 3]])),
        ("bii->ib", "bii->ib", s(&[&[2, 3, 3]])),
        ("iji->ij", "iji->ij", s(&[&[3, 2, 3]])),
        ("jii->ij", "jii->ij", s(&[&[2, 3, 3]])),
        ("iii->i", "iii->i", s(&[&[3, 3, 3]])),
        ("iijj->ij", "iijj->ij", s(&[&[2, 2, 3, 3]])),
        ("ijij->", "ijij->", s(&[&[2, 3, 2, 3]])),
        // Diagonals inside contractions.
        ("ii,i->i", "ii,i->i", s(&[&[3, 3], &[3]])),
        ("ij,jj->i", "ij,jj->i", s(&[&[2, 3], &[3, 3]])),
        ("bii,bij->bj", "bii,bij->bj", s(&[&[2, 3, 3], &[2, 3, 4]])),
        // With an ellipsis.
        ("i...i->...", "i...i->...", s(&[&[3, 2, 3]])),
        ("...ii->...i", "...ii->...i", s(&[&[2, 1, 3, 3]])),
        ("...ii,...i->...", "...ii,...i->...", s(&[&[2, 3, 3], &[4, 1, 3]])),
        // Implicit output: a repeated letter appears more than once, so it is summed (trace).
        ("ii", "ii->", s(&[&[4, 4]])),
        ("iij", "iij->j", s(&[&[3, 3, 2]])),
        ("...ii", "...ii->...", s(&[&[2, 3, 3]])),
    ];
    check_cases(&mut rng, &cases);
}

#[test]
fn einsum_diagonal_and_ellipsis_by_hand() {
    let _generator = common::generator_lock();
    for place in places() {
        let m = common::tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2], DType::Float32, place);
        assert_eq!(values(&paddle::einsum("ii->i", &[&m]).unwrap()), [1.0, 4.0], "diagonal on {place}");
        let trace = paddle::einsum("ii", &[&m]).unwrap();
        assert_eq!(trace.shape(), &[] as &[usize], "trace shape on {place}");
        assert_eq!(values(&trace), [5.0], "trace on {place}");
        // (2,1,2)·(2,2) broadcast over the batch: each batch row of the first times m.
        let a = common::tensor(&[1.0, 0.0, 0.0, 1.0], &[2, 1, 2], DType::Float32, place);
        let got = paddle::einsum("...ij,jk->...ik", &[&a, &m]).unwrap();
        assert_eq!(got.shape(), &[2, 1, 2], "broadcast matmul shape on {place}");
        assert_eq!(values(&got), [1.0, 2.0, 3.0, 4.0], "broadcast matmul on {place}");
        let s = paddle::einsum("...i->...", &[&m]).unwrap();
        assert_eq!(values(&s), [3.0, 7.0], "row sums on {place}");
    }
}

#[test]
fn einsum_ellipsis_and_diagonal_gradients_match_finite_differences() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 0x96AD);
    let mut failures = Vec::new();
    for (eq, shapes) in [
        ("...ij,...jk->...ik", vec![vec![2, 1, 2, 3], vec![3, 3, 2]]),
        ("...i->...", vec![vec![2, 3, 4]]),
        ("i...->...i", vec![vec![3, 2, 2]]),
        ("...,...->...", vec![vec![2, 1, 3], vec![4, 3]]),
        ("ii->i", vec![vec![3, 3]]),
        ("ii->", vec![vec![3, 3]]),
        ("bii->bi", vec![vec![2, 3, 3]]),
        ("iij->j", vec![vec![3, 3, 2]]),
        ("i...i,...->...", vec![vec![3, 2, 3], vec![2]]),
        ("bii,bij->bj", vec![vec![2, 2, 2], vec![2, 2, 3]]),
    ] {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec(s.iter().product(), -1.0, 1.0), s.clone())).collect();
        let f = move |t: &[Tensor]| paddle::einsum(eq, &t.iter().collect::<Vec<_>>());
        failures.extend(common::gradcheck(eq, &f, &inputs).err());
        // Every input must get a gradient (a diagonal or a broadcast axis must not cut it).
        let ts: Vec<Tensor> = inputs
            .iter()
            .map(|(v, s)| {
                let t = Tensor::from_vec_on(v.clone(), s, Place::Cpu).unwrap();
                t.set_stop_gradient(false);
                t
            })
            .collect();
        let out = f(&ts).unwrap();
        out.sum(&[], false).unwrap().backward().unwrap();
        for (i, t) in ts.iter().enumerate() {
            match t.grad() {
                Some(g) if g.shape() == t.shape() => {}
                Some(g) => failures.push(format!("{eq}: input {i} got a gradient of shape {:?}", g.shape())),
                None => failures.push(format!("{eq}: input {i} got no gradient")),
            }
        }
    }
    common::report("einsum gradchecks", &failures);
}

#[test]
fn einsum_ellipsis_and_diagonal_gpu_matches_cpu_with_gradients() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 0x69B);
    for (eq, shapes) in [
        ("...ij,...jk->...ik", vec![vec![2, 1, 3, 4], vec![3, 4, 2]]),
        ("bii->bi", vec![vec![2, 4, 4]]),
        ("ii->", vec![vec![5, 5]]),
        ("i...i,...j->...j", vec![vec![3, 2, 3], vec![2, 4]]),
    ] {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec(s.iter().product(), -1.0, 1.0), s.clone())).collect();
        let f = move |t: &[Tensor]| paddle::einsum(eq, &t.iter().collect::<Vec<_>>());
        common::gpu_matches_cpu(eq, &f, &inputs, true, 1e-5);
    }
}

#[test]
fn einsum_rejects_bad_ellipsis_and_diagonals_with_typed_errors() {
    let _generator = common::generator_lock();
    for place in places() {
        let t = |shape: &[usize]| {
            let n = shape.iter().product();
            common::tensor(&vec![1.0; n], shape, DType::Float32, place)
        };
        let (m23, m33, v3, b234) = (t(&[2, 3]), t(&[3, 3]), t(&[3]), t(&[2, 3, 4]));
        let (b243, b342, m43) = (t(&[2, 4, 3]), t(&[3, 4, 2]), t(&[4, 3]));
        // A repeated letter on axes of different sizes: invalid, naming the letter and sizes.
        for (eq, x) in [("ii->i", &m23), ("ii", &m23), ("iji->j", &b234)] {
            match paddle::einsum(eq, &[x]) {
                Err(Error::InvalidArgument { op: "einsum", msg }) => {
                    assert!(msg.contains("'i'"), "{eq} on {place}: {msg}");
                    let sizes = format!("{:?}", [x.shape()[0], x.shape()[x.ndim() - 1]]);
                    assert!(msg.contains(&sizes), "{eq} on {place}: {msg} should name sizes {sizes}");
                }
                other => panic!("{eq} on {place}: expected an invalid-argument error, got {other:?}"),
            }
        }
        let invalid: Vec<(&str, Vec<&Tensor>)> = vec![
            ("..ij->ij", vec![&m23]),
            ("....ij->ij", vec![&b234]),
            ("...i...->i", vec![&b234]),
            ("i.j->ij", vec![&m23]),
            ("ij->..", vec![&m23]),
            ("ij->i...j...", vec![&m23]),
            // The ellipsis covers axes the output drops.
            ("...ij->ij", vec![&b234]),
            ("...ij,...jk->ik", vec![&b234, &b243]),
            // Output letters not in the inputs, or repeated.
            ("ij->ik", vec![&m23]),
            ("...i->...k", vec![&b234]),
            ("ii->ii", vec![&m33]),
            ("i,i->i#", vec![&v3, &v3]),
            // Wrong operand count.
            ("...i,...i->...", vec![&v3]),
        ];
        for (eq, xs) in &invalid {
            let r = paddle::einsum(eq, xs);
            assert!(
                matches!(r, Err(Error::InvalidArgument { op: "einsum", .. })),
                "{eq} on {place}: expected an invalid-argument error, got {r:?}"
            );
        }
        let shape: Vec<(&str, Vec<&Tensor>)> = vec![
            // More letters than axes besides the ellipsis.
            ("...ijk->...", vec![&m23]),
            // Ellipsis axes that do not broadcast (2 against 4 at the same position).
            ("...i,...i->...i", vec![&m23, &m43]),
            ("...ij,...jk->...ik", vec![&b234, &b342]),
            // A letter's sizes still must agree across operands.
            ("...ij,...ij->...i", vec![&m23, &m33]),
        ];
        for (eq, xs) in &shape {
            let r = paddle::einsum(eq, xs);
            assert!(
                matches!(r, Err(Error::Shape { op: "einsum", .. })),
                "{eq} on {place}: expected a shape error, got {r:?}"
            );
        }
    }
}
