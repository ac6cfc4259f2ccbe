//! Seed 002's "Build Compatible Model": the same `MnistNet` and loss as the eager example,
//! built into a static Program (`data` placeholders, `minimize` appending the backward and
//! update ops) and trained by an Executor: `exe.run(startup)`, then per batch
//! `exe.run(main, feed={pixel, label}, fetch_list=[avg_loss, *params])`. Evaluation runs
//! the program's `clone_program(true)` (forward only). The trained model is saved with
//! `save_inference_model` (`{model}.pdmodel` + `{model}.pdiparams`), and `--infer` predicts
//! through `load_inference_model` alone, without building the network.
//!
//! ```text
//! cargo run --release --example static_mnist [-- --place cpu|gpu] [--epochs N] [--steps N]
//!     [--optimizer adam|sgd] [--seed S] [--data DIR] [--model PREFIX] [--infer IMAGE.png]
//! ```

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use dygraph::io::DataLoader;
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer, SGD};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, DType, Error, Place, Result, Tensor};

/// The programs of one model: training, evaluation, and the variables fed and fetched.
struct Programs {
    main: Program,
    startup: Program,
    test: Program,
    img: Tensor,
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
        Ok(Programs { main: main.clone(), startup: startup.clone(), test, img, avg_loss, probs: cost, params })
    })
}

/// Labels as the `[N, 1]` int64 the `label` placeholder declares.
fn column(label: &Tensor) -> Result<Tensor> {
    label.reshape([label.shape()[0], 1])
}

