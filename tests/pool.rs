//! Pooling: hand-computed values, GPU against CPU over strides, paddings, ceil_mode and
//! exclusive, adaptive bins, argmax indices, float64 gradchecks, double backward, errors.

mod common;

use dygraph::{self as paddle, DType, Place, Pool2dOptions, Result, Tensor};

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    common::tensor(v, shape, DType::Float64, Place::Cpu)
}

fn grid4() -> Tensor {
    t64(&(1..=16).map(|v| v as f64).collect::<Vec<_>>(), &[1, 1, 4, 4])
}

#[test]
fn hand_computed_values() {
    let x = grid4();
    let m = paddle::max_pool2d(&x, &Pool2dOptions::new(2)).unwrap();
    assert_eq!(common::values(&m), vec![6., 8., 14., 16.]);
    let a = paddle::avg_pool2d(&x, &Pool2dOptions::new(2)).unwrap();
    assert_eq!(common::values(&a), vec![3.5, 5.5, 11.5, 13.5]);
    // 3×3 windows, stride 2, padding 1: exclusive divides by the real elements only.
    let o = Pool2dOptions::new(3).stride(2).padding(1);
    assert_eq!(common::values(&paddle::avg_pool2d(&x, &o).unwrap()), vec![3.5, 5.0, 9.5, 11.0]);
    let incl = paddle::avg_pool2d(&x, &o.exclusive(false)).unwrap();
    assert_eq!(common::values(&incl), vec![14.0 / 9.0, 30.0 / 9.0, 57.0 / 9.0, 99.0 / 9.0]);
    assert_eq!(common::values(&paddle::max_pool2d(&x, &o).unwrap()), vec![6., 8., 14., 16.]);
    // ceil_mode keeps the partial last window: 3×3 stride 2 on 4×4 → 2×2 (floor gives 1×1).
    assert_eq!(paddle::max_pool2d(&x, &Pool2dOptions::new(3).stride(2)).unwrap().shape(), &[1, 1, 1, 1]);
    let c = paddle::max_pool2d(&x, &Pool2dOptions::new(3).stride(2).ceil_mode(true)).unwrap();
    assert_eq!(common::values(&c), vec![11., 12., 15., 16.]);
    // Indices are flat positions within each plane.
    let (_, idx) = paddle::max_pool2d_with_index(&x, &Pool2dOptions::new(2)).unwrap();
    assert_eq!(idx.to_vec::<i64>().unwrap(), vec![5, 7, 13, 15]);
    // Adaptive: 4 → 3 bins [0,2), [1,3), [2,4); global = 1×1.
    let ad = paddle::adaptive_avg_pool2d(&x, [1, 3]).unwrap();
    // Columns {0,1}, {1,2}, {2,3} over all four rows.
    assert_eq!(common::values(&ad), vec![60. / 8., 68. / 8., 76. / 8.]);
    let gl = paddle::adaptive_avg_pool2d(&x, 1).unwrap();
    assert_eq!(common::values(&gl), vec![8.5]);
    assert_eq!(common::values(&paddle::adaptive_max_pool2d(&x, [2, 1]).unwrap()), vec![8., 16.]);
}

/// A pooling under test.
type Op = dyn Fn(&[Tensor]) -> Result<Tensor>;

struct Case {
    shape: [usize; 4],
    opts: Pool2dOptions,
}

fn cases() -> Vec<Case> {
    fn o(k: impl Into<dygraph::Size2>) -> Pool2dOptions {
        Pool2dOptions::new(k)
    }
    vec![
        Case { shape: [2, 3, 6, 6], opts: o(2) },
        Case { shape: [1, 2, 7, 5], opts: o(3).stride(2).padding(1) },
        Case { shape: [2, 2, 7, 7], opts: o(3).stride(2).ceil_mode(true) },
        Case { shape: [1, 3, 6, 5], opts: o([3, 2]).stride([1, 2]).padding([1, 0, 0, 1]).exclusive(false) },
        Case { shape: [2, 1, 5, 5], opts: o(2).stride(1).padding(1).ceil_mode(true).exclusive(false) },
        Case { shape: [2, 4, 8, 8], opts: o(2).stride(2) },
    ]
}

