//! Seed 000's autoencoder with shared weights: one `Linear(64, 8, bias_attr=False)` encodes,
//! and `matmul(hidden, linear.weight, transpose_y=True)` decodes with the same weight;
//! Adam(0.01), 10 steps on `rand((256, 64))`.
//!
//! `cargo run --release --example shared_weights [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::nn::{self, Forward, Layer, ParamAttr};
use dygraph::optimizer::{Adam, Optimizer};
use dygraph::{self as paddle, Place, Result};

/// The ten losses.
pub fn run(place: Place) -> Result<Vec<f32>> {
    paddle::guard(place, || {
        let inputs = paddle::rand([256, 64])?;
        let linear = nn::Linear::with_attrs(64, 8, ParamAttr::default(), false)?;
        let loss_fn = nn::MSELoss::default();
        let mut optimizer = Adam::new(0.01, linear.parameters());
        let mut losses = Vec::new();
        for _ in 0..10 {
            let hidden = linear.forward(&inputs)?;
            // The weight from input to hidden is shared with the mapping from hidden to output.
            let outputs = paddle::matmul(&hidden, &linear.weight, false, true)?;
            let loss = loss_fn.forward(&outputs, &inputs)?;
            loss.backward()?;
            losses.push(loss.item::<f32>()?);
            optimizer.step()?;
            optimizer.clear_grad();
        }
        Ok(losses)
    })
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    println!("place: {place}");
    for (i, loss) in run(place)?.into_iter().enumerate() {
        println!("step: {i}, loss: [{loss:.8}]");
    }
    Ok(())
}
