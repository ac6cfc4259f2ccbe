//! Elementwise ops. Each op is one row of a table (`unary.rs`, `binary.rs`): its name, CPU
//! scalar closures, WGSL expressions and backward rule. The tables drive the CPU kernels,
//! the GPU shader variants, the shader-validation test and the GPU-vs-CPU tests.

pub(crate) mod binary;
pub(crate) mod cast;
pub(crate) mod ternary;
pub(crate) mod unary;

pub use binary::*;
pub use cast::cast;
pub use ternary::where_;
pub use unary::*;

pub(crate) use binary::BINARY_OPS;
pub(crate) use unary::UNARY_OPS;

/// Pads an op's parameter list to the two slots the kernels have.
pub(crate) fn pad2(p: &[f64]) -> [f64; 2] {
    [p.first().copied().unwrap_or(0.0), p.get(1).copied().unwrap_or(0.0)]
}
