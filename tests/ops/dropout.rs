//! Dropout: the mask is the same on CPU and GPU for a seed, about `1 − p` of the elements
//! survive, the modes scale as Paddle's, eval is deterministic, gradients follow the mask.

use crate::common;

use common::{Rng, gpu_or_skip, places, values};
use dygraph::{self as paddle, DType, DropoutMode, DropoutOptions, Error, Place, Tensor};

use common::generator_lock as lock;

fn train(p: f64) -> DropoutOptions {
    DropoutOptions { p, ..Default::default() }
}

#[test]
fn defaults_match_paddle() {
    let _generator = common::generator_lock();
    let o = DropoutOptions::default();
    assert_eq!((o.p, o.training, o.mode), (0.5, true, DropoutMode::UpscaleInTrain));
    assert_eq!("downscale_in_infer".parse::<DropoutMode>().unwrap(), DropoutMode::DownscaleInInfer);
    assert_eq!("upscale_in_train".parse::<DropoutMode>().unwrap(), DropoutMode::UpscaleInTrain);
    let e = "upscale".parse::<DropoutMode>().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("dropout"));
}

#[test]
fn mask_is_identical_on_cpu_and_gpu() {
    let Some(gpu) = gpu_or_skip() else { return };
    let _g = lock();
    let mut rng = Rng::new(3);
    let x = rng.vec(4099, 0.5, 1.5);
    let run = |place: Place, mode: DropoutMode| {
        paddle::seed(2024);
        let t = Tensor::from_vec_on(x.iter().map(|&v| v as f32).collect::<Vec<_>>(), [4099], place).unwrap();
        values(&paddle::dropout(&t, DropoutOptions { p: 0.3, training: true, mode }).unwrap())
    };
    for mode in [DropoutMode::UpscaleInTrain, DropoutMode::DownscaleInInfer] {
        let (c, g) = (run(Place::Cpu, mode), run(gpu, mode));
        let kept_c: Vec<bool> = c.iter().map(|&v| v != 0.0).collect();
        let kept_g: Vec<bool> = g.iter().map(|&v| v != 0.0).collect();
        assert_eq!(kept_c, kept_g, "{mode:?}: masks differ between CPU and GPU");
        common::assert_close("dropout GPU vs CPU", &g, &c, 1e-6);
    }
    // The mask is exactly `rand >= p` of the same stream.
    paddle::seed(2024);
    let u = values(&paddle::rand_on([4099], Place::Cpu).unwrap());
    let c = run(Place::Cpu, DropoutMode::DownscaleInInfer);
    let by_rand: Vec<bool> = u.iter().map(|&v| v >= 0.3).collect();
    assert_eq!(c.iter().map(|&v| v != 0.0).collect::<Vec<_>>(), by_rand);
}

#[test]
fn kept_fraction_and_upscaled_values() {
    let _g = lock();
    // Seeded: the statistical bounds (at least ~4.5 sigma) then hold deterministically.
    paddle::seed(100);
    for place in places() {
        for p in [0.1, 0.5, 0.8] {
            let x = paddle::ones_on([40_000], DType::Float32, place).unwrap();
            let y = values(&paddle::dropout(&x, train(p)).unwrap());
            let scale = 1.0 / (1.0 - p);
            let kept = y.iter().filter(|&&v| v != 0.0).count() as f64 / y.len() as f64;
            assert!((kept - (1.0 - p)).abs() < 0.012, "{place} p={p}: kept {kept}");
            assert!(y.iter().all(|&v| v == 0.0 || (v - scale).abs() < 1e-6), "{place} p={p}: values not 0 or {scale}");
            let mean = y.iter().sum::<f64>() / y.len() as f64;
            assert!((mean - 1.0).abs() < 0.05, "{place} p={p}: upscale keeps the mean, got {mean}");
        }
    }
}

