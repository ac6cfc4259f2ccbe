//! Index ops: index_select, gather, take_along_axis, one_hot, embedding. CPU known values,
//! GPU against CPU, float64 gradchecks and error cases.

use crate::common;

use common::{Rng, gpu_matches_cpu, gpu_or_skip, gradcheck, places, values};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

fn f32_on(v: &[f32], shape: &[usize], place: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, place).unwrap()
}

fn idx_on(v: &[i64], shape: &[usize], dtype: DType, place: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, place).unwrap().cast(dtype).unwrap()
}

fn x33(place: Place) -> Tensor {
    f32_on(&[1., 2., 3., 4., 5., 6., 7., 8., 9.], &[3, 3], place)
}

#[test]
fn index_select_and_gather_known_values() {
    let _generator = common::generator_lock();
    for place in places() {
        for dt in [DType::Int32, DType::Int64] {
            let x = x33(place);
            let rows = paddle::index_select(&x, &idx_on(&[2, 0], &[2], dt, place), 0).unwrap();
            assert_eq!(rows.shape(), &[2, 3]);
            assert_eq!(values(&rows), vec![7., 8., 9., 1., 2., 3.], "{place} {dt}");
            let cols = x.index_select(&idx_on(&[1, 1, 0], &[3], dt, place), -1).unwrap();
            assert_eq!(cols.shape(), &[3, 3]);
            assert_eq!(values(&cols), vec![2., 2., 1., 5., 5., 4., 8., 8., 7.]);
            let g = paddle::gather(&x, &idx_on(&[1, 2], &[2], dt, place), 1).unwrap();
            assert_eq!(values(&g), vec![2., 3., 5., 6., 8., 9.]);
            // A 0-D index drops the axis.
            let s = x.gather(&idx_on(&[1], &[], dt, place), 0).unwrap();
            assert_eq!(s.shape(), &[3]);
            assert_eq!(values(&s), vec![4., 5., 6.]);
            let empty = paddle::index_select(&x, &idx_on(&[], &[0], dt, place), 0).unwrap();
            assert_eq!(empty.shape(), &[0, 3]);
        }
        // Middle axis of a 3-D tensor, and non-float dtypes move exactly.
        let x: Vec<i64> = (0..24).map(|v| v * 1_000_000_007).collect();
        let t = Tensor::from_vec_on(x.clone(), [2, 3, 4], place).unwrap();
        let y = paddle::index_select(&t, &idx_on(&[2, 0], &[2], DType::Int64, place), 1).unwrap();
        let expect: Vec<i64> =
            [8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 12, 13, 14, 15].iter().map(|&k| x[k]).collect();
        assert_eq!(y.to_vec::<i64>().unwrap(), expect);
        let b = Tensor::from_vec_on(vec![true, false, false], [3], place).unwrap();
        let bi = paddle::gather(&b, &idx_on(&[1, 0, 0], &[3], DType::Int32, place), 0).unwrap();
        assert_eq!(bi.to_vec::<bool>().unwrap(), vec![false, true, true]);
        let h = x33(place).cast(DType::Float16).unwrap();
        let hs = paddle::index_select(&h, &idx_on(&[2], &[1], DType::Int32, place), 0).unwrap();
        assert_eq!(hs.dtype(), DType::Float16);
        assert_eq!(values(&hs), vec![7., 8., 9.]);
    }
}

#[test]
fn take_along_axis_known_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let arr = f32_on(&[10., 30., 20., 60., 40., 50.], &[2, 3], place);
        let i = idx_on(&[0, 2], &[2, 1], DType::Int64, place);
        let y = paddle::take_along_axis(&arr, &i, 1).unwrap();
        assert_eq!((y.shape(), values(&y)), (&[2usize, 1][..], vec![10., 50.]));
        // indices broadcast along the other axis: [2, 1] against [2, 3] on axis 0.
        let i = idx_on(&[1, 0], &[2, 1], DType::Int32, place);
        let y = arr.take_along_axis(&i, 0).unwrap();
        assert_eq!((y.shape(), values(&y)), (&[2usize, 3][..], vec![60., 40., 50., 10., 30., 20.]));
        // arr broadcasts too: [1, 3] against indices [2, 2] on axis 1.
        let a = f32_on(&[1., 2., 3.], &[1, 3], place);
        let i = idx_on(&[2, 0, 1, 1], &[2, 2], DType::Int64, place);
        let y = paddle::take_along_axis(&a, &i, -1).unwrap();
        assert_eq!((y.shape(), values(&y)), (&[2usize, 2][..], vec![3., 1., 2., 2.]));
    }
}

