//! The ViT, LSTM and ResNet MNIST examples: short eager runs on the CPU (a few hundred steps
//! with the examples' own settings, the one-cycle schedule fitted to the run) reach a test
//! accuracy only a model that learns the digits reaches, and the first steps through
//! `jit::to_static`, and on the GPU, follow the CPU's eager losses, and the first steps
//! under mixed precision (O1 float16, O2 bfloat16) follow float32's. The full runs' figures
//! (ViT and LSTM 97% in one epoch, ResNet 99% in two) are in BENCHMARKS.md. Each test holds the generator lock (training seeds the process-wide generator).
#![allow(clippy::duplicate_mod)]

#[path = "../../examples/lstm_mnist.rs"]
#[allow(dead_code)]
mod lstm_mnist;

#[path = "../../examples/vit_mnist.rs"]
#[allow(dead_code)]
mod vit_mnist;

#[path = "../../examples/resnet_mnist.rs"]
#[allow(dead_code)]
mod resnet_mnist;

/// The two tests of one example (each example file carries its own copy of the shared
/// training loop, so the config types differ).
macro_rules! example_tests {
    (
        $example:ident,
        $tests:ident,
        $steps_test:ident,
        $steps:expr,
        $min_accuracy:expr,
        $follow_test:ident,
        $amp_test:ident
    ) => {
        mod $tests {
            use std::path::PathBuf;

            use super::$example::common::classifier::RunConfig;
            use super::$example::{defaults, run};
            use dygraph::Place;

            fn config(place: Place) -> RunConfig {
                RunConfig {
                    place,
                    data_dir: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/mnist")),
                    verbose: false,
                    ..defaults()
                }
            }

            #[test]
            fn $steps_test() {
                let _g = crate::common::generator_lock();
                let name = stringify!($example);
                let c = RunConfig { epochs: 1, max_steps: Some($steps), ..config(Place::Cpu) };
                let r = run(&c).unwrap();
                eprintln!(
                    "{name}: {} CPU steps, {:.1} s ({:.0} images/s), test accuracy {:.4}",
                    $steps, r.train_seconds, r.images_per_second, r.test_accuracy
                );
                assert_eq!(r.losses.len(), $steps);
                assert!(
                    r.test_accuracy >= $min_accuracy,
                    "{name}: test accuracy {} after {} steps",
                    r.test_accuracy,
                    $steps
                );
            }

            /// Three steps through `jit::to_static`, and eagerly and statically on the GPU,
            /// give the CPU eager run's losses.
            #[test]
            fn $follow_test() {
                let _g = crate::common::generator_lock();
                let quick = |place, to_static| {
                    let c = RunConfig { max_steps: Some(3), epochs: 1, evaluate: false, to_static, ..config(place) };
                    run(&c).unwrap().losses
                };
                let reference = quick(Place::Cpu, false);
                assert_eq!(reference.len(), 3);
                let as_f64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
                for place in crate::common::places() {
                    for to_static in [false, true] {
                        if place == Place::Cpu && !to_static {
                            continue;
                        }
                        let got = quick(place, to_static);
                        let what = format!("{} losses on {place}, to_static {to_static}", stringify!($example));
                        crate::common::assert_close(&what, &as_f64(&got), &as_f64(&reference), 2e-3);
                    }
                }
            }

            /// Ten CPU steps under `--amp O1` (float16) and `--amp O2 --amp-dtype bfloat16`
            /// start where float32 starts (the 16-bit rounding of the first forward only) and
            /// stay near its losses.
            #[test]
            fn $amp_test() {
                let _g = crate::common::generator_lock();
                let steps = 10;
                let quick = |amp: Option<(&str, &str)>| {
                    let amp = amp.map(|(l, d)| (l.to_string(), d.to_string()));
                    let c = RunConfig { max_steps: Some(steps), epochs: 1, evaluate: false, amp, ..config(Place::Cpu) };
                    run(&c).unwrap().losses
                };
                let reference = quick(None);
                // bfloat16 keeps 8 bits of mantissa to float16's 11.
                for (level, dtype, first, bound) in [("O1", "float16", 5e-3, 0.02), ("O2", "bfloat16", 2e-2, 0.05)] {
                    let got = quick(Some((level, dtype)));
                    let what = format!("{} under {level} {dtype}", stringify!($example));
                    assert_eq!(got.len(), steps, "{what}");
                    let gap = got.iter().zip(&reference).map(|(a, b)| (a - b).abs()).sum::<f32>() / steps as f32;
                    eprintln!("{what}: losses {got:?} (float32 {reference:?}), mean |gap| {gap:.4}");
                    assert!((got[0] - reference[0]).abs() < first, "{what}: first loss {} vs {}", got[0], reference[0]);
                    assert!(gap < bound, "{what}: mean |loss − loss_f32| = {gap}");
                }
            }
        }
    };
}

example_tests!(
    lstm_mnist,
    lstm,
    short_run_learns_the_digits,
    200,
    0.85,
    to_static_and_gpu_follow_eager,
    amp_follows_float32
);
example_tests!(
    vit_mnist,
    vit,
    short_run_learns_the_digits,
    200,
    0.70,
    to_static_and_gpu_follow_eager,
    amp_follows_float32
);
example_tests!(
    resnet_mnist,
    resnet,
    short_run_learns_the_digits,
    100,
    0.93,
    to_static_and_gpu_follow_eager,
    amp_follows_float32
);
