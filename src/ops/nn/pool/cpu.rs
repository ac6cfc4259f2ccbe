//! CPU 2-D pooling (NCHW, every `h × w` plane independent): max (with argmax indices) and
//! average, fixed-window or adaptive, and their backward passes. Parallel over planes.

use crate::backend::cpu::WinFloat;
use crate::backend::cpu::workers::{build_chunk_pairs, zeroed_items};

/// Geometry of one pooling: `n · c` input planes of `h × w`, output planes `oh × ow`.
/// Fixed windows are `kh × kw` moved by `(sh, sw)` from `(-pt, -pl)` and clipped to the
/// input; adaptive windows are Paddle's `[floor(i·in/out), ceil((i+1)·in/out))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, dygraph_derive::Attrs)]
pub(crate) struct PoolGeom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub pt: usize,
    pub pl: usize,
    /// Bottom and right padding (the padded input non-exclusive averages divide within).
    pub pb: usize,
    pub pr: usize,
    pub adaptive: bool,
    /// Average over the in-input part of the window only (else over `kh · kw`).
    pub exclusive: bool,
}

/// `[start, end)` of one output's window along one axis.
type Window = (usize, usize);

/// Window `[start, end)` of output `o` along one axis.
fn window(o: usize, len: usize, out: usize, k: usize, s: usize, p: usize, adaptive: bool) -> (usize, usize) {
    if adaptive {
        return (o * len / out, ((o + 1) * len).div_ceil(out));
    }
    let start = (o * s) as isize - p as isize;
    let end = (start + k as isize).min(len as isize);
    (start.max(0) as usize, end.max(0) as usize)
}

impl PoolGeom {
    /// Whether the windows tile the input: each input element in exactly one window
    /// (stride = kernel, no padding, not adaptive, a whole number of windows per axis).
    pub fn tiles_input(&self) -> bool {
        !self.adaptive
            && (self.kh, self.kw) == (self.sh, self.sw)
            && self.pt + self.pl + self.pb + self.pr == 0
            && (self.h, self.w) == (self.oh * self.kh, self.ow * self.kw)
    }

    /// Rows `[start, end)` of output row `oy`.
    pub fn rows(&self, oy: usize) -> (usize, usize) {
        window(oy, self.h, self.oh, self.kh, self.sh, self.pt, self.adaptive)
    }
    /// Columns `[start, end)` of output column `ox`.
    pub fn cols(&self, ox: usize) -> (usize, usize) {
        window(ox, self.w, self.ow, self.kw, self.sw, self.pl, self.adaptive)
    }
    /// Every output row's and column's window, computed once per call rather than per plane.
    pub fn windows(&self) -> (Vec<Window>, Vec<Window>) {
        ((0..self.oh).map(|oy| self.rows(oy)).collect(), (0..self.ow).map(|ox| self.cols(ox)).collect())
    }
    /// The divisor of output `(oy, ox)` of an average pool: the in-input window area
    /// (exclusive or adaptive), else the window's area inside the padded input (Paddle and
    /// PyTorch: a `ceil_mode` window past the bottom/right padding counts only that part).
    pub fn count(&self, oy: usize, ox: usize) -> usize {
        if self.exclusive || self.adaptive {
            let (r0, r1) = self.rows(oy);
            let (c0, c1) = self.cols(ox);
            (r1 - r0) * (c1 - c0)
        } else {
            let padded = |o: usize, len: usize, k: usize, s: usize, p: usize, pad_end: usize| {
                let start = (o * s) as isize - p as isize;
                ((start + k as isize).min((len + pad_end) as isize) - start) as usize
            };
            padded(oy, self.h, self.kh, self.sh, self.pt, self.pb)
                * padded(ox, self.w, self.kw, self.sw, self.pl, self.pr)
        }
    }
    /// Number of planes (`n · c`).
    pub fn planes(&self) -> usize {
        self.n * self.c
    }
    pub fn in_plane(&self) -> usize {
        self.h * self.w
    }
    pub fn out_plane(&self) -> usize {
        self.oh * self.ow
    }
    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.oh, self.ow]
    }
}

/// Max pooling: the maxima and their flat indices within each `h × w` plane. The first
/// maximum in row-major window order wins ties; a NaN wins over numbers.
pub(crate) fn max_pool<T: WinFloat>(x: &[T], g: &PoolGeom) -> (Vec<T>, Vec<i32>) {
    let (ip, op) = (g.in_plane(), g.out_plane());
    let (rows, cols) = g.windows();
    let halving =
        !g.adaptive && (g.kh, g.kw, g.sh, g.sw, g.pt, g.pl) == (2, 2, 2, 2, 0, 0) && 2 * g.oh <= g.h && 2 * g.ow <= g.w;
    build_chunk_pairs(
        g.planes() * op,
        (T::ZERO, 0i32),
        op,
        || (),
        |p, vo, io, _| {
            let plane = &x[p * ip..(p + 1) * ip];
            if halving {
                return max_pool_2x2(plane, g, vo, io);
            }
            for (oy, &(r0, r1)) in rows.iter().enumerate() {
                let (vrow, irow) = (&mut vo[oy * g.ow..(oy + 1) * g.ow], &mut io[oy * g.ow..(oy + 1) * g.ow]);
                for ((v_out, i_out), &(c0, c1)) in vrow.iter_mut().zip(irow.iter_mut()).zip(&cols) {
                    let mut bi = r0 * g.w + c0;
                    let mut best = plane[bi];
                    for iy in r0..r1 {
                        let base = iy * g.w;
                        for (ix, &v) in plane[base + c0..base + c1].iter().enumerate() {
                            if v > best || (v.is_nan() && !best.is_nan()) {
                                best = v;
                                bi = base + c0 + ix;
                            }
                        }
                    }
                    *v_out = best;
                    *i_out = bi as i32;
                }
            }
        },
    )
}

