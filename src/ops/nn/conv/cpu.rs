//! CPU 2-D convolution (NCHW): im2col + GEMM through the `gemm` crate, and the two
//! backward products (col2im of `Wᵀ·dy` for the input, `dy·colsᵀ` for the filter).
//!
//! Work is spread over the batch (one im2col buffer per worker, reused across the items
//! it handles); a batch of one lets `gemm` use the cores instead. The filter gradient sums
//! per-chunk partials in a fixed chunk order, so results do not depend on the thread count.

use gemm::Parallelism;

use crate::backend::cpu::WinFloat;
use crate::backend::cpu::workers::{par_chunks_new, zeroed_items};

/// The geometry of one convolution: input `[n, c, h, w]`, weight `[oc, c / groups, kh, kw]`,
/// output `[n, oc, oh, ow]`, stride, top/left padding, dilation and groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, dygraph_derive::Attrs)]
pub(crate) struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub oc: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
    pub sh: usize,
    pub sw: usize,
    pub pt: usize,
    pub pl: usize,
    pub dh: usize,
    pub dw: usize,
    pub groups: usize,
}

impl ConvGeom {
    /// Input channels per group.
    pub fn cin_g(&self) -> usize {
        self.c / self.groups
    }
    /// Output channels per group.
    pub fn cout_g(&self) -> usize {
        self.oc / self.groups
    }
    /// Length of one im2col column: `cin_g · kh · kw`.
    pub fn k_len(&self) -> usize {
        self.cin_g() * self.kh * self.kw
    }
    /// Output positions per image.
    pub fn out_hw(&self) -> usize {
        self.oh * self.ow
    }
    /// 1×1 kernel, stride 1, no padding: the input already is its im2col matrix.
    fn pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.sh == 1 && self.sw == 1 && self.pt == 0 && self.pl == 0
    }
    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    pub fn weight_shape(&self) -> [usize; 4] {
        [self.oc, self.cin_g(), self.kh, self.kw]
    }
    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.oc, self.oh, self.ow]
    }
}

/// `dst (m×n, row stride dst_rs) [+]= a (m×k) · b (k×n)`, operands given by
/// (pointer, row stride, column stride).
///
/// # Safety
/// Every addressed element must lie inside the allocations behind the pointers, and `dst`
/// must not overlap `a` or `b`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_into<T: WinFloat>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    dst_rs: usize,
    accumulate: bool,
    a: (*const T, usize, usize),
    b: (*const T, usize, usize),
    par: Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: forwarded from the caller's contract.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            accumulate,
            a.0,
            a.2 as isize,
            a.1 as isize,
            b.0,
            b.2 as isize,
            b.1 as isize,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// Valid output range `[lo, hi)` along one axis for kernel offset `off` (input index
/// `o · s + off` must lie in `0..len`), clipped to `0..out`.
fn valid_range(off: isize, s: usize, len: usize, out: usize) -> (usize, usize) {
    let s = s as isize;
    let lo = if off >= 0 { 0 } else { ((-off) + s - 1) / s };
    let hi = if (len as isize) - off <= 0 { 0 } else { ((len as isize) - off + s - 1) / s };
    let lo = (lo as usize).min(out);
    (lo, (hi as usize).clamp(lo, out))
}

/// Fills `cols` (`[cin_g·kh·kw, oh·ow]`, row-major with row stride `ld`) from one group's
/// input planes `xg`.
fn im2col<T: WinFloat>(xg: &[T], g: &ConvGeom, cols: &mut [T], ld: usize) {
    let (h, w, oh, ow) = (g.h, g.w, g.oh, g.ow);
    let l = oh * ow;
    for c in 0..g.cin_g() {
        let plane = &xg[c * h * w..(c + 1) * h * w];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &mut cols[((c * g.kh + ki) * g.kw + kj) * ld..][..l];
                let x_off = (kj * g.dw) as isize - g.pl as isize;
                let (lo, hi) = valid_range(x_off, g.sw, w, ow);
                for oy in 0..oh {
                    let r = &mut row[oy * ow..(oy + 1) * ow];
                    let iy = (oy * g.sh + ki * g.dh) as isize - g.pt as isize;
                    if iy < 0 || iy >= h as isize || lo == hi {
                        r.fill(T::ZERO);
                        continue;
                    }
                    let src = &plane[iy as usize * w..(iy as usize + 1) * w];
                    r[..lo].fill(T::ZERO);
                    r[hi..].fill(T::ZERO);
                    let start = (lo * g.sw) as isize + x_off;
                    if g.sw == 1 {
                        let s0 = start as usize;
                        r[lo..hi].copy_from_slice(&src[s0..s0 + hi - lo]);
                    } else {
                        for (j, v) in r[lo..hi].iter_mut().enumerate() {
                            *v = src[(start + (j * g.sw) as isize) as usize];
                        }
                    }
                }
            }
        }
    }
}