#[test]
fn modes_and_eval() {
    let _g = lock();
    for place in places() {
        let x = Tensor::from_vec_on(vec![1.0f32, -2.0, 3.0, 4.0], [2, 2], place).unwrap();
        let eval = |mode, p| values(&paddle::dropout(&x, DropoutOptions { p, training: false, mode }).unwrap());
        assert_eq!(eval(DropoutMode::UpscaleInTrain, 0.4), vec![1.0, -2.0, 3.0, 4.0]);
        let d = eval(DropoutMode::DownscaleInInfer, 0.25);
        assert_eq!(d, vec![0.75, -1.5, 2.25, 3.0]);
        // Training with downscale_in_infer keeps values unscaled.
        let y = values(
            &paddle::dropout(&x, DropoutOptions { p: 0.5, training: true, mode: DropoutMode::DownscaleInInfer })
                .unwrap(),
        );
        for (a, b) in y.iter().zip([1.0, -2.0, 3.0, 4.0]) {
            assert!(*a == 0.0 || *a == b, "{place}: {y:?}");
        }
        // p = 0 is the identity, p = 1 zeros everything.
        assert!(paddle::dropout(&x, train(0.0)).unwrap().same_tensor(&x));
        assert_eq!(values(&paddle::dropout(&x, train(1.0)).unwrap()), vec![0.0; 4]);
        // float16 keeps its dtype.
        let h = x.cast(DType::Float16).unwrap();
        let yh = paddle::dropout(&h, train(0.5)).unwrap();
        assert_eq!(yh.dtype(), DType::Float16);
        assert!(values(&yh).iter().zip([1.0, -2.0, 3.0, 4.0]).all(|(a, b)| *a == 0.0 || *a == 2.0 * b));
    }
    let x64 = paddle::ones_on([1000], DType::Float64, Place::Cpu).unwrap();
    let y = paddle::dropout(&x64, train(0.5)).unwrap();
    assert_eq!(y.dtype(), DType::Float64);
    assert!(values(&y).iter().all(|&v| v == 0.0 || v == 2.0));
}

#[test]
fn reproducible_after_seed_and_fresh_per_call() {
    let _g = lock();
    for place in places() {
        let x = paddle::ones_on([500], DType::Float32, place).unwrap();
        paddle::seed(9);
        let a = values(&paddle::dropout(&x, train(0.5)).unwrap());
        let b = values(&paddle::dropout(&x, train(0.5)).unwrap());
        paddle::seed(9);
        assert_eq!(values(&paddle::dropout(&x, train(0.5)).unwrap()), a, "{place}");
        assert_ne!(a, b, "{place}: consecutive masks are equal");
    }
}

#[test]
fn gradient_is_mask_times_scale() {
    let _g = lock();
    for place in places() {
        for (mode, scale) in [(DropoutMode::UpscaleInTrain, 1.0 / 0.6), (DropoutMode::DownscaleInInfer, 1.0)] {
            let mut rng = Rng::new(5);
            let xv: Vec<f32> = rng.vec(300, 1.0, 2.0).into_iter().map(|v| v as f32).collect();
            let x = Tensor::from_vec_on(xv.clone(), [300], place).unwrap();
            x.set_stop_gradient(false);
            let y = paddle::dropout(&x, DropoutOptions { p: 0.4, training: true, mode }).unwrap();
            let w = Tensor::from_vec_on(
                rng.vec(300, -1.0, 1.0).into_iter().map(|v| v as f32).collect::<Vec<_>>(),
                [300],
                place,
            )
            .unwrap();
            y.mul(&w).unwrap().sum(&[], false).unwrap().backward().unwrap();
            let (yv, gv, wv) = (values(&y), values(&x.grad().unwrap()), values(&w));
            for i in 0..300 {
                let mask = if yv[i] != 0.0 { scale } else { 0.0 };
                assert!((yv[i] - mask * xv[i] as f64).abs() < 1e-5, "{place} {mode:?}: y[{i}]");
                assert!(
                    (gv[i] - mask * wv[i]).abs() < 1e-5,
                    "{place} {mode:?}: grad[{i}] {} vs {}",
                    gv[i],
                    mask * wv[i]
                );
            }
        }
        // Eval-mode gradients: identity and the (1 − p) scale.
        let x = paddle::ones_on([3], DType::Float32, place).unwrap();
        x.set_stop_gradient(false);
        let opts = DropoutOptions { p: 0.2, training: false, mode: DropoutMode::DownscaleInInfer };
        paddle::dropout(&x, opts).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert!(values(&x.grad().unwrap()).iter().all(|&g| (g - 0.8).abs() < 1e-6));
    }
}

#[test]
fn bad_arguments_are_errors() {
    let _generator = common::generator_lock();
    let x = paddle::ones_on([3], DType::Float32, Place::Cpu).unwrap();
    for p in [-0.1, 1.5, f64::NAN] {
        let e = paddle::dropout(&x, train(p)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("dropout"), "{e}");
    }
    let i = paddle::ones_on([3], DType::Int64, Place::Cpu).unwrap();
    let e = paddle::dropout(&i, train(0.5)).unwrap_err();
    assert!(matches!(e, Error::UnsupportedDType { .. }) && e.to_string().contains("dropout"), "{e}");
}
