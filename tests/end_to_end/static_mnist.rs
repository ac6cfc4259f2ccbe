//! Seed 002's "Build Compatible Model" end to end: the static MNIST example reaches 98% in
//! one epoch with Adam, follows the eager example step for step from the same seed, trains
//! with SGD, runs on the GPU, and its inference model predicts digits from PNGs through
//! `load_inference_model` alone. Each test holds the generator lock (seeded runs).

// Both examples include their shared `examples/common/mod.rs`.
#![allow(clippy::duplicate_mod)]

use crate::common;

#[path = "../../examples/static_mnist.rs"]
#[allow(dead_code)]
mod static_mnist;

#[path = "../../examples/mnist.rs"]
#[allow(dead_code)]
mod mnist;

use std::path::PathBuf;

use dygraph::Place;
use dygraph::vision::datasets::{Mnist, Mode};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dygraph-static-mnist-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist")
}

fn config(place: Place) -> static_mnist::Config {
    static_mnist::Config {
        place,
        data_dir: Some(data_dir()),
        model: tmp(&format!("model-{place}")),
        verbose: false,
        ..Default::default()
    }
}

#[test]
fn one_epoch_reaches_98_percent_and_the_inference_model_reads_pngs() {
    let _g = common::generator_lock();
    let cfg = config(Place::Cpu);
    let r = static_mnist::train(&cfg).unwrap();
    eprintln!(
        "static CPU epoch: {} steps, {:.1} s ({:.0} images/s), test loss {:.4}, accuracy {:.4}",
        r.losses.len(),
        r.train_seconds,
        r.images_per_second,
        r.test_loss,
        r.test_accuracy
    );
    assert_eq!(r.losses.len(), 60_000 / 64);
    assert!(r.losses[0] > 2.0, "starts near ln 10: {}", r.losses[0]);
    assert!(r.test_accuracy >= 0.98, "test accuracy {} after one epoch", r.test_accuracy);
    let test = Mnist::new(Some(&data_dir()), Mode::Test).unwrap();
    let mut right = 0;
    for i in 0..20 {
        let img = image::GrayImage::from_raw(28, 28, test.image_bytes(i).to_vec()).unwrap();
        let png = tmp(&format!("digit-{i}.png"));
        img.save(&png).unwrap();
        let (digit, _) = static_mnist::infer(&cfg.model, &png, Place::Cpu).unwrap();
        right += (digit == test.label(i) as usize) as usize;
    }
    assert!(right >= 19, "{right} of 20 test digits recognised through the inference model");
    assert!(static_mnist::infer(&cfg.model, &tmp("missing.png"), Place::Cpu).is_err());
    assert!(static_mnist::infer(&tmp("no-model"), &tmp("digit-0.png"), Place::Cpu).is_err());
}

#[test]
fn static_and_eager_examples_agree_step_for_step() {
    let _g = common::generator_lock();
    let steps = 100;
    let s =
        static_mnist::train(&static_mnist::Config { max_steps: Some(steps), evaluate: false, ..config(Place::Cpu) })
            .unwrap();
    let e = mnist::train(&mnist::Config {
        place: Place::Cpu,
        data_dir: Some(data_dir()),
        max_steps: Some(steps),
        evaluate: false,
        plot: None,
        progress: false,
        verbose: false,
        ..Default::default()
    })
    .unwrap();
    eprintln!(
        "{steps} steps on the CPU: eager {:.0} images/s, static {:.0} images/s",
        e.images_per_second, s.images_per_second
    );
    let what = format!("loss per step, static vs eager (seed {})", mnist::Config::default().seed);
    let (sl, el): (Vec<f64>, Vec<f64>) = s.losses.iter().zip(&e.losses).map(|(&a, &b)| (a as f64, b as f64)).unzip();
    assert_eq!(sl.len(), steps);
    common::assert_close(&what, &sl, &el, 1e-3);
}

#[test]
fn sgd_and_the_gpu_place_train() {
    let _g = common::generator_lock();
    let sgd = static_mnist::train(&static_mnist::Config {
        max_steps: Some(40),
        evaluate: false,
        optimizer: "sgd".into(),
        ..config(Place::Cpu)
    })
    .unwrap();
    let head = sgd.losses[..5].iter().sum::<f32>() / 5.0;
    let tail = sgd.losses[35..].iter().sum::<f32>() / 5.0;
    assert!(tail < head, "SGD loss {head} → {tail}");
    let Some(gpu) = common::gpu_or_skip() else { return };
    let run = |place| {
        static_mnist::train(&static_mnist::Config { max_steps: Some(30), evaluate: false, ..config(place) }).unwrap()
    };
    let (c, g) = (run(Place::Cpu), run(gpu));
    // The GPU steps replay a plan (fused), the CPU steps are interpreted: the same losses
    // step for step, within float32 drift over 30 Adam steps.
    let plan = g.plan.as_ref().expect("the GPU steps follow a plan");
    assert!(plan.dispatches > 0 && plan.ops > 0 && plan.live_ops == 0, "{plan:?}");
    assert!(c.plan.is_none(), "the CPU place interprets: {:?}", c.plan);
    let widen = |l: &[f32]| l.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let what = format!("static MNIST loss per step, GPU plan vs CPU (seed {})", config(gpu).seed);
    common::assert_close(&what, &widen(&g.losses), &widen(&c.losses), 1e-3);
    assert!(g.losses[29] < 0.6 * g.losses[0], "GPU static loss {} → {}", g.losses[0], g.losses[29]);
}
