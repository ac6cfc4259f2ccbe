//! Seed 002's "Build Compatible Model": the same `MnistNet` and loss as the eager example,
//! built into a static Program (`data` placeholders, `minimize` appending the backward and
//! update ops) and trained by an Executor: `exe.run(startup)`, then per batch
//! `exe.run(main, feed={pixel, label}, fetch_list=[avg_loss, *params])`. Evaluation runs
//! the program's `clone_program(true)` (forward only); the parameters are saved from the
//! Scope and `--infer` reloads them into a fresh Scope.
//!
//! ```text
//! cargo run --release --example static_mnist [-- --place cpu|gpu] [--epochs N] [--steps N]
//!     [--optimizer adam|sgd] [--seed S] [--data DIR] [--checkpoint FILE] [--infer IMAGE.png]
//! ```

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use dygraph::io::DataLoader;
use dygraph::nn::{Forward, Layer, StateDict};
use dygraph::optimizer::{Adam, Optimizer, SGD};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::vision::transforms::Normalize;
use dygraph::{self as paddle, DType, Error, Place, Result, Tensor};

/// The programs of one model: training, evaluation, and the variables fed and fetched.
struct Programs {
    main: Program,
    startup: Program,
    test: Program,
    avg_loss: Tensor,
    probs: Tensor,
    params: Vec<String>,
}

/// Builds the seed's static program with the eager example's model code.
fn build(optimizer: &str) -> Result<Programs> {
    let (main, startup) = (Program::new(), Program::new());
    st::program_guard(&main, &startup, || {
        let img = st::data("pixel", &[-1, 1, 28, 28], DType::Float32)?;
        let label = st::data("label", &[-1, 1], DType::Int64)?;
        let mnist = MnistNet::new()?;
        let cost = mnist.forward(&img)?;
        let avg_loss = mnist_loss(&cost, &label)?;
        let test = main.clone_program(true);
        let params = mnist.parameters();
        let mut opt: Box<dyn Optimizer> = match optimizer {
            "adam" => Box::new(Adam::new(1e-3, params.clone())),
            "sgd" => Box::new(SGD::new(1e-3, params.clone())),
            o => return Err(Error::invalid("static_mnist", format!("unknown optimizer {o:?} (adam or sgd)"))),
        };
        opt.minimize(&avg_loss)?;
        let params = params.iter().map(|p| p.name().unwrap_or_default()).collect();
        Ok(Programs { main: main.clone(), startup: startup.clone(), test, avg_loss, probs: cost, params })
    })
}

fn normalize() -> Result<Normalize> {
    Normalize::new(&[127.5], &[127.5])
}

/// Labels as the `[N, 1]` int64 the `label` placeholder declares.
fn column(label: &Tensor) -> Result<Tensor> {
    label.reshape([label.shape()[0], 1])
}

/// Accuracy of the evaluation program over the test set.
fn evaluate(exe: &Executor, p: &Programs, dir: Option<&Path>, place: Place) -> Result<(f64, f64)> {
    let test_set = Mnist::new(dir, Mode::Test)?.with_transform(normalize()?);
    let loader = DataLoader::new(test_set, 64).place(place);
    let (mut loss_sum, mut correct, mut seen) = (0.0, 0usize, 0usize);
    for batch in loader.iter()? {
        let (img, label) = batch?;
        let label = column(&label)?;
        let out = exe.run(&p.test, &[("pixel", &img), ("label", &label)], &[&p.avg_loss, &p.probs])?;
        let n = label.shape()[0];
        loss_sum += out[0].item::<f32>()? as f64 * n as f64;
        let pred = out[1].argmax(Some(1), false)?.to_vec::<i64>()?;
        correct += pred.iter().zip(label.to_vec::<i64>()?).filter(|(a, b)| **a == *b).count();
        seen += n;
    }
    Ok((loss_sum / seen.max(1) as f64, correct as f64 / seen.max(1) as f64))
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    let checkpoint = PathBuf::from(common::arg("checkpoint").unwrap_or_else(|| "static_mnist.safetensors".into()));
    let optimizer = common::arg("optimizer").unwrap_or_else(|| "adam".into());
    let seed = common::arg("seed").and_then(|s| s.parse().ok()).unwrap_or(2020);
    paddle::seed(seed);
    let p = build(&optimizer)?;
    if let Some(image) = common::arg("infer") {
        let exe = Executor::with_scope(place, Scope::new());
        for (name, t) in paddle::load(&checkpoint)?.iter() {
            exe.scope().set_var(name, t.to(place)?);
        }
        let img = common::load_image(Path::new(&image), place)?;
        // Only the ops the prediction needs (no label, no loss).
        let infer = p.test.prune(&[&p.probs.name().unwrap_or_default()])?;
        let probs = exe.run(&infer, &[("pixel", &img)], &[&p.probs])?[0].to_vec::<f32>()?;
        let best = probs.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
        println!("Inference result of {image} is: {best}");
        return Ok(());
    }
    let epochs: usize = common::arg("epochs").and_then(|e| e.parse().ok()).unwrap_or(1);
    let dir = common::arg("data").map(PathBuf::from);
    println!("place: {place}, optimizer: {optimizer}, epochs: {epochs} (static program)");
    let exe = Executor::with_scope(place, Scope::new());
    // Initialise the parameters and fetch them, as the seed does.
    let init = exe.run(&p.startup, &[], &p.params)?;
    println!("initialised {} parameters ({} values)", init.len(), init.iter().map(|t| t.numel()).sum::<usize>());
    let train_set = Mnist::new(dir.as_deref(), Mode::Train)?.with_transform(normalize()?);
    let loader = DataLoader::new(train_set, 64).shuffle(true).drop_last(true).place(place);
    let steps = common::arg("steps").and_then(|s| s.parse().ok()).unwrap_or(usize::MAX).min(loader.len());
    let mut fetch: Vec<String> = vec![p.avg_loss.name().unwrap_or_default()];
    fetch.extend(p.params.iter().cloned());
    let start = Instant::now();
    let mut trained = 0;
    let mut last = 0.0;
    for epoch in 0..epochs {
        for (batch_id, batch) in loader.iter()?.take(steps).enumerate() {
            let (img, label) = batch?;
            let label = column(&label)?;
            let out = exe.run(&p.main, &[("pixel", &img), ("label", &label)], &fetch)?;
            trained += 1;
            if batch_id % 100 == 0 || batch_id + 1 == steps {
                last = out[0].item::<f32>()?;
                if batch_id % 100 == 0 {
                    println!("Loss at epoch {epoch} step {batch_id}: [{last:.8}]");
                }
            }
        }
    }
    paddle::sync()?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "trained {trained} steps in {secs:.1} s ({:.0} images/s) on {place}; final loss {last:.6}",
        (trained * 64) as f64 / secs
    );
    let (test_loss, acc) = evaluate(&exe, &p, dir.as_deref(), place)?;
    println!("Test avg_loss is: {test_loss:.6}, acc is: {acc:.4}");
    let state: StateDict = p.params.iter().filter_map(|n| exe.scope().var(n).map(|t| (n.clone(), t))).collect();
    paddle::save(&state, &checkpoint)?;
    println!("parameters saved to {}", checkpoint.display());
    Ok(())
}