/// Distinct values (a shuffled ramp) so every max is unique and gradchecks are exact.
fn distinct(n: usize, rng: &mut common::Rng) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 / n as f64 - 0.5).collect();
    for i in (1..n).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn gpu_matches_cpu_and_gradcheck_over_the_grid() {
    let mut rng = common::Rng::new(31);
    for case in cases() {
        let n: usize = case.shape.iter().product();
        let inputs = vec![(distinct(n, &mut rng), case.shape.to_vec())];
        let o = case.opts;
        let fs: Vec<(&str, Box<Op>)> = vec![
            ("max", Box::new(move |v: &[Tensor]| paddle::max_pool2d(&v[0], &o))),
            ("avg", Box::new(move |v: &[Tensor]| paddle::avg_pool2d(&v[0], &o))),
        ];
        for (name, f) in &fs {
            let label = format!("{name}_pool2d {o:?}");
            common::gradcheck(&label, f.as_ref(), &inputs).unwrap();
            common::gpu_matches_cpu(&label, f.as_ref(), &inputs, true, 1e-5);
        }
        if let Some(gpu) = common::gpu() {
            let x = common::tensor(&inputs[0].0, &case.shape, DType::Float32, Place::Cpu);
            let (_, ic) = paddle::max_pool2d_with_index(&x, &o).unwrap();
            let (_, ig) = paddle::max_pool2d_with_index(&x.to(gpu).unwrap(), &o).unwrap();
            assert_eq!(ic.to_vec::<i64>().unwrap(), ig.to_vec::<i64>().unwrap(), "{o:?}");
        }
    }
}

#[test]
fn adaptive_pools_match_across_places_and_gradcheck() {
    let mut rng = common::Rng::new(32);
    for (shape, out) in [([2, 2, 7, 5], [3, 2]), ([1, 3, 6, 6], [3, 3]), ([2, 1, 5, 7], [1, 1]), ([1, 2, 4, 4], [5, 3])]
    {
        let n: usize = shape.iter().product();
        let inputs = vec![(distinct(n, &mut rng), shape.to_vec())];
        let f_avg = move |v: &[Tensor]| paddle::adaptive_avg_pool2d(&v[0], out);
        let f_max = move |v: &[Tensor]| paddle::adaptive_max_pool2d(&v[0], out);
        common::gradcheck("adaptive_avg", &f_avg, &inputs).unwrap();
        common::gradcheck("adaptive_max", &f_max, &inputs).unwrap();
        common::gpu_matches_cpu("adaptive_avg", &f_avg, &inputs, true, 1e-5);
        common::gpu_matches_cpu("adaptive_max", &f_max, &inputs, true, 1e-5);
    }
}

#[test]
fn double_backward_and_ties() {
    let mut rng = common::Rng::new(33);
    let o = Pool2dOptions::new(3).stride(2).padding(1);
    let inputs = vec![(distinct(50, &mut rng), vec![1, 2, 5, 5])];
    let f = move |v: &[Tensor]| -> Result<Tensor> {
        let y = paddle::avg_pool2d(&v[0], &o)?.square()?.sum(&[], false)?;
        let g = paddle::grad(&[y], &[v[0].clone()], None, true, true, false)?.remove(0).unwrap();
        g.square()?.sum(&[], false)
    };
    common::gradcheck("avg_pool2d double backward", &f, &inputs).unwrap();
    // Ties: the first maximum in row-major order takes the gradient.
    let x = t64(&[1., 3., 3., 1.], &[1, 1, 2, 2]);
    x.set_stop_gradient(false);
    paddle::max_pool2d(&x, &Pool2dOptions::new(2)).unwrap().sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(common::values(&x.grad().unwrap()), vec![0., 1., 0., 0.]);
    // NaN wins over numbers.
    let y = paddle::max_pool2d(&t64(&[1., f64::NAN, 3., 4.], &[1, 1, 2, 2]), &Pool2dOptions::new(2)).unwrap();
    assert!(common::values(&y)[0].is_nan());
}

#[test]
fn mnist_sized_pools_agree_and_errors_are_typed() {
    let mut rng = common::Rng::new(34);
    let shape = [8, 20, 24, 24];
    let inputs = vec![(rng.vec(shape.iter().product(), -1.0, 1.0), shape.to_vec())];
    let o = Pool2dOptions::new(2).stride(2);
    common::gpu_matches_cpu("mnist pool", &move |v: &[Tensor]| paddle::max_pool2d(&v[0], &o), &inputs, true, 1e-6);
    let x = grid4();
    let e = paddle::max_pool2d(&t64(&[0.; 16], &[4, 4]), &Pool2dOptions::new(2)).unwrap_err();
    assert!(e.to_string().contains("max_pool2d") && e.to_string().contains("[4, 4]"), "{e}");
    assert!(paddle::avg_pool2d(&x, &Pool2dOptions::new(0)).is_err());
    assert!(paddle::avg_pool2d(&x, &Pool2dOptions::new(2).stride(0)).is_err());
    let e = paddle::max_pool2d(&x, &Pool2dOptions::new(2).padding(2)).unwrap_err();
    assert!(e.to_string().contains("half the kernel"), "{e}");
    assert!(paddle::max_pool2d(&x, &Pool2dOptions::new(5)).is_err());
    assert!(paddle::adaptive_avg_pool2d(&x, 0).is_err());
    let ints = Tensor::from_vec_on(vec![1i64; 16], [1, 1, 4, 4], Place::Cpu).unwrap();
    assert!(paddle::max_pool2d(&ints, &Pool2dOptions::new(2)).is_err());
}