/// The first maximum of `(a, ia)` then `(b, ib)`: `b` when it is greater, or the first NaN.
/// Without branches: which one wins is data-dependent, so the loop below vectorises.
#[inline(always)]
fn first_max<T: WinFloat>((a, ia): (T, i32), (b, ib): (T, i32)) -> (T, i32) {
    let take = (b > a) | (b.is_nan() & !a.is_nan());
    (if take { b } else { a }, if take { ib } else { ia })
}

/// One plane of the 2×2, stride-2, unpadded max pooling (every window whole): each window's
/// two row pairs, then the pairs' winners, which picks the same element as the row-major
/// scan (the first maximum, the first NaN).
fn max_pool_2x2<T: WinFloat>(plane: &[T], g: &PoolGeom, vo: &mut [T], io: &mut [i32]) {
    let (w, ow) = (g.w, g.ow);
    for (oy, (vrow, irow)) in vo.chunks_exact_mut(ow).zip(io.chunks_exact_mut(ow)).enumerate() {
        let top = 2 * oy * w;
        let (r0, r1) = (&plane[top..top + 2 * ow], &plane[top + w..top + w + 2 * ow]);
        let (t, wi) = (top as i32, w as i32);
        let pairs = r0.chunks_exact(2).zip(r1.chunks_exact(2));
        for (c, ((v_out, i_out), (p0, p1))) in (0i32..).step_by(2).zip(vrow.iter_mut().zip(irow.iter_mut()).zip(pairs))
        {
            let upper = first_max((p0[0], t + c), (p0[1], t + c + 1));
            let lower = first_max((p1[0], t + wi + c), (p1[1], t + wi + c + 1));
            (*v_out, *i_out) = first_max(upper, lower);
        }
    }
}

/// Average pooling.
pub(crate) fn avg_pool<T: WinFloat>(x: &[T], g: &PoolGeom) -> Vec<T> {
    let (ip, op) = (g.in_plane(), g.out_plane());
    zeroed_items(g.planes() * op, op, 0, |p, o, _| {
        let plane = &x[p * ip..(p + 1) * ip];
        for oy in 0..g.oh {
            let (r0, r1) = g.rows(oy);
            for ox in 0..g.ow {
                let (c0, c1) = g.cols(ox);
                let mut s = T::ZERO;
                for iy in r0..r1 {
                    for &v in &plane[iy * g.w + c0..iy * g.w + c1] {
                        s += v;
                    }
                }
                o[oy * g.ow + ox] = s.div(T::from_usize(g.count(oy, ox)));
            }
        }
    })
}

/// Gradient of max pooling: each output's gradient goes to its recorded argmax (summed in
/// output order where windows overlap).
pub(crate) fn max_pool_backward<T: WinFloat>(dy: &[T], idx: &[i32], g: &PoolGeom) -> Vec<T> {
    let (ip, op) = (g.in_plane(), g.out_plane());
    zeroed_items(g.planes() * ip, ip, 0, |p, d, _| {
        for o in p * op..(p + 1) * op {
            d[idx[o] as usize] += dy[o];
        }
    })
}

/// Gradient of average pooling: each output's gradient spread over its window.
pub(crate) fn avg_pool_backward<T: WinFloat>(dy: &[T], g: &PoolGeom) -> Vec<T> {
    let (ip, op) = (g.in_plane(), g.out_plane());
    zeroed_items(g.planes() * ip, ip, 0, |p, d, _| {
        for oy in 0..g.oh {
            let (r0, r1) = g.rows(oy);
            for ox in 0..g.ow {
                let (c0, c1) = g.cols(ox);
                let v = dy[p * op + oy * g.ow + ox].div(T::from_usize(g.count(oy, ox)));
                for iy in r0..r1 {
                    for e in &mut d[iy * g.w + c0..iy * g.w + c1] {
                        *e += v;
                    }
                }
            }
        }
    })
}

/// `out[p, o] = src[p, idx[p, o]]`: the transpose of `max_pool_backward` (its gradient).
pub(crate) fn plane_gather<T: WinFloat>(src: &[T], idx: &[i32], g: &PoolGeom) -> Vec<T> {
    let (ip, op) = (g.in_plane(), g.out_plane());
    idx.iter().enumerate().map(|(o, &i)| src[(o / op) * ip + i as usize]).collect()
}
