//! One training loop for the MNIST model examples (`vit_mnist`, `lstm_mnist`, `resnet_mnist`):
//! Adam on shuffled batches, eagerly or through `jit::to_static`, optionally under mixed
//! precision (`--amp O1|O2 [--amp-dtype float16|bfloat16]`: `amp::auto_cast`, `amp::decorate`
//! at O2 and a `GradScaler`), then accuracy on the test set.

use std::path::PathBuf;
use std::time::Instant;

use dygraph::amp::{self, GradScaler};
use dygraph::io::DataLoader;
use dygraph::jit::{self, InputSpec};
use dygraph::nn::{CrossEntropyOptions, Forward, Layer};
use dygraph::optimizer::lr::{OneCycleLR, OneCycleOptions};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::vision::datasets::{Mnist, Mode};
use dygraph::{self as paddle, DType, Place, Result, Tensor};

/// What a run does.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub place: Place,
    pub epochs: usize,
    pub batch_size: usize,
    /// The learning rate: the peak of the one-cycle schedule when `one_cycle` is on.
    pub learning_rate: f64,
    /// Follow `OneCycleLR` over the run (a warm-up to `learning_rate`, then a cosine decay),
    /// stepped every batch.
    pub one_cycle: bool,
    /// Stop each epoch after this many steps (quick runs).
    pub max_steps: Option<usize>,
    /// Evaluate on the test set after training.
    pub evaluate: bool,
    pub data_dir: Option<PathBuf>,
    /// Train the `jit::to_static` program of the model instead of the eager model.
    pub to_static: bool,
    /// Mixed precision: the `auto_cast` level (`O1`, `O2`) and low dtype (`float16`,
    /// `bfloat16`).
    pub amp: Option<(String, String)>,
    pub verbose: bool,
    pub seed: u64,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            place: Place::Cpu,
            epochs: 1,
            batch_size: 64,
            learning_rate: 1e-3,
            one_cycle: false,
            max_steps: None,
            evaluate: true,
            data_dir: None,
            to_static: false,
            amp: None,
            verbose: true,
            seed: 2020,
        }
    }
}

impl RunConfig {
    /// `defaults` with `--place`, `--epochs`, `--steps`, `--batch`, `--lr`, `--static`,
    /// `--amp` and `--amp-dtype` from the command line.
    pub fn from_args(defaults: RunConfig) -> Result<Self> {
        let mut c = RunConfig { place: super::place_from_args()?, ..defaults };
        if let Some(e) = super::arg("epochs") {
            c.epochs = e.parse().map_err(|_| dygraph::Error::invalid("args", format!("--epochs {e}")))?;
        }
        if let Some(s) = super::arg("steps") {
            c.max_steps = Some(s.parse().map_err(|_| dygraph::Error::invalid("args", format!("--steps {s}")))?);
        }
        if let Some(b) = super::arg("batch") {
            c.batch_size = b.parse().map_err(|_| dygraph::Error::invalid("args", format!("--batch {b}")))?;
        }
        if let Some(s) = super::arg("lr") {
            c.learning_rate = s.parse().map_err(|_| dygraph::Error::invalid("args", format!("--lr {s}")))?;
        }
        c.to_static = std::env::args().any(|a| a == "--static");
        c.amp = super::arg("amp").map(|level| (level, super::arg("amp-dtype").unwrap_or_else(|| "float16".into())));
        if std::env::args().any(|a| a == "--constant-lr") {
            c.one_cycle = false;
        }
        Ok(c)
    }
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Every step's loss, in order.
    pub losses: Vec<f32>,
    pub test_accuracy: f64,
    pub train_seconds: f64,
    pub images_per_second: f64,
}

