use dygraph::{self as paddle, Place};
fn main() -> paddle::Result<()> {
    let mut s = 1u64;
    let mut rnd = |n: usize| -> Vec<f32> { (0..n).map(|_| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5 }).collect() };
    for (xs, ys, tx, ty) in [(vec![3usize, 70, 33], vec![33usize, 129], false, false), (vec![2, 1, 5, 7], vec![3, 5, 9], true, false), (vec![17], vec![4, 17, 6], false, false), (vec![130, 70], vec![65, 70], false, true)] {
        let a = rnd(xs.iter().product()); let b = rnd(ys.iter().product());
        let mut outs = vec![];
        for place in [Place::Cpu, Place::Gpu(0)] {
            let x = paddle::Tensor::from_vec_on(a.clone(), &xs, place)?;
            let y = paddle::Tensor::from_vec_on(b.clone(), &ys, place)?;
            let z = paddle::matmul(&x, &y, tx, ty)?;
            outs.push((z.shape().to_vec(), z.to_vec::<f32>()?));
        }
        let err: f32 = outs[0].1.iter().zip(&outs[1].1).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        println!("{:?} {:?} maxerr {err}", outs[0].0, outs[1].0);
    }
    Ok(())
}
