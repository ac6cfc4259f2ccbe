//! CPU convolution as im2col + GEMM (the `gemm` crate), parallel over the batch. The three
//! products of a convolution layer: the output, the input gradient (GEMM then col2im) and
//! the weight gradient (GEMM against the im2col matrix).

use gemm::Parallelism;

/// The geometry of one NCHW convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub pt: usize,
    pub pl: usize,
    pub dh: usize,
    pub dw: usize,
    pub groups: usize,
}

impl ConvGeom {
    pub fn cin_g(&self) -> usize {
        self.c / self.groups
    }
    pub fn cout_g(&self) -> usize {
        self.cout / self.groups
    }
    /// Rows of the im2col matrix of one group.
    pub fn k(&self) -> usize {
        self.cin_g() * self.kh * self.kw
    }
    pub fn ohw(&self) -> usize {
        self.oh * self.ow
    }
}

/// Numbers the kernels work in.
pub(crate) trait Real: Copy + Default + Send + Sync + std::ops::Add<Output = Self> + 'static {
    const ZERO: Self;
    const ONE: Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

/// `col[k, j]` = input element under kernel tap k at output position j, for group `g` of
/// image `x` (`[C, H, W]`).
fn im2col<T: Real>(x: &[T], g: usize, geo: &ConvGeom, col: &mut [T]) {
    let ohw = geo.ohw();
    for ci in 0..geo.cin_g() {
        let plane = &x[(g * geo.cin_g() + ci) * geo.h * geo.w..][..geo.h * geo.w];
        for ki in 0..geo.kh {
            for kj in 0..geo.kw {
                let row = &mut col[((ci * geo.kh + ki) * geo.kw + kj) * ohw..][..ohw];
                for oy in 0..geo.oh {
                    let iy = (oy * geo.sh + ki * geo.dh) as isize - geo.pt as isize;
                    let out = &mut row[oy * geo.ow..][..geo.ow];
                    if iy < 0 || iy >= geo.h as isize {
                        out.fill(T::ZERO);
                        continue;
                    }
                    let src = &plane[iy as usize * geo.w..][..geo.w];
                    for (ox, o) in out.iter_mut().enumerate() {
                        let ix = (ox * geo.sw + kj * geo.dw) as isize - geo.pl as isize;
                        *o = if ix >= 0 && ix < geo.w as isize { src[ix as usize] } else { T::ZERO };
                    }
                }
            }
        }
    }
}

/// Adds `col` back onto image gradient `dx` (`[C, H, W]`) for group `g` (inverse of im2col).
fn col2im<T: Real>(col: &[T], g: usize, geo: &ConvGeom, dx: &mut [T]) {
    let ohw = geo.ohw();
    for ci in 0..geo.cin_g() {
        let plane = &mut dx[(g * geo.cin_g() + ci) * geo.h * geo.w..][..geo.h * geo.w];
        for ki in 0..geo.kh {
            for kj in 0..geo.kw {
                let row = &col[((ci * geo.kh + ki) * geo.kw + kj) * ohw..][..ohw];
                for oy in 0..geo.oh {
                    let iy = (oy * geo.sh + ki * geo.dh) as isize - geo.pt as isize;
                    if iy < 0 || iy >= geo.h as isize {
                        continue;
                    }
                    let dst = &mut plane[iy as usize * geo.w..][..geo.w];
                    for (ox, &v) in row[oy * geo.ow..][..geo.ow].iter().enumerate() {
                        let ix = (ox * geo.sw + kj * geo.dw) as isize - geo.pl as isize;
                        if ix >= 0 && ix < geo.w as isize {
                            dst[ix as usize] = dst[ix as usize] + v;
                        }
                    }
                }
            }
        }
    }
}

/// `c = a · b` for row-major `a: [m, k]`, `b: [k, n]` (or transposed operands), overwriting
/// or accumulating into `c: [m, n]`.
#[allow(clippy::too_many_arguments)]
fn gemm_rm<T: Real>(
    m: usize,
    n: usize,
    k: usize,
    c: &mut [T],
    a: &[T],
    a_t: bool,
    b: &[T],
    b_t: bool,
    accumulate: bool,
    par: Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    let (a_rs, a_cs) = if a_t { (1, m as isize) } else { (k as isize, 1) };
    let (b_rs, b_cs) = if b_t { (1, k as isize) } else { (n as isize, 1) };
    // SAFETY: the slices hold m·k, k·n and m·n elements as the strides describe.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            if accumulate { T::ONE } else { T::ZERO },
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

fn inner_parallelism(batch: usize) -> Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    if batch == 1 {
        return Parallelism::Rayon(0);
    }
    let _ = batch;
    Parallelism::None
}

