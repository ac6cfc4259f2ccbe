//! The high-level API (`paddle.Model`): a network with its optimizer, loss and metrics,
//! trained by `fit` (with a progress bar), checked by `evaluate`, run by `predict`, saved
//! and loaded as safetensors, and summarised.
//!
//! ```no_run
//! # use dygraph::{self as paddle, hapi::Model, metric::Accuracy, nn::{Layer, Linear}, optimizer::Adam};
//! # fn demo<D: paddle::io::Dataset<Sample = (paddle::NdArray<f32>, i64)> + 'static>(train: D, test: D) -> paddle::Result<()> {
//! let net = Linear::new(784, 10)?;
//! let mut model = Model::new(net);
//! let opt = Adam::new(1e-3, model.network().parameters());
//! model.prepare(opt, |out, label| paddle::nn::functional::cross_entropy(out, label, &Default::default()),
//!     vec![Box::new(Accuracy::new())]);
//! model.fit(train, Some(test), 2, 64, 1)?;
//! # Ok(()) }
//! ```

use std::path::Path;

use crate::io::{Collate, DataLoader, Dataset};
use crate::metric::Metric;
use crate::nn::{Forward, Layer, StateDict, Summary};
use crate::optimizer::Optimizer;
use crate::{Error, Result, Tensor};

/// A loss of the network's output and the batch's labels.
pub type LossFn = Box<dyn Fn(&Tensor, &Tensor) -> Result<Tensor> + Send>;

/// The mean loss and metric values of one pass over a dataset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvalResult {
    /// The mean loss over the batches (weighted by batch size), when a loss was prepared.
    pub loss: Option<f64>,
    /// Each metric value by name (`"acc"`, `"acc_top5"`, ...).
    pub metrics: Vec<(String, f64)>,
}

impl EvalResult {
    /// The metric named `name`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

impl std::fmt::Display for EvalResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(l) = self.loss {
            parts.push(format!("loss: {l:.4}"));
        }
        parts.extend(self.metrics.iter().map(|(n, v)| format!("{n}: {v:.4}")));
        write!(f, "{}", parts.join(" - "))
    }
}

/// What `fit` measured per epoch.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Training loss and metrics of each epoch.
    pub train: Vec<EvalResult>,
    /// Evaluation after each epoch (when evaluation data was given).
    pub eval: Vec<EvalResult>,
}

/// A network and how to train it (`paddle.Model`).
pub struct Model<N: Forward + Layer> {
    network: N,
    optimizer: Option<Box<dyn Optimizer + Send>>,
    loss: Option<LossFn>,
    metrics: Vec<Box<dyn Metric>>,
}

impl<N: Forward + Layer> Model<N> {
    /// Wraps `network`.
    pub fn new(network: N) -> Self {
        Model { network, optimizer: None, loss: None, metrics: Vec::new() }
    }

    /// The network.
    pub fn network(&self) -> &N {
        &self.network
    }

    /// The network, mutably.
    pub fn network_mut(&mut self) -> &mut N {
        &mut self.network
    }

    /// Sets the optimizer, the loss of (output, label) and the metrics (`Model.prepare`).
    pub fn prepare(
        &mut self,
        optimizer: impl Optimizer + Send + 'static,
        loss: impl Fn(&Tensor, &Tensor) -> Result<Tensor> + Send + 'static,
        metrics: Vec<Box<dyn Metric>>,
    ) {
        self.optimizer = Some(Box::new(optimizer));
        self.loss = Some(Box::new(loss));
        self.metrics = metrics;
    }