/// Trains the model `build` makes (on the config's place, after seeding) with softmax
/// cross-entropy on its logits, and evaluates it.
pub fn train_classifier<M, F>(config: &RunConfig, build: F) -> Result<RunReport>
where
    M: Forward + Layer + 'static,
    F: FnOnce() -> Result<M>,
{
    paddle::seed(config.seed);
    paddle::guard(config.place, || {
        let dir = config.data_dir.as_deref();
        let train_set = Mnist::new(dir, Mode::Train)?.with_transform(super::mnist_normalize()?);
        let loader = DataLoader::new(train_set, config.batch_size).shuffle(true).drop_last(true).place(config.place);
        let mut model = build()?;
        let steps = config.max_steps.unwrap_or(usize::MAX).min(loader.len());
        let schedule = if config.one_cycle {
            let total = (config.epochs * steps).max(1) as i64;
            Some(OneCycleLR::new(config.learning_rate, total, OneCycleOptions::default())?)
        } else {
            None
        };
        let mut opt = match &schedule {
            Some(s) => Adam::new(s, model.parameters()),
            None => Adam::new(config.learning_rate, model.parameters()),
        };
        let autocast = match &config.amp {
            Some((level, dtype)) => {
                amp::decorate(level).dtype(dtype).apply(&mut model, Some(&mut opt as &mut dyn Optimizer))?;
                Some(amp::auto_cast(true).level(level).dtype(dtype))
            }
            None => None,
        };
        let mut scaler = GradScaler::new().enable(autocast.is_some());
        let spec = InputSpec::new(&[-1, 1, 28, 28], DType::Float32, "pixel");
        let mut net: Box<dyn Classifier> =
            if config.to_static { Box::new(jit::to_static(model, Some(spec))) } else { Box::new(model) };
        let mut report = RunReport::default();
        let mut log = super::LossLog::default();
        let start = Instant::now();
        for epoch in 0..config.epochs {
            net.set_mode(true);
            for (step, batch) in loader.iter()?.take(steps).enumerate() {
                let (img, label) = batch?;
                let (loss, calls) = amp::op_dtypes(|| -> Result<Tensor> {
                    let _scope = autocast.as_ref().map(|a| a.enter()).transpose()?;
                    paddle::nn::functional::cross_entropy(&net.logits(&img)?, &label, &CrossEntropyOptions::default())
                });
                let loss = loss?;
                if epoch == 0 && step == 0 && config.verbose && autocast.is_some() {
                    println!("first step's ops and the dtypes they ran in: {}", amp::describe_op_dtypes(&calls));
                }
                let scaled = scaler.scale(&loss)?;
                scaled.backward()?;
                scaler.minimize(&mut opt, &scaled)?;
                opt.clear_grad();
                if let Some(s) = &schedule {
                    s.step();
                }
                if let Some(v) = log.push(loss.detach().cast(DType::Float32)?, step, step + 1 == steps)?
                    && config.verbose
                {
                    println!("epoch {epoch} step {step}: loss {v:.5}");
                }
            }
        }
        paddle::sync()?;
        report.train_seconds = start.elapsed().as_secs_f64();
        report.images_per_second = (config.epochs * steps * config.batch_size) as f64 / report.train_seconds;
        report.losses = log.losses;
        if config.evaluate {
            net.set_mode(false);
            // Under the training's autocast, if any (an O2 model holds 16-bit parameters).
            report.test_accuracy = match &autocast {
                Some(a) => a.scope(|| accuracy(net.as_ref(), dir, config.place))??,
                None => accuracy(net.as_ref(), dir, config.place)?,
            };
        }
        Ok(report)
    })
}

/// The test-set accuracy of `net`.
fn accuracy(net: &dyn Classifier, dir: Option<&std::path::Path>, place: Place) -> Result<f64> {
    let _g = paddle::no_grad_guard();
    let test_set = Mnist::new(dir, Mode::Test)?.with_transform(super::mnist_normalize()?);
    let loader = DataLoader::new(test_set, 500).place(place);
    let (mut correct, mut seen) = (0usize, 0usize);
    for batch in loader.iter()? {
        let (img, label) = batch?;
        let p = net.logits(&img)?.argmax(Some(1), false)?.to_vec::<i64>()?;
        let l = label.to_vec::<i64>()?;
        correct += p.iter().zip(&l).filter(|(a, b)| a == b).count();
        seen += l.len();
    }
    Ok(correct as f64 / seen.max(1) as f64)
}

/// An eager model or its static program, as the loop sees it.
trait Classifier {
    fn logits(&self, x: &Tensor) -> Result<Tensor>;
    fn set_mode(&mut self, training: bool);
}

impl<M: Forward + Layer> Classifier for M {
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        self.forward(x)
    }
    fn set_mode(&mut self, training: bool) {
        self.set_training(training);
    }
}

/// Prints a run's one-line summary (what the examples' `main` ends with).
pub fn print_report(name: &str, config: &RunConfig, r: &RunReport) {
    let mut mode = if config.to_static { "to_static" } else { "eager" }.to_string();
    if let Some((level, dtype)) = &config.amp {
        mode += &format!(", amp {level} {dtype}");
    }
    println!("{name} ({mode}): test accuracy {:.4}, {:.0} training images/s", r.test_accuracy, r.images_per_second);
}
