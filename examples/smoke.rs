use dygraph::{self as paddle, DType, Place};
fn main() -> paddle::Result<()> {
    for place in [Place::Cpu, Place::Gpu(0)] {
        paddle::set_place(place)?;
        let a = paddle::to_tensor(&[[1.5f32, -2.0], [3.0, 4.25]])?;
        let b = paddle::arange(1.0, 3.0, 1.0, DType::Float32)?;
        let c = &a + &b;
        println!("{c}");
        let i = paddle::to_tensor(&[1i64, 2, 3])?;
        println!("{}", i.pow(9)?.numpy::<i64>()?);
        println!("{}", (&i.pow(9)? - 5).numpy::<i64>()?);
        let s = c.sum(&[], false)?;
        println!("sum {} mean {}", s.item::<f32>()?, c.mean(&[0], false)?);
        println!("{}", c.transpose(&[1, 0])?);
        println!("{}", paddle::concat(&[a.clone(), b.unsqueeze(&[0])?], 0)?);
        println!("{}", a.exp()?.cast(DType::Int64)?);
        println!("{}", a.cast(DType::Float16)?.tanh()?);
        println!("{}", paddle::pad(&a, &[1, 1], 0.5)?);
        println!("{}", paddle::zeros(&[2, 3], DType::Int32)?);
    }
    Ok(())
}
