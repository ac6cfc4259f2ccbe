//! Seed 002's MNIST program: two `SimpleImgConvPool` blocks (conv 5×5 1→20 and 20→50, relu,
//! max-pool 2×2 stride 2) and an FC 800→10 with softmax, trained with Adam 1e-3 (or SGD 1e-3)
//! on batches of 64; then evaluated on the 10 000 test images, saved, reloaded into a fresh
//! model and evaluated again; the loss curve is written as a PNG. The network is
//! `dygraph::vision::models::MnistNet`, which the browser demo (`web/`) also loads and trains.
//!
//! ```text
//! cargo run --release --example mnist [-- --place cpu|gpu] [--epochs N] [--optimizer adam|sgd]
//!     [--data DIR] [--checkpoint FILE] [--plot FILE] [--infer IMAGE.png]
//!     [--amp O1|O2] [--amp-dtype float16|bfloat16]
//! ```
//!
//! With `--amp`, the forward runs under `amp::auto_cast` at that level (O2 also casts the
//! parameters by `amp::decorate`, with float32 master weights) and a `GradScaler` scales the
//! loss; the first step prints which op ran in which dtype.

#[path = "common/mod.rs"]
mod common;
#[path = "common/plot.rs"]
mod plot;

use std::path::{Path, PathBuf};
use std::time::Instant;

use dygraph::amp::{self, GradScaler};
use dygraph::io::DataLoader;
use dygraph::nn::{Forward, Layer};
use dygraph::optimizer::{Adam, Optimizer, SGD};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::{self as paddle, Error, Place, Result, Tensor};

pub use dygraph::vision::models::MnistNet;

/// The seed's `fluid.layers.cross_entropy(cost, label)` on probabilities, averaged.
fn loss_of(probs: &Tensor, label: &Tensor) -> Result<Tensor> {
    dygraph::vision::models::mnist_loss(probs, label)
}

/// Which optimizer trains the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerKind {
    Adam,
    Sgd,
}

/// What a run does.
#[derive(Clone, Debug)]
pub struct Config {
    pub place: Place,
    pub epochs: usize,
    pub optimizer: OptimizerKind,
    pub batch_size: usize,
    pub data_dir: Option<PathBuf>,
    pub checkpoint: PathBuf,
    pub plot: Option<PathBuf>,
    /// Stop each epoch after this many steps (quick runs).
    pub max_steps: Option<usize>,
    /// Evaluate, save and reload after training.
    pub evaluate: bool,
    pub progress: bool,
    pub verbose: bool,
    /// The global seed (weights, shuffling). CPU runs are bit-reproducible for a seed; after
    /// one epoch, constant-lr Adam leaves the test accuracy anywhere in about 97.5–98.6%
    /// from seed to seed (measured over 7 seeds, median 98.4%); the default gives 98.58%.
    pub seed: u64,
    /// Mixed precision: the `auto_cast` level (`O1`, `O2`) and dtype, `None` for float32.
    pub amp: Option<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            place: Place::Cpu,
            epochs: 1,
            optimizer: OptimizerKind::Adam,
            batch_size: 64,
            data_dir: None,
            checkpoint: PathBuf::from("mnist.safetensors"),
            plot: Some(PathBuf::from("mnist_loss.png")),
            max_steps: None,
            evaluate: true,
            progress: true,
            verbose: true,
            seed: 2020,
            amp: None,
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every step's loss, in order.
    pub losses: Vec<f32>,
    pub test_loss: f64,
    pub test_accuracy: f64,
    pub reloaded_accuracy: f64,
    /// True when the reloaded model's predictions equal the trained model's exactly.
    pub reload_identical: bool,
    /// The trained model's predicted class for each test image.
    pub predictions: Vec<i64>,
    pub train_seconds: f64,
    pub images_per_second: f64,
}

/// Mean loss, accuracy and the predicted classes over `loader`.
pub fn evaluate(model: &MnistNet, loader: &DataLoader<Mnist>) -> Result<(f64, f64, Vec<i64>)> {
    let _g = paddle::no_grad_guard();
    let (mut loss_sum, mut correct, mut seen) = (0.0f64, 0usize, 0usize);
    let mut preds = Vec::new();
    for batch in loader.iter()? {
        let (img, label) = batch?;
        let probs = model.forward(&img)?;
        let n = label.shape()[0];
        loss_sum += loss_of(&probs, &label)?.cast(paddle::DType::Float32)?.item::<f32>()? as f64 * n as f64;
        let p = probs.argmax(Some(1), false)?.to_vec::<i64>()?;
        let l = label.to_vec::<i64>()?;
        correct += p.iter().zip(&l).filter(|(a, b)| a == b).count();
        seen += n;
        preds.extend(p);
    }
    Ok((loss_sum / seen.max(1) as f64, correct as f64 / seen.max(1) as f64, preds))
}

