//! Float64 reference implementations of the registered ops: plain loops over multi-indices,
//! written independently of the library's kernels (no strides tables, no im2col, no GEMM),
//! with `libm` for the transcendentals.

use super::Host;

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = i % shape[d];
            i /= shape[d];
        }
    }
    idx
}

/// The flat position of `idx` in `shape`.
pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(strides(shape)).map(|(i, s)| i * s).sum()
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// numpy broadcasting of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
            let db = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
            if da == 1 { db } else { da }
        })
        .collect()
}

/// The element of `x` that broadcast index `idx` (over `shape`) reads.
pub fn at_broadcast(x: &Host, idx: &[usize]) -> f64 {
    let lead = idx.len() - x.shape.len();
    let own: Vec<usize> = x.shape.iter().enumerate().map(|(k, &d)| if d == 1 { 0 } else { idx[lead + k] }).collect();
    x.v[ravel(&own, &x.shape)]
}

/// `f` elementwise over broadcast operands.
pub fn zip_n(xs: &[&Host], f: impl Fn(&[f64]) -> f64) -> Host {
    let mut shape: Vec<usize> = Vec::new();
    for x in xs {
        shape = broadcast(&shape, &x.shape);
    }
    let v = (0..numel(&shape))
        .map(|i| {
            let idx = unravel(i, &shape);
            let args: Vec<f64> = xs.iter().map(|x| at_broadcast(x, &idx)).collect();
            f(&args)
        })
        .collect();
    Host { v, shape }
}

/// An axis in `0..rank` from a possibly negative one.
pub fn axis(a: i64, rank: usize) -> usize {
    if a < 0 { (a + rank as i64) as usize } else { a as usize }
}

/// Reduces `x` over `axes` (all when empty) with `f` over each group's values.
pub fn reduce(x: &Host, axes: &[usize], keepdim: bool, f: impl Fn(&[f64]) -> f64) -> Host {
    let all: Vec<usize> = if axes.is_empty() { (0..x.shape.len()).collect() } else { axes.to_vec() };
    let keep: Vec<usize> = x.shape.iter().enumerate().map(|(i, &d)| if all.contains(&i) { 1 } else { d }).collect();
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); numel(&keep)];
    for (i, &v) in x.v.iter().enumerate() {
        let mut idx = unravel(i, &x.shape);
        for &a in &all {
            idx[a] = 0;
        }
        groups[ravel(&idx, &keep)].push(v);
    }
    let v = groups.iter().map(|g| f(g)).collect();
    let shape = if keepdim {
        keep
    } else {
        x.shape.iter().enumerate().filter(|(i, _)| !all.contains(i)).map(|(_, &d)| d).collect()
    };
    Host { v, shape }
}

/// Wraps an integer result into `i32` for int32 outputs.
pub fn wrap_int(v: i64, dtype: dygraph::DType) -> f64 {
    if dtype == dygraph::DType::Int32 { v as i32 as f64 } else { v as f64 }
}

/// `v` as a tensor of `dtype` holds it, computed without the library: Rust's `as` for
/// integers (truncating, saturating, NaN to 0), `!= 0` for bool, round to nearest even for
/// the floats (overflow to ±∞).
pub fn held_as(v: f64, dtype: dygraph::DType) -> f64 {
    use dygraph::DType::*;
    match dtype {
        Bool => (v != 0.0) as u8 as f64,
        Int32 => v as i32 as f64,
        Int64 => v as i64 as f64,
        Float16 => half::f16::from_f64(v).to_f64(),
        BFloat16 => half::bf16::from_f64(v).to_f64(),
        Float32 => v as f32 as f64,
        Float64 => v,
    }
}

/// `x^e` for integers: wrapping; a negative exponent gives trunc(1/x^|e|). Built on std's
/// `wrapping_pow`, an implementation separate from the op's.
pub fn int_pow(x: i64, e: i64) -> i64 {
    if e < 0 {
        // 1/x^|e| truncates to zero unless |x| is 1 (and 1/0 is 0 for integers here).
        return if x == 1 || x == -1 { if e % 2 == 0 { 1 } else { x } } else { 0 };
    }
    let (hi, lo) = ((e as u64 >> 32) as u32, e as u32);
    let x_to_2_32 = x.wrapping_pow(1 << 16).wrapping_pow(1 << 16);
    x_to_2_32.wrapping_pow(hi).wrapping_mul(x.wrapping_pow(lo))
}

/// Softmax along `axis` of `x` in f64 (`log` gives log-softmax).
pub fn softmax(x: &Host, ax: usize, log: bool) -> Host {
    let mut out = x.v.clone();
    let len = x.shape.get(ax).copied().unwrap_or(1);
    let st = if x.shape.is_empty() { 1 } else { strides(&x.shape)[ax] };
    for i in 0..x.v.len() {
        let idx = if x.shape.is_empty() { vec![] } else { unravel(i, &x.shape) };
        if !idx.is_empty() && idx[ax] != 0 {
            continue;
        }
        let row: Vec<f64> = (0..len).map(|r| x.v[i + r * st]).collect();
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for r in 0..len {
            out[i + r * st] = if log { row[r] - m - s.ln() } else { (row[r] - m).exp() / s };
        }
    }
    Host { v: out, shape: x.shape.clone() }
}

