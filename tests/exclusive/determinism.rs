//! Determinism: with the same seed, 60 MNIST training steps (seed 002's network, Adam,
//! real data in order) give bit-identical losses twice in one process on each place, and
//! on the CPU with one and with two worker threads (child processes with
//! `RAYON_NUM_THREADS=1` and `2`, which the thread pool reads once per process).

use crate::common;

use std::path::PathBuf;

use dygraph::io::DataLoader;
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::vision::transforms::Normalize;
use dygraph::{self as paddle, Place};

const STEPS: usize = 60;

/// The losses of `STEPS` steps from seed 2020, as their bit patterns.
fn losses(place: Place) -> Vec<u32> {
    paddle::seed(2020);
    paddle::guard(place, || {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist");
        let train =
            Mnist::new(Some(&dir), Mode::Train).unwrap().with_transform(Normalize::new(&[127.5], &[127.5]).unwrap());
        let loader = DataLoader::new(train, 32).place(place);
        let model = MnistNet::new().unwrap();
        let mut opt = Adam::new(1e-3, model.parameters());
        let mut out = Vec::with_capacity(STEPS);
        for batch in loader.iter().unwrap().take(STEPS) {
            let (img, label) = batch.unwrap();
            let loss = mnist_loss(&model.forward(&img).unwrap(), &label).unwrap();
            loss.backward().unwrap();
            opt.step().unwrap();
            opt.clear_grad();
            out.push(loss.item::<f32>().unwrap().to_bits());
        }
        out
    })
}

fn first_difference(a: &[u32], b: &[u32]) -> Option<String> {
    a.iter().zip(b).position(|(x, y)| x != y).map(|i| {
        format!("step {i}: {} vs {} ({:#010x} vs {:#010x})", f32::from_bits(a[i]), f32::from_bits(b[i]), a[i], b[i])
    })
}

/// Run by `cpu_losses_are_identical_with_one_and_two_threads` in a child process: prints
/// two runs' losses.
#[test]
#[ignore = "run as a child process by cpu_losses_are_identical_with_one_and_two_threads"]
fn determinism_child() {
    let _exclusive = crate::exclusive();
    let (a, b) = (losses(Place::Cpu), losses(Place::Cpu));
    let hex = |v: &[u32]| v.iter().map(|x| format!("{x:08x}")).collect::<Vec<_>>().join(",");
    println!("LOSSES-A {}", hex(&a));
    println!("LOSSES-B {}", hex(&b));
}

fn child_losses(threads: &str) -> (Vec<u32>, Vec<u32>) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            common::test_path(module_path!(), "determinism_child").as_str(),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the child with {threads} threads failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parse = |tag: &str| -> Vec<u32> {
        let line = text
            .lines()
            .find_map(|l| l.find(tag).map(|i| &l[i + tag.len()..]))
            .unwrap_or_else(|| panic!("no {tag} in:\n{text}"));
        line.split_whitespace()
            .next()
            .unwrap_or_default()
            .split(',')
            .map(|h| u32::from_str_radix(h, 16).unwrap())
            .collect()
    };
    (parse("LOSSES-A "), parse("LOSSES-B "))
}

#[test]
fn cpu_losses_are_identical_with_one_and_two_threads() {
    let _exclusive = crate::exclusive();
    let (one_a, one_b) = child_losses("1");
    let (two_a, two_b) = child_losses("2");
    assert_eq!(one_a.len(), STEPS);
    for (what, x, y) in [
        ("1 thread, run 2 vs run 1", &one_b, &one_a),
        ("2 threads vs 1 thread", &two_a, &one_a),
        ("2 threads, run 2 vs run 1", &two_b, &two_a),
    ] {
        if let Some(d) = first_difference(x, y) {
            panic!("CPU losses differ, {what}: {d}");
        }
    }
    let (first, last) = (f32::from_bits(one_a[0]), f32::from_bits(one_a[STEPS - 1]));
    assert!(last < 0.5 * first, "the run learns (loss {first} → {last})");
}

#[test]
fn gpu_losses_are_identical_run_to_run() {
    let _exclusive = crate::exclusive();
    let _g = common::generator_lock();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let (a, b) = (losses(gpu), losses(gpu));
    if let Some(d) = first_difference(&b, &a) {
        panic!("GPU losses differ between two runs: {d}");
    }
}
