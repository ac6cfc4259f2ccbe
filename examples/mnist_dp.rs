//! Seed 002's MNIST network trained data-parallel over MPI: every rank runs this program,
//! reads its shard of each global batch (`DistributedBatchSampler`), and `DataParallel`
//! averages the gradients across ranks during backward. With the same global batch (64 by
//! default, split evenly over the ranks) one epoch reaches the single-process accuracy.
//!
//! ```text
//! cargo build --release --features mpi --example mnist_dp
//! mpirun --oversubscribe --allow-run-as-root -np 2 target/release/examples/mnist_dp \
//!     [--epochs N] [--batch-size GLOBAL] [--steps N] [--data DIR] [--checkpoint FILE] [--seed S]
//!     [--bucket-mb MB]
//! ```
//!
//! Each rank uses a hardware GPU of its own when the machine has one per local rank, the CPU
//! otherwise (`DYGRAPH_DEVICE=cpu|gpu` overrides). Rank 0 prints the progress, the test
//! accuracy (the ranks evaluate shards of the test set and sum their counts), the
//! communication figures, and writes the checkpoint.

#[path = "common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use dygraph::distributed::{self as dist, DataParallel, DataParallelOptions, ParallelEnv, ReduceOp};
use dygraph::io::{DataLoader, DistributedBatchSampler};
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{Error, Place, Result, Tensor};

fn parsed<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match common::arg(name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| Error::invalid("mnist_dp", format!("bad --{name} {v:?}"))),
    }
}

/// Test accuracy: rank r evaluates batches r, r + N, ... of the test set (each image once,
/// no padding), and the ranks sum their counts.
fn evaluate(model: &impl Forward, env: &ParallelEnv, data: Option<&std::path::Path>, batch: usize) -> Result<f64> {
    let _g = dygraph::no_grad_guard();
    let test = Mnist::new(data, Mode::Test)?.with_transform(common::mnist_normalize()?);
    let loader = DataLoader::new(test, batch).place(env.place());
    let (mut correct, mut seen) = (0i64, 0i64);
    for (i, b) in loader.iter()?.enumerate() {
        let (img, label) = b?;
        if i % env.world_size() != env.rank() {
            continue;
        }
        let pred = model.forward(&img)?.argmax(Some(1), false)?.to_vec::<i64>()?;
        let label = label.to_vec::<i64>()?;
        correct += pred.iter().zip(&label).filter(|(p, l)| p == l).count() as i64;
        seen += label.len() as i64;
    }
    let counts = Tensor::from_vec_on(vec![correct, seen], [2], Place::Cpu)?;
    dist::all_reduce(&counts, ReduceOp::Sum)?;
    let c = counts.to_vec::<i64>()?;
    Ok(c[0] as f64 / c[1].max(1) as f64)
}

fn run(env: &ParallelEnv) -> Result<()> {
    let (rank, world) = (env.rank(), env.world_size());
    let epochs: usize = parsed("epochs", 1)?;
    let global_batch: usize = parsed("batch-size", 64)?;
    let max_steps: usize = parsed("steps", usize::MAX)?;
    let seed: u64 = parsed("seed", 2020)?;
    let data = common::arg("data").map(PathBuf::from);
    let checkpoint = PathBuf::from(common::arg("checkpoint").unwrap_or_else(|| "mnist_dp.safetensors".into()));
    if !global_batch.is_multiple_of(world) {
        return Err(Error::invalid(
            "mnist_dp",
            format!("--batch-size {global_batch} is not a multiple of {world} ranks"),
        ));
    }
    let batch = global_batch / world;
    if rank == 0 {
        println!(
            "{world} ranks, place {}, global batch {global_batch} ({batch} per rank), epochs {epochs}",
            env.place()
        );
    }

    dygraph::seed(seed);
    let mut sampler = DistributedBatchSampler::new(batch, world, rank, true, true)?;
    // Rank 0's initial weights reach every rank (DataParallel broadcasts them).
    let bucket_mb: f64 = parsed("bucket-mb", DataParallelOptions::default().bucket_cap_mb)?;
    let options = DataParallelOptions {
        bucket_cap_mb: bucket_mb,
        first_bucket_mb: bucket_mb.min(DataParallelOptions::default().first_bucket_mb),
        ..DataParallelOptions::default()
    };
    let model = DataParallel::with_options(MnistNet::new()?, options)?;
    let mut opt = Adam::new(1e-3, model.parameters());
    let start = Instant::now();
    let mut steps = 0usize;
    for epoch in 0..epochs {
        sampler.set_epoch(epoch as u64);
        let train_set = Mnist::new(data.as_deref(), Mode::Train)?.with_transform(common::mnist_normalize()?);
        let loader = DataLoader::new(train_set, batch).batch_sampler(sampler.clone()).place(env.place());
        let epoch_start = Instant::now();
        for (i, b) in loader.iter()?.take(max_steps).enumerate() {
            let (img, label) = b?;
            let loss = mnist_loss(&model.forward(&img)?, &label)?;
            loss.backward()?;
            opt.step()?;
            opt.clear_grad();
            steps += 1;
            if rank == 0 && i % 100 == 0 {
                let ips = ((i + 1) * global_batch) as f64 / epoch_start.elapsed().as_secs_f64();
                println!("epoch {epoch} step {i}: loss {:.6} ({ips:.0} images/s)", loss.item::<f32>()?);
            }
        }
    }
    dygraph::sync()?;
    let seconds = start.elapsed().as_secs_f64();
    let accuracy = evaluate(&model, env, data.as_deref(), 100)?;
    let stats = model.comm_stats();
    if rank == 0 {
        println!(
            "trained {steps} steps in {seconds:.1} s: {:.0} images/s over {world} ranks",
            (steps * global_batch) as f64 / seconds
        );
        println!("test accuracy: {:.4}", accuracy);
        println!(
            "all-reduced {} bytes per step in {} buckets {:?}; all-reduce {:.3} ms/step, {:.0}% of it overlapped \
             backward; backward waited {:.3} ms/step for it",
            stats.bytes_per_step,
            stats.bucket_bytes.len(),
            stats.bucket_bytes,
            stats.comm_s * 1e3 / stats.steps.max(1) as f64,
            100.0 * stats.overlap_fraction(),
            stats.exposed_s * 1e3 / stats.steps.max(1) as f64
        );
    }
    dist::save(&model.state_dict(), &checkpoint)?;
    if rank == 0 {
        println!("checkpoint written to {} by rank 0", checkpoint.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let env = match dist::init_parallel_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("mnist_dp: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&env) {
        Ok(()) => ExitCode::SUCCESS,
        // A failing rank takes the job down rather than leaving the others waiting.
        Err(e) => env.abort(&e),
    }
}