/// Runs `f(n, out_chunk)` over the batch, in parallel natively.
fn per_image<T: Send>(out: &mut [T], per: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if per == 0 {
        return;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        out.par_chunks_mut(per).enumerate().for_each(|(n, o)| f(n, o));
    }
    #[cfg(target_arch = "wasm32")]
    for (n, o) in out.chunks_mut(per).enumerate() {
        f(n, o);
    }
}

/// Output `[N, Cout, OH, OW]` of `x: [N, C, H, W]` with `w: [Cout, C/groups, KH, KW]`.
pub(crate) fn conv2d_forward<T: Real>(x: &[T], w: &[T], bias: Option<&[T]>, geo: &ConvGeom) -> Vec<T> {
    let per = geo.cout * geo.ohw();
    let mut out = vec![T::ZERO; geo.n * per];
    let par = inner_parallelism(geo.n);
    per_image(&mut out, per, |n, o| {
        let xi = &x[n * geo.c * geo.h * geo.w..][..geo.c * geo.h * geo.w];
        let mut col = vec![T::ZERO; geo.k() * geo.ohw()];
        for g in 0..geo.groups {
            im2col(xi, g, geo, &mut col);
            let wg = &w[g * geo.cout_g() * geo.k()..][..geo.cout_g() * geo.k()];
            let og = &mut o[g * geo.cout_g() * geo.ohw()..][..geo.cout_g() * geo.ohw()];
            gemm_rm(geo.cout_g(), geo.ohw(), geo.k(), og, wg, false, &col, false, false, par);
        }
        if let Some(b) = bias {
            for (co, plane) in o.chunks_mut(geo.ohw()).enumerate() {
                for v in plane {
                    *v = *v + b[co];
                }
            }
        }
    });
    out
}

/// Input gradient `[N, C, H, W]` from output gradient `g` and weight `w`.
pub(crate) fn conv2d_grad_input<T: Real>(g: &[T], w: &[T], geo: &ConvGeom) -> Vec<T> {
    let per = geo.c * geo.h * geo.w;
    let mut dx = vec![T::ZERO; geo.n * per];
    let par = inner_parallelism(geo.n);
    per_image(&mut dx, per, |n, d| {
        let gi = &g[n * geo.cout * geo.ohw()..][..geo.cout * geo.ohw()];
        let mut col = vec![T::ZERO; geo.k() * geo.ohw()];
        for grp in 0..geo.groups {
            let wg = &w[grp * geo.cout_g() * geo.k()..][..geo.cout_g() * geo.k()];
            let gg = &gi[grp * geo.cout_g() * geo.ohw()..][..geo.cout_g() * geo.ohw()];
            // col = wgᵀ · gg : [K, cout_g] · [cout_g, OHW]
            gemm_rm(geo.k(), geo.ohw(), geo.cout_g(), &mut col, wg, true, gg, false, false, par);
            col2im(&col, grp, geo, d);
        }
    });
    dx
}

/// Weight gradient `[Cout, C/groups, KH, KW]` from input `x` and output gradient `g`,
/// summed over the batch in a fixed order.
pub(crate) fn conv2d_grad_weight<T: Real>(x: &[T], g: &[T], geo: &ConvGeom) -> Vec<T> {
    let per = geo.cout * geo.k();
    let mut partial = vec![T::ZERO; geo.n * per];
    let par = inner_parallelism(geo.n);
    per_image(&mut partial, per, |n, dw| {
        let xi = &x[n * geo.c * geo.h * geo.w..][..geo.c * geo.h * geo.w];
        let gi = &g[n * geo.cout * geo.ohw()..][..geo.cout * geo.ohw()];
        let mut col = vec![T::ZERO; geo.k() * geo.ohw()];
        for grp in 0..geo.groups {
            im2col(xi, grp, geo, &mut col);
            let gg = &gi[grp * geo.cout_g() * geo.ohw()..][..geo.cout_g() * geo.ohw()];
            let dg = &mut dw[grp * geo.cout_g() * geo.k()..][..geo.cout_g() * geo.k()];
            // dg = gg · colᵀ : [cout_g, OHW] · [OHW, K]
            gemm_rm(geo.cout_g(), geo.k(), geo.ohw(), dg, gg, false, &col, true, false, par);
        }
    });
    let mut out = vec![T::ZERO; per];
    for chunk in partial.chunks(per) {
        for (o, &v) in out.iter_mut().zip(chunk) {
            *o = *o + v;
        }
    }
    out
}
