//! layer_norm and batch_norm: CPU against hand-computed values and a naive f64 reference,
//! GPU against CPU (forward, every gradient, running statistics), float64 gradchecks with
//! respect to x, weight and bias, double backward, dtypes and errors.

use crate::common;

use common::{Rng, assert_close, gpu_matches_cpu, gpu_or_skip, gradcheck, places, tensor, values};
use dygraph::{self as paddle, BatchNormOptions, DType, Error, Place, Tensor};

fn cpu(v: &[f64], shape: &[usize]) -> Tensor {
    tensor(v, shape, DType::Float64, Place::Cpu)
}

// ---------------------------------------------------------------------------------------
// layer_norm

#[test]
fn layer_norm_known_values_cpu() {
    let _generator = common::generator_lock();
    let eps = 1e-5;
    // Rows [1, 2, 3, 4] (mean 2.5, biased var 1.25) and [2, 2, 2, 2] (var 0).
    let x = cpu(&[1.0, 2.0, 3.0, 4.0, 2.0, 2.0, 2.0, 2.0], &[2, 4]);
    let r = 1.0 / (1.25f64 + eps).sqrt();
    let plain = [-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r, 0.0, 0.0, 0.0, 0.0];
    let y = paddle::layer_norm(&x, &[4], None, None, eps).unwrap();
    assert_close("layer_norm", &values(&y), &plain, 1e-15);
    let w = cpu(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let b = cpu(&[0.5, 0.0, -0.5, 1.0], &[4]);
    let y = paddle::layer_norm(&x, &[4], Some(&w), Some(&b), eps).unwrap();
    let want: Vec<f64> =
        (0..8).map(|k| plain[k] * [1.0, 2.0, 3.0, 4.0][k % 4] + [0.5, 0.0, -0.5, 1.0][k % 4]).collect();
    assert_close("layer_norm affine", &values(&y), &want, 1e-15);

    // Two normalised dims: [2, 2, 3] over [2, 3] normalises each 6-element block.
    let v: Vec<f64> = (0..12).map(|k| (k * k) as f64 * 0.25).collect();
    let y = values(&paddle::layer_norm(&cpu(&v, &[2, 2, 3]), &[2, 3], None, None, eps).unwrap());
    for block in 0..2 {
        let row = &v[block * 6..][..6];
        let mu = row.iter().sum::<f64>() / 6.0;
        let var = row.iter().map(|a| (a - mu) * (a - mu)).sum::<f64>() / 6.0;
        for j in 0..6 {
            let want = (row[j] - mu) / (var + eps).sqrt();
            assert!((y[block * 6 + j] - want).abs() < 1e-12, "block {block} j {j}");
        }
    }

    // float32 on the CPU agrees, and a flattened [D] weight is accepted.
    let x32 = x.cast(DType::Float32).unwrap();
    let w32 = w.cast(DType::Float32).unwrap();
    let y = paddle::layer_norm(&x32, &[4], Some(&w32), None, eps).unwrap();
    let want: Vec<f64> = (0..8).map(|k| plain[k] * [1.0, 2.0, 3.0, 4.0][k % 4]).collect();
    assert_close("layer_norm float32", &values(&y), &want, 1e-6);
}

/// (shape, normalized_shape): short rows (one invocation per row on the GPU), rows of
/// ≥ 32 and > 256 elements (a workgroup per row), many rows (chunked dweight/dbias).
/// Rows held in registers (up to 1,024, the last slice partial or full), looped over (1,300),
/// short rows one per invocation, and 260 rows of 33 (one invocation each on a software
/// adapter, a workgroup each on hardware).
const LN_CASES: &[(&[usize], &[usize])] = &[
    (&[8, 300], &[300]),
    (&[3, 1024], &[1024]),
    (&[2, 1300], &[1300]),
    (&[260, 33], &[33]),
    (&[50, 16], &[16]),
    (&[4, 6, 10], &[6, 10]),
    (&[200, 40], &[40]),
    (&[3, 2, 5], &[3, 2, 5]),
];

#[test]
fn layer_norm_gpu_matches_cpu() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(11);
    for &(shape, ns) in LN_CASES {
        let n: usize = shape.iter().product();
        let d: usize = ns.iter().product();
        let x = (rng.vec(n, -3.0, 3.0), shape.to_vec());
        let w = (rng.vec(d, 0.5, 1.5), ns.to_vec());
        let b = (rng.vec(d, -1.0, 1.0), ns.to_vec());
        gpu_matches_cpu(
            &format!("layer_norm {shape:?} over {ns:?} with weight and bias"),
            &|xs| paddle::layer_norm(&xs[0], ns, Some(&xs[1]), Some(&xs[2]), 1e-5),
            &[x.clone(), w.clone(), b],
            true,
            1e-5,
        );
        gpu_matches_cpu(
            &format!("layer_norm {shape:?} over {ns:?} with weight"),
            &|xs| paddle::layer_norm(&xs[0], ns, Some(&xs[1]), None, 1e-5),
            &[x.clone(), w],
            true,
            1e-5,
        );
        gpu_matches_cpu(
            &format!("layer_norm {shape:?} over {ns:?}"),
            &|xs| paddle::layer_norm(&xs[0], ns, None, None, 1e-5),
            &[x],
            true,
            1e-5,
        );
    }
}

