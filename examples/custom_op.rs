//! Seed 002's PyLayer: tanh with a hand-written backward, checked against the built-in tanh.
//!
//! `cargo run --release --example custom_op [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::autograd::{PyLayer, PyLayerContext};
use dygraph::{self as paddle, Place, Result, Tensor};

/// `tanh` whose backward is written by hand: dy · (1 − y²).
pub struct CusTanh;

impl PyLayer for CusTanh {
    fn forward(ctx: &mut PyLayerContext, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let y = inputs[0].tanh()?;
        ctx.save_for_backward(&[&y]);
        Ok(vec![y])
    }

    fn backward(ctx: &PyLayerContext, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let y = &ctx.saved_tensor()[0];
        Ok(vec![Some(grads[0].mul(&y.square()?.rsub_scalar(1.0)?)?)])
    }
}

/// Outputs and input gradients of the custom layer and of the built-in op.
pub struct Report {
    pub custom_sum: f32,
    pub builtin_sum: f32,
    pub custom_grad: Vec<f32>,
    pub builtin_grad: Vec<f32>,
}

/// Runs both on `input` (2-D, as in the seed: `np.ones([2, 2])`) on `place`.
pub fn run(place: Place, input: &[[f32; 2]; 2]) -> Result<Report> {
    let run_one = |custom: bool| -> Result<(f32, Vec<f32>)> {
        let x = paddle::to_tensor_on(input, place)?;
        x.set_stop_gradient(false);
        let y = if custom { CusTanh::apply(std::slice::from_ref(&x))?.remove(0) } else { x.tanh()? };
        let dy_out: f32 = y.to_vec::<f32>()?.iter().sum();
        y.sum(&[], false)?.backward()?;
        let grad = x.gradient::<f32>()?.expect("x requires a gradient").data;
        Ok((dy_out, grad))
    };
    let (custom_sum, custom_grad) = run_one(true)?;
    let (builtin_sum, builtin_grad) = run_one(false)?;
    Ok(Report { custom_sum, builtin_sum, custom_grad, builtin_grad })
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    println!("place: {place}");
    let r = run(place, &[[1.0, 1.0], [1.0, 1.0]])?;
    println!("custom  tanh: sum of outputs {:.8}, input gradient {:?}", r.custom_sum, r.custom_grad);
    println!("builtin tanh: sum of outputs {:.8}, input gradient {:?}", r.builtin_sum, r.builtin_grad);
    let max_diff = r.custom_grad.iter().zip(&r.builtin_grad).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    println!("largest gradient difference: {max_diff:e}");
    Ok(())
}
