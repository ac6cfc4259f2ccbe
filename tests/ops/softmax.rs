//! softmax / log_softmax: CPU against hand-computed values, GPU against CPU for both kernel
//! paths (workgroup per row, invocation per line) and for the fused backward, float64
//! gradchecks along several axes, double backward (create_graph), dtypes and errors.

use crate::common;

use common::{Rng, assert_close, gpu_matches_cpu, gpu_or_skip, gradcheck, tensor, values};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

fn cpu(v: &[f64], shape: &[usize]) -> Tensor {
    tensor(v, shape, DType::Float64, Place::Cpu)
}

/// Softmax of one row in f64, the reference for the known-value tests.
fn softmax_row(row: &[f64]) -> Vec<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = row.iter().map(|v| (v - m).exp()).sum();
    row.iter().map(|v| (v - m).exp() / total).collect()
}

#[test]
fn softmax_known_values_cpu() {
    let _generator = common::generator_lock();
    let e = std::f64::consts::E;
    // Last axis: rows [1, 2, 3] and [1, 1, 1].
    let x = cpu(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    let s = 1.0 + e + e * e;
    let want = [1.0 / s, e / s, e * e / s, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
    assert_close("softmax axis -1", &values(&paddle::softmax(&x, -1).unwrap()), &want, 1e-15);
    let want_log: Vec<f64> = want.iter().map(|v| v.ln()).collect();
    assert_close("log_softmax axis -1", &values(&paddle::log_softmax(&x, -1).unwrap()), &want_log, 1e-15);

    // Axis 0 of [[0, 1], [2, 3]]: columns (0, 2) and (1, 3), each e^0 : e^2.
    let x = cpu(&[0.0, 1.0, 2.0, 3.0], &[2, 2]);
    let (a, b) = (1.0 / (1.0 + e * e), e * e / (1.0 + e * e));
    assert_close("softmax axis 0", &values(&x.softmax(0).unwrap()), &[a, a, b, b], 1e-15);
    assert_close("log_softmax axis 0", &values(&x.log_softmax(0).unwrap()), &[a.ln(), a.ln(), b.ln(), b.ln()], 1e-15);

    // Stable for large inputs (no overflow to inf/inf), in float32 too.
    for dtype in [DType::Float32, DType::Float64] {
        let x = tensor(&[1000.0, 1001.0, -1000.0, -1001.0], &[2, 2], dtype, Place::Cpu);
        let got = values(&x.softmax(-1).unwrap());
        let (p, q) = (1.0 / (1.0 + e), e / (1.0 + e));
        assert_close("softmax of large inputs", &got, &[p, q, q, p], 1e-7);
        let got = values(&x.log_softmax(-1).unwrap());
        assert_close("log_softmax of large inputs", &got, &[p.ln(), q.ln(), q.ln(), p.ln()], 1e-7);
    }

    // A 0-D tensor is a one-element row.
    let x = Tensor::from_vec_on(vec![3.5f32], Vec::<usize>::new(), Place::Cpu).unwrap();
    let y = x.softmax(-1).unwrap();
    assert_eq!(y.shape(), &[] as &[usize]);
    assert_eq!(values(&y), vec![1.0]);
    assert_eq!(values(&x.log_softmax(0).unwrap()), vec![0.0]);
}

#[test]
fn softmax_middle_axis_matches_rowwise_reference() {
    let _generator = common::generator_lock();
    // [2, 3, 4] along axis 1: each (outer, inner) line is a softmax of 3 values.
    let mut rng = Rng::new(1);
    let v = rng.vec(24, -3.0, 3.0);
    let x = cpu(&v, &[2, 3, 4]);
    let got = values(&x.softmax(1).unwrap());
    let got_neg = values(&x.softmax(-2).unwrap());
    assert_eq!(got, got_neg);
    for o in 0..2 {
        for i in 0..4 {
            let at = |r: usize| (o * 3 + r) * 4 + i;
            let want = softmax_row(&[v[at(0)], v[at(1)], v[at(2)]]);
            for r in 0..3 {
                assert!((got[at(r)] - want[r]).abs() < 1e-15, "line ({o}, {i}) r={r}");
            }
        }
    }
}

#[test]
fn softmax_dtypes() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(2);
    let v: Vec<f64> = rng.vec(40, -4.0, 4.0);
    let reference = values(&cpu(&v, &[4, 10]).softmax(-1).unwrap());
    let mut places = vec![Place::Cpu];
    places.extend(gpu_or_skip());
    for place in places {
        let x = tensor(&v, &[4, 10], DType::Float16, place);
        let y = x.softmax(-1).unwrap();
        assert_eq!(y.dtype(), DType::Float16);
        assert_close(&format!("float16 softmax on {place}"), &values(&y), &reference, 2e-3);
        let y = tensor(&v, &[4, 10], DType::Float32, place).softmax(-1).unwrap();
        assert_eq!(y.dtype(), DType::Float32);
        assert_close(&format!("float32 softmax on {place}"), &values(&y), &reference, 1e-6);
    }
}

/// Shapes and axes covering every GPU entry: contiguous rows of ≥ 32 elements (workgroup per
/// row; up to 1,024 held in registers, partial and full last slices; 1,025 the looping
/// entry; 300 rows, one invocation each on a software adapter), short contiguous rows and
/// strided lines (inner > 1).
const CASES: &[(&[usize], isize)] = &[
    (&[5, 33], 1),
    (&[3, 1024], -1),
    (&[2, 1025], -1),
    (&[300, 40], -1),
    (&[4, 300], -1),
    (&[3, 1000], 1),
    (&[2, 3, 600], 2),
    (&[64, 10], -1),
    (&[3, 40, 5], 1),
    (&[6, 7, 9], 0),
    (&[5, 300, 3], 1),
    (&[37], 0),
];

#[test]
fn softmax_gpu_matches_cpu() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(3);
    for &(shape, axis) in CASES {
        let n = shape.iter().product();
        let v = rng.vec(n, -6.0, 6.0);
        // Forward and the fused backward (gradients of Σ y·v) against the CPU.
        gpu_matches_cpu(
            &format!("softmax {shape:?} axis {axis}"),
            &|xs| paddle::softmax(&xs[0], axis),
            &[(v.clone(), shape.to_vec())],
            true,
            1e-5,
        );
        gpu_matches_cpu(
            &format!("log_softmax {shape:?} axis {axis}"),
            &|xs| paddle::log_softmax(&xs[0], axis),
            &[(v, shape.to_vec())],
            true,
            1e-5,
        );
    }
}