#[test]
fn layer_norm_gradcheck() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(12);
    for (shape, ns) in [(vec![3usize, 5], vec![5usize]), (vec![2, 3, 4], vec![3, 4]), (vec![4, 3], vec![4, 3])] {
        let n: usize = shape.iter().product();
        let d: usize = ns.iter().product();
        let x = (rng.vec(n, -2.0, 2.0), shape.clone());
        let w = (rng.vec(d, 0.5, 1.5), ns.clone());
        let b = (rng.vec(d, -1.0, 1.0), ns.clone());
        gradcheck(
            &format!("layer_norm {shape:?} x, weight, bias"),
            &|xs| paddle::layer_norm(&xs[0], &ns, Some(&xs[1]), Some(&xs[2]), 1e-5),
            &[x.clone(), w.clone(), b],
        )
        .unwrap();
        gradcheck(
            &format!("layer_norm {shape:?} x, weight"),
            &|xs| paddle::layer_norm(&xs[0], &ns, Some(&xs[1]), None, 1e-5),
            &[x.clone(), w],
        )
        .unwrap();
        gradcheck(&format!("layer_norm {shape:?} x"), &|xs| paddle::layer_norm(&xs[0], &ns, None, None, 1e-3), &[x])
            .unwrap();
    }
}

/// Gradients of Σ f(inputs)·v with respect to every input, kept differentiable.
fn grads_of(f: &dyn Fn(&[Tensor]) -> dygraph::Result<Tensor>, xs: &[Tensor]) -> dygraph::Result<Vec<Tensor>> {
    let _grad = dygraph::enable_grad();
    let y = f(xs)?;
    let mut rng = Rng::new(13);
    let v = tensor(&rng.vec(y.numel(), -1.0, 1.0), y.shape(), y.dtype(), y.place());
    let loss = y.mul(&v)?.sum(&[], false)?;
    let g = paddle::grad(&[loss], xs, None, true, true, false)?;
    Ok(g.into_iter().map(|g| g.expect("every input is used")).collect())
}

/// Σ over all first-order gradients, each weighted, as one differentiable scalar-ish tensor
/// (a flat concatenation) for second-order checks.
fn flat_grads(f: &dyn Fn(&[Tensor]) -> dygraph::Result<Tensor>, xs: &[Tensor]) -> dygraph::Result<Tensor> {
    let gs: Vec<Tensor> = grads_of(f, xs)?.iter().map(|g| g.reshape([g.numel()])).collect::<dygraph::Result<_>>()?;
    paddle::concat(&gs, 0)
}

