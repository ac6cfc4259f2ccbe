//! The CPU backend's shared primitives: typed host vectors, the strided elementwise
//! walkers, GEMM wrappers, the worker pool and the scratch heap. Each op family's CPU
//! kernel (the reference every GPU kernel is tested against) lives in the family's folder.

pub(crate) mod elementwise;
mod float;
pub(crate) mod heap;
pub(crate) mod matmul;
pub(crate) mod reduce;
pub(crate) mod workers;

pub(crate) use float::WinFloat;

pub(crate) use workers::{par_blocks_new, par_chunks_new};

pub use crate::host::CpuData;
pub(crate) use crate::host::{gpu_bytes, map_data, typed_ref, with_data};

/// A float kernel over CPU data: `float_kernel!(op; x = a, y = b => body)` runs `body` with
/// each name bound to the `Vec<f32>` (or `Vec<f64>`) inside its operand, all of one float
/// dtype, and wraps the `Vec` it returns; other dtypes are `op`'s typed error. `body` may use
/// `?` on `Option`s (a `None` reads as a dtype mismatch).
macro_rules! float_kernel {
    ($op:expr; $($v:ident = $x:expr),+ => $body:expr) => {{
        let f32_run = || -> Option<$crate::backend::cpu::CpuData> {
            $(let $v = $crate::backend::cpu::typed_ref::<f32>($x)?;)+
            Some($crate::backend::cpu::CpuData::F32($body))
        };
        let f64_run = || -> Option<$crate::backend::cpu::CpuData> {
            $(let $v = $crate::backend::cpu::typed_ref::<f64>($x)?;)+
            Some($crate::backend::cpu::CpuData::F64($body))
        };
        let dtype = [$($x.dtype()),+][0];
        f32_run().or_else(f64_run).ok_or_else(|| $crate::Error::unsupported($op, dtype, "on the CPU"))
    }};
}
pub(crate) use float_kernel;

/// Runs `f(i)` for `i in 0..n`, on both cores when the work is large enough to pay for it.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn par_chunks_mut<T: Send>(out: &mut [T], min_chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    use rayon::prelude::*;
    if out.len() <= min_chunk {
        f(0, out);
        return;
    }
    let chunk = out.len().div_ceil(rayon::current_num_threads() * 4).max(min_chunk);
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i * chunk, c));
}

#[cfg(target_arch = "wasm32")]
pub(crate) fn par_chunks_mut<T: Send>(out: &mut [T], _min_chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    f(0, out);
}
