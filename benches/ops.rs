//! Criterion benchmarks: the MNIST training step and the kernels it is made of, on the CPU
//! place and, when an adapter is present, the GPU place. `cargo bench --bench ops`.
//! GPU timings include `sync()`, so they measure the work, not only its recording.

#[path = "../examples/mnist.rs"]
#[allow(dead_code)]
mod mnist;

use criterion::{Criterion, criterion_group, criterion_main};
use dygraph::io::DataLoader;
use dygraph::nn::{CrossEntropyOptions, Forward, Layer, Pool2dOptions};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::static_ as st;
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::transforms::Normalize;
use dygraph::{self as paddle, Conv2dOptions, DType, Place};

fn places() -> Vec<Place> {
    let mut p = vec![Place::Cpu];
    match paddle::gpu_info(0) {
        Ok(info) => {
            eprintln!("GPU adapter: {} ({}, {})", info.name, info.backend, info.device_type);
            p.push(Place::Gpu(0));
        }
        Err(e) => eprintln!("no GPU adapter, CPU only: {e}"),
    }
    p
}

/// Runs `f` and waits for the device, so GPU figures include execution.
fn done<T>(v: T) -> T {
    paddle::sync().unwrap();
    v
}

fn mnist_step(c: &mut Criterion) {
    let mut group = c.benchmark_group("mnist_train_step_batch64");
    group.sample_size(10);
    for place in places() {
        paddle::guard(place, || {
            paddle::seed(1);
            let model = mnist::MnistNet::new().unwrap();
            let mut opt = Adam::new(1e-3, model.parameters());
            // The first shuffled batch of real MNIST: max pooling's and relu's work depends on
            // the data, so random inputs would time a different workload.
            let train =
                Mnist::new(None, Mode::Train).unwrap().with_transform(Normalize::new(&[127.5], &[127.5]).unwrap());
            let loader = DataLoader::new(train, 64).shuffle(true).place(place);
            let (x, y) = loader.iter().unwrap().next().unwrap().unwrap();
            let ce = CrossEntropyOptions { use_softmax: false, ..Default::default() };
            group.bench_function(format!("eager/{place}"), |b| {
                b.iter(|| {
                    let loss = paddle::nn::functional::cross_entropy(&model.forward(&x).unwrap(), &y, &ce).unwrap();
                    loss.backward().unwrap();
                    opt.step().unwrap();
                    opt.clear_grad();
                    done(loss)
                })
            });
            // The same step as a static program run by an Executor (seed 002's "Build
            // Compatible Model").
            let (main, startup) = (st::Program::new(), st::Program::new());
            let loss = st::program_guard(&main, &startup, || {
                let img = st::data("pixel", &[-1, 1, 28, 28], DType::Float32).unwrap();
                let label = st::data("label", &[-1, 1], DType::Int64).unwrap();
                let net = mnist::MnistNet::new().unwrap();
                let loss = paddle::nn::functional::cross_entropy(&net.forward(&img).unwrap(), &label, &ce).unwrap();
                Adam::new(1e-3, net.parameters()).minimize(&loss).unwrap();
                loss
            });
            let exe = st::Executor::with_scope(place, st::Scope::new());
            exe.run(&startup, &[], &[] as &[&str]).unwrap();
            group.bench_function(format!("static/{place}"), |b| {
                b.iter(|| done(exe.run(&main, &[("pixel", &x), ("label", &y)], &[&loss]).unwrap()))
            });
        });
    }
    group.finish();
}

fn kernels(c: &mut Criterion) {
    let mut group = c.benchmark_group("kernels");
    group.sample_size(20);
    for place in places() {
        paddle::guard(place, || {
            let a = paddle::randn([256, 256]).unwrap();
            let b = paddle::randn([256, 256]).unwrap();
            group.bench_function(format!("matmul_256x256x256/{place}"), |bn| {
                bn.iter(|| done(paddle::matmul(&a, &b, false, false).unwrap()))
            });
            let x = paddle::randn([64, 20, 12, 12]).unwrap();
            let w = paddle::randn([50, 20, 5, 5]).unwrap();
            let bias = paddle::randn([50]).unwrap();
            let opts = Conv2dOptions::default();
            group.bench_function(format!("conv2d_64x20x12x12_k5_oc50/{place}"), |bn| {
                bn.iter(|| done(paddle::conv2d(&x, &w, Some(&bias), &opts).unwrap()))
            });
            let h = paddle::randn([64, 20, 24, 24]).unwrap();
            let pool = Pool2dOptions::new(2).stride(2);
            group.bench_function(format!("max_pool2d_64x20x24x24/{place}"), |bn| {
                bn.iter(|| done(paddle::max_pool2d(&h, &pool).unwrap()))
            });
            group.bench_function(format!("relu_737k/{place}"), |bn| bn.iter(|| done(h.relu().unwrap())));
            let bias_like = paddle::randn([1, 20, 1, 1]).unwrap();
            group.bench_function(format!("add_broadcast_737k/{place}"), |bn| {
                bn.iter(|| done(paddle::add(&h, &bias_like).unwrap()))
            });
            group.bench_function(format!("sum_axes_0_2_3_737k/{place}"), |bn| {
                bn.iter(|| done(h.sum(&[0, 2, 3], false).unwrap()))
            });
            // The seed MNIST network's two convolutions at batch 64, forward and backward.
            let x1 = paddle::randn([64, 1, 28, 28]).unwrap();
            let w1 = paddle::randn([20, 1, 5, 5]).unwrap();
            let b1 = paddle::randn([20]).unwrap();
            for t in [&x, &w1, &b1, &w, &bias] {
                t.set_stop_gradient(false);
            }
            group.bench_function(format!("mnist_convs_forward_backward/{place}"), |bn| {
                bn.iter(|| {
                    let y1 = paddle::conv2d(&x1, &w1, Some(&b1), &opts).unwrap();
                    let y2 = paddle::conv2d(&x, &w, Some(&bias), &opts).unwrap();
                    y1.sum(&[], false).unwrap().add(&y2.sum(&[], false).unwrap()).unwrap().backward().unwrap();
                    for t in [&w1, &b1, &x, &w, &bias] {
                        t.clear_gradient();
                    }
                    done(())
                })
            });
        });
    }
    group.finish();
}

criterion_group!(benches, mnist_step, kernels);
criterion_main!(benches);