/// The fused backward and the create_graph (tensor-op) backward agree; the latter has
/// correct second derivatives.
fn check_double_backward(
    name: &str,
    f: &dyn Fn(&[Tensor]) -> dygraph::Result<Tensor>,
    inputs: &[(Vec<f64>, Vec<usize>)],
) {
    let xs: Vec<Tensor> = inputs
        .iter()
        .map(|(v, s)| {
            let t = cpu(v, s);
            t.set_stop_gradient(false);
            t
        })
        .collect();
    let composite: Vec<Vec<f64>> = grads_of(f, &xs).unwrap().iter().map(values).collect();
    let y = f(&xs).unwrap();
    let mut rng = Rng::new(13);
    let v = tensor(&rng.vec(y.numel(), -1.0, 1.0), y.shape(), y.dtype(), y.place());
    y.mul(&v).unwrap().sum(&[], false).unwrap().backward().unwrap();
    for (i, (x, c)) in xs.iter().zip(&composite).enumerate() {
        assert_close(
            &format!("{name}: create_graph vs fused grad of input {i}"),
            c,
            &values(&x.grad().unwrap()),
            1e-10,
        );
    }
    gradcheck(&format!("{name} double backward"), &|xs| flat_grads(f, xs), inputs).unwrap();
    gpu_matches_cpu(&format!("{name} double backward"), &|xs| flat_grads(f, xs), inputs, true, 1e-4);
}

#[test]
fn layer_norm_double_backward() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(14);
    let inputs =
        [(rng.vec(12, -2.0, 2.0), vec![3, 4]), (rng.vec(4, 0.5, 1.5), vec![4]), (rng.vec(4, -1.0, 1.0), vec![4])];
    check_double_backward(
        "layer_norm",
        &|xs| paddle::layer_norm(&xs[0], &[4], Some(&xs[1]), Some(&xs[2]), 1e-3),
        &inputs,
    );
}

#[test]
fn layer_norm_float16() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(15);
    let v = rng.vec(4 * 40, -2.0, 2.0);
    let w = rng.vec(40, 0.5, 1.5);
    let reference = values(&paddle::layer_norm(&cpu(&v, &[4, 40]), &[40], Some(&cpu(&w, &[40])), None, 1e-5).unwrap());
    for place in places() {
        let x = tensor(&v, &[4, 40], DType::Float16, place);
        for wd in [DType::Float16, DType::Float32] {
            let wt = tensor(&w, &[40], wd, place);
            let y = paddle::layer_norm(&x, &[40], Some(&wt), None, 1e-5).unwrap();
            assert_eq!(y.dtype(), DType::Float16);
            assert_close(&format!("float16 layer_norm on {place} (weight {wd})"), &values(&y), &reference, 3e-3);
        }
    }
}

#[test]
fn layer_norm_errors() {
    let _generator = common::generator_lock();
    let x = cpu(&[0.0; 24], &[2, 3, 4]);
    let named = |e: &Error, parts: &[&str]| {
        let m = e.to_string();
        assert!(m.contains("layer_norm"), "{m}");
        for p in parts {
            assert!(m.contains(p), "{m} lacks {p}");
        }
    };
    for ns in [&[3usize][..], &[4, 3], &[], &[1, 2, 3, 4]] {
        let e = paddle::layer_norm(&x, ns, None, None, 1e-5).unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{e}");
        named(&e, &[&format!("{ns:?}"), "[2, 3, 4]"]);
    }
    let w = cpu(&[1.0; 3], &[3]);
    let e = paddle::layer_norm(&x, &[4], Some(&w), None, 1e-5).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    named(&e, &["weight", "[3]", "[4]"]);
    let e = paddle::layer_norm(&x, &[3, 4], None, Some(&cpu(&[0.0; 4], &[4])), 1e-5).unwrap_err();
    named(&e, &["bias", "[4]", "[3, 4]"]);
    let w32 = tensor(&[1.0; 4], &[4], DType::Float32, Place::Cpu);
    let e = paddle::layer_norm(&x, &[4], Some(&w32), None, 1e-5).unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    named(&e, &[]);
    let e = paddle::layer_norm(&x, &[4], None, None, -1.0).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    named(&e, &["epsilon"]);
    let xi = Tensor::from_vec_on(vec![1i32; 4], [4usize], Place::Cpu).unwrap();
    let e = paddle::layer_norm(&xi, &[4], None, None, 1e-5).unwrap_err();
    assert!(matches!(e, Error::UnsupportedDType { .. }), "{e}");
    if let Some(g) = gpu_or_skip() {
        let xg = tensor(&[0.0; 8], &[2, 4], DType::Float32, g);
        let e = paddle::layer_norm(&xg, &[4], Some(&w32), None, 1e-5).unwrap_err();
        assert!(matches!(e, Error::PlaceMismatch { .. }), "{e}");
        named(&e, &[]);
    }
}

