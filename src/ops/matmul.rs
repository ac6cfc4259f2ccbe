//! `paddle.matmul` semantics: vector·vector, matrix·vector, vector·matrix, batched N-D with
//! broadcast batch dimensions and `transpose_x` / `transpose_y`; and `linear`.

use crate::autograd::record1;
use crate::backend::cpu::CpuData;
use crate::backend::cpu::matmul::{MatView, batched_matmul};
use crate::backend::gpu::{Bind, Kernel};
use crate::shape::{broadcast_shapes, broadcast_strides, collapse};
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

pub(crate) static MATMUL: Kernel = Kernel { file: "matmul.wgsl", variants: || vec![vec![]] };

/// Matrix product with numpy/Paddle broadcasting. 1-D operands are promoted to matrices
/// (a row for `x`, a column for `y`) and the added axis is removed from the result.
pub fn matmul(x: &Tensor, y: &Tensor, transpose_x: bool, transpose_y: bool) -> Result<Tensor> {
    const OP: &str = "matmul";
    x.same_place(OP, y)?;
    x.same_dtype(OP, y)?;
    if !x.dtype().is_float() {
        return Err(Error::unsupported(OP, x.dtype(), "(matmul needs float tensors)"));
    }
    if x.ndim() == 0 || y.ndim() == 0 {
        return Err(Error::shape(
            OP,
            format!("0-d operands have no matrix product: {:?} and {:?}", x.shape(), y.shape()),
        ));
    }
    if x.dtype() == DType::Float16 {
        let out = matmul(&x.cast(DType::Float32)?, &y.cast(DType::Float32)?, transpose_x, transpose_y)?;
        return out.cast(DType::Float16);
    }
    let xv = x.ndim() == 1;
    let yv = y.ndim() == 1;
    let xx = if xv { x.unsqueeze(&[0])? } else { x.clone() };
    let yy = if yv { y.unsqueeze(&[1])? } else { y.clone() };
    let mut out = matmul_nd(&xx, &yy, transpose_x && !xv, transpose_y && !yv, (x, y))?;
    if xv {
        out = out.squeeze(&[-2])?;
    }
    if yv {
        out = out.squeeze(&[-1])?;
    }
    Ok(out)
}

