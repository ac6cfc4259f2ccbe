//! Seed 003's programs in both styles. Dynamic: a `while` loop on tensors,
//! `x + y if x > y else x − y`, and a Conv2D (3 → 2 channels, 3×3, Xavier-normal weights
//! named `conv2d.weight`, learning rate 0.001, relu) on a random 1×3×32×32 image. Static: the
//! TensorFlow-style `while_loop` on two counters, `cond` as an op fed through an Executor,
//! and the same conv built into a Program and run by `Executor(CPUPlace)`.
//!
//! `cargo run --release --example static_vs_dynamic [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::nn::{self, Conv2dOptions, Forward, Initializer, ParamAttr};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Place, Result, Tensor};

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

/// The seed's `ParamAttr(name='conv2d.weight', initializer=Xavier(uniform=False),
/// learning_rate=0.001)`.
fn conv_attr() -> ParamAttr {
    ParamAttr {
        name: Some("conv2d.weight".into()),
        initializer: Some(Initializer::xavier_normal()),
        learning_rate: 0.001,
        trainable: true,
    }
}

/// The seed's Conv2D with Xavier-normal weights and relu; returns (input, conv, output).
pub fn conv(place: Place) -> Result<(Tensor, nn::Conv2D, Tensor)> {
    paddle::guard(place, || {
        let x = paddle::rand([1, 3, 32, 32])?;
        let conv2d = nn::Conv2D::with_options(3, 2, 3, Conv2dOptions::default(), conv_attr(), true)?;
        let out = conv2d.forward(&x)?.relu()?;
        Ok((x, conv2d, out))
    })
}

/// The TensorFlow-style loop of the seed as a static program: `while_loop(cond, body,
/// [first, second])` with counters 0 and 10, run by an Executor.
pub fn static_while_loop(place: Place) -> Result<(i64, i64)> {
    let (main, startup) = (Program::new(), Program::new());
    let out = st::program_guard(&main, &startup, || {
        let first = paddle::full([1], 0, DType::Int64)?;
        let second = paddle::full([1], 10, DType::Int64)?;
        st::while_loop(
            |v| v[0].less_than(&v[1]),
            |v| Ok(vec![v[0].add_scalar(2)?, v[1].add_scalar(1)?]),
            &[first, second],
        )
    })?;
    let r = Executor::with_scope(place, Scope::new()).run(&main, &[], &out)?;
    Ok((r[0].item()?, r[1].item()?))
}

/// `z = cond(x > y, x + y, x − y)` as an op of a program, with `x` and `y` fed as
/// `rand(1)` arrays.
pub fn static_cond(place: Place) -> Result<(f32, f32, f32)> {
    let (main, startup) = (Program::new(), Program::new());
    let z = st::program_guard(&main, &startup, || -> Result<Tensor> {
        let x = st::data("x", &[1], DType::Float32)?;
        let y = st::data("y", &[1], DType::Float32)?;
        st::cond(&x.greater_than(&y)?, || x.add(&y), || x.sub(&y))
    })?;
    let x_np = paddle::rand_on([1], Place::Cpu)?;
    let y_np = paddle::rand_on([1], Place::Cpu)?;
    let out = Executor::with_scope(place, Scope::new()).run(&main, &[("x", &x_np), ("y", &y_np)], &[&z])?;
    Ok((x_np.item()?, y_np.item()?, out[0].item()?))
}

/// The seed's static `conv2d(input=data, num_filters=2, filter_size=3, act="relu",
/// param_attr=...)` run by `Executor(CPUPlace)`: the input, the output, and the scope's
/// weight and bias.
pub fn static_conv() -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let (main, startup) = (Program::new(), Program::new());
    let (res, conv2d) = st::program_guard(&main, &startup, || -> Result<_> {
        let data = st::data("data", &[-1, 3, 32, 32], DType::Float32)?;
        let conv2d = nn::Conv2D::with_options(3, 2, 3, Conv2dOptions::default(), conv_attr(), true)?;
        Ok((conv2d.forward(&data)?.relu()?, conv2d))
    })?;
    let exe = Executor::with_scope(Place::Cpu, Scope::new());
    exe.run(&startup, &[], &[] as &[&str])?;
    let x = paddle::rand_on([1, 3, 32, 32], Place::Cpu)?;
    let output = exe.run(&main, &[("data", &x)], &[&res])?.remove(0);
    let weight = exe.scope().var("conv2d.weight").ok_or_else(|| paddle::Error::invalid("static_conv", "no weight"))?;
    let bias_name = conv2d.bias.as_ref().and_then(|b| b.name()).unwrap_or_default();
    let bias = exe.scope().var(&bias_name).ok_or_else(|| paddle::Error::invalid("static_conv", "no bias"))?;
    Ok((x, output, weight, bias))
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
    println!("static:");
    let (c1, c2) = static_while_loop(place)?;
    println!("{c1}\n{c2}");
    let (x, y, z) = static_cond(place)?;
    println!("x = {x:.8}, y = {y:.8}, z = {z:.8}");
    let (_, output, _, _) = static_conv()?;
    println!("{output}");
    Ok(())
}
