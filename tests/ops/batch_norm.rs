//! The public `batch_norm`: what its registered parts (`batch_norm_stats`, `batch_norm`,
//! `batch_norm_grad`, swept in the registry sweep) do not show on their own — the running
//! statistics it updates, `use_global_stats`, float32 statistics with a float16 input, and
//! gradients through the batch statistics (first and second order).

use crate::common;

use common::{Rng, assert_close, gpu_matches_cpu, gradcheck, places, tensor, values};
use dygraph::{self as paddle, BatchNormOptions, DType, Place, Tensor};

fn cpu(v: &[f64], shape: &[usize]) -> Tensor {
    tensor(v, shape, DType::Float64, Place::Cpu)
}

/// Naive f64 batch norm over axis 1: (y, batch mean, biased batch variance); `stats`
/// normalise instead of the batch's when given.
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
    let (mut mean, mut var) = (vec![0.0; c], vec![0.0; c]);
    for ch in 0..c {
        let vals: Vec<f64> = (0..n).flat_map(|i| (0..s).map(move |k| (i, k))).map(|(i, k)| x[at(i, ch, k)]).collect();
        mean[ch] = vals.iter().sum::<f64>() / vals.len() as f64;
        var[ch] = vals.iter().map(|v| (v - mean[ch]) * (v - mean[ch])).sum::<f64>() / vals.len() as f64;
    }
    let (um, uv) = stats.unwrap_or((&mean, &var));
    let mut y = vec![0.0; x.len()];
    for i in 0..n {
        for ch in 0..c {
            for k in 0..s {
                let v = (x[at(i, ch, k)] - um[ch]) / (uv[ch] + eps).sqrt();
                y[at(i, ch, k)] = v * w.map_or(1.0, |w| w[ch]) + b.map_or(0.0, |b| b[ch]);
            }
        }
    }
    (y, mean, var)
}