    /// Trains for `epochs` passes over `train` in shuffled batches of `batch_size`,
    /// evaluating on `eval` after each. `verbose`: 0 silent, 1 a progress bar per epoch
    /// (with the running loss and metrics), 2 one line per epoch.
    pub fn fit<D, E>(
        &mut self,
        train: D,
        eval: Option<E>,
        epochs: usize,
        batch_size: usize,
        verbose: u8,
    ) -> Result<History>
    where
        D: Dataset + 'static,
        D::Sample: Collate<Batch = (Tensor, Tensor)>,
        E: Dataset + 'static,
        E::Sample: Collate<Batch = (Tensor, Tensor)>,
    {
        if self.optimizer.is_none() || self.loss.is_none() {
            return Err(Error::invalid("Model.fit", "call prepare(optimizer, loss, metrics) first"));
        }
        let place = crate::current_place()?;
        let loader = DataLoader::new(train, batch_size).shuffle(true).place(place);
        let eval_loader = eval.map(|e| DataLoader::new(e, batch_size).place(place));
        let mut history = History::default();
        for epoch in 0..epochs {
            self.network.train();
            let bar = Progress::new(verbose == 1, loader.len(), format!("Epoch {}/{epochs}", epoch + 1));
            let result = self.run_epoch(&loader, true, &bar)?;
            bar.finish(&result);
            if verbose == 2 {
                println!("Epoch {}/{epochs} - {result}", epoch + 1);
            }
            history.train.push(result);
            if let Some(e) = &eval_loader {
                let r = self.run_epoch(e, false, &Progress::new(false, 0, String::new()))?;
                if verbose > 0 {
                    println!("Eval - {r}");
                }
                history.eval.push(r);
            }
        }
        Ok(history)
    }

    /// The loss and metrics over `data` (`Model.evaluate`), in evaluation mode.
    pub fn evaluate<D>(&mut self, data: D, batch_size: usize, verbose: u8) -> Result<EvalResult>
    where
        D: Dataset + 'static,
        D::Sample: Collate<Batch = (Tensor, Tensor)>,
    {
        let loader = DataLoader::new(data, batch_size).place(crate::current_place()?);
        let r = self.run_epoch(&loader, false, &Progress::new(false, 0, String::new()))?;
        if verbose > 0 {
            println!("Eval - {r}");
        }
        Ok(r)
    }

    /// The network's outputs on every input of `data`, in order, concatenated on the batch
    /// axis (`Model.predict`; labels are ignored).
    pub fn predict<D>(&mut self, data: D, batch_size: usize) -> Result<Tensor>
    where
        D: Dataset + 'static,
        D::Sample: Collate<Batch = (Tensor, Tensor)>,
    {
        self.network.eval();
        let _g = crate::no_grad_guard();
        let loader = DataLoader::new(data, batch_size).place(crate::current_place()?);
        let mut outs = Vec::new();
        for batch in loader.iter()? {
            let (x, _) = batch?;
            outs.push(self.network.forward(&x)?);
        }
        if outs.is_empty() {
            return Err(Error::invalid("Model.predict", "the dataset is empty"));
        }
        crate::concat(&outs, 0)
    }

    /// The network's output for one batch of inputs (`Model.predict_batch`).
    pub fn predict_batch(&mut self, x: &Tensor) -> Result<Tensor> {
        self.network.eval();
        let _g = crate::no_grad_guard();
        self.network.forward(x)
    }

    /// One pass: training steps (`train`) or evaluation, accumulating loss and metrics.
    fn run_epoch<D>(&mut self, loader: &DataLoader<D>, train: bool, bar: &Progress) -> Result<EvalResult>
    where
        D: Dataset + 'static,
        D::Sample: Collate<Batch = (Tensor, Tensor)>,
    {
        if !train {
            self.network.eval();
        }
        self.metrics.iter_mut().for_each(|m| m.reset());
        let (mut loss_sum, mut seen) = (0.0f64, 0usize);
        for batch in loader.iter()? {
            let (x, y) = batch?;
            let n = x.shape().first().copied().unwrap_or(1);
            let (out, loss) = if train {
                let out = self.network.forward(&x)?;
                let loss = self.loss.as_ref().map(|f| f(&out, &y)).transpose()?;
                let l = loss.as_ref().ok_or_else(|| Error::invalid("Model.fit", "no loss prepared"))?;
                l.backward()?;
                let opt =
                    self.optimizer.as_mut().ok_or_else(|| Error::invalid("Model.fit", "no optimizer prepared"))?;
                opt.step()?;
                opt.clear_grad();
                (out.detach(), loss)
            } else {
                let _g = crate::no_grad_guard();
                let out = self.network.forward(&x)?;
                let loss = self.loss.as_ref().map(|f| f(&out, &y)).transpose()?;
                (out, loss)
            };
            if let Some(l) = loss {
                loss_sum += l.item::<f32>()? as f64 * n as f64;
            }
            seen += n;
            {
                let _g = crate::no_grad_guard();
                for m in &mut self.metrics {
                    m.update(&out, &y)?;
                }
            }
            bar.step(|| self.snapshot(self.loss.as_ref().map(|_| loss_sum / seen.max(1) as f64)));
        }
        Ok(self.snapshot(self.loss.as_ref().map(|_| loss_sum / seen.max(1) as f64)))
    }

