//! Hooks for the crate's own test suites: the shader sources and kernel lists the shader
//! tests validate with naga (every kernel variant, and the kernels fusion generates) and compare against the files on disk. Not part of the API a model
//! is written against; hidden from the documentation.
#![doc(hidden)]

pub use crate::backend::gpu::shader_files;

/// Every (kernel file, variant, expanded source) the library can dispatch, with the
/// in-place forms execution plans may use.
pub fn all_shader_variants() -> crate::Result<Vec<(String, String)>> {
    crate::ops::registry();
    crate::backend::gpu::all_shader_variants()
}

/// The kernels' files, so a test can check that every file is used by some kernel.
pub fn kernel_files() -> Vec<&'static str> {
    crate::ops::registry();
    crate::backend::gpu::kernel_files()
}
/// Whether the WGSL compute shader `source` (entry `main`) compiles on `gpu:index`: the
/// validation error when not. Probes what the device's reported features allow.
#[cfg(not(target_arch = "wasm32"))]
pub fn gpu_compiles(index: usize, source: &str) -> crate::Result<std::result::Result<(), String>> {
    Ok(crate::backend::gpu::context(index)?.compiles(source))
}

pub use crate::ops::fused::fused_kernel_source;
pub use crate::ops::matmul::epilogue::matmul_epilogue_source;
pub use crate::ops::nn::conv::epilogue::conv2d_epilogue_source;
pub use crate::ops::reduce_prologue::reduce_prologue_source;
pub use crate::ops::update::merged_kernel_files;
