//! Strided iteration over one to three operands, in parallel chunks for large outputs.
//! Elementwise ops, broadcasting, `where` and every data-movement op run on this.

use crate::shape::collapse;

/// Offsets of `K` operands for every element of `shape`, in row-major order, starting at
/// linear index `start`, calling `f(i, offsets)` for `len` elements.
fn walk<const K: usize>(
    shape: &[usize],
    strides: &[Vec<isize>; K],
    base: [isize; K],
    start: usize,
    len: usize,
    mut f: impl FnMut(usize, [isize; K]),
) {
    walk_runs(shape, strides, base, start, len, |i, off, run, step| {
        let mut o = off;
        for j in 0..run {
            f(i + j, o);
            for k in 0..K {
                o[k] += step[k];
            }
        }
    });
}

/// [`walk`] by innermost runs: `f(i, offsets, run, steps)` covers elements `i..i + run`,
/// operand `k` at `offsets[k] + j · steps[k]`.
fn walk_runs<const K: usize>(
    shape: &[usize],
    strides: &[Vec<isize>; K],
    base: [isize; K],
    start: usize,
    len: usize,
    mut f: impl FnMut(usize, [isize; K], usize, [isize; K]),
) {
    let nd = shape.len();
    if len == 0 {
        // Nothing to visit; also keeps a zero-size dimension out of the `%` below.
        return;
    }
    if nd == 0 {
        f(start, base, 1, [0; K]);
        return;
    }
    // Coordinates of `start`.
    let mut coord = vec![0usize; nd];
    let mut rem = start;
    for d in (0..nd).rev() {
        coord[d] = rem % shape[d];
        rem /= shape[d];
    }
    let mut off = base;
    for k in 0..K {
        for d in 0..nd {
            off[k] += coord[d] as isize * strides[k][d];
        }
    }
    let last = nd - 1;
    let inner = shape[last];
    let step: [isize; K] = std::array::from_fn(|k| strides[k][last]);
    let mut i = start;
    let end = start + len;
    while i < end {
        let run = (inner - coord[last]).min(end - i);
        f(i, off, run, step);
        i += run;
        if i >= end {
            break;
        }
        // Back to the start of the row, then carry into the outer dimensions.
        for k in 0..K {
            off[k] -= step[k] * coord[last] as isize;
        }
        coord[last] = 0;
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            coord[d] += 1;
            for k in 0..K {
                off[k] += strides[k][d];
            }
            if coord[d] < shape[d] {
                break;
            }
            for k in 0..K {
                off[k] -= strides[k][d] * shape[d] as isize;
            }
            coord[d] = 0;
        }
    }
}

/// Outputs below this size run on the calling thread.
pub(crate) const PAR_MIN: usize = 1 << 15;

/// `out[i] = f(a[offset_a(i)])` over `shape` with strides `sa` (from base `oa`).
pub(crate) fn map_strided<A: Copy + Sync, Y: Copy + Send + Sync + Default>(
    a: &[A],
    shape: &[usize],
    sa: &[isize],
    oa: usize,
    f: impl Fn(A) -> Y + Sync,
) -> Vec<Y> {
    let n: usize = shape.iter().product();
    let (shape, st) = collapse(shape, &[sa.to_vec()]);
    let st: [Vec<isize>; 1] = [st[0].clone()];
    if shape.len() == 1 && st[0][0] == 1 {
        let src = &a[oa..oa + n];
        return super::par_chunks_new(n, Y::default(), PAR_MIN, |start, chunk| {
            let len = chunk.len();
            for (o, &x) in chunk.iter_mut().zip(&src[start..start + len]) {
                *o = f(x);
            }
        });
    }
    super::par_chunks_new(n, Y::default(), PAR_MIN, |start, chunk| {
        let len = chunk.len();
        walk(&shape, &st, [oa as isize], start, len, |i, [ia]| {
            chunk[i - start] = f(a[ia as usize]);
        });
    })
}

/// `out[i] = f(a[..], b[..])` over `shape` with per-operand strides (0 = broadcast).
pub(crate) fn zip_strided<A: Copy + Sync, B: Copy + Sync, Y: Copy + Send + Sync + Default>(
    a: &[A],
    sa: &[isize],
    b: &[B],
    sb: &[isize],
    shape: &[usize],
    f: impl Fn(A, B) -> Y + Sync,
) -> Vec<Y> {
    let n: usize = shape.iter().product();
    let (shape, st) = collapse(shape, &[sa.to_vec(), sb.to_vec()]);
    let st: [Vec<isize>; 2] = [st[0].clone(), st[1].clone()];
    if shape.len() == 1 && st[0][0] == 1 && st[1][0] == 1 {
        return super::par_chunks_new(n, Y::default(), PAR_MIN, |start, chunk| {
            let end = start + chunk.len();
            for ((o, &x), &y) in chunk.iter_mut().zip(&a[start..end]).zip(&b[start..end]) {
                *o = f(x, y);
            }
        });
    }
    super::par_chunks_new(n, Y::default(), PAR_MIN, |start, chunk| {
        let len = chunk.len();
        walk(&shape, &st, [0, 0], start, len, |i, [ia, ib]| {
            chunk[i - start] = f(a[ia as usize], b[ib as usize]);
        });
    })
}