#[test]
fn one_hot_known_values() {
    let _generator = common::generator_lock();
    for place in places() {
        for dt in [DType::Int32, DType::Int64] {
            let y = paddle::one_hot(&idx_on(&[0, 2, 1, 2], &[2, 2], dt, place), 3).unwrap();
            assert_eq!((y.shape(), y.dtype()), (&[2usize, 2, 3][..], DType::Float32));
            assert_eq!(values(&y), vec![1., 0., 0., 0., 0., 1., 0., 1., 0., 0., 0., 1.]);
        }
    }
}

#[test]
fn embedding_known_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let w = f32_on(&[0., 1., 10., 11., 20., 21.], &[3, 2], place);
        let ids = idx_on(&[2, 0, 1, 2], &[2, 2], DType::Int64, place);
        let y = paddle::embedding(&ids, &w, None).unwrap();
        assert_eq!(y.shape(), &[2, 2, 2]);
        assert_eq!(values(&y), vec![20., 21., 0., 1., 10., 11., 20., 21.]);
        let y = paddle::embedding(&ids, &w, Some(-1)).unwrap();
        assert_eq!(values(&y), vec![0., 0., 0., 1., 10., 11., 0., 0.]);
        // The padding row gets no gradient; repeated ids accumulate.
        let w = f32_on(&[0., 1., 10., 11., 20., 21.], &[3, 2], place);
        w.set_stop_gradient(false);
        let ids = idx_on(&[1, 0, 1, 2], &[4], DType::Int32, place);
        paddle::embedding(&ids, &w, Some(2)).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&w.grad().unwrap()), vec![1., 1., 2., 2., 0., 0.], "{place}");
    }
}

#[test]
fn gradients_accumulate_on_repeated_indices() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = x33(place);
        x.set_stop_gradient(false);
        let y = paddle::index_select(&x, &idx_on(&[2, 2, 0], &[3], DType::Int64, place), 1).unwrap();
        let w = f32_on(&[1., 2., 3., 4., 5., 6., 7., 8., 9.], &[3, 3], place);
        y.mul(&w).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&x.grad().unwrap()), vec![3., 0., 3., 6., 0., 9., 9., 0., 15.], "{place}");
    }
}

fn host_ints(rng: &mut Rng, n: usize, hi: i64) -> Vec<i64> {
    rng.ints(n, 0, hi)
}

#[test]
fn gpu_matches_cpu_on_random_inputs() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(11);
    for dt in [DType::Int32, DType::Int64] {
        let sel = host_ints(&mut rng, 9, 5);
        gpu_matches_cpu(
            "index_select",
            &|xs| paddle::index_select(&xs[0], &idx_on(&sel, &[9], dt, xs[0].place()), 1),
            &[(rng.vec(3 * 5 * 7, -1.0, 1.0), vec![3, 5, 7])],
            true,
            1e-6,
        );
        let g = host_ints(&mut rng, 40, 6);
        gpu_matches_cpu(
            "gather",
            &|xs| paddle::gather(&xs[0], &idx_on(&g, &[40], dt, xs[0].place()), 0),
            &[(rng.vec(6 * 4, -1.0, 1.0), vec![6, 4])],
            true,
            1e-6,
        );
        let t = host_ints(&mut rng, 4 * 6, 5);
        gpu_matches_cpu(
            "take_along_axis",
            &|xs| paddle::take_along_axis(&xs[0], &idx_on(&t, &[4, 6, 1], dt, xs[0].place()), 1),
            &[(rng.vec(4 * 5 * 3, -1.0, 1.0), vec![4, 5, 3])],
            true,
            1e-6,
        );
        let ids = host_ints(&mut rng, 3 * 50, 20);
        gpu_matches_cpu(
            "embedding",
            &|xs| paddle::embedding(&idx_on(&ids, &[3, 50], dt, xs[0].place()), &xs[0], Some(3)),
            &[(rng.vec(20 * 8, -1.0, 1.0), vec![20, 8])],
            true,
            1e-6,
        );
        let labels = host_ints(&mut rng, 37, 11);
        gpu_matches_cpu(
            "one_hot",
            &|xs| paddle::one_hot(&idx_on(&labels, &[37], dt, xs[0].place()), 11),
            &[(vec![0.0], vec![1])],
            false,
            0.0,
        );
    }
}

