//! How each dtype looks inside a WGSL kernel: storage type, compute type, loads, stores and
//! scalar parameters. float16 and bfloat16 are packed two per u32 word and compute in f32.

use crate::backend::gpu::Variant;
use crate::{DType, Error, Place, Result, Scalar};

/// Storage element type of `dtype` in a WGSL `array<...>`.
pub(crate) fn storage(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool | DType::Float16 | DType::BFloat16 => "u32",
        DType::Int32 => "i32",
        DType::Int64 | DType::Float64 => "vec2<u32>",
        DType::Float32 => "f32",
    }
}

/// Type a kernel computes in for `dtype`.
pub(crate) fn compute(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::Int32 => "i32",
        DType::Int64 | DType::Float64 => "vec2<u32>",
        DType::Float16 | DType::BFloat16 | DType::Float32 => "f32",
    }
}

/// The `XS`/`XT` (input storage and compute types) and `YS`/`YT` (output) substitutions
/// of a kernel variant.
pub(crate) fn io_types(x: DType, y: DType) -> Variant {
    vec![("XS", storage(x).into()), ("XT", compute(x).into()), ("YS", storage(y).into()), ("YT", compute(y).into())]
}

/// Expression loading element `idx` of buffer `buf` as the compute type.
pub(crate) fn load(dtype: DType, buf: &str, idx: &str) -> String {
    match dtype {
        DType::Bool => format!("({buf}[{idx}] != 0u)"),
        DType::Float16 => format!("unpack2x16float({buf}[({idx}) / 2u])[({idx}) % 2u]"),
        // A bfloat16 is the high half of a float32.
        DType::BFloat16 => {
            format!("bitcast<f32>((({buf}[({idx}) / 2u] >> (16u * (({idx}) % 2u))) & 0xffffu) << 16u)")
        }
        _ => format!("{buf}[{idx}]"),
    }
}

/// Expression loading element `idx` of a buffer of WGSL `f16` elements as f32: float16's
/// packed layout seen by a kernel that enables f16 (devices with `SHADER_F16`).
fn load_f16(buf: &str, idx: &str) -> String {
    format!("f32({buf}[{idx}])")
}

/// Expression converting compute-type value `val` to the storage type (float16: a WGSL `f16`
/// element, in kernels that enable f16; not bfloat16).
pub(crate) fn store(dtype: DType, val: &str) -> String {
    match dtype {
        DType::Bool => format!("select(0u, 1u, {val})"),
        DType::Float16 => format!("f16({val})"),
        _ => val.to_string(),
    }
}

/// How a kernel reading packed words tells the float dtypes apart: 0 float32, 1 float16,
/// 2 bfloat16 (a `half` parameter of `nan_check.wgsl` and `check_finite_and_unscale.wgsl`).
pub(crate) fn half_mode(dtype: DType) -> u32 {
    match dtype {
        DType::Float16 => 1,
        DType::BFloat16 => 2,
        _ => 0,
    }
}

/// The `XS`/`XT`/`YS`/`YT` substitutions of a kernel that enables f16 and reads float16 as
/// WGSL `f16` elements (computing in f32), writing `out`.
pub(crate) fn f16_io_types(out: DType) -> Variant {
    let ys = if out == DType::Float16 { "f16" } else { storage(out) };
    vec![("XS", "f16".into()), ("XT", "f32".into()), ("YS", ys.into()), ("YT", compute(out).into())]
}

/// Loads of a table kernel for inputs of `dtype`: WGSL `f16` elements for float16 (the
/// kernels that enable f16), else [`load`].
pub(crate) fn table_load(dtype: DType, buf: &str, idx: &str) -> String {
    if dtype == DType::Float16 { load_f16(buf, idx) } else { load(dtype, buf, idx) }
}

/// u32 words a scalar parameter of `dtype` occupies.
pub(crate) fn param_words(dtype: DType) -> usize {
    if dtype == DType::Int64 { 2 } else { 1 }
}

/// Expression reading a scalar parameter of `dtype` starting at `params[word]`.
pub(crate) fn param(dtype: DType, word: usize) -> String {
    match dtype {
        DType::Bool => format!("(params[{word}] != 0u)"),
        DType::Int32 => format!("bitcast<i32>(params[{word}])"),
        DType::Int64 | DType::Float64 => format!("vec2<u32>(params[{word}], params[{}])", word + 1),
        DType::Float16 | DType::BFloat16 | DType::Float32 => format!("bitcast<f32>(params[{word}])"),
    }
}