#[test]
fn softmax_gradcheck() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(4);
    for (shape, axis) in [(vec![3usize, 4, 5], 0isize), (vec![3, 4, 5], 1), (vec![3, 4, 5], -1), (vec![2, 40], 1)] {
        let n = shape.iter().product();
        let input = [(rng.vec(n, -2.0, 2.0), shape.clone())];
        gradcheck(&format!("softmax {shape:?} axis {axis}"), &|xs| paddle::softmax(&xs[0], axis), &input).unwrap();
        gradcheck(&format!("log_softmax {shape:?} axis {axis}"), &|xs| paddle::log_softmax(&xs[0], axis), &input)
            .unwrap();
    }
}

/// The gradient of Σ f(x)·w with respect to x, kept differentiable (create_graph).
fn first_grad(f: fn(&Tensor, isize) -> dygraph::Result<Tensor>, x: &Tensor, axis: isize) -> dygraph::Result<Tensor> {
    let _grad = dygraph::enable_grad();
    let y = f(x, axis)?;
    let mut rng = Rng::new(5);
    let w = tensor(&rng.vec(y.numel(), -1.0, 1.0), y.shape(), y.dtype(), y.place());
    let loss = y.mul(&w)?.sum(&[], false)?;
    let g = paddle::grad(&[loss], std::slice::from_ref(x), None, true, true, false)?;
    Ok(g[0].clone().expect("x is used"))
}

