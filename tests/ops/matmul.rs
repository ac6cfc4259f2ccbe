//! The GPU matrix product against a float64 reference computed here, over shapes that cross
//! every kernel's tile edges (partial row, column and depth tiles, several depth tiles,
//! transposed operands, broadcast batch dims, split reductions), with each GPU entry forced
//! in turn.

use crate::common;

use dygraph::{self as paddle, DType, Place, Tensor};

/// `[batch.., m, k] · [batch.., k, n]` in float64, from row-major data, batch dims
/// broadcast (numpy rules), with optional transposes as `matmul` takes them.
fn reference(x: &Tensor, y: &Tensor, tx: bool, ty: bool) -> (Vec<f64>, Vec<usize>) {
    let (xs, ys) = (x.shape().to_vec(), y.shape().to_vec());
    let (xv, yv) = (common::values(x), common::values(y));
    let (xr, xc) = (xs[xs.len() - 2], xs[xs.len() - 1]);
    let (yr, yc) = (ys[ys.len() - 2], ys[ys.len() - 1]);
    let (m, k) = if tx { (xc, xr) } else { (xr, xc) };
    let n = if ty { yr } else { yc };
    let (xb, yb) = (&xs[..xs.len() - 2], &ys[..ys.len() - 2]);
    let nd = xb.len().max(yb.len());
    let pad = |b: &[usize]| [vec![1; nd - b.len()], b.to_vec()].concat();
    let (xb, yb) = (pad(xb), pad(yb));
    let batch: Vec<usize> = xb.iter().zip(&yb).map(|(&a, &b)| a.max(b)).collect();
    let count: usize = batch.iter().product();
    let mut out = Vec::with_capacity(count * m * n);
    for z in 0..count {
        let (mut rem, mut xo, mut yo) = (z, 0, 0);
        let (mut xstride, mut ystride) = (xr * xc, yr * yc);
        for d in (0..nd).rev() {
            let c = rem % batch[d];
            rem /= batch[d];
            xo += if xb[d] == 1 { 0 } else { c * xstride };
            yo += if yb[d] == 1 { 0 } else { c * ystride };
            xstride *= xb[d];
            ystride *= yb[d];
        }
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let a = if tx { xv[xo + p * xc + i] } else { xv[xo + i * xc + p] };
                    let b = if ty { yv[yo + j * yc + p] } else { yv[yo + p * yc + j] };
                    s += a * b;
                }
                out.push(s);
            }
        }
    }
    let shape = [batch, vec![m, n]].concat();
    (out, shape)
}

/// `(x shape, y shape, transpose_x, transpose_y)`.
fn cases() -> Vec<(Vec<usize>, Vec<usize>, bool, bool)> {
    vec![
        (vec![1, 1], vec![1, 1], false, false),
        (vec![3, 5], vec![5, 2], false, false),
        (vec![127, 9], vec![9, 129], false, false),
        (vec![130, 17], vec![17, 257], false, false),
        (vec![128, 64], vec![64, 128], false, false),
        (vec![200, 33], vec![150, 33], false, true),
        (vec![33, 70], vec![33, 140], true, false),
        (vec![2, 1, 65, 24], vec![3, 24, 131], false, false),
        (vec![2, 129, 8], vec![8, 7], false, false),
        (vec![5, 0], vec![0, 4], false, false),
        // Row-major with K and N multiples of 4 (the vec4 entry): partial tiles, several
        // depth tiles, broadcast batches.
        (vec![132, 20], vec![20, 260], false, false),
        (vec![2, 1, 68, 36], vec![3, 36, 132], false, false),
        (vec![129, 4], vec![4, 4], false, false),
        // Few output blocks over a deep K (the MNIST FC layer): software adapters' `direct`
        // splits K, here 8 slices; and per batch, 4 slices of 2 matrices.
        (vec![64, 800], vec![800, 10], false, false),
        (vec![2, 5, 300], vec![300, 3], false, false),
        // The same through vec4 loads (`direct4`): 8 slices, the last column quad alone.
        (vec![8, 512], vec![512, 12], false, false),
        // Whole 32×32 blocks over 16-deep tiles: float16 runs these on cooperative matrices
        // where the adapter has them (`coop`), batched and broadcast too.
        (vec![64, 48], vec![48, 96], false, false),
        (vec![2, 32, 32], vec![2, 32, 64], false, false),
        (vec![3, 96, 64], vec![64, 32], false, false),
    ]
}