/// Trains, evaluates, checkpoints and reloads as the seed program does.
pub fn train(config: &Config) -> Result<Report> {
    paddle::seed(config.seed);
    paddle::guard(config.place, || {
        let dir = config.data_dir.as_deref();
        let train_set = Mnist::new(dir, Mode::Train)?.with_transform(common::mnist_normalize()?);
        let loader = DataLoader::new(train_set, config.batch_size).shuffle(true).drop_last(true).place(config.place);
        let mut model = MnistNet::new()?;
        let mut opt: Box<dyn Optimizer> = match config.optimizer {
            OptimizerKind::Adam => Box::new(Adam::new(1e-3, model.parameters())),
            OptimizerKind::Sgd => Box::new(SGD::new(1e-3, model.parameters())),
        };
        let autocast = match &config.amp {
            Some((level, dtype)) => {
                amp::decorate(level).dtype(dtype).apply(&mut model, Some(opt.as_mut()))?;
                Some(amp::auto_cast(true).level(level).dtype(dtype))
            }
            None => None,
        };
        let mut scaler = GradScaler::new().enable(autocast.is_some());
        let steps = config.max_steps.unwrap_or(usize::MAX).min(loader.len());
        let mut report = Report::default();
        let start = Instant::now();
        let mut log = common::LossLog::default();
        for epoch in 0..config.epochs {
            let bar = progress_bar(config.progress, steps as u64, epoch);
            let epoch_start = Instant::now();
            for (batch_id, batch) in loader.iter()?.take(steps).enumerate() {
                let (img, label) = batch?;
                let (avg_loss, calls) = amp::op_dtypes(|| -> Result<Tensor> {
                    let _scope = autocast.as_ref().map(|a| a.enter()).transpose()?;
                    loss_of(&model.forward(&img)?, &label)
                });
                let avg_loss = avg_loss?;
                if epoch == 0 && batch_id == 0 && config.verbose && autocast.is_some() {
                    println!("first step's ops and the dtypes they ran in: {}", amp::describe_op_dtypes(&calls));
                }
                let scaled = scaler.scale(&avg_loss)?;
                scaled.backward()?;
                scaler.minimize(opt.as_mut(), &scaled)?;
                opt.clear_grad();
                if let Some(v) =
                    log.push(avg_loss.detach().cast(paddle::DType::Float32)?, batch_id, batch_id + 1 == steps)?
                    && config.verbose
                {
                    let line = format!("Loss at epoch {epoch} step {batch_id}: [{v:.8}]");
                    // A hidden bar (output not a terminal) would drop its println.
                    match &bar {
                        Some(b) if !b.is_hidden() => b.println(line),
                        _ => println!("{line}"),
                    }
                }
                if let Some(b) = &bar {
                    let ips = ((batch_id + 1) * config.batch_size) as f64 / epoch_start.elapsed().as_secs_f64();
                    b.set_message(format!("{ips:.0} images/s"));
                    b.inc(1);
                }
            }
            if let Some(b) = bar {
                b.finish_and_clear();
            }
        }
        paddle::sync()?;
        report.losses = log.losses;
        report.train_seconds = start.elapsed().as_secs_f64();
        report.images_per_second = (report.losses.len() * config.batch_size) as f64 / report.train_seconds;
        let non_finite = report.losses.iter().filter(|l| !l.is_finite()).count();
        if config.verbose && non_finite > 0 {
            println!(
                "{non_finite} steps had a non-finite loss (float16 overflow); the GradScaler skipped their updates"
            );
        }
        if config.verbose {
            println!(
                "trained {} steps in {:.1} s ({:.0} images/s) on {}",
                report.losses.len(),
                report.train_seconds,
                report.images_per_second,
                config.place
            );
        }
        if let Some(plot) = &config.plot {
            plot_losses(&report.losses, plot)?;
            if config.verbose {
                println!("loss curve written to {}", plot.display());
            }
        }
        if !config.evaluate {
            return Ok(report);
        }
        model.eval();
        let test_set = Mnist::new(dir, Mode::Test)?.with_transform(common::mnist_normalize()?);
        let test_loader = DataLoader::new(test_set, config.batch_size).place(config.place);
        // Under the training's autocast, if any (an O2 model holds float16 parameters).
        let eval = |m: &MnistNet| match &autocast {
            Some(a) => a.scope(|| evaluate(m, &test_loader))?,
            None => evaluate(m, &test_loader),
        };
        let (test_loss, test_acc, preds) = eval(&model)?;
        report.test_loss = test_loss;
        report.test_accuracy = test_acc;
        if config.verbose {
            println!("Test avg_loss is: {test_loss:.6}, acc is: {test_acc:.4}");
        }
        // Saved as float32 (an O2 model's parameters are float16), as `save_dtype` does.
        paddle::save(&amp::cast_state_dict(&model.state_dict(), paddle::DType::Float32)?, &config.checkpoint)?;
        if config.verbose {
            println!("checkpoint saved to {}", config.checkpoint.display());
        }
        let mut restored = MnistNet::new()?;
        restored.set_state_dict(&paddle::load(&config.checkpoint)?)?;
        restored.eval();
        let (_, acc2, preds2) = eval(&restored)?;
        report.reloaded_accuracy = acc2;
        report.reload_identical = preds == preds2;
        report.predictions = preds;
        if config.verbose {
            println!("checkpoint loaded: acc is {acc2:.4} (predictions identical: {})", report.reload_identical);
        }
        Ok(report)
    })
}

