//! The data-movement primitive every shape op is written in: read a strided view of a
//! tensor into a new contiguous one (`gather`), or assemble a tensor from pieces written at
//! strided views of it (`assemble`). One CPU loop and one WGSL kernel serve transpose,
//! slice, flip, broadcast, concat, pad and their gradients.

use crate::backend::cpu::elementwise::{map_strided, scatter_strided};
use crate::backend::cpu::{CpuData, map_data, typed_ref, with_data};
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel};
use crate::ops::wgsl;
use crate::shape::{View, collapse};
use crate::{DType, Error, Result, Scalar};

pub(crate) static COPY: Kernel = Kernel {
    file: "copy.wgsl",
    keys: || vec![1, 2],
    variant: |words| vec![("S", if words == 2 { "vec2<u32>" } else { "u32" }.to_string())],
};

/// Records a copy of `src_view` of `src` to `dst_view` of `dst` (32- or 64-bit elements;
/// float16 goes through float32).
pub(crate) fn gpu_copy(
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
    ctx.dispatch(
        &COPY,
        wgsl::param_words(dtype) as u32,
        "main",
        &[Bind::read(src), Bind::write(dst)],
        &params,
        n as u64,
    )
}

/// `view` of `data` as new contiguous data.
pub(crate) fn cpu_gather(data: &CpuData, view: &View) -> CpuData {
    map_data!(data, v => map_strided(v, &view.shape, &view.strides, view.offset, |e| e))
}

/// `view` of `src` into the contiguous `dst`.
pub(crate) fn gpu_gather(ctx: &GpuContext, dtype: DType, src: &GpuBuffer, view: &View, dst: &GpuBuffer) -> Result<()> {
    gpu_copy(ctx, dtype, src, view, dst, &View::contiguous(&view.shape))
}

/// `n` elements of `dtype` filled with `fill` (zeros when `None`), with each `(piece, view)`
/// written at `view` (a piece is contiguous with `view.shape`).
pub(crate) fn cpu_assemble(
    n: usize,
    dtype: DType,
    fill: Option<Scalar>,
    pieces: &[(&CpuData, &View)],
) -> Result<CpuData> {
    let mut out = fill.unwrap_or(Scalar::Int(0)).fill(dtype, n);
    for (src, view) in pieces {
        with_data!(&mut out, o => {
            let s = typed_ref(src)
                .ok_or_else(|| Error::DTypeMismatch { op: "assemble", lhs: dtype, rhs: src.dtype() })?;
            scatter_strided(o, view.offset, &view.strides, s, &view.shape);
        });
    }
    Ok(out)
}

/// `dst` (of `n` elements) filled with `fill` (left for the pieces to cover entirely when
/// `None`), then each `(piece, view)` written at `view`.
pub(crate) fn gpu_assemble(
    ctx: &GpuContext,
    dtype: DType,
    dst: &GpuBuffer,
    n: usize,
    fill: Option<Scalar>,
    pieces: &[(&GpuBuffer, &View)],
) -> Result<()> {
    if let Some(v) = fill {
        crate::ops::creation::gpu_fill(ctx, dst, dtype, v, n)?;
    }
    for (src, view) in pieces {
        gpu_copy(ctx, dtype, src, &View::contiguous(&view.shape), dst, view)?;
    }
    Ok(())
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family { ops: &[], kernels: &[&COPY] };