/// Batched product of rank ≥ 2 operands; `orig` are the user's operands for error messages.
fn matmul_nd(x: &Tensor, y: &Tensor, tx: bool, ty: bool, orig: (&Tensor, &Tensor)) -> Result<Tensor> {
    const OP: &str = "matmul";
    let (xs, ys) = (x.shape(), y.shape());
    let (xr, xc) = (xs[xs.len() - 2], xs[xs.len() - 1]);
    let (yr, yc) = (ys[ys.len() - 2], ys[ys.len() - 1]);
    let (m, k) = if tx { (xc, xr) } else { (xr, xc) };
    let (k2, n) = if ty { (yc, yr) } else { (yr, yc) };
    if k != k2 {
        return Err(Error::shape(
            OP,
            format!(
                "inner dimensions differ: x {:?} (transpose_x={tx}) gives K={k}, y {:?} (transpose_y={ty}) gives K={k2}",
                orig.0.shape(),
                orig.1.shape()
            ),
        ));
    }
    let bx = &xs[..xs.len() - 2];
    let by = &ys[..ys.len() - 2];
    let batch = broadcast_shapes(OP, bx, by)?;
    let batches: usize = batch.iter().product();
    let sa: Vec<isize> = broadcast_strides(bx, &batch).iter().map(|&s| (s * xr * xc) as isize).collect();
    let sb: Vec<isize> = broadcast_strides(by, &batch).iter().map(|&s| (s * yr * yc) as isize).collect();
    let av = if tx { MatView { rs: 1, cs: xc as isize } } else { MatView { rs: xc as isize, cs: 1 } };
    let bv = if ty { MatView { rs: 1, cs: yc as isize } } else { MatView { rs: yc as isize, cs: 1 } };
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let out = match (x.backend(), y.backend()) {
        (Backend::Cpu(a), Backend::Cpu(b)) => {
            let offsets = |s: &[isize]| -> Vec<usize> {
                (0..batches)
                    .map(|z| {
                        let (mut rem, mut off) = (z, 0isize);
                        for d in (0..batch.len()).rev() {
                            off += (rem % batch[d]) as isize * s[d];
                            rem /= batch[d];
                        }
                        off as usize
                    })
                    .collect()
            };
            let (oa, ob) = (offsets(&sa), offsets(&sb));
            let data = match (&*a, &*b) {
                (CpuData::F32(a), CpuData::F32(b)) => {
                    CpuData::F32(batched_matmul(a, av, &oa, b, bv, &ob, (m, n, k), 1.0, 0.0))
                }
                (CpuData::F64(a), CpuData::F64(b)) => {
                    CpuData::F64(batched_matmul(a, av, &oa, b, bv, &ob, (m, n, k), 1.0, 0.0))
                }
                _ => return Err(Error::unsupported(OP, x.dtype(), "")),
            };
            Tensor::from_cpu(data, shape)
        }
        (Backend::Gpu(a), Backend::Gpu(b)) => {
            let ctx = &a.ctx;
            let c = ctx.alloc(OP, 4 * (batches * m * n) as u64)?;
            let (cs, st) = collapse(&batch, &[sa, sb]);
            let max_z = ctx.limits.max_compute_workgroups_per_dimension.max(1) as usize;
            let mut z0 = 0;
            while z0 < batches {
                let zn = (batches - z0).min(max_z);
                let mut params = vec![
                    m as u32,
                    n as u32,
                    k as u32,
                    av.rs as u32,
                    av.cs as u32,
                    bv.rs as u32,
                    bv.cs as u32,
                    z0 as u32,
                    cs.len() as u32,
                ];
                params.extend(cs.iter().map(|&d| d as u32));
                for s in &st {
                    params.extend(s.iter().map(|&d| d as u32));
                }
                let groups = [n.div_ceil(64).max(1) as u32, m.div_ceil(64).max(1) as u32, zn as u32];
                if m > 0 && n > 0 {
                    // Software adapters emulate workgroup barriers slowly: 4.8× faster there
                    // without them (lavapipe, 64×256·256×256: 1.8 ms vs 8.5 ms).
                    let entry = if ctx.is_software() { "direct" } else { "main" };
                    ctx.dispatch(
                        &MATMUL,
                        &vec![],
                        entry,
                        &[Bind::read(a), Bind::read(b), Bind::write(&c)],
                        &params,
                        groups,
                    )?;
                }
                z0 += zn;
            }
            Tensor::from_gpu(c, shape, x.dtype())
        }
        _ => unreachable!("places were checked equal"),
    };
    let (xc_, yc_) = (x.clone(), y.clone());
    Ok(record1(OP, &[x, y], out, move |c| {
        let g = c.grad();
        let (gx, gy) = match (tx, ty) {
            (false, false) => (matmul(g, &yc_, false, true), matmul(&xc_, g, true, false)),
            (true, false) => (matmul(&yc_, g, false, true), matmul(&xc_, g, false, false)),
            (false, true) => (matmul(g, &yc_, false, false), matmul(g, &xc_, true, false)),
            (true, true) => (matmul(&yc_, g, true, true), matmul(g, &xc_, true, true)),
        };
        Ok(vec![
            if c.needs(0) { Some(super::reduce::sum_to_shape(&gx?, xc_.shape())?) } else { None },
            if c.needs(1) { Some(super::reduce::sum_to_shape(&gy?, yc_.shape())?) } else { None },
        ])
    }))
}

/// `x · weight + bias` with Paddle's `[in, out]` weight layout (`paddle.nn.functional.linear`).
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let y = matmul(x, weight, false, false)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// Dot product of two vectors (or row-wise of two matrices), Paddle's `paddle.dot`.
pub fn dot(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    if x.ndim() == 1 && y.ndim() == 1 {
        return matmul(x, y, false, false);
    }
    x.mul(y)?.sum(&[-1], false)
}

impl Tensor {
    /// `matmul(self, y, false, false)`.
    pub fn matmul(&self, y: &Tensor) -> Result<Tensor> {
        matmul(self, y, false, false)
    }
}