/// The convolution geometry.
#[derive(Clone, Copy, Debug)]
pub struct Conv {
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

impl Conv {
    /// Every (image, out channel, oy, ox, in channel, ky, kx) with its input position, if
    /// inside the image.
    pub fn taps(&self, mut f: impl FnMut([usize; 4], [usize; 4], [usize; 4])) {
        let (cin_g, cout_g) = (self.c / self.groups, self.oc / self.groups);
        for n in 0..self.n {
            for o in 0..self.oc {
                let g = o / cout_g;
                for oy in 0..self.oh {
                    for ox in 0..self.ow {
                        for ci in 0..cin_g {
                            for ky in 0..self.kh {
                                for kx in 0..self.kw {
                                    let iy = (oy * self.sh + ky * self.dh) as i64 - self.pt as i64;
                                    let ix = (ox * self.sw + kx * self.dw) as i64 - self.pl as i64;
                                    if iy < 0 || ix < 0 || iy >= self.h as i64 || ix >= self.w as i64 {
                                        continue;
                                    }
                                    let x = [n, g * cin_g + ci, iy as usize, ix as usize];
                                    f([n, o, oy, ox], x, [o, ci, ky, kx]);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    pub fn x_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    pub fn w_shape(&self) -> [usize; 4] {
        [self.oc, self.c / self.groups, self.kh, self.kw]
    }
    pub fn y_shape(&self) -> [usize; 4] {
        [self.n, self.oc, self.oh, self.ow]
    }

    /// `y = F(x, w)`.
    pub fn forward(&self, x: &Host, w: &Host) -> Host {
        let mut y = vec![0.0; numel(&self.y_shape())];
        self.taps(|yi, xi, wi| {
            y[ravel(&yi, &self.y_shape())] += x.v[ravel(&xi, &self.x_shape())] * w.v[ravel(&wi, &self.w_shape())]
        });
        Host::new(y, &self.y_shape())
    }

    /// `dx = D(dy, w)`: the adjoint in x.
    pub fn grad_input(&self, dy: &Host, w: &Host) -> Host {
        let mut dx = vec![0.0; numel(&self.x_shape())];
        self.taps(|yi, xi, wi| {
            dx[ravel(&xi, &self.x_shape())] += dy.v[ravel(&yi, &self.y_shape())] * w.v[ravel(&wi, &self.w_shape())]
        });
        Host::new(dx, &self.x_shape())
    }

    /// `dw = W(x, dy)`: the adjoint in w.
    pub fn grad_weight(&self, x: &Host, dy: &Host) -> Host {
        let mut dw = vec![0.0; numel(&self.w_shape())];
        self.taps(|yi, xi, wi| {
            dw[ravel(&wi, &self.w_shape())] += dy.v[ravel(&yi, &self.y_shape())] * x.v[ravel(&xi, &self.x_shape())]
        });
        Host::new(dw, &self.w_shape())
    }
}

/// Pooling window `o` along one axis, found by walking cells rather than by the kernels'
/// start/end arithmetic: the input positions it covers, and the count an average divides by.
/// A window of a fixed kernel covers padded positions `o·s .. o·s + k`; the count is its input
/// cells when `exclusive`, else its cells inside the padded input (`pad0 + len + pad1`). An
/// adaptive window covers the cells `[i, i + 1)` that overlap `[o·len/out, (o+1)·len/out)`.
#[allow(clippy::too_many_arguments)]
pub fn pool_window(
    o: usize,
    len: usize,
    out: usize,
    k: usize,
    s: usize,
    pad0: usize,
    pad1: usize,
    adaptive: bool,
    exclusive: bool,
) -> (Vec<usize>, usize) {
    if adaptive {
        let cells: Vec<usize> = (0..len).filter(|&i| o * len < (i + 1) * out && i * out < (o + 1) * len).collect();
        let n = cells.len();
        return (cells, n);
    }
    let padded: Vec<usize> = (o * s..o * s + k).filter(|&q| q < pad0 + len + pad1).collect();
    let cells: Vec<usize> = padded.iter().filter(|&&q| q >= pad0 && q < pad0 + len).map(|&q| q - pad0).collect();
    let count = if exclusive { cells.len() } else { padded.len() };
    (cells, count)
}

/// The number of pooling windows along an axis of `len` with padding `pad0`/`pad1`, by
/// counting window starts: a window fits in the padded input (floor mode), or (ceil mode)
/// overlaps it by at least one cell past the last full window's start and starts before the
/// trailing padding.
pub fn pool_windows(len: usize, pad0: usize, pad1: usize, k: usize, s: usize, ceil: bool) -> usize {
    let span = len + pad0 + pad1;
    (0..)
        .take_while(|&o: &usize| {
            let start = o * s;
            if ceil { start + k < span + s && start < pad0 + len } else { start + k <= span }
        })
        .count()
}