// ---------------------------------------------------------------------------------------
// batch_norm

/// Naive f64 batch norm over axis 1: (y, batch mean, biased batch variance).
fn bn_reference(
    x: &[f64],
    shape: &[usize],
    stats: Option<(&[f64], &[f64])>,
    w: Option<&[f64]>,
    b: Option<&[f64]>,
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (n, c) = (shape[0], shape[1]);
    let s: usize = shape[2..].iter().product();
    let at = |i: usize, ch: usize, k: usize| (i * c + ch) * s + k;
    let mut mean = vec![0.0; c];
    let mut var = vec![0.0; c];
    for ch in 0..c {
        let vals: Vec<f64> = (0..n).flat_map(|i| (0..s).map(move |k| (i, k))).map(|(i, k)| x[at(i, ch, k)]).collect();
        let m = vals.iter().sum::<f64>() / vals.len() as f64;
        mean[ch] = m;
        var[ch] = vals.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / vals.len() as f64;
    }
    let (um, uv) = stats.unwrap_or((&mean, &var));
    let mut y = vec![0.0; x.len()];
    for i in 0..n {
        for ch in 0..c {
            for k in 0..s {
                let mut v = (x[at(i, ch, k)] - um[ch]) / (uv[ch] + eps).sqrt();
                v = v * w.map_or(1.0, |w| w[ch]) + b.map_or(0.0, |b| b[ch]);
                y[at(i, ch, k)] = v;
            }
        }
    }
    (y, mean, var)
}

#[test]
fn batch_norm_known_values_cpu() {
    let _generator = common::generator_lock();
    let eps = 1e-5;
    // [N=2, C=2]: channel 0 {1, 3} (mean 2, var 1), channel 1 {2, 6} (mean 4, var 4).
    let x = cpu(&[1.0, 2.0, 3.0, 6.0], &[2, 2]);
    let rm = cpu(&[0.0, 0.0], &[2]);
    let rv = cpu(&[1.0, 1.0], &[2]);
    let train = BatchNormOptions { training: true, ..Default::default() };
    let y = paddle::batch_norm(&x, &rm, &rv, None, None, &train).unwrap();
    let (a, b) = (1.0 / (1.0f64 + eps).sqrt(), 2.0 / (4.0f64 + eps).sqrt());
    assert_close("batch_norm training", &values(&y), &[-a, -b, a, b], 1e-15);
    // momentum 0.9: running = 0.9·running + 0.1·batch, with the biased variance (Paddle).
    assert_close("running_mean", &values(&rm), &[0.2, 0.4], 1e-15);
    assert_close("running_var", &values(&rv), &[1.0, 1.3], 1e-15);

    // Inference uses (and keeps) the running statistics.
    let w = cpu(&[2.0, -1.0], &[2]);
    let bias = cpu(&[0.5, 1.0], &[2]);
    let y = paddle::batch_norm(&x, &rm, &rv, Some(&w), Some(&bias), &BatchNormOptions::default()).unwrap();
    let want = [
        (1.0 - 0.2) / (1.0f64 + eps).sqrt() * 2.0 + 0.5,
        1.0 - (2.0 - 0.4) / (1.3f64 + eps).sqrt(),
        (3.0 - 0.2) / (1.0f64 + eps).sqrt() * 2.0 + 0.5,
        1.0 - (6.0 - 0.4) / (1.3f64 + eps).sqrt(),
    ];
    assert_close("batch_norm inference", &values(&y), &want, 1e-15);
    assert_close("running_mean unchanged", &values(&rm), &[0.2, 0.4], 1e-15);
    assert_close("running_var unchanged", &values(&rv), &[1.0, 1.3], 1e-15);
}

