//! Seed 003's dynamic-graph programs: a `while` loop on tensors, `x + y if x > y else x − y`,
//! and a Conv2D (3 → 2 channels, 3×3, Xavier-normal weights, learning rate 0.001, relu)
//! applied to a random 1×3×32×32 image.
//!
//! `cargo run --release --example static_vs_dynamic [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::nn::{self, Conv2dOptions, Forward, Initializer, ParamAttr};
use dygraph::{self as paddle, Place, Result, Tensor};

/// `while first < second: first += 2; second += 1` on one-element tensors.
pub fn while_loop(place: Place) -> Result<(f32, f32)> {
    let mut first = paddle::to_tensor_on([0.0f32], place)?;
    let mut second = paddle::to_tensor_on([10.0f32], place)?;
    while first.less_than(&second)?.item::<bool>()? {
        first = first.add_scalar(2.0)?;
        second = second.add_scalar(1.0)?;
    }
    Ok((first.item()?, second.item()?))
}

/// `z = x + y if x > y else x − y` for `x, y = rand(1)`.
pub fn cond(place: Place) -> Result<(f32, f32, f32)> {
    let x = paddle::rand_on([1], place)?;
    let y = paddle::rand_on([1], place)?;
    let z = if x.greater_than(&y)?.item::<bool>()? { x.add(&y)? } else { x.sub(&y)? };
    Ok((x.item()?, y.item()?, z.item()?))
}

/// The seed's Conv2D with Xavier-normal weights and relu; returns (input, conv, output).
pub fn conv(place: Place) -> Result<(Tensor, nn::Conv2D, Tensor)> {
    paddle::guard(place, || {
        let x = paddle::rand([1, 3, 32, 32])?;
        let attr = ParamAttr {
            name: Some("conv2d.weight".into()),
            initializer: Some(Initializer::xavier_normal()),
            learning_rate: 0.001,
            trainable: true,
        };
        let conv2d = nn::Conv2D::with_options(3, 2, 3, Conv2dOptions::default(), attr, true)?;
        let out = conv2d.forward(&x)?.relu()?;
        Ok((x, conv2d, out))
    })
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    println!("place: {place}");
    let (c1, c2) = while_loop(place)?;
    println!("{c1}\n{c2}");
    let (x, y, z) = cond(place)?;
    println!("x = {x:.8}, y = {y:.8}, z = {z:.8}");
    let (_, _, out) = conv(place)?;
    println!("{out}");
    Ok(())
}