#[test]
fn gradcheck_float64() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(23);
    let f64_idx = |v: &[i64], shape: &[usize]| idx_on(v, shape, DType::Int64, Place::Cpu);
    let sel = [2i64, 0, 2, 3];
    gradcheck(
        "index_select",
        &|xs| paddle::index_select(&xs[0], &f64_idx(&sel, &[4]), 1),
        &[(rng.vec(12, -1.0, 1.0), vec![3, 4])],
    )
    .unwrap();
    gradcheck(
        "gather",
        &|xs| paddle::gather(&xs[0], &f64_idx(&[1, 1, 0], &[3]), 0),
        &[(rng.vec(8, -1.0, 1.0), vec![2, 4])],
    )
    .unwrap();
    gradcheck(
        "gather 0-D",
        &|xs| paddle::gather(&xs[0], &f64_idx(&[2], &[]), 1),
        &[(rng.vec(8, -1.0, 1.0), vec![2, 4])],
    )
    .unwrap();
    let t = [0i64, 3, 3, 1, 2, 2];
    gradcheck(
        "take_along_axis",
        &|xs| paddle::take_along_axis(&xs[0], &f64_idx(&t, &[2, 3]), 1),
        &[(rng.vec(8, -1.0, 1.0), vec![2, 4])],
    )
    .unwrap();
    // arr [1, 4] broadcast against indices [3, 2]: gradients sum over the broadcast rows.
    gradcheck(
        "take_along_axis broadcast",
        &|xs| paddle::take_along_axis(&xs[0], &f64_idx(&t, &[3, 2]), 1),
        &[(rng.vec(4, -1.0, 1.0), vec![1, 4])],
    )
    .unwrap();
    let ids = [4i64, 1, 1, 0, 4, 2];
    gradcheck(
        "embedding",
        &|xs| paddle::embedding(&f64_idx(&ids, &[2, 3]), &xs[0], Some(1)),
        &[(rng.vec(15, -1.0, 1.0), vec![5, 3])],
    )
    .unwrap();
    // Second order: the gradient (a scatter-add) is itself differentiable.
    gradcheck(
        "index_select double backward",
        &|xs| {
            // gradcheck evaluates under no_grad; the inner gradient needs a graph.
            let _grad_on = paddle::enable_grad();
            let y = paddle::index_select(&xs[0], &f64_idx(&sel, &[4]), 1)?;
            let loss = y.mul(&y)?.mul(&y)?.sum(&[], false)?;
            let g = paddle::grad(&[loss], &[xs[0].clone()], None, false, true, false)?;
            Ok(g[0].clone().expect("input is used"))
        },
        &[(rng.vec(12, -1.0, 1.0), vec![3, 4])],
    )
    .unwrap();
}

fn assert_err(r: paddle::Result<Tensor>, op: &str, kind: fn(&Error) -> bool, needles: &[&str]) {
    let e = r.expect_err(op);
    assert!(kind(&e), "{op}: unexpected error kind {e:?}");
    let msg = e.to_string();
    assert!(msg.contains(op), "message does not name {op}: {msg}");
    for n in needles {
        assert!(msg.contains(n), "{op}: message lacks {n:?}: {msg}");
    }
}

