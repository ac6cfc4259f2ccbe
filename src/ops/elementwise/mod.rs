//! Elementwise ops. Each op is one row of a table (`unary.rs`, `binary.rs`): its name, CPU
//! scalar closures, WGSL expressions and backward rule. The tables drive the CPU kernels,
//! the GPU shader variants, the shader-validation test and the GPU-vs-CPU tests.

pub(crate) mod binary;
pub(crate) mod cast;
mod info;
pub(crate) mod ternary;
pub(crate) mod unary;

pub use binary::*;
pub use cast::cast;
pub use info::{OpInfo, apply_elementwise, elementwise_ops};
pub use ternary::where_;
pub use unary::*;

pub(crate) use binary::BINARY_OPS;
pub(crate) use unary::UNARY_OPS;

use crate::backend::gpu::Variant;
use crate::ops::registry::op::OpHeader;
use crate::ops::wgsl;
use crate::{DType, Error};

/// A table row's WGSL expressions: `f32` for float32 and float16 (and for int32 where `i32`
/// is not set), and the int64 and bool ones where the row has GPU kernels for those dtypes.
pub(crate) struct GpuExprs {
    pub f32: &'static str,
    pub i32: Option<&'static str>,
    pub i64: Option<&'static str>,
    pub bool: Option<&'static str>,
}

impl GpuExprs {
    /// The expressions for float32, int32, int64 and bool.
    pub(crate) const fn new(
        f32: &'static str,
        i32: Option<&'static str>,
        i64: Option<&'static str>,
        bool: Option<&'static str>,
    ) -> Self {
        GpuExprs { f32, i32, i64, bool }
    }

    /// The expression for `dtype` of a row with float and/or int closures.
    fn get(&self, dtype: DType, float: bool, int: bool) -> Option<&'static str> {
        match dtype {
            DType::Float32 | DType::Float16 => float.then_some(self.f32),
            DType::Int32 => int.then(|| self.i32.unwrap_or(self.f32)),
            DType::Int64 => self.i64,
            DType::Bool => self.bool,
            _ => None,
        }
    }
}

/// The dtypes of the families a row computes (float16 and bfloat16 run through float32).
fn family_dtypes(float: bool, int: bool, boolean: bool) -> Vec<DType> {
    let mut d = Vec::new();
    if float {
        d.extend([DType::Float16, DType::BFloat16, DType::Float32, DType::Float64]);
    }
    if int {
        d.extend([DType::Int32, DType::Int64]);
    }
    if boolean {
        d.push(DType::Bool);
    }
    d
}

/// The dtypes a table row can have a GPU variant for. float16's variant enables f16 (for
/// devices with `SHADER_F16`; elsewhere float16 computes through float32, as bfloat16
/// always does).
const GPU_DTYPES: [DType; 5] = [DType::Float32, DType::Float16, DType::Int32, DType::Int64, DType::Bool];

/// What the unary and binary tables share: a row's position (its GPU variant key), its
/// dtypes, its WGSL expression and the substitutions of one shader variant.
pub(crate) trait TableRow: OpHeader + Sync + 'static {
    /// Position in the table.
    fn id(&self) -> u32;
    /// Dtypes the op supports.
    fn dtypes(&self) -> Vec<DType>;
    /// The WGSL expression for `dtype`, where the row has a GPU kernel for it.
    fn gpu_expr(&self, dtype: DType) -> Option<&'static str>;
    /// The result's dtype for inputs of `dtype`.
    fn out_dtype(&self, dtype: DType) -> DType;
    /// The shader's loads, stores and parameters for inputs of `dtype`.
    fn accessors(&self, dtype: DType, out: DType) -> Variant;

    /// The shader substitutions for `dtype` (only requested where `gpu_expr` has one). The
    /// float16 variant stores WGSL `f16` elements and computes in f32, rounding each result
    /// once.
    fn variant(&self, dtype: DType) -> Variant {
        let out = self.out_dtype(dtype);
        let mut v = if dtype == DType::Float16 {
            let mut v = vec![("ENABLE", "f16".to_string())];
            v.extend(wgsl::f16_io_types(out));
            v
        } else {
            wgsl::io_types(dtype, out)
        };
        v.push(("EXPR", self.gpu_expr(dtype).unwrap_or_default().into()));
        v.extend(self.accessors(dtype, out));
        v
    }

    /// The variant key of `dtype`: the row's id and the dtype's code.
    fn key(&self, dtype: DType) -> u32 {
        self.id() * 8 + dtype.code()
    }

    /// The typed error for a dtype the row does not support.
    fn unsupported(&self, dtype: DType) -> Error {
        Error::unsupported(self.name(), dtype, format!("(supported: {:?})", self.dtypes()))
    }
}

/// The [`TableRow`] methods that read the fields every row struct has: `id`, the `float` and
/// `int` closures, `out_bool` and the `gpu` expressions.
macro_rules! row_fields {
    () => {
        fn id(&self) -> u32 {
            self.id
        }

        fn gpu_expr(&self, dtype: DType) -> Option<&'static str> {
            self.gpu.get(dtype, self.float.is_some(), self.int.is_some())
        }

        fn out_dtype(&self, dtype: DType) -> DType {
            if self.out_bool { DType::Bool } else { dtype }
        }
    };
}
use row_fields;

/// Every variant key of a table (a `Kernel`'s `keys`).
fn table_keys<R: TableRow>(rows: &[&R]) -> Vec<u32> {
    rows.iter().flat_map(|r| GPU_DTYPES.iter().filter(|&&t| r.gpu_expr(t).is_some()).map(|&t| r.key(t))).collect()
}

/// The substitutions behind `key` (a `Kernel`'s `variant`).
fn table_variant<R: TableRow>(rows: &[&R], key: u32) -> Variant {
    rows[(key / 8) as usize].variant(DType::from_code(key % 8))
}

/// Variant keys of a vec4 kernel: the ids of the rows with a float32 expression returning
/// float32.
fn vec4_keys<R: TableRow>(rows: &[&R]) -> Vec<u32> {
    rows.iter().filter(|r| vec4_row(**r)).map(|r| r.id()).collect()
}

/// The substitution of a vec4 kernel's variant `key` (a row id).
fn vec4_variant<R: TableRow>(rows: &[&R], key: u32) -> Variant {
    vec![("EXPR", rows[key as usize].gpu_expr(DType::Float32).unwrap_or_default().into())]
}

/// True when a row has a vec4 variant.
fn vec4_row<R: TableRow>(r: &R) -> bool {
    r.gpu_expr(DType::Float32).is_some() && r.out_dtype(DType::Float32) == DType::Float32
}

/// Pads an op's parameter list to the two slots the kernels have.
pub(crate) fn pad2(p: &[f64]) -> [f64; 2] {
    [p.first().copied().unwrap_or(0.0), p.get(1).copied().unwrap_or(0.0)]
}