/// Accuracy of the evaluation program over the test set.
fn evaluate(exe: &Executor, p: &Programs, dir: Option<&Path>, place: Place) -> Result<(f64, f64)> {
    let test_set = Mnist::new(dir, Mode::Test)?.with_transform(common::mnist_normalize()?);
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

/// What a run does (the eager example's options).
#[derive(Clone, Debug)]
pub struct Config {
    pub place: Place,
    pub epochs: usize,
    /// `"adam"` or `"sgd"` (both at 1e-3, as the seed).
    pub optimizer: String,
    pub data_dir: Option<PathBuf>,
    /// Where the inference model goes (`{model}.pdmodel`, `{model}.pdiparams`).
    pub model: PathBuf,
    /// Stop each epoch after this many steps.
    pub max_steps: Option<usize>,
    /// Evaluate and save the inference model after training.
    pub evaluate: bool,
    pub verbose: bool,
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            place: Place::Cpu,
            epochs: 1,
            optimizer: "adam".into(),
            data_dir: None,
            model: PathBuf::from("static_mnist_model"),
            max_steps: None,
            evaluate: true,
            verbose: true,
            seed: 2020,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every step's loss.
    pub losses: Vec<f32>,
    pub test_loss: f64,
    pub test_accuracy: f64,
    pub train_seconds: f64,
    pub images_per_second: f64,
    /// The execution plan the last training step replayed (GPU places), or None where the
    /// steps were interpreted op by op (the CPU place).
    pub plan: Option<st::PlanInfo>,
}

/// Builds the programs, runs the startup program, trains, evaluates and saves the
/// inference model, printing the eager example's progress lines.
pub fn train(config: &Config) -> Result<Report> {
    let place = config.place;
    paddle::seed(config.seed);
    let p = build(&config.optimizer)?;
    let exe = Executor::with_scope(place, Scope::new());
    // Initialise the parameters and fetch them, as the seed does.
    let init = exe.run(&p.startup, &[], &p.params)?;
    if config.verbose {
        println!("initialised {} parameters ({} values)", init.len(), init.iter().map(|t| t.numel()).sum::<usize>());
    }
    let dir = config.data_dir.as_deref();
    let train_set = Mnist::new(dir, Mode::Train)?.with_transform(common::mnist_normalize()?);
    let loader = DataLoader::new(train_set, 64).shuffle(true).drop_last(true).place(place);
    let steps = config.max_steps.unwrap_or(usize::MAX).min(loader.len());
    let mut fetch: Vec<String> = vec![p.avg_loss.name().unwrap_or_default()];
    fetch.extend(p.params.iter().cloned());
    let mut report = Report::default();
    let start = Instant::now();
    let mut log = common::LossLog::default();
    for epoch in 0..config.epochs {
        for (batch_id, batch) in loader.iter()?.take(steps).enumerate() {
            let (img, label) = batch?;
            let label = column(&label)?;
            let out = exe.run(&p.main, &[("pixel", &img), ("label", &label)], &fetch)?;
            if let Some(v) = log.push(out[0].clone(), batch_id, batch_id + 1 == steps)?
                && config.verbose
            {
                println!("Loss at epoch {epoch} step {batch_id}: [{v:.8}]");
            }
        }
    }
    paddle::sync()?;
    report.plan = exe.last_plan();
    report.losses = log.losses;
    report.train_seconds = start.elapsed().as_secs_f64();
    report.images_per_second = (report.losses.len() * 64) as f64 / report.train_seconds;
    if config.verbose {
        println!(
            "trained {} steps in {:.1} s ({:.0} images/s) on {place} (static program)",
            report.losses.len(),
            report.train_seconds,
            report.images_per_second
        );
        if let Some(plan) = &report.plan {
            println!(
                "each step replayed a plan: {} kernel dispatches for the program's {} ops, {:.2} MiB of buffers",
                plan.dispatches,
                plan.ops,
                plan.buffer_bytes as f64 / (1u64 << 20) as f64
            );
        }
    }
    if !config.evaluate {
        return Ok(report);
    }
    let (test_loss, acc) = evaluate(&exe, &p, dir, place)?;
    report.test_loss = test_loss;
    report.test_accuracy = acc;
    st::save_inference_model(&config.model, &[&p.img], &[&p.probs], &exe, &p.main)?;
    if config.verbose {
        println!("Test avg_loss is: {test_loss:.6}, acc is: {acc:.4}");
        println!("inference model saved to {}.pdmodel and {0}.pdiparams", config.model.display());
    }
    Ok(report)
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    let model = PathBuf::from(common::arg("model").unwrap_or_else(|| "static_mnist_model".into()));
    if let Some(image) = common::arg("infer") {
        let (digit, probs) = infer(&model, Path::new(&image), place)?;
        println!("Inference result of {image} is: {digit}");
        println!("probabilities: {:?}", probs.iter().map(|p| format!("{p:.4}")).collect::<Vec<_>>());
        return Ok(());
    }
    let config = Config {
        place,
        epochs: common::arg("epochs")
            .map(|e| e.parse().map_err(|_| Error::invalid("static_mnist", format!("bad --epochs {e:?}"))))
            .transpose()?
            .unwrap_or(1),
        optimizer: common::arg("optimizer").unwrap_or_else(|| "adam".into()),
        data_dir: common::arg("data").map(PathBuf::from),
        model,
        max_steps: common::arg("steps").and_then(|s| s.parse().ok()),
        seed: common::arg("seed").and_then(|s| s.parse().ok()).unwrap_or(2020),
        ..Default::default()
    };
    println!("place: {place}, optimizer: {}, epochs: {} (static program)", config.optimizer, config.epochs);
    train(&config)?;
    Ok(())
}

/// The digit in `image` and the class probabilities, from the inference model at `model`
/// (no network code: the program and parameters come from the files).
pub fn infer(model: &Path, image: &Path, place: Place) -> Result<(usize, Vec<f32>)> {
    let exe = Executor::with_scope(place, Scope::new());
    let m = st::load_inference_model(model, &exe)?;
    let img = common::load_image(image, place)?;
    let feed = m.feed_names.first().ok_or_else(|| Error::invalid("infer", "the model has no feed"))?;
    let probs = exe.run(&m.program, &[(feed, &img)], &m.fetch_names)?[0].to_vec::<f32>()?;
    let best = probs.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
    Ok((best, probs))
}