/// Adds `cols` (`[cin_g·kh·kw, oh·ow]`, row stride `ld`) back into one group's input planes
/// `xg` (the transpose of `im2col`). Sequential per image, so the sums are deterministic.
fn col2im<T: WinFloat>(cols: &[T], ld: usize, g: &ConvGeom, xg: &mut [T]) {
    let (h, w, oh, ow) = (g.h, g.w, g.oh, g.ow);
    let l = oh * ow;
    for c in 0..g.cin_g() {
        let plane = &mut xg[c * h * w..(c + 1) * h * w];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let row = &cols[((c * g.kh + ki) * g.kw + kj) * ld..][..l];
                let x_off = (kj * g.dw) as isize - g.pl as isize;
                let (lo, hi) = valid_range(x_off, g.sw, w, ow);
                if lo == hi {
                    continue;
                }
                for oy in 0..oh {
                    let iy = (oy * g.sh + ki * g.dh) as isize - g.pt as isize;
                    if iy < 0 || iy >= h as isize {
                        continue;
                    }
                    let r = &row[oy * ow + lo..oy * ow + hi];
                    let dst = &mut plane[iy as usize * w..(iy as usize + 1) * w];
                    let start = (lo * g.sw) as isize + x_off;
                    if g.sw == 1 {
                        let s0 = start as usize;
                        for (d, &v) in dst[s0..s0 + r.len()].iter_mut().zip(r) {
                            *d += v;
                        }
                    } else {
                        for (j, &v) in r.iter().enumerate() {
                            dst[(start + (j * g.sw) as isize) as usize] += v;
                        }
                    }
                }
            }
        }
    }
}

/// GEMM parallelism inside one image: only when there is a single image to work on.
fn inner_parallelism(g: &ConvGeom, work: usize) -> Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    if g.n == 1 && work >= 1 << 16 {
        return Parallelism::Rayon(0);
    }
    let _ = (g, work);
    Parallelism::None
}

/// `y = conv2d(x, w) + bias` (`x` `[n, c, h, w]`, `w` `[oc, c/groups, kh, kw]`, contiguous).
pub(crate) fn conv2d_forward<T: WinFloat>(x: &[T], wt: &[T], bias: Option<&[T]>, g: &ConvGeom) -> Vec<T> {
    let (cin_g, cout_g, kk, l) = (g.cin_g(), g.cout_g(), g.k_len(), g.out_hw());
    let par = inner_parallelism(g, cout_g * kk * l);
    let scratch = if g.pointwise() { 0 } else { kk * l };
    zeroed_items(g.n * g.oc * l, g.oc * l, scratch, |ni, o, cols| {
        let xi = &x[ni * g.c * g.h * g.w..(ni + 1) * g.c * g.h * g.w];
        for gi in 0..g.groups {
            let xg = &xi[gi * cin_g * g.h * g.w..(gi + 1) * cin_g * g.h * g.w];
            let src: &[T] = if g.pointwise() {
                xg
            } else {
                im2col(xg, g, cols, l);
                cols
            };
            let og = &mut o[gi * cout_g * l..(gi + 1) * cout_g * l];
            if let Some(b) = bias {
                for (r, row) in og.chunks_mut(l).enumerate() {
                    row.fill(b[gi * cout_g + r]);
                }
            }
            let wg = &wt[gi * cout_g * kk..(gi + 1) * cout_g * kk];
            // SAFETY: wg is cout_g×kk, src kk×l and og cout_g×l, all row-major and in bounds;
            // og is a distinct allocation.
            unsafe {
                gemm_into(
                    (cout_g, l, kk),
                    og.as_mut_ptr(),
                    l,
                    bias.is_some(),
                    (wg.as_ptr(), kk, 1),
                    (src.as_ptr(), l, 1),
                    par,
                )
            };
        }
    })
}

