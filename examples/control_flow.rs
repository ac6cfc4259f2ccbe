//! Seed 000's flexible network: an MLP (128 → 256 → (256) → 1) whose forward pass takes the
//! second linear layer only when `rand([1]) > 0.5`, trained with MSELoss and SGD(0.01) on
//! random data for 200 × (1000 / 64) steps, printing the loss every 200 steps.
//!
//! `cargo run --release --example control_flow [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::nn::{self, Forward, Layer, Reduction};
use dygraph::optimizer::{Optimizer, SGD};
use dygraph::{self as paddle, DType, Place, Result, Tensor};

#[derive(nn::Layer)]
pub struct MyModel {
    linear1: nn::Linear,
    linear2: nn::Linear,
    linear3: nn::Linear,
}

impl MyModel {
    pub fn new(input_size: usize, hidden_size: usize) -> Result<Self> {
        Ok(MyModel {
            linear1: nn::Linear::new(input_size, hidden_size)?,
            linear2: nn::Linear::new(hidden_size, hidden_size)?,
            linear3: nn::Linear::new(hidden_size, 1)?,
        })
    }
}

impl Forward for MyModel {
    fn forward(&self, inputs: &Tensor) -> Result<Tensor> {
        let mut x = self.linear1.forward(inputs)?.relu()?;
        // Plain Rust control flow on a tensor value: the graph differs from step to step.
        if paddle::rand_on([1], inputs.place())?.greater_than_scalar(0.5)?.item::<bool>()? {
            x = self.linear2.forward(&x)?.relu()?;
        }
        self.linear3.forward(&x)
    }
}

/// Trains for `steps` steps on `place`; returns (step, loss) every 200 steps and the last.
pub fn run(place: Place, steps: usize) -> Result<Vec<(usize, f32)>> {
    paddle::guard(place, || {
        let (total_data, batch_size, input_size, hidden_size) = (1000, 64, 128, 256);
        let x_data = paddle::randn([total_data, input_size])?;
        let y_data = paddle::randn([total_data, 1])?;
        let model = MyModel::new(input_size, hidden_size)?;
        let loss_fn = nn::MSELoss::new(Reduction::Mean);
        let mut optimizer = SGD::new(0.01, model.parameters());
        let mut losses = Vec::new();
        for t in 0..steps {
            // np.random.choice(total_data, batch_size, replace=False)
            let idx = paddle::randperm(total_data, DType::Int64)?.slice(&[0], &[0], &[batch_size as i64])?;
            let x = paddle::index_select(&x_data, &idx, 0)?;
            let y = paddle::index_select(&y_data, &idx, 0)?;
            let y_pred = model.forward(&x)?;
            let loss = loss_fn.forward(&y_pred, &y)?;
            if t % 200 == 0 || t + 1 == steps {
                losses.push((t, loss.item::<f32>()?));
            }
            loss.backward()?;
            optimizer.step()?;
            optimizer.clear_grad();
        }
        Ok(losses)
    })
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    println!("place: {place}");
    let steps = common::arg("steps").and_then(|s| s.parse().ok()).unwrap_or(200 * (1000 / 64));
    for (t, loss) in run(place, steps)? {
        println!("{t} [{loss:.8}]");
    }
    Ok(())
}
