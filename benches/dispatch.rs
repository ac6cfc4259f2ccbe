//! The host cost of an eager GPU op: the time a call takes to validate, allocate and record
//! its dispatch, without waiting for the device (`cargo bench --bench dispatch`). The
//! recorder submits every 512 dispatches; that submit is part of the cost, the execution is
//! not. Two measures: wall time per call (`wall`), and the calling thread's CPU time per call
//! (`thread_cpu`, Linux), which leaves out a software adapter's worker threads executing the
//! kernels on the same cores. `check_nan_inf` measures that flag's cost per op (GPU calls
//! there wait for the device, with and without the check, so the two compare); `shadow` the
//! CPU shadow's, per op and per MNIST training step.

use std::time::Duration;
#[cfg(not(target_os = "linux"))]
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use dygraph::{self as paddle, DType, Place, Tensor};

#[path = "common/mod.rs"]
mod common;

use common::thread_cpu;

/// One benchmarked call.
type OpCall<'a> = Box<dyn Fn() -> Tensor + 'a>;

/// Times `iters` calls of `f` by the calling thread's CPU time.
fn cpu_time(iters: u64, f: &dyn Fn() -> Tensor) -> Duration {
    let t0 = thread_cpu();
    for _ in 0..iters {
        drop(f());
    }
    thread_cpu() - t0
}

fn dispatch(c: &mut Criterion) {
    let Ok(info) = paddle::gpu_info(0) else {
        eprintln!("no GPU adapter: nothing to measure");
        return;
    };
    eprintln!("GPU adapter: {} ({}, {})", info.name, info.backend, info.device_type);
    let g = Place::Gpu(0);
    let x = paddle::ones_on([1024], DType::Float32, g).unwrap();
    let y = paddle::ones_on([1024], DType::Float32, g).unwrap();
    let a = paddle::ones_on([16, 16], DType::Float32, g).unwrap();
    paddle::sync().unwrap();
    let ops: Vec<(&str, OpCall<'_>)> = vec![
        ("relu_1k", Box::new(|| x.relu().unwrap())),
        ("add_1k", Box::new(|| x.add(&y).unwrap())),
        ("sum_1k", Box::new(|| x.sum(&[], false).unwrap())),
        ("matmul_16", Box::new(|| a.matmul(&a).unwrap())),
    ];
    let mut group = c.benchmark_group("gpu_op_host_cost");
    for (name, f) in &ops {
        group.bench_function(format!("{name}/wall"), |b| b.iter(f));
        group.bench_function(format!("{name}/thread_cpu"), |b| b.iter_custom(|iters| cpu_time(iters, f.as_ref())));
    }
    group.finish();
    paddle::sync().unwrap();
}

/// `FLAGS_check_nan_inf`'s cost per eager op: a 1024-element add with the flag off, at level
/// 1 and at level 2, on the CPU and (when there is an adapter) the GPU; every GPU call waits
/// for the device, so the deferred check's kernel (level 1) and the per-op readback (level 2)
/// compare with the unchecked add.
fn nan_check(c: &mut Criterion) {
    let mut places = vec![Place::Cpu];
    if paddle::gpu_info(0).is_ok() {
        places.push(Place::Gpu(0));
    }
    let mut group = c.benchmark_group("check_nan_inf");
    for place in places {
        let x = paddle::ones_on([1024], DType::Float32, place).unwrap();
        let y = paddle::ones_on([1024], DType::Float32, place).unwrap();
        for on in ["0", "1", "2"] {
            paddle::set_flags(&[("FLAGS_check_nan_inf", on)]).unwrap();
            group.bench_function(format!("add_1k/{place}/check_{on}"), |b| {
                b.iter(|| {
                    let z = x.add(&y).unwrap();
                    if place.is_gpu() {
                        paddle::sync().unwrap();
                    }
                    z
                })
            });
        }
        paddle::set_flags(&[("FLAGS_check_nan_inf", "0")]).unwrap();
    }
    group.finish();
}

/// The CPU shadow's cost (`FLAGS_shadow`): a 1024-element GPU add and one Adam step of the
/// MNIST network on the GPU (batch 64, synthetic images), unshadowed and shadowed; every call
/// waits for the device in both, so the two compare.
fn shadow(c: &mut Criterion) {
    use dygraph::nn::{Forward, Layer};
    use dygraph::optimizer::{Adam, Optimizer};
    use dygraph::vision::models::{MnistNet, mnist_loss};
    if paddle::gpu_info(0).is_err() {
        eprintln!("no GPU adapter: no shadow to measure");
        return;
    }
    let g = Place::Gpu(0);
    let x = paddle::ones_on([1024], DType::Float32, g).unwrap();
    let img = paddle::rand_on([64, 1, 28, 28], g).unwrap();
    let label = Tensor::from_vec_on((0..64).map(|i| i % 10).collect::<Vec<i64>>(), [64, 1], g).unwrap();
    let model = paddle::guard(g, MnistNet::new).unwrap();
    let mut opt = Adam::new(1e-3, model.parameters());
    let mut group = c.benchmark_group("shadow");
    group.sample_size(10);
    for setting in ["off", "cpu"] {
        paddle::set_flags(&[("FLAGS_shadow", setting)]).unwrap();
        group.bench_function(format!("add_1k/{setting}"), |b| {
            b.iter(|| {
                let z = x.add(&x).unwrap();
                paddle::sync().unwrap();
                z
            })
        });
        group.bench_function(format!("mnist_step/{setting}"), |b| {
            b.iter(|| {
                let loss = mnist_loss(&model.forward(&img).unwrap(), &label).unwrap();
                loss.backward().unwrap();
                opt.step().unwrap();
                opt.clear_grad();
                paddle::sync().unwrap();
            })
        });
    }
    paddle::set_flags(&[("FLAGS_shadow", "off")]).unwrap();
    group.finish();
}

criterion_group!(benches, dispatch, nan_check, shadow);
criterion_main!(benches);
