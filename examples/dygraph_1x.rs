//! Seed 002's first programs in the Paddle 1.x style: `guard`, `to_variable`, `sums` of ten
//! 2×2 ones, `reduce_sum` + `backward` + `gradient()`, and a custom layer (relu →
//! elementwise_mul → reduce_sum) whose hidden value's gradient is read after backward.
//!
//! `cargo run --release --example dygraph_1x [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::nn::{self, Forward};
use dygraph::{self as paddle, NdArray, Place, Result, Tensor};

/// Paddle 1.x's custom layer; keeps its hidden value for inspection like `_x_for_debug`.
#[derive(nn::Layer, Default)]
pub struct MyLayer {
    #[layer(skip)]
    x_for_debug: std::sync::Mutex<Option<Tensor>>,
}

impl Forward for MyLayer {
    fn forward(&self, inputs: &Tensor) -> Result<Tensor> {
        let x = paddle::relu(inputs)?;
        x.retain_grads()?;
        *self.x_for_debug.lock().unwrap_or_else(|e| e.into_inner()) = Some(x.clone());
        let x = paddle::multiply(&x, &x)?;
        paddle::sum(&x, &[], false)
    }
}

/// Everything the seed prints.
pub struct Outputs {
    pub sums: NdArray<f32>,
    pub loss_gradient: Vec<f32>,
    pub dy_out: f32,
    pub dy_grad: Vec<f32>,
}

pub fn run(place: Place) -> Result<Outputs> {
    paddle::guard(place, || {
        let x = [[1.0f32; 2]; 2];
        let inputs: Vec<Tensor> = (0..10).map(|_| paddle::to_tensor(x)).collect::<Result<_>>()?;
        for v in &inputs {
            v.set_stop_gradient(false);
        }
        let ret = paddle::sums(&inputs)?;
        let sums = ret.numpy::<f32>()?;
        let loss = paddle::sum(&ret, &[], false)?;
        loss.retain_grads()?;
        loss.backward()?;
        let loss_gradient = loss.gradient::<f32>()?.map(|g| g.data).unwrap_or_default();

        let np_inp = [1.0f32, 2.0, -1.0];
        let var_inp = paddle::to_tensor(np_inp)?;
        var_inp.set_stop_gradient(false);
        let l = MyLayer::default();
        let x = l.forward(&var_inp)?;
        let dy_out = x.item::<f32>()?;
        x.backward()?;
        let hidden = l.x_for_debug.lock().unwrap_or_else(|e| e.into_inner()).clone().expect("forward ran");
        let dy_grad = hidden.gradient::<f32>()?.map(|g| g.data).unwrap_or_default();
        Ok(Outputs { sums, loss_gradient, dy_out, dy_grad })
    })
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    println!("place: {place}");
    let o = run(place)?;
    println!("{}", o.sums);
    println!("{:?}", o.loss_gradient);
    println!("dy_out: {}", o.dy_out);
    println!("gradient of the hidden value: {:?}", o.dy_grad);
    Ok(())
}