/// The words of scalar `v` as a parameter of `dtype`.
pub(crate) fn scalar_words(dtype: DType, v: Scalar) -> Vec<u32> {
    match dtype {
        DType::Bool => vec![(v.to_f64() != 0.0) as u32],
        DType::Int32 => vec![v.to_i64() as i32 as u32],
        DType::Int64 | DType::Float64 => {
            let x = v.to_i64();
            vec![x as u32, (x >> 32) as u32]
        }
        DType::Float16 | DType::BFloat16 | DType::Float32 => vec![(v.to_f64() as f32).to_bits()],
    }
}

/// Errors for dtypes that cannot live on a GPU (float64).
pub(crate) fn check_gpu_dtype(op: &'static str, dtype: DType, place: Place) -> Result<()> {
    if dtype == DType::Float64 {
        return Err(Error::unsupported(
            op,
            dtype,
            format!("on {place}: WebGPU has no 64-bit floats; use float32, or the CPU place for float64"),
        ));
    }
    Ok(())
}

/// Variant-key bit of the matrix products' float16 variants (matmul, conv2d, for devices
/// with `SHADER_F16`): the operands are WGSL `f16` elements.
pub(crate) const F16_OPERANDS: u32 = 1 << 30;
/// Variant-key bit: the result is WGSL `f16` elements.
pub(crate) const F16_RESULT: u32 = 1 << 29;

/// The float16 variants of product key `base`: f16 operands and result; f16 operands into
/// f32 (a split product's slices, the input gradient's columns); f32 into an f16 result
/// (their `finish` or `col2im`).
pub(crate) fn f16_product_keys(base: u32) -> [u32; 3] {
    [base | F16_OPERANDS | F16_RESULT, base | F16_OPERANDS, base | F16_RESULT]
}

/// A product key without its float16 bits, the substitutions they add (`enable f16`) and
/// the WGSL element types of the operands and of the result.
pub(crate) fn f16_product_types(key: u32) -> (u32, Variant, &'static str, &'static str) {
    let element = |bit: u32| if key & bit != 0 { "f16" } else { "f32" };
    let enable = if key & (F16_OPERANDS | F16_RESULT) != 0 { vec![("ENABLE", "f16".into())] } else { Vec::new() };
    (key & !(F16_OPERANDS | F16_RESULT), enable, element(F16_OPERANDS), element(F16_RESULT))
}

/// The keys a product of `base` runs with, for operands and a result of the dtypes given:
/// its main entry's (into f32 slices when `split`) and its `finish`'s (from the slices).
pub(crate) fn product_keys(base: u32, operands: DType, result: DType, split: bool) -> (u32, u32) {
    let bit = |dtype: DType, bit: u32| if dtype == DType::Float16 { bit } else { 0 };
    let result_bit = bit(result, F16_RESULT);
    (base | bit(operands, F16_OPERANDS) | if split { 0 } else { result_bit }, base | result_bit)
}

/// Variant-key bit of a float kernel's float16 form (devices with `SHADER_F16`): its float
/// tensors are WGSL `f16` elements, the `{{E}}` of the template, each loaded into f32 and
/// each result rounded once as it is stored. The same bit as the products' [`F16_OPERANDS`].
pub(crate) const F16_ELEMENTS: u32 = F16_OPERANDS;

/// `keys` and their float16 forms.
pub(crate) fn with_f16_keys(keys: Vec<u32>) -> Vec<u32> {
    keys.iter().copied().chain(keys.iter().map(|k| k | F16_ELEMENTS)).collect()
}

/// The [`F16_ELEMENTS`] bit for tensors of `dtype`: set for float16 (which reaches a GPU
/// kernel only where the device has `SHADER_F16`; elsewhere it arrives as float32).
pub(crate) fn f16_bit(dtype: DType) -> u32 {
    if dtype == DType::Float16 { F16_ELEMENTS } else { 0 }
}

/// Key `key` without its float16 bit, and the `{{E}}` substitution (with `enable f16` in the
/// float16 form).
pub(crate) fn element_variant(key: u32) -> (u32, Variant) {
    if key & F16_ELEMENTS != 0 {
        (key & !F16_ELEMENTS, vec![("ENABLE", "f16".into()), ("E", "f16".into())])
    } else {
        (key, vec![("E", "f32".into())])
    }
}
