//! dtype conversion (`paddle.cast`). Float to int truncates toward zero (saturating, NaN
//! gives 0), anything to bool is `!= 0`, int64 to int32 wraps.

use crate::backend::cpu::CpuData;
use crate::backend::cpu::elementwise::PAR_MIN;
use crate::backend::cpu::par_chunks_new;
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Result, Tensor};

const GPU_DTYPES: [DType; 6] =
    [DType::Bool, DType::Int32, DType::Int64, DType::Float16, DType::Float32, DType::BFloat16];

pub(crate) static CAST: Kernel = Kernel {
    file: "cast.wgsl",
    keys: || {
        let mut v = Vec::new();
        for from in GPU_DTYPES {
            for to in GPU_DTYPES {
                if from != to {
                    v.push(cast_key(from, to));
                }
            }
        }
        v
    },
    variant: |key| variant(DType::from_code(key / 8), DType::from_code(key % 8)),
};

fn cast_key(from: DType, to: DType) -> u32 {
    from.code() * 8 + to.code()
}

fn convert_expr(from: DType, to: DType) -> &'static str {
    use DType::*;
    let to = if to.is_half() { Float32 } else { to };
    let from = if from.is_half() { Float32 } else { from };
    match (from, to) {
        (Float32, Float32) => "x",
        (Float32, Int32) => "f32_to_i32(x)",
        (Float32, Int64) => "i64_from_f32(x)",
        // Not `x != 0.0`: naga lowers float `!=` to an ordered compare, so NaN would be false.
        (Float32, Bool) => "!(x == 0.0)",
        (Int32, Float32) => "f32(x)",
        (Int32, Int64) => "i64_from_i32(x)",
        (Int32, Bool) => "x != 0",
        (Int64, Float32) => "i64_to_f32(x)",
        (Int64, Int32) => "bitcast<i32>(x.x)",
        (Int64, Bool) => "!i64_is_zero(x)",
        (Bool, Float32) => "select(0.0, 1.0, x)",
        (Bool, Int32) => "select(0, 1, x)",
        (Bool, Int64) => "vec2<u32>(select(0u, 1u, x), 0u)",
        _ => "x",
    }
}

fn variant(from: DType, to: DType) -> Variant {
    let pack = match to {
        DType::Float16 => "pack2x16float(vec2<f32>(a, b))",
        _ => "bf16_bits(a) | (bf16_bits(b) << 16u)",
    };
    let body = if to.is_half() {
        format!(
            "if (2u * i >= n) {{ return; }}\n    let a = convert(load(2u * i));\n    var b = 0.0;\n    \
             if (2u * i + 1u < n) {{ b = convert(load(2u * i + 1u)); }}\n    dst[i] = {pack};"
        )
    } else {
        format!("if (i >= n) {{ return; }}\n    let y = convert(load(i));\n    dst[i] = {};", wgsl::store(to, "y"))
    };
    let mut v = wgsl::io_types(from, to);
    v.extend([("LOAD", wgsl::load(from, "src", "i")), ("EXPR", convert_expr(from, to).into()), ("BODY", body)]);
    v
}

fn cpu_cast(d: &CpuData, to: DType) -> CpuData {
    use half::slice::HalfFloatSliceExt;
    let n = d.len();
    match d {
        CpuData::F16(v) if to == DType::Float32 => CpuData::F32(chunked(v, 0.0, |a, y| a.convert_to_f32_slice(y))),
        CpuData::F32(v) if to == DType::Float16 => {
            CpuData::F16(chunked(v, half::f16::ZERO, |a, y| y.convert_from_f32_slice(a)))
        }
        CpuData::BF16(v) if to == DType::Float32 => CpuData::F32(chunked(v, 0.0, |a, y| a.convert_to_f32_slice(y))),
        CpuData::F32(v) if to == DType::BFloat16 => {
            CpuData::BF16(chunked(v, half::bf16::ZERO, |a, y| y.convert_from_f32_slice(a)))
        }
        CpuData::Bool(_) | CpuData::I32(_) | CpuData::I64(_) => CpuData::from_i64(to, (0..n).map(|i| d.get_i64(i))),
        _ => CpuData::from_f64(to, (0..n).map(|i| d.get_f64(i))),
    }
}

/// `convert` over `xs` in parallel chunks: the 16-bit float casts autocast makes around most
/// ops go through `half`'s slice conversions (F16C instructions where the CPU has them).
fn chunked<A: Sync, Y: Copy + Send + Sync>(xs: &[A], zero: Y, convert: impl Fn(&[A], &mut [Y]) + Sync) -> Vec<Y> {
    par_chunks_new(xs.len(), zero, PAR_MIN, |start, out| convert(&xs[start..start + out.len()], out))
}

/// A new GPU buffer holding the `n` elements of `src` (of `from`) converted to `to`: for
/// kernels that compute in another dtype than their input's.
pub(crate) fn gpu_cast(
    ctx: &std::sync::Arc<crate::backend::gpu::GpuContext>,
    src: &crate::backend::gpu::GpuBuffer,
    from: DType,
    to: DType,
    n: usize,
) -> Result<crate::backend::gpu::GpuBuffer> {
    let out = ctx.alloc("cast", crate::backend::cpu::gpu_bytes(to, n))?;
    let threads = if to.is_half() { n.div_ceil(2) } else { n };
    ctx.dispatch(
        &CAST,
        cast_key(from, to),
        "main",
        &[Bind::read(src), Bind::write(&out)],
        &[n as u32],
        threads as u64,
    )?;
    Ok(out)
}

/// `cast`'s attribute: the target dtype.
#[derive(Clone, Copy, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct CastAttrs {
    pub dtype: DType,
}

registry_entry!(
    /// dtype conversion (`paddle.cast`).
    CAST_OP: CastOp = "cast", CastAttrs, ()
);

impl Op for CastOp {
    fn facts(&self) -> Facts {
        Facts { amp: AmpList::Keep, ..Facts::NONE }
    }
    fn infer(&self, x: &[&TensorMeta], a: &CastAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let [x] = inputs("cast", x)?;
        Ok((vec![x.with_dtype(a.dtype)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &CastAttrs, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![cpu_cast(k.x(0), a.dtype)])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &CastAttrs, _: &()) -> Result<()> {
        let (from, to) = (k.ins[0].dtype, a.dtype);
        let n = k.outs[0].numel();
        if from == to {
            let bytes = crate::backend::cpu::gpu_bytes(to, n).div_ceil(4) * 4;
            return k.ctx.copy(k.x(0), 0, k.y(0), 0, bytes);
        }
        let threads = if to.is_half() { n.div_ceil(2) } else { n };
        let binds = [Bind::read(k.x(0)), Bind::write(k.y(0))];
        k.ctx.dispatch(&CAST, cast_key(from, to), "main", &binds, &[n as u32], threads as u64)
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &CastAttrs, _: &()) -> Result<Vec<Option<Tensor>>> {
        let from = g.x(0).dtype();
        if !from.is_float() {
            return Ok(vec![None]);
        }
        Ok(vec![g.grad_if(0, || cast(g.g(), from))?])
    }
}

/// Converts `x` to `dtype` (a no-op when it already has it).
pub fn cast(x: &Tensor, dtype: DType) -> Result<Tensor> {
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    apply1(&CAST_OP, &[x], CastAttrs { dtype })
}

impl Tensor {
    /// Converts to `dtype` (`x.astype(dtype)`).
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        cast(self, dtype)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&CAST_OP], kernels: &[&CAST] };