fn progress_bar(on: bool, len: u64, epoch: usize) -> Option<indicatif::ProgressBar> {
    if !on {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "epoch {epoch} {{bar:40}} {{pos}}/{{len}} {{msg}} ({{elapsed}})"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}

/// Predicts the digit in `image` with the model saved at `checkpoint`.
pub fn infer(checkpoint: &Path, image: &Path, place: Place) -> Result<(usize, Vec<f32>)> {
    paddle::guard(place, || {
        let mut model = MnistNet::new()?;
        model.set_state_dict(&paddle::load(checkpoint)?)?;
        model.eval();
        let probs = paddle::no_grad(|| model.forward(&common::load_image(image, place)?))?.to_vec::<f32>()?;
        let best = probs.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
        Ok((best, probs))
    })
}

/// Draws the per-step losses and their 50-step moving average into a PNG.
pub fn plot_losses(losses: &[f32], path: &Path) -> Result<()> {
    let raw: Vec<(f64, f64)> = losses.iter().enumerate().map(|(i, &l)| (i as f64, l as f64)).collect();
    let k = 50;
    let smooth = (0..losses.len())
        .map(|i| {
            let s = i.saturating_sub(k - 1);
            (i as f64, losses[s..=i].iter().map(|&l| l as f64).sum::<f64>() / (i - s + 1) as f64)
        })
        .collect();
    let series = [
        plot::Series { points: raw, color: (160, 190, 230), width: 1 },
        plot::Series { points: smooth, color: (0, 0, 255), width: 2 },
    ];
    plot::line_chart("MNIST training loss", "step", "loss", &series, path).map_err(|e| Error::invalid("plot", e))
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    let checkpoint = PathBuf::from(common::arg("checkpoint").unwrap_or_else(|| "mnist.safetensors".into()));
    if let Some(image) = common::arg("infer") {
        let (digit, probs) = infer(&checkpoint, Path::new(&image), place)?;
        println!("Inference result of {image} is: {digit}");
        println!("probabilities: {:?}", probs.iter().map(|p| format!("{p:.4}")).collect::<Vec<_>>());
        return Ok(());
    }
    let optimizer = match common::arg("optimizer").as_deref() {
        None | Some("adam") => OptimizerKind::Adam,
        Some("sgd") => OptimizerKind::Sgd,
        Some(o) => return Err(Error::invalid("mnist", format!("unknown optimizer {o:?} (adam or sgd)"))),
    };
    let config = Config {
        place,
        epochs: common::arg("epochs")
            .map(|e| e.parse().map_err(|_| Error::invalid("mnist", format!("bad --epochs {e:?}"))))
            .transpose()?
            .unwrap_or(1),
        optimizer,
        data_dir: common::arg("data").map(PathBuf::from),
        checkpoint,
        plot: Some(PathBuf::from(common::arg("plot").unwrap_or_else(|| "mnist_loss.png".into()))),
        max_steps: common::arg("steps").and_then(|s| s.parse().ok()),
        seed: common::arg("seed").and_then(|s| s.parse().ok()).unwrap_or(2020),
        amp: common::arg("amp").map(|level| (level, common::arg("amp-dtype").unwrap_or_else(|| "float16".into()))),
        ..Default::default()
    };
    let precision = config.amp.as_ref().map_or(String::new(), |(l, d)| format!(", amp {l} {d}"));
    println!("place: {place}, optimizer: {optimizer:?}, epochs: {}{precision}", config.epochs);
    train(&config)?;
    Ok(())
}
