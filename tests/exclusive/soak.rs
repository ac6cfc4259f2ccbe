//! Soak: seed 002's MNIST network trains for many steps (real data, epoch after epoch) while
//! the process RSS, the live-tensor count, the GPU's allocated bytes and its pipeline cache
//! are sampled. After warm-up (the first fifth of the steps) RSS sets a new high (by over 64
//! KiB) at most twice, as caches that fill late do, where a leak would at sample after sample,
//! and grows at most 1% plus 16 MiB (the CPU workers' kept scratch and allocator noise); the
//! tensor count and GPU bytes are flat at every sample, no pipeline is compiled, and once the
//! model, optimizer and loader are dropped the tensor count and GPU bytes return to their
//! values before the run.
//!
//! Each place trains twice: eagerly, and as the static program an `Executor` runs (on a GPU by
//! replaying a plan).
//!
//! CI runs the short form (150 CPU steps, 50 GPU steps); the long runs of RELIABILITY.md are
//! `DYGRAPH_SOAK_STEPS=10000,2000 cargo test --release --test exclusive soak -- --nocapture` (CPU, GPU);
//! `DYGRAPH_SOAK_PLOT=DIR` also draws each run's memory curves into `DIR/soak-<place>-<mode>.png`.

use crate::common;
#[path = "../../examples/common/plot.rs"]
mod plot;

use std::path::PathBuf;
use std::rc::Rc;

use dygraph::io::DataLoader;
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_::{Executor, Program, Scope, data, program_guard};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::vision::transforms::Normalize;
use dygraph::{self as paddle, DType, Place, Tensor};

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

/// RSS above the highest sample so far by more than this is a new high.
const NEW_HIGH_BYTES: u64 = 64 << 10;
/// New highs allowed after warm-up: caches that fill late, each once.
const MAX_NEW_HIGHS: usize = 2;
/// RSS growth allowed after warm-up beyond 1%: the per-thread scratch kept by the CPU
/// kernels' workers (up to 4 MiB per thread and float type) and allocator noise.
const BOUNDED_GROWTH_BYTES: u64 = 16 << 20;

fn steps_for(place: Place) -> usize {
    let (cpu, gpu) = std::env::var("DYGRAPH_SOAK_STEPS")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once(',')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .unwrap_or((150, 50));
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

/// How the network trains: eagerly, or as seed 002's static program (`minimize` appends
/// backward and Adam) run by an `Executor`, which on a GPU replays a plan.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Training {
    Eager,
    Static,
}

/// One training step on a batch: the loss.
type Step = Box<dyn FnMut(&Tensor, &Tensor) -> f32>;

fn trainer(mode: Training, place: Place) -> (Step, Option<Rc<Executor>>) {
    match mode {
        Training::Eager => {
            let model = MnistNet::new().unwrap();
            let mut opt = Adam::new(1e-3, model.parameters());
            let step = move |img: &Tensor, label: &Tensor| {
                let loss = mnist_loss(&model.forward(img).unwrap(), label).unwrap();
                loss.backward().unwrap();
                opt.step().unwrap();
                opt.clear_grad();
                loss.item::<f32>().unwrap()
            };
            (Box::new(step), None)
        }
        Training::Static => {
            let (main, startup) = (Program::new(), Program::new());
            let loss = program_guard(&main, &startup, || {
                let img = data("pixel", &[-1, 1, 28, 28], DType::Float32).unwrap();
                let label = data("label", &[-1, 1], DType::Int64).unwrap();
                let net = MnistNet::new().unwrap();
                let loss = mnist_loss(&net.forward(&img).unwrap(), &label).unwrap();
                Adam::new(1e-3, net.parameters()).minimize(&loss).unwrap();
                loss
            });
            let exe = Rc::new(Executor::with_scope(place, Scope::new()));
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            let name = loss.name().unwrap();
            let runner = exe.clone();
            let step = move |img: &Tensor, label: &Tensor| {
                let out = runner.run(&main, &[("pixel", img), ("label", label)], &[name.as_str()]).unwrap();
                out[0].item::<f32>().unwrap()
            };
            (Box::new(step), Some(exe))
        }
    }
}