/// A kernel over one innermost run of a binary op: `(a, a_offset, a_step, b, b_offset,
/// b_step, out)`; see [`zip_run`].
pub(crate) type RunFn<A, B, Y> = fn(&[A], usize, isize, &[B], usize, isize, &mut [Y]);

/// `out[j] = f(a[oa + j·sa], b[ob + j·sb])`, with loops of their own for the contiguous and
/// broadcast-scalar cases so that they vectorise once `f` is inlined.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn zip_run<A: Copy, B: Copy, Y>(
    a: &[A],
    oa: usize,
    sa: isize,
    b: &[B],
    ob: usize,
    sb: isize,
    out: &mut [Y],
    f: impl Fn(A, B) -> Y,
) {
    let n = out.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in out.iter_mut().zip(&a[oa..oa + n]).zip(&b[ob..ob + n]) {
                *o = f(x, y);
            }
        }
        (1, 0) => {
            let y = b[ob];
            for (o, &x) in out.iter_mut().zip(&a[oa..oa + n]) {
                *o = f(x, y);
            }
        }
        (0, 1) => {
            let x = a[oa];
            for (o, &y) in out.iter_mut().zip(&b[ob..ob + n]) {
                *o = f(x, y);
            }
        }
        _ => {
            for (j, o) in out.iter_mut().enumerate() {
                let (ia, ib) = (oa as isize + j as isize * sa, ob as isize + j as isize * sb);
                *o = f(a[ia as usize], b[ib as usize]);
            }
        }
    }
}

/// [`zip_strided`] with a kernel called once per innermost run rather than per element.
pub(crate) fn zip_strided_runs<A: Sync, B: Sync, Y: Copy + Send + Sync + Default>(
    a: &[A],
    sa: &[isize],
    b: &[B],
    sb: &[isize],
    shape: &[usize],
    run: RunFn<A, B, Y>,
) -> Vec<Y> {
    let n: usize = shape.iter().product();
    let (shape, st) = collapse(shape, &[sa.to_vec(), sb.to_vec()]);
    let st: [Vec<isize>; 2] = [st[0].clone(), st[1].clone()];
    super::par_chunks_new(n, Y::default(), PAR_MIN, |start, chunk| {
        walk_runs(&shape, &st, [0, 0], start, chunk.len(), |i, [ia, ib], len, [da, db]| {
            run(a, ia as usize, da, b, ib as usize, db, &mut chunk[i - start..i - start + len]);
        });
    })
}

/// `out[i] = f(a[..], b[..], c[..])` over `shape` with per-operand strides.
pub(crate) fn zip3_strided<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, Y: Copy + Send + Sync + Default>(
    a: (&[A], &[isize]),
    b: (&[B], &[isize]),
    c: (&[C], &[isize]),
    shape: &[usize],
    f: impl Fn(A, B, C) -> Y + Sync,
) -> Vec<Y> {
    let n: usize = shape.iter().product();
    let (shape, st) = collapse(shape, &[a.1.to_vec(), b.1.to_vec(), c.1.to_vec()]);
    let st: [Vec<isize>; 3] = [st[0].clone(), st[1].clone(), st[2].clone()];
    super::par_chunks_new(n, Y::default(), PAR_MIN, |start, chunk| {
        let len = chunk.len();
        walk(&shape, &st, [0, 0, 0], start, len, |i, [ia, ib, ic]| {
            chunk[i - start] = f(a.0[ia as usize], b.0[ib as usize], c.0[ic as usize]);
        });
    })
}

/// Writes `src` (contiguous, `shape`) into `dst` at `offset + Σ c·strides`.
pub(crate) fn scatter_strided<T: Copy>(dst: &mut [T], offset: usize, strides: &[isize], src: &[T], shape: &[usize]) {
    let n: usize = shape.iter().product();
    let st: [Vec<isize>; 1] = [strides.to_vec()];
    walk(shape, &st, [offset as isize], 0, n, |i, [o]| {
        dst[o as usize] = src[i];
    });
}

/// `out[i] = f(a[i])`, in parallel chunks for large inputs.
pub(crate) fn par_map<A: Copy + Sync, Y: Copy + Send + Sync + Default>(a: &[A], f: impl Fn(A) -> Y + Sync) -> Vec<Y> {
    super::par_chunks_new(a.len(), Y::default(), PAR_MIN, |start, chunk| {
        let len = chunk.len();
        for (o, &x) in chunk.iter_mut().zip(&a[start..start + len]) {
            *o = f(x);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_matches_naive_indexing() {
        // A transposed 3x4 view of a 4x3 buffer, starting mid-way.
        let a: Vec<i32> = (0..12).collect();
        let out = map_strided(&a, &[3, 4], &[1, 3], 0, |x| x);
        assert_eq!(out, vec![0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]);
        // Broadcast add of [2,1] and [3].
        let b = zip_strided(&[10, 20], &[1, 0], &[1, 2, 3], &[0, 1], &[2, 3], |x: i32, y: i32| x + y);
        assert_eq!(b, vec![11, 12, 13, 21, 22, 23]);
        // Flip via negative stride.
        let f = map_strided(&a, &[12], &[-1], 11, |x| x);
        assert_eq!(f, (0..12).rev().collect::<Vec<_>>());
    }
}