/// Lays group `gi`'s `dy` rows of images `first..first + items` side by side: `dys` becomes
/// `[cout_g, items·l]`, the layout that lets one GEMM cover a block of images.
fn gather_dy_block<T: WinFloat>(dy: &[T], g: &ConvGeom, gi: usize, first: usize, items: usize, dys: &mut [T]) {
    let (cout_g, l) = (g.cout_g(), g.out_hw());
    let ld = items * l;
    for j in 0..items {
        for m in 0..cout_g {
            let src = &dy[((first + j) * g.oc + gi * cout_g + m) * l..][..l];
            dys[m * ld + j * l..][..l].copy_from_slice(src);
        }
    }
}

/// Gradient of the input: `dx = col2im(Wᵀ · dy)` per group. Images go in blocks whose `dy`
/// rows are laid side by side (`[cout_g, b·l]`), so one GEMM covers `b·l` columns rather than
/// `l` (MNIST conv2: l = 64), then each image's columns are added back into its planes.
pub(crate) fn conv2d_backward_data<T: WinFloat>(dy: &[T], wt: &[T], g: &ConvGeom) -> Vec<T> {
    let (cin_g, cout_g, kk, l) = (g.cin_g(), g.cout_g(), g.k_len(), g.out_hw());
    let hw = g.h * g.w;
    let block = (IM2COL_BLOCK / (kk * l).max(1)).clamp(1, g.n.div_ceil(8).max(1));
    let par = inner_parallelism(g, cout_g * kk * l * block);
    let scratch = (kk + cout_g) * l * block;
    zeroed_items(g.n * g.c * hw, block * g.c * hw, scratch, |bi, dxb, s| {
        let (cols, dys) = s.split_at_mut(kk * l * block);
        let items = dxb.len() / (g.c * hw);
        let ld = items * l;
        for gi in 0..g.groups {
            gather_dy_block(dy, g, gi, bi * block, items, dys);
            let wg = &wt[gi * cout_g * kk..(gi + 1) * cout_g * kk];
            // Wᵀ is kk×cout_g: row stride 1, column stride kk.
            // SAFETY: cols holds kk×ld elements, dys cout_g×ld; distinct from wg.
            unsafe {
                gemm_into(
                    (kk, ld, cout_g),
                    cols.as_mut_ptr(),
                    ld,
                    false,
                    (wg.as_ptr(), 1, kk),
                    (dys.as_ptr(), ld, 1),
                    par,
                )
            };
            for j in 0..items {
                let dxg = &mut dxb[j * g.c * hw + gi * cin_g * hw..][..cin_g * hw];
                col2im(&cols[j * l..], ld, g, dxg);
            }
        }
    })
}

/// Batch chunks the filter gradient is split into (fixed, so sums are reproducible).
const FILTER_CHUNKS: usize = 16;

/// Largest im2col block (elements) the gradients build for several images at once.
const IM2COL_BLOCK: usize = 1 << 22;

