//! Seed 000's first two programs: eager basics (randn, arange, broadcast add, matmul, print)
//! and Python-style control flow on int64 tensors (`pow` with a `rand` branch).
//!
//! `cargo run --release --example basics [-- --place cpu|gpu]`

#[path = "common/mod.rs"]
mod common;

use dygraph::{self as paddle, DType, Place, Result, Tensor};

/// The four tensors of the first program.
pub struct Basics {
    pub a: Tensor,
    pub b: Tensor,
    pub c: Tensor,
    pub d: Tensor,
}

/// `a = randn([4, 2])`, `b = arange(1, 3)`, `c = a + b`, `d = matmul(a, b)`.
pub fn basics(place: Place) -> Result<Basics> {
    let a = paddle::randn_on([4, 2], place)?;
    let b = paddle::arange(1, 3, 1, DType::Float32)?.to(place)?;
    let c = &a + &b;
    let d = paddle::matmul(&a, &b, false, false)?;
    Ok(Basics { a, b, c, d })
}

/// One line of the control-flow program: the exponent, the branch taken and the result.
pub struct Step {
    pub i: u32,
    pub plus: bool,
    pub c: Vec<i64>,
}

/// `c = pow(a, i) ± b` for i in 0..10, adding when `rand([1]) > 0.5`.
pub fn control_flow(place: Place) -> Result<Vec<Step>> {
    let a = paddle::to_tensor_on([1i64, 2, 3], place)?;
    let b = paddle::to_tensor_on([4i64, 5, 6], place)?;
    let mut steps = Vec::new();
    for i in 0..10u32 {
        let r = paddle::rand_on([1], place)?;
        let plus = r.greater_than_scalar(0.5)?.item::<bool>()?;
        let c = if plus { &a.pow(i as i64)? + &b } else { &a.pow(i as i64)? - &b };
        steps.push(Step { i, plus, c: c.to_vec::<i64>()? });
    }
    Ok(steps)
}

fn main() -> Result<()> {
    let place = common::place_from_args()?;
    let t = basics(place)?;
    println!("{}\n{}\n{}\n{}", t.a, t.b, t.c, t.d);
    for s in control_flow(place)? {
        let arr = paddle::NdArray { data: s.c, shape: vec![3] };
        println!("{} {}> {}", s.i, if s.plus { '+' } else { '-' }, arr);
    }
    Ok(())
}