/// `momentum·running + (1 − momentum)·batch`, per channel.
fn blend(running: &[f64], batch: &[f64], momentum: f64) -> Vec<f64> {
    running.iter().zip(batch).map(|(r, b)| momentum * r + (1.0 - momentum) * b).collect()
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

/// The gradients of `Σ bn(x)·v` with respect to every input, kept differentiable.
fn grads_of(xs: &[Tensor]) -> dygraph::Result<Vec<Tensor>> {
    let _grad = paddle::enable_grad();
    let y = bn(xs, true)?;
    let v = tensor(&Rng::new(13).vec(y.numel(), -1.0, 1.0), y.shape(), y.dtype(), y.place());
    let g = paddle::grad(&[y.mul(&v)?.sum(&[], false)?], xs, None, true, true, false)?;
    Ok(g.into_iter().map(|g| g.expect("every input is used")).collect())
}

/// Every first-order gradient, flattened into one differentiable tensor.
fn flat_grads(xs: &[Tensor]) -> dygraph::Result<Tensor> {
    let gs: Vec<Tensor> = grads_of(xs)?.iter().map(|g| g.reshape([g.numel()])).collect::<dygraph::Result<_>>()?;
    paddle::concat(&gs, 0)
}

#[test]
fn batch_norm_running_statistics_global_stats_float16_and_training_gradients() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(21);

    // Training normalises by the batch and moves the running statistics (biased variance, as
    // Paddle); inference normalises by the running statistics and keeps them. Float64, ranks
    // 2 to 5, several momenta.
    for shape in [vec![5usize, 3], vec![4, 3, 7], vec![2, 4, 3, 5], vec![2, 2, 2, 3, 2]] {
        let (n, c) = (shape.iter().product::<usize>(), shape[1]);
        let v = rng.vec(n, -3.0, 3.0);
        let (w, b) = (rng.vec(c, 0.5, 1.5), rng.vec(c, -1.0, 1.0));
        let (rm0, rv0) = (rng.vec(c, -0.5, 0.5), rng.vec(c, 0.5, 2.0));
        for momentum in [0.9, 0.5, 0.0] {
            let (rm, rv) = (cpu(&rm0, &[c]), cpu(&rv0, &[c]));
            let opts = BatchNormOptions { training: true, momentum, epsilon: 1e-4, use_global_stats: None };
            let y = paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, Some(&cpu(&w, &[c])), Some(&cpu(&b, &[c])), &opts)
                .unwrap();
            let (want, mean, var) = bn_reference(&v, &shape, None, Some(&w), Some(&b), 1e-4);
            let at = format!("{shape:?} momentum {momentum}");
            assert_close(&format!("training {at}"), &values(&y), &want, 1e-13);
            assert_close(&format!("running_mean {at}"), &values(&rm), &blend(&rm0, &mean, momentum), 1e-13);
            assert_close(&format!("running_var {at}"), &values(&rv), &blend(&rv0, &var, momentum), 1e-13);
        }
        let (rm, rv) = (cpu(&rm0, &[c]), cpu(&rv0, &[c]));
        let y =
            paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, Some(&cpu(&w, &[c])), None, &Default::default()).unwrap();
        let (want, _, _) = bn_reference(&v, &shape, Some((&rm0, &rv0)), Some(&w), None, 1e-5);
        assert_close(&format!("inference {shape:?}"), &values(&y), &want, 1e-13);
        assert_eq!((values(&rm), values(&rv)), (rm0, rv0), "inference keeps the running statistics");
    }

    // use_global_stats overrides the mode both ways.
    let shape = [3usize, 2, 4];
    let v = rng.vec(24, -2.0, 2.0);
    let (rm0, rv0) = (vec![0.3, -0.2], vec![1.5, 0.7]);
    let (rm, rv) = (cpu(&rm0, &[2]), cpu(&rv0, &[2]));
    let opts = BatchNormOptions { training: true, use_global_stats: Some(true), ..Default::default() };
    let y = paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, None, None, &opts).unwrap();
    let (want, mean, var) = bn_reference(&v, &shape, Some((&rm0, &rv0)), None, None, 1e-5);
    assert_close("use_global_stats=true in training", &values(&y), &want, 1e-13);
    assert_eq!((values(&rm), values(&rv)), (rm0.clone(), rv0.clone()), "use_global_stats=true updates nothing");
    let opts = BatchNormOptions { training: false, use_global_stats: Some(false), ..Default::default() };
    let y = paddle::batch_norm(&cpu(&v, &shape), &rm, &rv, None, None, &opts).unwrap();
    let (want, _, _) = bn_reference(&v, &shape, None, None, None, 1e-5);
    assert_close("use_global_stats=false in inference", &values(&y), &want, 1e-13);
    assert_close("running_mean", &values(&rm), &blend(&rm0, &mean, 0.9), 1e-13);
    assert_close("running_var", &values(&rv), &blend(&rv0, &var, 0.9), 1e-13);

    // float32 running statistics with a float16 input (Paddle's AMP), and float32 running
    // statistics on the GPU, on every place against the reference.
    let shape = [4usize, 3, 10];
    let v = rng.vec(120, -2.0, 2.0);
    let (want, mean, var) = bn_reference(&v, &shape, None, None, None, 1e-5);
    for place in places() {
        let train = BatchNormOptions { training: true, ..Default::default() };
        let x = tensor(&v, &shape, DType::Float16, place);
        let (rm, rv) = (tensor(&[0.0; 3], &[3], DType::Float32, place), tensor(&[1.0; 3], &[3], DType::Float32, place));
        let y = paddle::batch_norm(&x, &rm, &rv, None, None, &train).unwrap();
        assert_eq!(y.dtype(), DType::Float16);
        assert_close(&format!("float16 batch_norm on {place}"), &values(&y), &want, 3e-3);
        assert_close("float16 running_mean", &values(&rm), &blend(&[0.0; 3], &mean, 0.9), 3e-3);
        assert_close("float16 running_var", &values(&rv), &blend(&[1.0; 3], &var, 0.9), 3e-3);
        let (rm0, rv0) = ([0.2, -0.1, 0.4], [0.8, 1.1, 1.9]);
        let (rm, rv) = (tensor(&rm0, &[3], DType::Float32, place), tensor(&rv0, &[3], DType::Float32, place));
        let opts = BatchNormOptions { momentum: 0.8, ..train };
        paddle::batch_norm(&tensor(&v, &shape, DType::Float32, place), &rm, &rv, None, None, &opts).unwrap();
        assert_close(&format!("running_mean on {place}"), &values(&rm), &blend(&rm0, &mean, 0.8), 1e-6);
        assert_close(&format!("running_var on {place}"), &values(&rv), &blend(&rv0, &var, 0.8), 1e-6);
    }

    // Gradients through the batch statistics: the create_graph rule against the fused
    // backward, first and second order by finite differences, and the GPU against the CPU.
    let inputs =
        [(rng.vec(30, -2.0, 2.0), vec![3, 2, 5]), (rng.vec(2, 0.5, 1.5), vec![2]), (rng.vec(2, -1.0, 1.0), vec![2])];
    gradcheck("batch_norm training", &|xs| bn(xs, true), &inputs).unwrap();
    gradcheck("batch_norm training, x only", &|xs| bn(xs, true), &inputs[..1]).unwrap();
    let xs: Vec<Tensor> = inputs
        .iter()
        .map(|(v, s)| {
            let t = cpu(v, s);
            t.set_stop_gradient(false);
            t
        })
        .collect();
    let composite: Vec<Vec<f64>> = grads_of(&xs).unwrap().iter().map(values).collect();
    let y = bn(&xs, true).unwrap();
    let v = tensor(&Rng::new(13).vec(y.numel(), -1.0, 1.0), y.shape(), y.dtype(), y.place());
    y.mul(&v).unwrap().sum(&[], false).unwrap().backward().unwrap();
    for (i, (x, c)) in xs.iter().zip(&composite).enumerate() {
        assert_close(&format!("create_graph vs fused gradient of input {i}"), c, &values(&x.grad().unwrap()), 1e-10);
    }
    gradcheck("batch_norm training, second order", &flat_grads, &inputs).unwrap();
    gpu_matches_cpu("batch_norm training, second order", &flat_grads, &inputs, true, 1e-4);
}
