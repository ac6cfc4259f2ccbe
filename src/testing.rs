//! Hooks for the crate's own test suites: the shader sources and kernel lists the shader
//! tests validate with naga (every kernel variant, and the kernels fusion generates) and compare against the files on disk. Not part of the API a model
//! is written against; hidden from the documentation.
#![doc(hidden)]

pub use crate::backend::gpu::{all_shader_variants, kernel_files, shader_files};
pub use crate::ops::fused::fused_kernel_source;
pub use crate::ops::matmul_epilogue::matmul_epilogue_source;
pub use crate::ops::nn::conv_epilogue::conv2d_epilogue_source;
pub use crate::ops::reduce_prologue::reduce_prologue_source;
pub use crate::ops::update::merged_kernel_files;
