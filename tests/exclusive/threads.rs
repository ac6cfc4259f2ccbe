//! Threads: two models training at once on two threads (both on the CPU, CPU and GPU, both
//! on the GPU) give the losses and parameters of training them one after the other, without
//! deadlock; grad mode, the `guard` place and static mode are per thread. (The random
//! generator and `set_device`'s default place are process-wide, as in Paddle: models are
//! initialised before the threads start.)

use crate::common;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use dygraph::nn::{Forward, Layer, Linear, Sequential, StateDict, Tanh};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::{self as paddle, Place, Tensor};

fn mlp() -> Sequential {
    Sequential::new().add(Linear::new(8, 16).unwrap()).add(Tanh).add(Linear::new(16, 1).unwrap())
}

/// A fresh MLP holding `state` on `place`.
fn model_from(state: &StateDict, place: Place) -> Sequential {
    let mut m = mlp();
    m.set_state_dict(state).unwrap();
    m.to(place).unwrap();
    m
}

/// 60 Adam steps regressing a fixed target; the losses (bits) and final parameters.
fn train(model: Sequential, place: Place, shift: f64) -> (Vec<u32>, Vec<Vec<f64>>) {
    paddle::guard(place, || {
        let x: Vec<f32> = (0..32 * 8).map(|i| ((i * 13 % 17) as f32 / 17.0) - 0.5).collect();
        let y: Vec<f32> = (0..32).map(|i| ((i as f64 * 0.3 + shift).sin()) as f32).collect();
        let x = Tensor::from_vec_on(x, [32, 8], place).unwrap();
        let y = Tensor::from_vec_on(y, [32, 1], place).unwrap();
        let mut opt = Adam::new(1e-2, model.parameters());
        let mut losses = Vec::new();
        for _ in 0..60 {
            let loss = model.forward(&x).unwrap().subtract(&y).unwrap().square().unwrap().mean(&[], false).unwrap();
            loss.backward().unwrap();
            opt.step().unwrap();
            opt.clear_grad();
            losses.push(loss.item::<f32>().unwrap().to_bits());
        }
        let params = model.parameters().iter().map(|p| p.to_f64_vec().unwrap()).collect();
        (losses, params)
    })
}

#[test]
fn two_models_train_at_once_as_they_do_one_after_the_other() {
    let _exclusive = crate::exclusive();
    let _g = common::generator_lock();
    paddle::seed(common::run_seed());
    let gpu = common::gpu_or_skip();
    let mut pairs = vec![(Place::Cpu, Place::Cpu)];
    if let Some(g) = gpu {
        pairs.push((Place::Cpu, g));
        pairs.push((g, g));
    }
    for (pa, pb) in pairs {
        let (sa, sb) = (mlp().state_dict(), mlp().state_dict());
        let alone_a = train(model_from(&sa, pa), pa, 0.0);
        let alone_b = train(model_from(&sb, pb), pb, 1.0);
        let (ma, mb) = (model_from(&sa, pa), model_from(&sb, pb));
        let (tx, rx) = mpsc::channel();
        let start = Arc::new(Barrier::new(2));
        let threads: Vec<_> = [(ma, pa, 0.0, 'a'), (mb, pb, 1.0, 'b')]
            .into_iter()
            .map(|(m, p, shift, tag)| {
                let (tx, start) = (tx.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    tx.send((tag, train(m, p, shift))).unwrap();
                })
            })
            .collect();
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(rx.recv_timeout(Duration::from_secs(300)).expect("a training thread hung (deadlock?)"));
        }
        for t in threads {
            t.join().expect("a training thread panicked");
        }
        got.sort_by_key(|(tag, _)| *tag);
        assert_eq!(got[0].1, alone_a, "model a on {pa} beside model b on {pb}");
        assert_eq!(got[1].1, alone_b, "model b on {pb} beside model a on {pa}");
    }
}

#[test]
fn grad_mode_guard_place_and_static_mode_are_per_thread() {
    let _exclusive = crate::exclusive();
    let gpu = common::gpu_or_skip();
    let inside = Arc::new(Barrier::new(2));
    let done = Arc::new(Barrier::new(2));
    let (i2, d2) = (inside.clone(), done.clone());
    let other = std::thread::spawn(move || {
        let _no_grad = paddle::no_grad_guard();
        paddle::static_::enable_static();
        let place = gpu.unwrap_or(Place::Cpu);
        paddle::guard(place, || {
            i2.wait();
            // The main thread checks its own state now.
            d2.wait();
            assert!(!paddle::is_grad_enabled());
            assert!(paddle::static_::in_static_mode());
            assert_eq!(paddle::current_place().unwrap(), place);
        });
        paddle::static_::disable_static();
    });
    inside.wait();
    assert!(paddle::is_grad_enabled(), "another thread's no_grad leaked");
    assert!(!paddle::static_::in_static_mode(), "another thread's enable_static leaked");
    paddle::guard(Place::Cpu, || {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], [2]).unwrap();
        x.set_stop_gradient(false);
        let y = x.square().unwrap().sum(&[], false).unwrap();
        assert_eq!(x.place(), Place::Cpu, "another thread's guard leaked");
        y.backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    });
    done.wait();
    other.join().expect("the other thread's checks failed");
}