#[test]
fn bad_inputs_are_errors() {
    let _generator = common::generator_lock();
    let p = Place::Cpu;
    let x = x33(p);
    let i = idx_on(&[0, 1], &[2], DType::Int64, p);
    let axis = |e: &Error| matches!(e, Error::Axis { .. });
    let dtype = |e: &Error| matches!(e, Error::UnsupportedDType { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument { .. });
    let shape = |e: &Error| matches!(e, Error::Shape { .. });
    assert_err(paddle::index_select(&x, &i, 2), "index_select", axis, &["axis 2"]);
    assert_err(paddle::gather(&x, &i, -3), "gather", axis, &[]);
    assert_err(
        paddle::take_along_axis(&x, &idx_on(&[0, 0, 0], &[1, 3], DType::Int64, p), 5),
        "take_along_axis",
        axis,
        &[],
    );
    let fidx = f32_on(&[0., 1.], &[2], p);
    assert_err(paddle::index_select(&x, &fidx, 0), "index_select", dtype, &["float32"]);
    assert_err(paddle::embedding(&fidx, &x, None), "embedding", dtype, &["float32"]);
    assert_err(paddle::one_hot(&fidx, 3), "one_hot", dtype, &["float32"]);
    assert_err(
        paddle::index_select(&x, &idx_on(&[0, 3], &[2], DType::Int64, p), 0),
        "index_select",
        invalid,
        &["index 3", "size 3"],
    );
    assert_err(
        paddle::gather(&x, &idx_on(&[-1], &[1], DType::Int32, p), 1),
        "gather",
        invalid,
        &["index -1", "size 3"],
    );
    assert_err(
        paddle::take_along_axis(&x, &idx_on(&[0, 9, 0], &[1, 3], DType::Int64, p), 0),
        "take_along_axis",
        invalid,
        &["index 9", "size 3"],
    );
    assert_err(
        paddle::embedding(&idx_on(&[4], &[1], DType::Int64, p), &x, None),
        "embedding",
        invalid,
        &["index 4", "size 3"],
    );
    assert_err(paddle::one_hot(&idx_on(&[3], &[1], DType::Int64, p), 3), "one_hot", invalid, &["label 3"]);
    assert_err(paddle::one_hot(&i, 0), "one_hot", invalid, &[]);
    assert_err(paddle::embedding(&i, &x, Some(3)), "embedding", invalid, &["padding_idx 3"]);
    // Shapes.
    assert_err(
        paddle::take_along_axis(&x, &idx_on(&[0, 0], &[1, 2], DType::Int64, p), 0),
        "take_along_axis",
        shape,
        &["[1, 2]", "[3, 3]"],
    );
    assert_err(
        paddle::take_along_axis(&x, &idx_on(&[0, 0], &[2], DType::Int64, p), 0),
        "take_along_axis",
        shape,
        &["rank"],
    );
    assert_err(
        paddle::index_select(&x, &idx_on(&[0, 0], &[1, 2], DType::Int64, p), 0),
        "index_select",
        shape,
        &["1-D"],
    );
    assert_err(paddle::index_select(&x, &idx_on(&[0], &[], DType::Int64, p), 0), "index_select", shape, &["1-D"]);
    assert_err(paddle::embedding(&i, &f32_on(&[1., 2.], &[2], p), None), "embedding", shape, &["2-D"]);
    if let Some(g) = gpu_or_skip() {
        let e = paddle::index_select(&x33(g), &i, 0).unwrap_err();
        assert!(matches!(e, Error::PlaceMismatch { .. }) && e.to_string().contains("index_select"), "{e}");
    }
}

#[test]
fn index_shaders_validate() {
    let _generator = common::generator_lock();
    let sources = paddle::testing::all_shader_variants().unwrap();
    let mut count = 0;
    for (key, src) in &sources {
        if !["gather.wgsl", "scatter_add.wgsl", "one_hot.wgsl"].iter().any(|f| key.starts_with(f)) {
            continue;
        }
        count += 1;
        let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{key}: {}", e.emit_to_string(src)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
    }
    assert_eq!(count, 8);
}