    fn snapshot(&self, loss: Option<f64>) -> EvalResult {
        let metrics = self.metrics.iter().flat_map(|m| m.names().into_iter().zip(m.accumulate())).collect();
        EvalResult { loss, metrics }
    }

    /// Writes the network's state dict to `{path}.safetensors` and the optimizer's to
    /// `{path}.opt.safetensors` (Paddle's `.pdparams` / `.pdopt` pair).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let (params, opt) = paths(path.as_ref());
        crate::save(&self.network.state_dict(), &params)?;
        if let Some(o) = &self.optimizer {
            // Keyed by the parameters' paths in the network ("conv1.weight.moment1"), which
            // a fresh model shares, not by their generated names ("conv2d_0.w_0").
            let to_path = self.parameter_names(true);
            crate::save(&rename_keys(&o.state_dict(), &to_path), &opt)?;
        }
        Ok(())
    }

    /// Reads what `save` wrote: the network's state, and the optimizer's when both the file
    /// and a prepared optimizer exist.
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let (params, opt) = paths(path.as_ref());
        let state: StateDict = crate::load(&params)?;
        self.network.set_state_dict(&state)?;
        if opt.exists() {
            let to_name = self.parameter_names(false);
            if let Some(o) = self.optimizer.as_mut() {
                o.set_state_dict(&rename_keys(&crate::load(&opt)?, &to_name))?;
            }
        }
        Ok(())
    }

    /// Each parameter's generated name and its path in the network, as `(from, to)` pairs
    /// (`to_path`: name → path; else path → name).
    fn parameter_names(&self, to_path: bool) -> Vec<(String, String)> {
        self.network
            .named_parameters()
            .into_iter()
            .filter_map(|(path, t)| t.name().map(|name| if to_path { (name, path) } else { (path, name) }))
            .collect()
    }

    /// Layers, output shapes and parameter counts for an input of `input_size`
    /// (`Model.summary`), printed and returned.
    pub fn summary(&self, input_size: &[usize]) -> Result<Summary> {
        crate::nn::summary(&self.network, input_size)
    }
}

/// `state` with each key's `from.` prefix replaced by `to.`, for each `(from, to)` pair.
fn rename_keys(state: &StateDict, pairs: &[(String, String)]) -> StateDict {
    state
        .iter()
        .map(|(k, t)| {
            let renamed = pairs.iter().find_map(|(from, to)| {
                k.strip_prefix(from.as_str()).filter(|r| r.starts_with('.')).map(|r| format!("{to}{r}"))
            });
            (renamed.unwrap_or_else(|| k.to_string()), t.clone())
        })
        .collect()
}

fn paths(path: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let s = path.as_os_str().to_string_lossy();
    (format!("{s}.safetensors").into(), format!("{s}.opt.safetensors").into())
}

/// `verbose = 1`'s progress bar (a terminal bar natively, nothing in the browser).
struct Progress {
    #[cfg(not(target_arch = "wasm32"))]
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(on: bool, len: usize, title: String) -> Self {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let bar = on.then(|| {
                let bar = indicatif::ProgressBar::new(len as u64);
                let style = indicatif::ProgressStyle::with_template(&format!(
                    "{title} {{bar:30}} {{pos}}/{{len}} {{msg}} ({{elapsed}})"
                ))
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
                bar.set_style(style);
                bar
            });
            Progress { bar }
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = (on, len, title);
            Progress {}
        }
    }

    fn step(&self, status: impl FnOnce() -> EvalResult) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(b) = &self.bar {
            b.inc(1);
            if b.position() % 10 == 0 {
                b.set_message(status().to_string());
            }
        }
        #[cfg(target_arch = "wasm32")]
        let _ = status;
    }

    fn finish(&self, result: &EvalResult) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(b) = &self.bar {
            b.finish_with_message(result.to_string());
        }
        #[cfg(target_arch = "wasm32")]
        let _ = result;
    }
}
