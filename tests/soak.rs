//! Soak: seed 002's MNIST network trains for many steps (real data, epoch after epoch) while
//! the process RSS, the live-tensor count, the GPU's allocated bytes and its pipeline cache
//! are sampled. After warm-up (the first fifth of the steps) RSS grows at most 1% (plus 4 MiB
//! for allocator noise), the tensor count and GPU bytes are flat at every sample, no pipeline
//! is compiled, and once the model, optimizer and loader are dropped the tensor count and GPU
//! bytes return to their values before the run.
//!
//! CI runs the short form (300 CPU steps, 100 GPU steps); the long runs of RELIABILITY.md are
//! `DYGRAPH_SOAK_STEPS=10000,2000 cargo test --release --test soak -- --nocapture` (CPU, GPU).

mod common;

use std::path::PathBuf;

use dygraph::io::DataLoader;
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::vision::transforms::Normalize;
use dygraph::{self as paddle, Place};

/// Resident set size in bytes (Linux `/proc/self/statm`, pages of 4 KiB).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm (the soak runs on Linux)");
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).expect("statm's resident field") * 4096
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    step: usize,
    rss: u64,
    tensors: usize,
    gpu_bytes: u64,
    pipelines: u64,
}

fn steps_for(place: Place) -> usize {
    let (cpu, gpu) = std::env::var("DYGRAPH_SOAK_STEPS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once(',')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .unwrap_or((300, 100));
    if place.is_gpu() { gpu } else { cpu }
}

fn gpu_stats(place: Place) -> (u64, u64) {
    match place {
        Place::Gpu(i) => {
            paddle::sync().unwrap();
            let s = paddle::memory_stats(i).unwrap();
            (s.allocated, s.pipelines)
        }
        Place::Cpu => (0, 0),
    }
}

fn soak(place: Place) {
    let steps = steps_for(place);
    let every = (steps / 20).max(1);
    let before_tensors = paddle::live_tensors();
    let (before_gpu, _) = gpu_stats(place);
    let mut samples = Vec::new();
    paddle::seed(2020);
    paddle::guard(place, || {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist");
        let train =
            Mnist::new(Some(&dir), Mode::Train).unwrap().with_transform(Normalize::new(&[127.5], &[127.5]).unwrap());
        let loader = DataLoader::new(train, 64).shuffle(true).drop_last(true).place(place);
        let model = MnistNet::new().unwrap();
        let mut opt = Adam::new(1e-3, model.parameters());
        let mut step = 0;
        while step < steps {
            for batch in loader.iter().unwrap() {
                if step == steps {
                    break;
                }
                let (img, label) = batch.unwrap();
                let loss = mnist_loss(&model.forward(&img).unwrap(), &label).unwrap();
                loss.backward().unwrap();
                opt.step().unwrap();
                opt.clear_grad();
                let value = loss.item::<f32>().unwrap();
                assert!(value.is_finite(), "step {step}: loss {value}");
                drop((img, label, loss));
                step += 1;
                if step % every == 0 {
                    let (gpu_bytes, pipelines) = gpu_stats(place);
                    samples.push(Sample { step, rss: rss(), tensors: paddle::live_tensors(), gpu_bytes, pipelines });
                }
            }
        }
    });
    let (after_gpu, _) = gpu_stats(place);
    let after_tensors = paddle::live_tensors();
    let seed_note = format!("(DYGRAPH_TEST_SEED={})", common::run_seed());
    let mut report = format!("soak on {place}: {steps} steps\n  step      rss MiB  tensors  gpu MiB  pipelines\n");
    for s in &samples {
        report += &format!(
            "  {:>6} {:>10.1} {:>8} {:>8.2} {:>10}\n",
            s.step,
            s.rss as f64 / 1048576.0,
            s.tensors,
            s.gpu_bytes as f64 / 1048576.0,
            s.pipelines
        );
    }
    report +=
        &format!("  after drop: tensors {before_tensors} → {after_tensors}, gpu bytes {before_gpu} → {after_gpu}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), report.as_bytes());

    let warm: Vec<&Sample> = samples.iter().filter(|s| s.step > steps / 5).collect();
    let first = warm.first().expect("samples after warm-up");
    for s in &warm {
        let limit = first.rss + first.rss / 100 + (4 << 20);
        assert!(s.rss <= limit, "RSS grew from {} to {} by step {} on {place}\n{report}", first.rss, s.rss, s.step);
        assert_eq!(s.tensors, first.tensors, "live tensors at step {} on {place} {seed_note}\n{report}", s.step);
        assert_eq!(s.gpu_bytes, first.gpu_bytes, "GPU bytes at step {} on {place}\n{report}", s.step);
        assert_eq!(s.pipelines, first.pipelines, "pipelines compiled after warm-up, step {} on {place}", s.step);
    }
    assert_eq!(after_tensors, before_tensors, "tensors outlived the model on {place}\n{report}");
    assert_eq!(after_gpu, before_gpu, "GPU buffers outlived the model on {place}\n{report}");
}

#[test]
fn cpu_training_keeps_memory_flat() {
    let _g = common::generator_lock();
    soak(Place::Cpu);
}

#[test]
fn gpu_training_keeps_memory_flat() {
    let _g = common::generator_lock();
    let Some(gpu) = common::gpu_or_skip() else { return };
    soak(gpu);
}
