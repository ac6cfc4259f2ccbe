//! MNIST as sequences: each image's 28 rows are 28 time steps of 28 pixels through an LSTM
//! (hidden 128); the last step's output feeds a linear classifier. One epoch of Adam reaches
//! 97%+ test accuracy. `--static` trains the `jit::to_static` program of the same model.
//!
//! ```text
//! cargo run --release --example lstm_mnist [-- --place cpu|gpu] [--epochs N] [--steps N] [--static]
//!     [--amp O1|O2] [--amp-dtype float16|bfloat16]
//! ```

#[path = "common/mod.rs"]
pub mod common;

use common::classifier::{RunConfig, RunReport, train_classifier};
use dygraph::nn::{Forward, LSTM, Linear};
use dygraph::{Result, Tensor};

/// LSTM over the rows, then a classifier on the last output.
#[derive(dygraph::nn::Layer)]
pub struct LstmNet {
    pub lstm: LSTM,
    pub fc: Linear,
}

impl LstmNet {
    pub fn new(hidden: usize) -> Result<Self> {
        Ok(LstmNet { lstm: LSTM::new(28, hidden)?, fc: Linear::new(hidden, 10)? })
    }
}

impl Forward for LstmNet {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let rows = dygraph::reshape(x, &[-1, 28, 28])?;
        let (out, _) = self.lstm.forward(&rows, None)?;
        let last = out.slice(&[1], &[27], &[28])?.squeeze(&[1])?;
        self.fc.forward(&last)
    }
}

/// The example's hyper-parameters (the command line may override them).
pub fn defaults() -> RunConfig {
    RunConfig { learning_rate: 3e-3, one_cycle: true, batch_size: 64, ..Default::default() }
}

/// Trains and evaluates as configured.
pub fn run(config: &RunConfig) -> Result<RunReport> {
    train_classifier(config, || LstmNet::new(128))
}

fn main() -> Result<()> {
    let config = RunConfig::from_args(defaults())?;
    let r = run(&config)?;
    common::classifier::print_report("lstm_mnist", &config, &r);
    Ok(())
}