#[test]
fn batch_norm_matches_reference_cpu() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(21);
    for shape in [vec![5usize, 3], vec![4, 3, 7], vec![2, 4, 3, 5], vec![2, 2, 2, 3, 2]] {
        let n: usize = shape.iter().product();
        let c = shape[1];
        let v = rng.vec(n, -3.0, 3.0);
        let (w, b) = (rng.vec(c, 0.5, 1.5), rng.vec(c, -1.0, 1.0));
        let (rm0, rv0) = (rng.vec(c, -0.5, 0.5), rng.vec(c, 0.5, 2.0));
        for momentum in [0.9, 0.5] {
            let (rm, rv) = (cpu(&rm0, &[c]), cpu(&rv0, &[c]));
            let opts = BatchNormOptions { training: true, momentum, epsilon: 1e-4, use_global_stats: None };
            let y = paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, Some(&cpu(&w, &[c])), Some(&cpu(&b, &[c])), &opts)
                .unwrap();
            let (want, mean, var) = bn_reference(&v, &shape, None, Some(&w), Some(&b), 1e-4);
            assert_close(&format!("batch_norm {shape:?} training"), &values(&y), &want, 1e-13);
            let want_rm: Vec<f64> = (0..c).map(|k| momentum * rm0[k] + (1.0 - momentum) * mean[k]).collect();
            let want_rv: Vec<f64> = (0..c).map(|k| momentum * rv0[k] + (1.0 - momentum) * var[k]).collect();
            assert_close("running_mean", &values(&rm), &want_rm, 1e-13);
            assert_close("running_var", &values(&rv), &want_rv, 1e-13);
        }
        let (rm, rv) = (cpu(&rm0, &[c]), cpu(&rv0, &[c]));
        let y =
            paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, Some(&cpu(&w, &[c])), None, &Default::default()).unwrap();
        let (want, _, _) = bn_reference(&v, &shape, Some((&rm0, &rv0)), Some(&w), None, 1e-5);
        assert_close(&format!("batch_norm {shape:?} inference"), &values(&y), &want, 1e-13);
    }
}

#[test]
fn batch_norm_use_global_stats() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(22);
    let shape = [3usize, 2, 4];
    let v = rng.vec(24, -2.0, 2.0);
    let (rm0, rv0) = (vec![0.3, -0.2], vec![1.5, 0.7]);
    // Some(true) in training: running statistics normalise and are not updated.
    let (rm, rv) = (cpu(&rm0, &[2]), cpu(&rv0, &[2]));
    let opts = BatchNormOptions { training: true, use_global_stats: Some(true), ..Default::default() };
    let y = paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, None, None, &opts).unwrap();
    let (want, mean, var) = bn_reference(&v, &shape, Some((&rm0, &rv0)), None, None, 1e-5);
    assert_close("use_global_stats=true", &values(&y), &want, 1e-13);
    assert_eq!(values(&rm), rm0);
    assert_eq!(values(&rv), rv0);
    // Some(false) in inference: batch statistics normalise and update the running ones.
    let opts = BatchNormOptions { training: false, use_global_stats: Some(false), ..Default::default() };
    let y = paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, None, None, &opts).unwrap();
    let (want, _, _) = bn_reference(&v, &shape, None, None, None, 1e-5);
    assert_close("use_global_stats=false", &values(&y), &want, 1e-13);
    let want_rm: Vec<f64> = (0..2).map(|k| 0.9 * rm0[k] + 0.1 * mean[k]).collect();
    let want_rv: Vec<f64> = (0..2).map(|k| 0.9 * rv0[k] + 0.1 * var[k]).collect();
    assert_close("running_mean", &values(&rm), &want_rm, 1e-13);
    assert_close("running_var", &values(&rv), &want_rv, 1e-13);
}

/// batch_norm with fresh running statistics on the inputs' place.
fn bn(xs: &[Tensor], training: bool) -> dygraph::Result<Tensor> {
    let c = xs[0].shape()[1];
    let place = xs[0].place();
    let rm = tensor(&vec![0.1; c], &[c], xs[0].dtype(), place);
    let rv = tensor(&vec![1.2; c], &[c], xs[0].dtype(), place);
    let opts = BatchNormOptions { training, ..Default::default() };
    paddle::batch_norm(&xs[0], &rm, &rv, xs.get(1), xs.get(2), &opts)
}

const BN_SHAPES: &[&[usize]] = &[&[8, 3], &[4, 3, 50], &[2, 4, 9, 9], &[2, 3, 20, 20], &[1, 2, 600]];

