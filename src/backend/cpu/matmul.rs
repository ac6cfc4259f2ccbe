//! CPU matrix multiply through the `gemm` crate (SIMD micro-kernels, multi-threaded),
//! batched over broadcast batch dimensions.

use gemm::Parallelism;

/// One operand of a batched matmul: a matrix at `offset + b·batch_stride` with row and
/// column strides (transposes are just swapped strides).
#[derive(Clone, Copy)]
pub(crate) struct MatView {
    pub rs: isize,
    pub cs: isize,
}

fn parallelism(work: usize) -> Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    if work >= 1 << 15 {
        return Parallelism::Rayon(0);
    }
    let _ = work;
    Parallelism::None
}

/// `c[b] = a[b] · b[b]` for each batch entry `b` (offsets into `a`/`bm` given per batch);
/// `c` is contiguous `[batches, m, n]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn batched_matmul<T: Copy + Send + Sync + Default + 'static>(
    a: &[T],
    av: MatView,
    a_offsets: &[usize],
    bm: &[T],
    bv: MatView,
    b_offsets: &[usize],
    (m, n, k): (usize, usize, usize),
    one: T,
    zero: T,
) -> Vec<T> {
    let batches = a_offsets.len();
    let mut c = vec![T::default(); batches * m * n];
    if m == 0 || n == 0 {
        return c;
    }
    let run = |ci: &mut [T], bi: usize, par: Parallelism| {
        // SAFETY: the offsets and strides address elements inside `a` and `bm` (checked by
        // the caller's shape logic), and `ci` is an exclusive m×n row-major block.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                ci.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr().add(a_offsets[bi]),
                av.cs,
                av.rs,
                bm.as_ptr().add(b_offsets[bi]),
                bv.cs,
                bv.rs,
                zero,
                one,
                false,
                false,
                false,
                par,
            )
        }
    };
    let per = m * n * k;
    #[cfg(not(target_arch = "wasm32"))]
    if batches > 1 && per < 1 << 18 {
        use rayon::prelude::*;
        c.par_chunks_mut(m * n).enumerate().for_each(|(bi, ci)| run(ci, bi, Parallelism::None));
        return c;
    }
    for (bi, ci) in c.chunks_mut(m * n).enumerate() {
        run(ci, bi, parallelism(per));
    }
    c
}
