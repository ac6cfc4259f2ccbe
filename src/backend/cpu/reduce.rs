//! CPU reductions over the middle axis of an (outer, R, inner) view, in parallel over the
//! outputs, or over chunks of R when there are few outputs.

#[cfg(not(target_arch = "wasm32"))]
use rayon::prelude::*;

/// `out[o, i] = fold(init, x[o, r, i] for r)` with `step`, merging partial folds with `merge`.
pub(crate) fn reduce<T: Copy + Sync, A: Copy + Send + Sync + Default>(
    x: &[T],
    (outer, len, inner): (usize, usize, usize),
    init: A,
    step: impl Fn(A, T) -> A + Sync,
    merge: impl Fn(A, A) -> A + Sync,
) -> Vec<A> {
    let outputs = outer * inner;
    #[cfg(not(target_arch = "wasm32"))]
    if outputs < 8 && len >= 1 << 16 {
        // Few outputs, long rows: split each row across the cores.
        return (0..outputs)
            .map(|k| {
                let (o, i) = (k / inner, k % inner);
                (0..len)
                    .into_par_iter()
                    .with_min_len(1 << 14)
                    .fold(|| init, |a, r| step(a, x[(o * len + r) * inner + i]))
                    .reduce(|| init, &merge)
            })
            .collect();
    }
    let _ = &merge;
    let mut out = vec![A::default(); outputs];
    super::par_chunks_mut(&mut out, (1 << 15) / len.max(1) + 1, |start, chunk| {
        for (j, o_val) in chunk.iter_mut().enumerate() {
            let k = start + j;
            let (o, i) = (k / inner, k % inner);
            let mut a = init;
            let base = o * len * inner + i;
            for r in 0..len {
                a = step(a, x[base + r * inner]);
            }
            *o_val = a;
        }
    });
    out
}