#[test]
fn batch_norm_gpu_matches_cpu() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(23);
    for &shape in BN_SHAPES {
        let n: usize = shape.iter().product();
        let c = shape[1];
        let x = (rng.vec(n, -3.0, 3.0), shape.to_vec());
        let w = (rng.vec(c, 0.5, 1.5), vec![c]);
        let b = (rng.vec(c, -1.0, 1.0), vec![c]);
        for training in [true, false] {
            let mode = if training { "training" } else { "inference" };
            gpu_matches_cpu(
                &format!("batch_norm {shape:?} {mode} with weight and bias"),
                &|xs| bn(xs, training),
                &[x.clone(), w.clone(), b.clone()],
                true,
                1e-5,
            );
            gpu_matches_cpu(
                &format!("batch_norm {shape:?} {mode}"),
                &|xs| bn(xs, training),
                std::slice::from_ref(&x),
                true,
                1e-5,
            );
        }
    }
}

#[test]
fn batch_norm_running_stats_gpu_matches_cpu() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let mut rng = Rng::new(24);
    for &shape in BN_SHAPES {
        let n: usize = shape.iter().product();
        let c = shape[1];
        let v = rng.vec(n, -3.0, 3.0);
        let (rm0, rv0) = (rng.vec(c, -0.5, 0.5), rng.vec(c, 0.5, 2.0));
        let (_, mean, var) = bn_reference(&v, shape, None, None, None, 1e-5);
        let mut results = Vec::new();
        for place in [Place::Cpu, g] {
            let rm = tensor(&rm0, &[c], DType::Float32, place);
            let rv = tensor(&rv0, &[c], DType::Float32, place);
            let x = tensor(&v, shape, DType::Float32, place);
            let opts = BatchNormOptions { training: true, momentum: 0.8, ..Default::default() };
            paddle::batch_norm(&x, &rm, &rv, None, None, &opts).unwrap();
            let want_rm: Vec<f64> = (0..c).map(|k| 0.8 * rm0[k] + 0.2 * mean[k]).collect();
            let want_rv: Vec<f64> = (0..c).map(|k| 0.8 * rv0[k] + 0.2 * var[k]).collect();
            assert_close(&format!("running_mean {shape:?} on {place}"), &values(&rm), &want_rm, 1e-6);
            assert_close(&format!("running_var {shape:?} on {place}"), &values(&rv), &want_rv, 1e-6);
            results.push((values(&rm), values(&rv)));
        }
        assert_close("running_mean GPU vs CPU", &results[1].0, &results[0].0, 1e-5);
        assert_close("running_var GPU vs CPU", &results[1].1, &results[0].1, 1e-5);
    }
}

#[test]
fn batch_norm_gradcheck() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(25);
    for shape in [vec![4usize, 3], vec![3, 2, 5], vec![2, 2, 3, 3]] {
        let n: usize = shape.iter().product();
        let c = shape[1];
        let x = (rng.vec(n, -2.0, 2.0), shape.clone());
        let w = (rng.vec(c, 0.5, 1.5), vec![c]);
        let b = (rng.vec(c, -1.0, 1.0), vec![c]);
        for training in [true, false] {
            let mode = if training { "training" } else { "inference" };
            gradcheck(
                &format!("batch_norm {shape:?} {mode} x, weight, bias"),
                &|xs| bn(xs, training),
                &[x.clone(), w.clone(), b.clone()],
            )
            .unwrap();
            gradcheck(&format!("batch_norm {shape:?} {mode} x"), &|xs| bn(xs, training), std::slice::from_ref(&x))
                .unwrap();
        }
    }
}

#[test]
fn batch_norm_double_backward() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(26);
    let inputs =
        [(rng.vec(18, -2.0, 2.0), vec![3, 2, 3]), (rng.vec(2, 0.5, 1.5), vec![2]), (rng.vec(2, -1.0, 1.0), vec![2])];
    check_double_backward("batch_norm training", &|xs| bn(xs, true), &inputs);
    check_double_backward("batch_norm inference", &|xs| bn(xs, false), &inputs);
}

