//! Seed 002's MNIST network trained through the high-level API (`paddle.Model`): `prepare`
//! with Adam, the seed's loss and top-1/top-2 `Accuracy`; `fit` for one epoch with a
//! progress bar; `evaluate` on the test set; `save`, `load` into a fresh model, `predict`.
//! `--static` hands `Model` the network's `jit::to_static` program instead; `--samples N`
//! trains on the first N training images only (`paddle.io.Subset`), for a quick run.
//!
//! ```text
//! cargo run --release --example model_api [-- --place cpu|gpu] [--epochs N] [--static] [--samples N]
//! ```

#[path = "common/mod.rs"]
pub mod common;

use std::path::{Path, PathBuf};

use dygraph::hapi::{EvalResult, History, Model};
use dygraph::io::{Dataset, Subset};
use dygraph::jit::{InputSpec, to_static};
use dygraph::metric::Accuracy;
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::Adam;
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::vision::models::{MnistNet, mnist_loss};
use dygraph::{self as paddle, DType, Place, Result};

/// What a run measured.
pub struct Report {
    pub history: History,
    pub test: EvalResult,
    /// The reloaded model's evaluation (equal to `test`).
    pub reloaded: EvalResult,
    /// Predicted class probabilities for the test set, `[10000, 10]`.
    pub predictions: paddle::Tensor,
}

fn model<N: Forward + Layer>(network: N) -> Model<N> {
    let mut model = Model::new(network);
    let opt = Adam::new(1e-3, model.network().parameters());
    model.prepare(opt, mnist_loss, vec![Box::new(Accuracy::topk(&[1, 2]))]);
    model
}

/// Trains (on the first `train_samples` training images, or all), evaluates, saves to
/// `checkpoint` (a path prefix), reloads and predicts; with `to_static`, the network `Model`
/// drives is the traced program.
pub fn run(
    place: Place,
    data: Option<&Path>,
    epochs: usize,
    train_samples: Option<usize>,
    checkpoint: &Path,
    verbose: u8,
    to_static: bool,
) -> Result<Report> {
    paddle::seed(2020);
    paddle::guard(place, || {
        if to_static {
            let traced = || -> Result<_> {
                let spec = InputSpec::new(&[-1, 1, 28, 28], DType::Float32, "pixel");
                Ok(self::to_static(MnistNet::new()?, Some(spec)))
            };
            run_with(&traced, data, epochs, train_samples, checkpoint, verbose)
        } else {
            run_with(&MnistNet::new, data, epochs, train_samples, checkpoint, verbose)
        }
    })
}

fn run_with<N: Forward + Layer>(
    network: &dyn Fn() -> Result<N>,
    data: Option<&Path>,
    epochs: usize,
    train_samples: Option<usize>,
    checkpoint: &Path,
    verbose: u8,
) -> Result<Report> {
    let data_set = |mode| -> Result<_> { Ok(Mnist::new(data, mode)?.with_transform(common::mnist_normalize()?)) };
    let mut model = model(network()?);
    model.summary(&[1, 1, 28, 28])?;
    let train = std::sync::Arc::new(data_set(Mode::Train)?);
    let n = train_samples.unwrap_or(train.len()).min(train.len());
    let train = Subset::new(train, (0..n).collect())?;
    let history = model.fit(train, Some(data_set(Mode::Test)?), epochs, 64, verbose)?;
    let test = model.evaluate(data_set(Mode::Test)?, 500, verbose)?;
    model.save(checkpoint)?;
    let mut fresh = self::model(network()?);
    fresh.load(checkpoint)?;
    let reloaded = fresh.evaluate(data_set(Mode::Test)?, 500, 0)?;
    let predictions = fresh.predict(data_set(Mode::Test)?, 500)?;
    Ok(Report { history, test, reloaded, predictions })
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    let epochs = common::arg("epochs").and_then(|e| e.parse().ok()).unwrap_or(1);
    let to_static = std::env::args().any(|a| a == "--static");
    let samples = common::arg("samples").and_then(|n| n.parse().ok());
    let r = run(place, None, epochs, samples, &PathBuf::from("model_api_mnist"), 1, to_static)?;
    println!("test: {}", r.test);
    Ok(())
}