#[test]
fn gpu_matches_float64_reference() {
    let _generator = common::generator_lock();
    let Some(g) = common::gpu_or_skip() else { return };
    let mut rng = common::Rng::new(1);
    let mut failures = Vec::new();
    for (xs, ys, tx, ty) in cases() {
        let what = format!("matmul {xs:?}{} · {ys:?}{}", if tx { "ᵀ" } else { "" }, if ty { "ᵀ" } else { "" });
        let mut data = |s: &[usize]| {
            let v: Vec<f32> = rng.vec(s.iter().product(), -1.0, 1.0).iter().map(|&v| v as f32).collect();
            Tensor::from_vec_on(v, s, Place::Cpu).unwrap()
        };
        let (x, y) = (data(&xs), data(&ys));
        let (want, shape) = reference(&x, &y, tx, ty);
        let got = paddle::matmul(&x.to(g).unwrap(), &y.to(g).unwrap(), tx, ty).unwrap();
        if got.shape() != shape.as_slice() {
            failures.push(format!("{what}: shape {:?}, expected {shape:?}", got.shape()));
            continue;
        }
        // float32 products summed over k terms of magnitude ≤ 1.
        let k = if tx { xs[xs.len() - 2] } else { xs[xs.len() - 1] };
        let atol = 2e-7 * (k.max(1) as f64);
        if let Err(m) = common::check_allclose(&what, &common::values(&got), &want, atol, 1e-5) {
            failures.push(m);
        }
        // float16 operands (natively on devices with SHADER_F16): the reference of the
        // rounded operands, within one float16 rounding of each output.
        let (x16, y16) = (x.cast(DType::Float16).unwrap(), y.cast(DType::Float16).unwrap());
        let (want, _) = reference(&x16, &y16, tx, ty);
        let got = paddle::matmul(&x16.to(g).unwrap(), &y16.to(g).unwrap(), tx, ty).unwrap();
        let what = format!("{what} in float16");
        if let Err(m) = common::check_allclose(&what, &common::values(&got), &want, atol + 1e-4, 1e-3) {
            failures.push(m);
        }
    }
    common::report("GPU matmul against float64", &failures);
}

/// The GPU picks an entry per adapter and shape (`wide4`, `wide`, `main`, or `direct4` and
/// `direct` on software adapters, `coop` for float16 on cooperative matrices); rerun the
/// check above with each forced, in a child process (the choice is read once per process),
/// so every entry is checked on any machine, `coop` where the adapter has cooperative
/// matrices (elsewhere its skip is counted).
#[test]
fn gpu_matches_float64_reference_with_each_kernel_forced() {
    let _generator = common::generator_lock();
    let Some(_) = common::gpu_or_skip() else { return };
    let mut entries = vec!["main", "wide", "wide4", "direct", "direct4"];
    if paddle::gpu_info(0).unwrap().cooperative_matrix_f16 {
        entries.push("coop");
    } else {
        common::skip(
            "coop",
            "matmul with DYGRAPH_MATMUL_KERNEL=coop",
            "the adapter has no 16×16×16 f16 cooperative matrices",
        );
    }
    common::rerun_with_each(
        &common::test_path(module_path!(), "gpu_matches_float64_reference"),
        "DYGRAPH_MATMUL_KERNEL",
        &entries,
    );
}

/// Gradients of a product spanning several 64×64 tiles with a ragged depth, GPU against CPU.
#[test]
fn gradients_of_a_multi_tile_product_match_between_gpu_and_cpu() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(499);
    let inputs = vec![(rng.vec(130 * 37, -1.0, 1.0), vec![130, 37]), (rng.vec(37 * 70, -1.0, 1.0), vec![37, 70])];
    let f = |x: &[Tensor]| paddle::matmul(&x[0], &x[1], false, false);
    common::gpu_matches_cpu("matmul 130x37x70", &f, &inputs, true, 1e-4);
}