fn soak(place: Place, mode: Training) {
    let steps = steps_for(place);
    let every = (steps / 20).max(1);
    let before_tensors = paddle::live_tensors();
    let (before_gpu, _) = gpu_stats(place);
    let mut samples = Vec::new();
    let mut plan = None;
    paddle::seed(2020);
    paddle::guard(place, || {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist");
        let train =
            Mnist::new(Some(&dir), Mode::Train).unwrap().with_transform(Normalize::new(&[127.5], &[127.5]).unwrap());
        let loader = DataLoader::new(train, 64).shuffle(true).drop_last(true).place(place);
        let (mut train_step, exe) = trainer(mode, place);
        let mut step = 0;
        while step < steps {
            for batch in loader.iter().unwrap() {
                if step == steps {
                    break;
                }
                let (img, label) = batch.unwrap();
                let value = train_step(&img, &label);
                assert!(value.is_finite(), "step {step}: loss {value}");
                drop((img, label));
                step += 1;
                if step % every == 0 {
                    let (gpu_bytes, pipelines) = gpu_stats(place);
                    samples.push(Sample { step, rss: rss(), tensors: paddle::live_tensors(), gpu_bytes, pipelines });
                }
            }
        }
        plan = exe.and_then(|e| e.last_plan());
    });
    if mode == Training::Static && place.is_gpu() {
        assert!(plan.is_some(), "the static program on {place} did not replay a plan");
    }
    let place_name = format!("{place} ({mode:?}{})", if plan.is_some() { ", plan" } else { "" });
    let (after_gpu, _) = gpu_stats(place);
    let after_tensors = paddle::live_tensors();
    let seed_note = format!("(DYGRAPH_TEST_SEED={})", common::run_seed());
    let mut report = format!("soak on {place_name}: {steps} steps\n  step      rss MiB  tensors  gpu MiB  pipelines\n");
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
    if let Some(dir) = std::env::var_os("DYGRAPH_SOAK_PLOT") {
        plot_run(&PathBuf::from(dir), place, mode, &samples);
    }

    let warm: Vec<&Sample> = samples.iter().filter(|s| s.step > steps / 5).collect();
    let first = warm.first().expect("samples after warm-up");
    // A leak sets a new RSS high at sample after sample; a cache that fills late (a worker
    // thread keeping its first large scratch buffer, up to 4 MiB, or the allocator raising its
    // mmap threshold) sets one or two.
    let mut high = first.rss;
    let mut new_highs = Vec::new();
    for s in &warm {
        if s.rss > high + NEW_HIGH_BYTES {
            new_highs.push(s.step);
        }
        high = high.max(s.rss);
    }
    assert!(
        new_highs.len() <= MAX_NEW_HIGHS,
        "RSS set a new high (by over {NEW_HIGH_BYTES} bytes) at steps {new_highs:?} on {place_name}\n{report}"
    );
    for s in &warm {
        let limit = first.rss + first.rss / 100 + BOUNDED_GROWTH_BYTES;
        assert!(
            s.rss <= limit,
            "RSS grew from {} to {} by step {} on {place_name}\n{report}",
            first.rss,
            s.rss,
            s.step
        );
        assert_eq!(s.tensors, first.tensors, "live tensors at step {} on {place_name} {seed_note}\n{report}", s.step);
        assert_eq!(s.gpu_bytes, first.gpu_bytes, "GPU bytes at step {} on {place_name}\n{report}", s.step);
        assert_eq!(s.pipelines, first.pipelines, "pipelines compiled after warm-up, step {} on {place_name}", s.step);
    }
    assert_eq!(after_tensors, before_tensors, "tensors outlived the model on {place_name}\n{report}");
    assert_eq!(after_gpu, before_gpu, "GPU buffers outlived the model on {place_name}\n{report}");
}

/// Writes the run's RSS (and GPU memory) curves to `soak-<place>-<mode>.png` in `dir`.
fn plot_run(dir: &std::path::Path, place: Place, mode: Training, samples: &[Sample]) {
    std::fs::create_dir_all(dir).unwrap();
    let mib = |b: u64| b as f64 / 1048576.0;
    let mut series = vec![plot::Series {
        points: samples.iter().map(|s| (s.step as f64, mib(s.rss))).collect(),
        color: (0, 0, 255),
        width: 2,
    }];
    if place.is_gpu() {
        series.push(plot::Series {
            points: samples.iter().map(|s| (s.step as f64, mib(s.gpu_bytes))).collect(),
            color: (220, 90, 0),
            width: 2,
        });
    }
    let kind = if place.is_gpu() { "gpu" } else { "cpu" };
    let mode_name = format!("{mode:?}").to_lowercase();
    let title = format!(
        "MNIST soak, {kind}, {mode_name}: process RSS{} (MiB)",
        if place.is_gpu() { " (blue) and GPU memory allocated (orange)" } else { "" }
    );
    let path = dir.join(format!("soak-{kind}-{mode_name}.png"));
    plot::line_chart(&title, "training step", "MiB", &series, &path).unwrap();
    eprintln!("plotted {}", path.display());
}

#[test]
fn cpu_training_keeps_memory_flat() {
    let _exclusive = crate::exclusive();
    let _g = common::generator_lock();
    soak(Place::Cpu, Training::Eager);
    soak(Place::Cpu, Training::Static);
}

#[test]
fn gpu_training_keeps_memory_flat() {
    let _exclusive = crate::exclusive();
    let _g = common::generator_lock();
    let Some(gpu) = common::gpu_or_skip() else { return };
    soak(gpu, Training::Eager);
    soak(gpu, Training::Static);
}
