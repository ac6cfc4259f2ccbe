//! dtype conversion (`paddle.cast`). Float to int truncates toward zero (saturating, NaN
//! gives 0), anything to bool is `!= 0`, int64 to int32 wraps.

use crate::autograd::record1;
use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::wgsl;
use crate::tensor::Backend;
use crate::{DType, Result, Tensor};

const GPU_DTYPES: [DType; 5] = [DType::Bool, DType::Int32, DType::Int64, DType::Float16, DType::Float32];

pub(crate) static CAST: Kernel = Kernel {
    file: "cast.wgsl",
    variants: || {
        let mut v = Vec::new();
        for from in GPU_DTYPES {
            for to in GPU_DTYPES {
                if from != to {
                    v.push(variant(from, to));
                }
            }
        }
        v
    },
};

fn convert_expr(from: DType, to: DType) -> &'static str {
    use DType::*;
    let to = if to == Float16 { Float32 } else { to };
    let from = if from == Float16 { Float32 } else { from };
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
    let body = if to == DType::Float16 {
        "if (2u * i >= n) { return; }\n    let a = convert(load(2u * i));\n    var b = 0.0;\n    \
         if (2u * i + 1u < n) { b = convert(load(2u * i + 1u)); }\n    dst[i] = pack2x16float(vec2<f32>(a, b));"
            .to_string()
    } else {
        format!("if (i >= n) {{ return; }}\n    let y = convert(load(i));\n    dst[i] = {};", wgsl::store(to, "y"))
    };
    vec![
        ("XS", wgsl::storage(from).into()),
        ("XT", wgsl::compute(from).into()),
        ("YS", wgsl::storage(to).into()),
        ("YT", wgsl::compute(to).into()),
        ("LOAD", wgsl::load(from, "src", "i")),
        ("EXPR", convert_expr(from, to).into()),
        ("BODY", body),
    ]
}

fn cpu_cast(d: &CpuData, to: DType) -> CpuData {
    let n = d.len();
    match d {
        CpuData::F16(v) if to == DType::Float32 => CpuData::F32(v.iter().map(|x| x.to_f32()).collect()),
        CpuData::F32(v) if to == DType::Float16 => CpuData::F16(v.iter().map(|&x| half::f16::from_f32(x)).collect()),
        CpuData::Bool(_) | CpuData::I32(_) | CpuData::I64(_) => CpuData::from_i64(to, (0..n).map(|i| d.get_i64(i))),
        _ => CpuData::from_f64(to, (0..n).map(|i| d.get_f64(i))),
    }
}

/// Converts `x` to `dtype` (a no-op when it already has it).
pub fn cast(x: &Tensor, dtype: DType) -> Result<Tensor> {
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    let out = match x.backend() {
        Backend::Cpu(d) => Tensor::from_cpu(cpu_cast(&d, dtype), x.shape()),
        Backend::Gpu(buf) => {
            wgsl::check_gpu_dtype("cast", dtype, x.place())?;
            let ctx = &buf.ctx;
            let n = x.numel();
            let out = ctx.alloc("cast", crate::backend::cpu::gpu_bytes(dtype, n))?;
            let threads = if dtype == DType::Float16 { n.div_ceil(2) } else { n };
            ctx.dispatch_1d(
                &CAST,
                &variant(x.dtype(), dtype),
                "main",
                &[Bind::read(buf), Bind::write(&out)],
                &[n as u32],
                threads as u64,
            )?;
            Tensor::from_gpu(out, x.shape(), dtype)
        }
    };
    if !(x.dtype().is_float() && dtype.is_float()) {
        return Ok(out);
    }
    let from = x.dtype();
    Ok(record1("cast", &[x], out, move |c| Ok(vec![Some(cast(c.grad(), from)?)])))
}

impl Tensor {
    /// Converts to `dtype` (`x.astype(dtype)`).
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        cast(self, dtype)
    }
}
