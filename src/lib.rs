//! # dygraph
//!
//! PaddlePaddle's dynamic-graph ("DyGraph") deep learning in Rust. Every eager op runs as a
//! WGSL compute shader through `wgpu` (Vulkan, Metal, DX12, WebGPU in the browser); a CPU
//! backend serves `Place::Cpu` and is the reference every GPU kernel is tested against;
//! gradients are computed where the tensors live.
//!
//! ```no_run
//! use dygraph::{self as paddle, DType};
//! # fn main() -> paddle::Result<()> {
//! paddle::seed(0);
//! let a = paddle::randn(&[4, 2])?;
//! let b = paddle::arange(1.0, 3.0, 1.0, DType::Float32)?;
//! let c = &a + &b;
//! let d = paddle::matmul(&a, &b, false, false)?;
//! println!("{c}\n{d}");
//! # Ok(()) }
//! ```

/// The README's Rust blocks, compiled and run as doctests (with the `mpi` feature, which
/// its data-parallel block needs; test.sh enables it), so the first code a newcomer copies
/// cannot rot.
#[cfg(all(doctest, feature = "mpi", not(target_arch = "wasm32")))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// Lets `#[derive(Layer)]` name `::dygraph` inside this crate too.
extern crate self as dygraph;

#[macro_use]
mod builder;

pub mod amp;
pub mod autograd;
mod backend;
mod device;
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub mod distributed;
mod dtype;
mod error;
mod flags;
pub mod hapi;
mod host;
pub mod io;
pub mod jit;
pub mod metric;
pub mod nn;
pub mod ops;
pub mod optimizer;
mod place;
pub mod profiler;
mod random;
/// CPU shadow mode: every GPU op rerun on the CPU and compared (`FLAGS_shadow`).
pub mod shadow {
    pub use crate::ops::registry::dispatch::shadow::{Replay, checked_ops, replay};
}
mod shape;
pub mod static_;
mod tensor;
pub mod testing;
pub mod vision;

pub use autograd::{GradOptions, grad};
pub use backend::gpu::{
    GpuInfo, MemoryStats, dispatch_count, empty_cache, gpu_count, gpu_info, init_gpu, memory_stats, reset_peak_memory,
    set_memory_limit, submit_count, sync,
};
pub use device::{current_place, get_device, guard, set_device, set_place};
pub use dtype::{DType, Element, Scalar};
pub use error::{Error, Result};
pub use flags::{get_flags, set_flags};
pub use hapi::Model;
pub use io::{load, save};
pub use ops::combine::{
    TensorOrScalar, diff, lerp, masked_fill, meshgrid, repeat_interleave, repeat_interleave_by, roll, unbind,
};
pub use ops::count::{Unique, bincount, histogram, masked_select, nonzero, unique};
pub use ops::creation::{
    TensorData, arange, arange_on, eye, full, full_like, full_on, linspace, ones, ones_like, ones_on, to_tensor,
    to_tensor_on, zeros, zeros_like, zeros_on,
};
pub use ops::einsum::einsum;
pub use ops::elementwise::*;
pub use ops::index::*;
pub use ops::indexing::Idx;
pub use ops::linalg::{NormKind, kron, norm, outer};
pub use ops::logic::{all, allclose, any, isclose};
pub use ops::matmul::*;
pub use ops::nn::*;
pub use ops::overload::{PowArg, pow};
pub use ops::random::*;
pub use ops::reduce::*;
pub use ops::sample::{bernoulli, multinomial};
pub use ops::scan::{cumprod, cumprod_with, cumsum, cumsum_with};
pub use ops::scatter::{index_add, put_along_axis, scatter, scatter_nd, scatter_nd_add};
pub use ops::shape::*;
pub use ops::sort::{argsort, sort, topk};
pub use ops::tri::{tril, triu};
pub use place::Place;
pub use random::*;
pub use shape::{IntoShape, Shape, broadcast_shapes};
pub use tensor::TensorMeta;
pub use tensor::grad_mode::{enable_grad, is_grad_enabled, no_grad, no_grad_guard};
pub use tensor::live_tensors;
pub use tensor::{NdArray, PrintOptions, Tensor, set_printoptions};