#[test]
fn batch_norm_float16() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(27);
    let shape = [4usize, 3, 10];
    let v = rng.vec(120, -2.0, 2.0);
    let (want, mean, var) = bn_reference(&v, &shape, None, None, None, 1e-5);
    for place in places() {
        let x = tensor(&v, &shape, DType::Float16, place);
        // float32 running statistics with a float16 input, as Paddle's AMP keeps them.
        let rm = tensor(&[0.0; 3], &[3], DType::Float32, place);
        let rv = tensor(&[1.0; 3], &[3], DType::Float32, place);
        let y =
            paddle::batch_norm(&x, &rm, &rv, None, None, &BatchNormOptions { training: true, ..Default::default() })
                .unwrap();
        assert_eq!(y.dtype(), DType::Float16);
        assert_close(&format!("float16 batch_norm on {place}"), &values(&y), &want, 3e-3);
        let want_rm: Vec<f64> = mean.iter().map(|m| 0.1 * m).collect();
        let want_rv: Vec<f64> = var.iter().map(|v| 0.9 + 0.1 * v).collect();
        assert_close("float16 running_mean", &values(&rm), &want_rm, 3e-3);
        assert_close("float16 running_var", &values(&rv), &want_rv, 3e-3);
    }
}

#[test]
fn batch_norm_errors() {
    let _generator = common::generator_lock();
    let named = |e: &Error, parts: &[&str]| {
        let m = e.to_string();
        assert!(m.contains("batch_norm"), "{m}");
        for p in parts {
            assert!(m.contains(p), "{m} lacks {p}");
        }
    };
    let x = cpu(&[0.0; 24], &[2, 3, 4]);
    let (rm, rv) = (cpu(&[0.0; 3], &[3]), cpu(&[1.0; 3], &[3]));
    let opts = BatchNormOptions::default();
    // Rank below 2.
    let e = paddle::batch_norm(&cpu(&[0.0; 3], &[3]), &rm, &rv, None, None, &opts).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    named(&e, &["[3]", "rank"]);
    // Channel mismatch of running statistics, weight and bias.
    let four = cpu(&[1.0; 4], &[4]);
    for (name, args) in [
        ("running_mean", (&four, &rv, None, None)),
        ("running_var", (&rm, &four, None, None)),
        ("weight", (&rm, &rv, Some(&four), None)),
        ("bias", (&rm, &rv, None, Some(&four))),
    ] {
        let e = paddle::batch_norm(&x, args.0, args.1, args.2, args.3, &opts).unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{name}: {e}");
        named(&e, &[name, "[4]", "[3]", "[2, 3, 4]"]);
    }
    let w2d = cpu(&[1.0; 3], &[1, 3]);
    let e = paddle::batch_norm(&x, &rm, &rv, Some(&w2d), None, &opts).unwrap_err();
    named(&e, &["weight", "[1, 3]"]);
    // dtype of the affine parameters must match the input.
    let w32 = tensor(&[1.0; 3], &[3], DType::Float32, Place::Cpu);
    let e = paddle::batch_norm(&x, &rm, &rv, Some(&w32), None, &opts).unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    named(&e, &[]);
    // Bad epsilon / momentum.
    let e = paddle::batch_norm(&x, &rm, &rv, None, None, &BatchNormOptions { epsilon: f64::NAN, ..opts }).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    named(&e, &["epsilon"]);
    let e = paddle::batch_norm(&x, &rm, &rv, None, None, &BatchNormOptions { momentum: 1.5, ..opts }).unwrap_err();
    named(&e, &["momentum"]);
    // Batch statistics of an empty batch.
    let empty = cpu(&[], &[0, 3, 4]);
    let train = BatchNormOptions { training: true, ..opts };
    let e = paddle::batch_norm(&empty, &rm, &rv, None, None, &train).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    named(&e, &["[0, 3, 4]"]);
    // Running statistics on another place.
    if let Some(g) = gpu_or_skip() {
        let xg = tensor(&[0.0; 24], &[2, 3, 4], DType::Float32, g);
        let e = paddle::batch_norm(&xg, &rm, &rv, None, None, &opts).unwrap_err();
        assert!(matches!(e, Error::PlaceMismatch { .. }), "{e}");
        named(&e, &[]);
    }
}

#[test]
fn norm_shaders_validate() {
    let _generator = common::generator_lock();
    let sources = paddle::all_shader_variants().unwrap();
    let mine: Vec<_> =
        sources.iter().filter(|(k, _)| k.starts_with("layer_norm") || k.starts_with("batch_norm")).collect();
    assert_eq!(mine.len(), 7);
    for (key, src) in mine {
        let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{key}: {}", e.emit_to_string(src)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
    }
}
