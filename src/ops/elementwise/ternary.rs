//! `where(cond, x, y)` with numpy broadcasting of all three operands.

use crate::autograd::record1;
use crate::backend::cpu::CpuData;
use crate::backend::cpu::elementwise::zip3_strided;
use crate::backend::cpu::{map_data, typed_ref};
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::wgsl;
use crate::shape::{broadcast_shapes, broadcast_strides, collapse};
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

pub(crate) static WHERE: Kernel = Kernel {
    file: "where.wgsl",
    variants: || {
        [DType::Bool, DType::Int32, DType::Int64, DType::Float32]
            .iter()
            .map(|&d| vec![("S", wgsl::storage(d).to_string())])
            .collect()
    },
};

/// Picks `x` where `cond` is true and `y` elsewhere (Paddle's `paddle.where`). `cond` must
/// be bool; `x` and `y` share a dtype; all three broadcast together.
pub fn where_(cond: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    const OP: &str = "where";
    cond.same_place(OP, x)?;
    x.same_place(OP, y)?;
    x.same_dtype(OP, y)?;
    if cond.dtype() != DType::Bool {
        return Err(Error::unsupported(OP, cond.dtype(), "for the condition (expected bool)"));
    }
    if x.dtype() == DType::Float16 {
        let out = where_(cond, &super::upcast(x)?, &super::upcast(y)?)?;
        return out.cast(DType::Float16);
    }
    let shape = broadcast_shapes(OP, cond.shape(), x.shape())?;
    let shape = broadcast_shapes(OP, &shape, y.shape())?;
    let strides =
        |t: &Tensor| -> Vec<isize> { broadcast_strides(t.shape(), &shape).into_iter().map(|s| s as isize).collect() };
    let (sc, sx, sy) = (strides(cond), strides(x), strides(y));
    let out = match (cond.backend(), x.backend(), y.backend()) {
        (Backend::Cpu(c), Backend::Cpu(a), Backend::Cpu(b)) => {
            let CpuData::Bool(c) = &*c else { unreachable!("cond dtype checked") };
            let data = map_data!(&*a, av => {
                let bv = typed_ref(&b).expect("operands share a dtype");
                zip3_strided((c, &sc), (av, &sx), (bv, &sy), &shape, |k, p, q| if k { p } else { q })
            });
            Tensor::from_cpu(data, shape.clone())
        }
        (Backend::Gpu(c), Backend::Gpu(a), Backend::Gpu(b)) => {
            let ctx = &a.ctx;
            let n: usize = shape.iter().product();
            let out = ctx.alloc(OP, crate::backend::cpu::gpu_bytes(x.dtype(), n))?;
            let (cs, st) = collapse(&shape, &[sc, sx, sy]);
            let mut params = vec![n as u32, cs.len() as u32];
            params.extend(cs.iter().map(|&d| d as u32));
            for s in &st {
                params.extend(s.iter().map(|&d| d as u32));
            }
            let variant: Variant = vec![("S", wgsl::storage(x.dtype()).to_string())];
            ctx.dispatch_1d(
                &WHERE,
                &variant,
                "main",
                &[Bind::read(c), Bind::read(a), Bind::read(b), Bind::write(&out)],
                &params,
                n as u64,
            )?;
            Tensor::from_gpu(out, shape.clone(), x.dtype())
        }
        _ => unreachable!("places were checked equal"),
    };
    if !out.dtype().is_float() {
        return Ok(out);
    }
    let (c, xs, ys) = (cond.clone(), x.clone(), y.clone());
    Ok(record1(OP, &[x, y], out, move |ctx| {
        let g = ctx.grad();
        let zero = g.zeros_like()?;
        Ok(vec![
            if ctx.needs(0) {
                Some(crate::ops::reduce::sum_to_shape(&where_(&c, g, &zero)?, xs.shape())?)
            } else {
                None
            },
            if ctx.needs(1) {
                Some(crate::ops::reduce::sum_to_shape(&where_(&c, &zero, g)?, ys.shape())?)
            } else {
                None
            },
        ])
    }))
}
