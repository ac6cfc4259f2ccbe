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
    super::par_chunks_new(outputs, A::default(), (1 << 15) / len.max(1) + 1, |start, chunk| {
        if inner == 1 {
            for (j, o_val) in chunk.iter_mut().enumerate() {
                *o_val = fold_lanes(&x[(start + j) * len..][..len], init, &step, &merge);
            }
            return;
        }
        // Strided rows: fold whole contiguous slices of `inner` outputs at a time, so the
        // loads are sequential and the accumulators independent (vectorisable).
        let (mut k, mut rest) = (start, chunk);
        while !rest.is_empty() {
            let (o, i0) = (k / inner, k % inner);
            let seg = (inner - i0).min(rest.len());
            let (acc, tail) = rest.split_at_mut(seg);
            acc.fill(init);
            for r in 0..len {
                for (a, &v) in acc.iter_mut().zip(&x[(o * len + r) * inner + i0..][..seg]) {
                    *a = step(*a, v);
                }
            }
            k += seg;
            rest = tail;
        }
    })
}

/// Folds a contiguous row in eight interleaved lanes merged in a fixed order: the same result
/// for the same input every time, with independent accumulators the compiler can vectorise.
fn fold_lanes<T: Copy, A: Copy>(row: &[T], init: A, step: &impl Fn(A, T) -> A, merge: &impl Fn(A, A) -> A) -> A {
    const LANES: usize = 8;
    if row.len() < 4 * LANES {
        return row.iter().fold(init, |a, &v| step(a, v));
    }
    let mut acc = [init; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = step(*a, v);
        }
    }
    let merged = acc.into_iter().reduce(merge).unwrap_or(init);
    chunks.remainder().iter().fold(merged, |a, &v| step(a, v))
}