/// Gradient of the weight: `dW_g = Σ_n dy_{n,g} · cols_{n,g}ᵀ`. Each chunk of the batch
/// lays the im2col matrices of several images side by side (`[kk, b·l]`, with their `dy`
/// rows likewise) so one GEMM reduces over `b·l` rather than `l` (MNIST conv2: l = 64).
pub(crate) fn conv2d_backward_filter<T: WinFloat>(x: &[T], dy: &[T], g: &ConvGeom) -> Vec<T> {
    let (cin_g, cout_g, kk, l) = (g.cin_g(), g.cout_g(), g.k_len(), g.out_hw());
    let wlen = g.oc * kk;
    let chunks = g.n.clamp(1, FILTER_CHUNKS);
    let per_chunk = g.n.div_ceil(chunks);
    let block = (IM2COL_BLOCK / (kk * l).max(1)).clamp(1, per_chunk.max(1));
    let par = inner_parallelism(g, cout_g * kk * l * block);
    let scratch = (kk + cout_g) * l * block;
    let chw = g.c * g.h * g.w;
    let partials = zeroed_items(chunks * wlen, wlen, scratch, |ci, dw, s| {
        let (cols, dys) = s.split_at_mut(kk * l * block);
        let (n0, n1) = ((ci * per_chunk).min(g.n), ((ci + 1) * per_chunk).min(g.n));
        let mut first = true;
        for b0 in (n0..n1).step_by(block) {
            let items = block.min(n1 - b0);
            let ld = items * l;
            for gi in 0..g.groups {
                for (bi, ni) in (b0..b0 + items).enumerate() {
                    let xg = &x[ni * chw + gi * cin_g * g.h * g.w..][..cin_g * g.h * g.w];
                    im2col(xg, g, &mut cols[bi * l..], ld);
                }
                gather_dy_block(dy, g, gi, b0, items, dys);
                let dwg = &mut dw[gi * cout_g * kk..(gi + 1) * cout_g * kk];
                // colsᵀ is (b·l)×kk: row stride 1, column stride ld.
                // SAFETY: dwg is cout_g×kk, dys cout_g×ld and cols kk×ld (row stride ld),
                // all inside their buffers; dwg is distinct from both.
                unsafe {
                    gemm_into(
                        (cout_g, kk, ld),
                        dwg.as_mut_ptr(),
                        kk,
                        !first,
                        (dys.as_ptr(), ld, 1),
                        (cols.as_ptr(), 1, ld),
                        par,
                    )
                };
            }
            first = false;
        }
    });
    // The chunks' partial sums added in chunk order, element by element across the cores.
    par_chunks_new(wlen, T::ZERO, 1 << 12, |first, out| {
        for (j, o) in out.iter_mut().enumerate() {
            let i = first + j;
            *o = partials[i];
            for c in 1..chunks {
                *o += partials[c * wlen + i];
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{ConvGeom, conv2d_backward_data, conv2d_backward_filter, conv2d_forward};
    use crate::backend::cpu::workers::CachedScratch;

    /// The convolution kernels give the same bits whatever the workers' cached scratch held:
    /// every thread's cache filled with NaN, then with 1e30, before the same three products
    /// of a batch of one (gemm's own threads), a batch whose last image block is short and
    /// whose filter chunks are partly empty (20 images), and padding with stride 2.
    #[test]
    fn conv_results_ignore_stale_scratch() {
        let poison = |v: f32| {
            let fill = move || f32::cache().with(|c| *c.borrow_mut() = vec![v; 1 << 20]);
            rayon::broadcast(|_| fill());
            fill();
        };
        for (n, c, hw, oc, pad, stride) in [(1, 8, 20, 16, 1, 1), (20, 3, 9, 4, 0, 1), (7, 3, 9, 4, 2, 2)] {
            let k = 3;
            let o = (hw + 2 * pad - k) / stride + 1;
            let g = ConvGeom {
                n,
                c,
                h: hw,
                w: hw,
                oc,
                kh: k,
                kw: k,
                oh: o,
                ow: o,
                sh: stride,
                sw: stride,
                pt: pad,
                pl: pad,
                dh: 1,
                dw: 1,
                groups: 1,
            };
            let x: Vec<f32> = (0..n * c * hw * hw).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
            let wt: Vec<f32> = (0..oc * c * k * k).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
            let dy: Vec<f32> = (0..n * oc * o * o).map(|i| ((i * 7 % 23) as f32 - 11.0) / 5.0).collect();
            let run = || {
                [
                    conv2d_forward(&x, &wt, None, &g),
                    conv2d_backward_data(&dy, &wt, &g),
                    conv2d_backward_filter(&x, &dy, &g),
                ]
            };
            poison(f32::NAN);
            let after_nan = run();
            poison(1e30);
            let after_big = run();
            for (what, (a, b)) in
                ["forward", "input gradient", "filter gradient"].iter().zip(after_nan.iter().zip(&after_big))
            {
                assert!(a.iter().all(|v| v.is_finite()), "{what} of {g:?} read a NaN left in scratch");
                let same = a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "{what} of {g:?} depends on stale scratch contents");
            }
        }
    }
}
