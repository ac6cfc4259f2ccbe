//! The data-movement primitive every shape op is written in: read a strided view of a
//! tensor into a new contiguous one (`gather_view`), or assemble a new tensor from pieces
//! written at strided views of it (`assemble`). One CPU loop and one WGSL kernel serve
//! transpose, slice, flip, expand, concat, pad and their gradients.

use crate::backend::cpu::elementwise::{map_strided, scatter_strided};
use crate::backend::cpu::{gpu_bytes, map_data, typed_ref, with_data};
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel, Variant};
use crate::ops::elementwise::upcast;
use crate::ops::wgsl;
use crate::shape::{View, collapse};
use crate::tensor::Backend;
use crate::{DType, Place, Result, Scalar, Tensor};

pub(crate) static COPY: Kernel = Kernel {
    file: "copy.wgsl",
    variants: || vec![vec![("S", "u32".to_string())], vec![("S", "vec2<u32>".to_string())]],
};

fn copy_variant(dtype: DType) -> Variant {
    let s = if wgsl::param_words(dtype) == 2 { "vec2<u32>" } else { "u32" };
    vec![("S", s.to_string())]
}

fn gpu_copy(
    ctx: &GpuContext,
    dtype: DType,
    src: &GpuBuffer,
    src_view: &View,
    dst: &GpuBuffer,
    dst_view: &View,
) -> Result<()> {
    let n = src_view.numel();
    if n == 0 {
        return Ok(());
    }
    let (shape, st) = collapse(&src_view.shape, &[src_view.strides.clone(), dst_view.strides.clone()]);
    let mut params = vec![n as u32, shape.len() as u32, src_view.offset as u32, dst_view.offset as u32];
    params.extend(shape.iter().map(|&d| d as u32));
    for s in &st {
        params.extend(s.iter().map(|&d| d as i32 as u32));
    }
    ctx.dispatch_1d(&COPY, &copy_variant(dtype), "main", &[Bind::read(src), Bind::write(dst)], &params, n as u64)
}

/// A new contiguous tensor holding `view` of `x` (no autograd; callers record).
pub(crate) fn gather_view(x: &Tensor, view: &View) -> Result<Tensor> {
    if x.dtype() == DType::Float16 {
        return gather_view(&upcast(x)?, view)?.cast(DType::Float16);
    }
    match x.backend() {
        Backend::Cpu(d) => {
            let data = map_data!(&*d, v => map_strided(v, &view.shape, &view.strides, view.offset, |e| e));
            Ok(Tensor::from_cpu(data, view.shape.clone()))
        }
        Backend::Gpu(buf) => {
            let ctx = &buf.ctx;
            let out = ctx.alloc("copy", gpu_bytes(x.dtype(), view.numel()))?;
            gpu_copy(ctx, x.dtype(), buf, view, &out, &View::contiguous(&view.shape))?;
            Ok(Tensor::from_gpu(out, view.shape.clone(), x.dtype()))
        }
    }
}

/// A new tensor of `shape` on `place`, filled with `fill` (or left for the pieces to cover
/// entirely when `None`), with each `(piece, view)` written at `view` of it. Pieces are
/// contiguous and `view.shape == piece.shape()`.
pub(crate) fn assemble(
    shape: &[usize],
    dtype: DType,
    place: Place,
    fill: Option<Scalar>,
    pieces: &[(Tensor, View)],
) -> Result<Tensor> {
    if dtype == DType::Float16 {
        let up: Vec<(Tensor, View)> = pieces.iter().map(|(t, v)| Ok((upcast(t)?, v.clone()))).collect::<Result<_>>()?;
        return assemble(shape, DType::Float32, place, fill, &up)?.cast(DType::Float16);
    }
    let n: usize = shape.iter().product();
    match place {
        Place::Cpu => {
            let mut out = fill.unwrap_or(Scalar::Int(0)).fill(dtype, n);
            for (piece, view) in pieces {
                let src = piece.to_cpu_data("assemble")?;
                with_data!(&mut out, o => {
                    let s = typed_ref(&src).expect("pieces share the output dtype");
                    scatter_strided(o, view.offset, &view.strides, s, &view.shape);
                });
            }
            Ok(Tensor::from_cpu(out, shape.to_vec()))
        }
        Place::Gpu(_) => {
            let base = match fill {
                Some(v) => crate::full_on(shape, v, dtype, place)?,
                None => {
                    let ctx = crate::backend::gpu::context(match place {
                        Place::Gpu(i) => i,
                        Place::Cpu => 0,
                    })?;
                    Tensor::from_gpu(ctx.alloc("assemble", gpu_bytes(dtype, n))?, shape.to_vec(), dtype)
                }
            };
            let Backend::Gpu(dst) = base.backend() else { unreachable!("created on the GPU") };
            for (piece, view) in pieces {
                let Backend::Gpu(src) = piece.backend() else { unreachable!("pieces share the place") };
                gpu_copy(&dst.ctx, dtype, src, &View::contiguous(piece.shape()), dst, view)?;
            }
            Ok(base)
        }
    }
}