#[test]
fn softmax_double_backward() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(6);
    for (f, name) in [
        (paddle::softmax as fn(&Tensor, isize) -> dygraph::Result<Tensor>, "softmax"),
        (paddle::log_softmax, "log_softmax"),
    ] {
        for (shape, axis) in [(vec![3usize, 5], -1isize), (vec![2, 3, 4], 1)] {
            let n = shape.iter().product();
            let v = rng.vec(n, -2.0, 2.0);
            // The create_graph rule (tensor ops) gives the same gradient as the fused kernel.
            let x = cpu(&v, &shape);
            x.set_stop_gradient(false);
            let composite = values(&first_grad(f, &x, axis).unwrap());
            let y = f(&x, axis).unwrap();
            let mut rng2 = Rng::new(5);
            let w = tensor(&rng2.vec(y.numel(), -1.0, 1.0), y.shape(), y.dtype(), y.place());
            y.mul(&w).unwrap().sum(&[], false).unwrap().backward().unwrap();
            assert_close(&format!("{name} create_graph vs fused"), &composite, &values(&x.grad().unwrap()), 1e-12);
            // Second-order gradients by finite differences, and on the GPU against the CPU.
            let input = [(v, shape.clone())];
            gradcheck(&format!("{name} double backward {shape:?}"), &|xs| first_grad(f, &xs[0], axis), &input).unwrap();
            gpu_matches_cpu(&format!("{name} double backward"), &|xs| first_grad(f, &xs[0], axis), &input, true, 1e-5);
        }
    }
}

#[test]
fn softmax_errors() {
    let _generator = common::generator_lock();
    let xi = Tensor::from_vec_on(vec![1i64, 2, 3], [3usize], Place::Cpu).unwrap();
    for (op, e) in
        [("softmax", paddle::softmax(&xi, -1).unwrap_err()), ("log_softmax", paddle::log_softmax(&xi, -1).unwrap_err())]
    {
        assert!(matches!(e, Error::UnsupportedDType { .. }), "{e}");
        assert!(e.to_string().contains(op), "{e}");
    }
    let x = cpu(&[1.0; 6], &[2, 3]);
    let e = paddle::softmax(&x, 2).unwrap_err();
    assert!(matches!(e, Error::Axis { axis: 2, rank: 2, .. }), "{e}");
    assert!(e.to_string().contains("softmax") && e.to_string().contains("[2, 3]"), "{e}");
    let e = x.log_softmax(-3).unwrap_err();
    assert!(matches!(e, Error::Axis { .. }) && e.to_string().contains("log_softmax"), "{e}");
    let scalar = cpu(&[1.0], &[]);
    let e = scalar.softmax(1).unwrap_err();
    assert!(matches!(e, Error::Axis { .. }) && e.to_string().contains("softmax"), "{e}");
}

#[test]
fn softmax_empty_and_gpu_values() {
    let _generator = common::generator_lock();
    // A zero-size tensor gives a zero-size result on every place.
    let mut places = vec![Place::Cpu];
    places.extend(gpu_or_skip());
    for place in places {
        let x = tensor(&[], &[0, 4], DType::Float32, place);
        assert_eq!(x.softmax(-1).unwrap().shape(), &[0, 4]);
        assert_eq!(x.log_softmax(0).unwrap().shape(), &[0, 4]);
    }
    // Rows of a long softmax sum to one on the GPU.
    if let Some(g) = gpu_or_skip() {
        let mut rng = Rng::new(7);
        let x = tensor(&rng.vec(3 * 2000, -10.0, 10.0), &[3, 2000], DType::Float32, g);
        let s = values(&x.softmax(-1).unwrap().sum(&[-1], false).unwrap());
        assert_close("row sums", &s, &[1.0, 1.0, 1.0], 1e-5);
    }
}

#[test]
fn softmax_shaders_validate() {
    let _generator = common::generator_lock();
    let sources = paddle::all_shader_variants().unwrap();
    let mine: Vec<_> = sources.iter().filter(|(k, _)| k.starts_with("softmax")).collect();
    assert_eq!(mine.len(), 4, "softmax and softmax_grad, each with LOG = false / true");
    for (key, src) in mine {
        let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{key}: {}", e.emit_to_string(src)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
    }
}
