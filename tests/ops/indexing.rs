//! NumPy-style indexing: `index` against positions computed here (ranges with steps and
//! negative bounds, integers, new axes, ellipsis, integer and bool tensor indices), and
//! `index_put` / `set_value` writes with their gradients; typed errors; every place.

use crate::common;

use common::{gradcheck, places, values};
use dygraph::{self as paddle, DType, Error, Idx, Tensor};

fn arange(n: usize, shape: &[usize], place: dygraph::Place) -> Tensor {
    common::tensor(&(0..n).map(|v| v as f64).collect::<Vec<_>>(), shape, DType::Float32, place)
}

/// Python's slice positions for `start:end:step` over `n`.
fn slice_positions(n: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Vec<i64> {
    let norm = |v: i64| if v < 0 { v + n } else { v };
    let mut out = Vec::new();
    if step > 0 {
        let (mut i, e) = (norm(start.unwrap_or(0)).clamp(0, n), norm(end.unwrap_or(n)).clamp(0, n));
        while i < e {
            out.push(i);
            i += step;
        }
    } else {
        let mut i = start.map_or(n - 1, |s| norm(s).clamp(-1, n - 1));
        let e = end.map_or(-1, |e| norm(e).clamp(-1, n - 1));
        while i > e {
            out.push(i);
            i += step;
        }
    }
    out
}

#[test]
fn index_reads_like_numpy() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = arange(24, &[2, 3, 4], place);
        let v = |t: Tensor| (t.shape().to_vec(), values(&t));
        assert_eq!(v(x.index(&[1.into()]).unwrap()), (vec![3, 4], (12..24).map(|a| a as f64).collect()));
        assert_eq!(v(x.index(&[(-1).into(), 2.into()]).unwrap()), (vec![4], vec![20., 21., 22., 23.]));
        for (s, e, st) in [
            (Some(1), None, 1),
            (None, None, -1),
            (Some(-1), Some(0), -2),
            (Some(-3), Some(10), 2),
            (None, Some(-1), 1),
        ] {
            let got = x.index(&[Idx::full(), Idx::full(), Idx::range(s, e, st)]).unwrap();
            let cols = slice_positions(4, s, e, st);
            let want: Vec<f64> = (0..6).flat_map(|r| cols.iter().map(move |&c| (r * 4 + c) as f64)).collect();
            assert_eq!(v(got), (vec![2, 3, cols.len()], want), "[:, :, {s:?}:{e:?}:{st}] on {place}");
        }
        let y = x.index(&[Idx::Ellipsis, Idx::NewAxis, 0.into()]).unwrap();
        assert_eq!(y.shape(), &[2, 3, 1]);
        assert_eq!(values(&y), [0., 4., 8., 12., 16., 20.]);
        let y = x.index(&[Idx::NewAxis, (..1).into(), Idx::Ellipsis, (1..=2).into()]).unwrap();
        assert_eq!(v(y), (vec![1, 1, 3, 2], vec![1., 2., 5., 6., 9., 10.]));

        // Integer tensors: negatives count from the end; the dimension takes the index's shape.
        let idx = Tensor::from_vec_on(vec![2i64, -1, 0, 0], [2, 2], place).unwrap();
        let y = x.index(&[Idx::full(), Idx::full(), (&idx).into()]).unwrap();
        assert_eq!(y.shape(), &[2, 3, 2, 2]);
        assert_eq!(values(&y)[..4], [2., 3., 0., 0.]);
        let rows = Tensor::from_vec_on(vec![1i32], [1], place).unwrap();
        assert_eq!(v(x.index(&[Idx::full(), (&rows).into(), 3.into()]).unwrap()), (vec![2, 1], vec![7., 19.]));

        // A bool mask over the first two dimensions: the selected rows, in order.
        let mask = Tensor::from_vec_on(vec![true, false, true, false, false, true], [2, 3], place).unwrap();
        let y = x.index(&[(&mask).into()]).unwrap();
        assert_eq!(y.shape(), &[3, 4]);
        assert_eq!(values(&y)[..], [0., 1., 2., 3., 8., 9., 10., 11., 20., 21., 22., 23.]);

        let err = |r: paddle::Result<Tensor>| r.expect_err("expected an error");
        assert!(matches!(err(x.index(&[2.into()])), Error::InvalidArgument { .. }), "index 2 of size 2");
        assert!(matches!(err(x.index(&[0.into(), 0.into(), 0.into(), 0.into()])), Error::InvalidArgument { .. }));
        assert!(matches!(err(x.index(&[Idx::Ellipsis, Idx::Ellipsis])), Error::InvalidArgument { .. }));
        assert!(matches!(err(x.index(&[(&rows).into(), (&rows).into()])), Error::InvalidArgument { .. }));
        assert!(x.index(&[Idx::range(None, None, 0)]).is_err());
    }
}

#[test]
fn index_put_and_set_value_write_like_numpy_and_differentiate() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = arange(6, &[2, 3], place);
        let seven = common::tensor(&[7.0], &[1], DType::Float32, place);
        let y = x.index_put(&[Idx::full(), (1..).into()], &seven).unwrap();
        assert_eq!(values(&y), [0., 7., 7., 3., 7., 7.]);
        assert_eq!(values(&x), [0., 1., 2., 3., 4., 5.], "index_put leaves its input alone");
        let row = common::tensor(&[10., 20., 30.], &[3], DType::Float32, place);
        let y = x.index_put(&[(-1).into()], &row).unwrap();
        assert_eq!(values(&y), [0., 1., 2., 10., 20., 30.]);
        let mask = x.greater_than_scalar(3.5).unwrap();
        let y = x.index_put(&[(&mask).into()], &common::tensor(&[0.0], &[], DType::Float32, place)).unwrap();
        assert_eq!(values(&y), [0., 1., 2., 3., 0., 0.]);

        // In place: the memory (and a view of it) changes.
        let view = x.reshape([6usize]).unwrap();
        x.set_value(&[0.into(), Idx::range(None, None, 2)], &common::tensor(&[-1., -2.], &[2], DType::Float32, place))
            .unwrap();
        assert_eq!(values(&view), [-1., 1., -2., 3., 4., 5.]);
        assert_eq!(x.inplace_version(), 1);
    }
    let mut rng = common::Rng::new(common::run_seed() ^ 61);
    let inputs = vec![(rng.vec(12, -1.0, 1.0), vec![3, 4]), (rng.vec(2, -1.0, 1.0), vec![2])];
    let f = |t: &[Tensor]| t[0].index_put(&[(1..).into(), 2.into()], &t[1])?.square();
    if let Err(m) = gradcheck("index_put", &f, &inputs) {
        panic!("{m}");
    }
    let g = |t: &[Tensor]| t[0].index(&[Idx::range(None, None, -1), Idx::NewAxis, (1..3).into()])?.exp();
    if let Err(m) = gradcheck("index", &g, &inputs[..1]) {
        panic!("{m}");
    }
}
