//! 2-D pooling (`paddle.nn.functional.max_pool2d`, `avg_pool2d`, `adaptive_*_pool2d`), NCHW.
//!
//! Rules, as Paddle/PyTorch: padding counts as −∞ for max pooling; the first maximum in
//! row-major order wins ties and NaN wins over numbers; `exclusive` average pooling divides
//! by the window's elements inside the input, otherwise by the window clipped to the padded
//! input; with `ceil_mode` a last window that would start in the trailing padding is dropped.
//! Backward kernels gather, for each input element, from every window covering it: no
//! atomics, deterministic.

use super::conv::Size2;
use crate::autograd::record1;
use crate::backend::cpu::{CpuData, par_chunks_mut};
use crate::backend::gpu::{Bind, Kernel};
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

pub(crate) static POOL2D: Kernel = Kernel { file: "pool2d.wgsl", variants: || vec![vec![]] };

/// Pooling window options (Paddle's keyword arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dOptions {
    /// Window size.
    pub kernel_size: [usize; 2],
    /// Step (default: the kernel size).
    pub stride: Option<[usize; 2]>,
    /// `[top, bottom, left, right]`.
    pub padding: [usize; 4],
    /// Round the output size up.
    pub ceil_mode: bool,
    /// Average pooling ignores padding in the divisor (default true, as Paddle).
    pub exclusive: bool,
}

impl Pool2dOptions {
    /// A `kernel`-sized window with stride = kernel, no padding.
    pub fn new(kernel: impl Into<Size2>) -> Self {
        Pool2dOptions { kernel_size: kernel.into().0, stride: None, padding: [0; 4], ceil_mode: false, exclusive: true }
    }

    /// Sets the stride.
    pub fn stride(mut self, s: impl Into<Size2>) -> Self {
        self.stride = Some(s.into().0);
        self
    }

    /// Sets the padding: an int, `[ph, pw]` or `[top, bottom, left, right]`.
    pub fn padding(mut self, p: impl Into<super::conv::Padding>) -> Self {
        self.padding = match p.into() {
            super::conv::Padding::Explicit(p) => p,
            _ => [0; 4],
        };
        self
    }

    /// Round output sizes up.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.ceil_mode = on;
        self
    }

    /// Exclude padding from average pooling's divisor.
    pub fn exclusive(mut self, on: bool) -> Self {
        self.exclusive = on;
        self
    }
}

/// Where each output window lies.
#[derive(Clone, Copy, Debug)]
struct PoolGeom {
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    k: [usize; 2],
    s: [usize; 2],
    pad: [usize; 4],
    adaptive: bool,
    exclusive: bool,
}

impl PoolGeom {
    /// `[start, end, padded_end)` of window `o` along axis `a` (0: rows, 1: columns).
    fn window(&self, a: usize, o: usize) -> (isize, isize, isize) {
        let (len, out) = if a == 0 { (self.h, self.oh) } else { (self.w, self.ow) };
        if self.adaptive {
            let (s, e) = ((o * len / out) as isize, ((o + 1) * len).div_ceil(out) as isize);
            return (s, e, e);
        }
        let pad_before = self.pad[2 * a];
        let pad_after = self.pad[2 * a + 1];
        let start = (o * self.s[a]) as isize - pad_before as isize;
        let end = start + self.k[a] as isize;
        (start, end, end.min((len + pad_after) as isize))
    }

    fn count(&self, wy: (isize, isize, isize), wx: (isize, isize, isize)) -> f64 {
        if self.exclusive || self.adaptive {
            let ys = (wy.1.min(self.h as isize) - wy.0.max(0)).max(0);
            let xs = (wx.1.min(self.w as isize) - wx.0.max(0)).max(0);
            (ys * xs) as f64
        } else {
            ((wy.2 - wy.0) * (wx.2 - wx.0)) as f64
        }
    }

    fn params(&self, max_backward: bool) -> Vec<u32> {
        [
            self.planes,
            self.h,
            self.w,
            self.oh,
            self.ow,
            self.k[0],
            self.k[1],
            self.s[0],
            self.s[1],
            self.pad[0],
            self.pad[2],
            self.adaptive as usize,
            self.exclusive as usize,
            self.h + self.pad[0] + self.pad[1],
            self.w + self.pad[2] + self.pad[3],
            max_backward as usize,
        ]
        .map(|v| v as u32)
        .to_vec()
    }
}

fn out_len(op: &'static str, len: usize, k: usize, s: usize, pb: usize, pa: usize, ceil: bool) -> Result<usize> {
    let padded = len + pb + pa;
    if padded < k {
        return Err(Error::shape(op, format!("kernel {k} is larger than the padded input {padded}")));
    }
    let mut out = if ceil { (padded - k).div_ceil(s) + 1 } else { (padded - k) / s + 1 };
    // A last window starting in the trailing padding is dropped (ceil_mode).
    if ceil && (out - 1) * s >= len + pb {
        out -= 1;
    }
    Ok(out)
}

fn check_input(op: &'static str, x: &Tensor) -> Result<(usize, usize, usize, usize)> {
    x.expect_float(op)?;
    if x.ndim() != 4 {
        return Err(Error::shape(op, format!("input must be 4-D NCHW, got {:?}", x.shape())));
    }
    let s = x.shape();
    Ok((s[0], s[1], s[2], s[3]))
}

fn fixed_geom(op: &'static str, x: &Tensor, o: &Pool2dOptions) -> Result<PoolGeom> {
    let (n, c, h, w) = check_input(op, x)?;
    let k = o.kernel_size;
    let s = o.stride.unwrap_or(k);
    if k.contains(&0) || s.contains(&0) {
        return Err(Error::invalid(op, format!("kernel {k:?} and stride {s:?} must be positive")));
    }
    let p = o.padding;
    if p[0] > k[0] / 2 || p[1] > k[0] / 2 || p[2] > k[1] / 2 || p[3] > k[1] / 2 {
        return Err(Error::invalid(op, format!("padding {p:?} must be at most half the kernel {k:?}")));
    }
    let oh = out_len(op, h, k[0], s[0], p[0], p[1], o.ceil_mode)?;
    let ow = out_len(op, w, k[1], s[1], p[2], p[3], o.ceil_mode)?;
    Ok(PoolGeom { planes: n * c, h, w, oh, ow, k, s, pad: p, adaptive: false, exclusive: o.exclusive })
}

fn adaptive_geom(op: &'static str, x: &Tensor, out: Size2) -> Result<PoolGeom> {
    let (n, c, h, w) = check_input(op, x)?;
    let [oh, ow] = out.0;
    if oh == 0 || ow == 0 || h == 0 || w == 0 {
        return Err(Error::invalid(op, format!("output size {:?} and input {:?} must be non-empty", out.0, x.shape())));
    }
    Ok(PoolGeom { planes: n * c, h, w, oh, ow, k: [0; 2], s: [1; 2], pad: [0; 4], adaptive: true, exclusive: true })
}

/// Numbers the CPU pooling kernels run on (float32 natively, float64 for gradchecks).
trait PoolReal: Copy + Send + Sync + PartialOrd + Default + 'static {
    fn nan(self) -> bool;
    fn neg_inf() -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl PoolReal for f32 {
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn neg_inf() -> Self {
        f32::NEG_INFINITY
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl PoolReal for f64 {
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn neg_inf() -> Self {
        f64::NEG_INFINITY
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// CPU forward over each plane: the output and, for max, the argmax flat indices.
fn cpu_forward<T: PoolReal>(x: &[T], g: &PoolGeom, max: bool) -> (Vec<T>, Vec<i64>) {
    let per = g.oh * g.ow;
    let mut out = vec![T::default(); g.planes * per];
    let mut idx = vec![0i64; if max { g.planes * per } else { 0 }];
    let rows: Vec<(usize, usize)> = (0..g.oh).map(|o| clip(g.window(0, o), g.h)).collect();
    let cols: Vec<(usize, usize)> = (0..g.ow).map(|o| clip(g.window(1, o), g.w)).collect();
    let counts: Vec<f64> = (0..per).map(|i| g.count(g.window(0, i / g.ow), g.window(1, i % g.ow)).max(1.0)).collect();
    let work = |p: usize, o_plane: &mut [T], i_plane: Option<&mut [i64]>| {
        let plane = &x[p * g.h * g.w..][..g.h * g.w];
        let mut i_plane = i_plane;
        for (oy, &(ys, ye)) in rows.iter().enumerate() {
            for (ox, &(xs, xe)) in cols.iter().enumerate() {
                let o = oy * g.ow + ox;
                if max {
                    let (mut best, mut arg, mut found) = (T::neg_inf(), 0usize, false);
                    for y in ys..ye {
                        for (xx, &v) in plane[y * g.w + xs..y * g.w + xe].iter().enumerate() {
                            if !found || v > best || (v.nan() && !best.nan()) {
                                best = v;
                                arg = y * g.w + xs + xx;
                                found = true;
                            }
                        }
                    }
                    o_plane[o] = best;
                    if let Some(ip) = i_plane.as_deref_mut() {
                        ip[o] = arg as i64;
                    }
                } else {
                    let mut acc = 0.0f64;
                    for y in ys..ye {
                        for &v in &plane[y * g.w + xs..y * g.w + xe] {
                            acc += v.to_f64();
                        }
                    }
                    o_plane[o] = T::from_f64(acc / counts[o]);
                }
            }
        }
    };
    if max {
        par_pairs(&mut out, &mut idx, per, |p, o, i| work(p, o, Some(i)));
    } else {
        par_chunks_mut(&mut out, per, |start, chunk| {
            for (k, o) in chunk.chunks_mut(per).enumerate() {
                work(start / per + k, o, None);
            }
        });
    }
    (out, idx)
}

/// Clips a window to `[0, len)`.
fn clip(w: (isize, isize, isize), len: usize) -> (usize, usize) {
    let s = w.0.max(0) as usize;
    (s.min(len), (w.1.min(len as isize).max(0) as usize).max(s.min(len)))
}

/// Runs `f(plane, out_plane, idx_plane)` over planes, in parallel natively.
fn par_pairs<T: Send>(out: &mut [T], idx: &mut [i64], per: usize, f: impl Fn(usize, &mut [T], &mut [i64]) + Sync) {
    if per == 0 {
        return;
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        out.par_chunks_mut(per).zip(idx.par_chunks_mut(per)).enumerate().for_each(|(p, (o, i))| f(p, o, i));
    }
    #[cfg(target_arch = "wasm32")]
    for (p, (o, i)) in out.chunks_mut(per).zip(idx.chunks_mut(per)).enumerate() {
        f(p, o, i);
    }
}

/// CPU backward: scatter `gy` through the argmax indices (max) or evenly (avg).
fn cpu_backward<T: PoolReal>(gy: &[T], idx: Option<&[i64]>, g: &PoolGeom) -> Vec<T> {
    let per_in = g.h * g.w;
    let per_out = g.oh * g.ow;
    let mut dx = vec![T::default(); g.planes * per_in];
    let rows: Vec<(usize, usize)> = (0..g.oh).map(|o| clip(g.window(0, o), g.h)).collect();
    let cols: Vec<(usize, usize)> = (0..g.ow).map(|o| clip(g.window(1, o), g.w)).collect();
    par_chunks_mut(&mut dx, per_in, |start, chunk| {
        for (pi, plane) in chunk.chunks_mut(per_in).enumerate() {
            let p = start / per_in + pi;
            let gp = &gy[p * per_out..][..per_out];
            match idx {
                Some(idx) => {
                    let ip = &idx[p * per_out..][..per_out];
                    for (o, &at) in ip.iter().enumerate() {
                        let v = &mut plane[at as usize];
                        *v = T::from_f64(v.to_f64() + gp[o].to_f64());
                    }
                }
                None => {
                    for (oy, &(ys, ye)) in rows.iter().enumerate() {
                        for (ox, &(xs, xe)) in cols.iter().enumerate() {
                            let o = oy * g.ow + ox;
                            let share = gp[o].to_f64() / g.count(g.window(0, oy), g.window(1, ox)).max(1.0);
                            for y in ys..ye {
                                for v in &mut plane[y * g.w + xs..y * g.w + xe] {
                                    *v = T::from_f64(v.to_f64() + share);
                                }
                            }
                        }
                    }
                }
            }
        }
    });
    dx
}

/// Runs `f32` or `f64` CPU kernel `k` on the host data of `t`.
fn on_cpu<R>(t: &Tensor, k32: impl FnOnce(&[f32]) -> R, k64: impl FnOnce(&[f64]) -> R) -> Result<R> {
    match t.backend() {
        Backend::Cpu(d) => match &*d {
            CpuData::F32(v) => Ok(k32(v)),
            CpuData::F64(v) => Ok(k64(v)),
            other => Err(Error::unsupported("pool2d", other.dtype(), "(float32 or float64)")),
        },
        Backend::Gpu(_) => unreachable!("CPU path"),
    }
}

/// Runs a pooling forward; returns the output and, for max, the indices (int64).
fn forward(op: &'static str, x: &Tensor, g: PoolGeom, max: bool) -> Result<(Tensor, Option<Tensor>)> {
    if x.dtype() == DType::Float16 {
        let (y, i) = forward(op, &x.cast(DType::Float32)?, g, max)?;
        return Ok((y.cast(DType::Float16)?, i));
    }
    let n = x.shape()[0];
    let c = x.shape()[1];
    let shape = vec![n, c, g.oh, g.ow];
    let (out, idx) = match x.backend() {
        Backend::Cpu(_) => {
            let (o, i) = on_cpu(
                x,
                |v| {
                    let (o, i) = cpu_forward(v, &g, max);
                    (CpuData::F32(o), i)
                },
                |v| {
                    let (o, i) = cpu_forward(v, &g, max);
                    (CpuData::F64(o), i)
                },
            )?;
            let idx = max.then(|| Tensor::from_cpu(CpuData::I64(i), shape.clone()));
            (Tensor::from_cpu(o, shape.clone()), idx)
        }
        Backend::Gpu(b) => {
            let ctx = &b.ctx;
            let numel = g.planes * g.oh * g.ow;
            let out = ctx.alloc(op, 4 * numel as u64)?;
            let idx = ctx.alloc(op, 8 * numel as u64)?;
            ctx.dispatch_1d(
                &POOL2D,
                &vec![],
                if max { "max_fwd" } else { "avg_fwd" },
                &[Bind::read(b), Bind::read(b), Bind::write(&out), Bind::write(&idx)],
                &g.params(false),
                numel as u64,
            )?;
            let idx = max.then(|| Tensor::from_gpu(idx, shape.clone(), DType::Int64));
            (Tensor::from_gpu(out, shape.clone(), DType::Float32), idx)
        }
    };
    let (xs, idx_c) = (x.clone(), idx.clone());
    let out = record1(op, &[x], out, move |c| Ok(vec![Some(backward(op, c.grad(), idx_c.as_ref(), &xs, g)?)]));
    Ok((out, idx))
}

/// The input gradient of a pooling, itself differentiable (it is linear in `gy`).
fn backward(op: &'static str, gy: &Tensor, idx: Option<&Tensor>, x: &Tensor, g: PoolGeom) -> Result<Tensor> {
    let dx = match gy.backend() {
        Backend::Cpu(_) => {
            let i = match idx {
                Some(t) => Some(t.to_vec::<i64>()?),
                None => None,
            };
            let data = on_cpu(
                gy,
                |v| CpuData::F32(cpu_backward(v, i.as_deref(), &g)),
                |v| CpuData::F64(cpu_backward(v, i.as_deref(), &g)),
            )?;
            Tensor::from_cpu(data, x.shape().to_vec())
        }
        Backend::Gpu(b) => {
            let ctx = &b.ctx;
            let numel = g.planes * g.h * g.w;
            let out = ctx.alloc(op, 4 * numel as u64)?;
            let scratch = ctx.alloc(op, 8)?;
            let aux = match idx.map(|t| t.backend()) {
                Some(Backend::Gpu(ib)) => ib.clone(),
                _ => b.clone(),
            };
            ctx.dispatch_1d(
                &POOL2D,
                &vec![],
                "bwd",
                &[Bind::read(b), Bind::read(&aux), Bind::write(&out), Bind::write(&scratch)],
                &g.params(idx.is_some()),
                numel as u64,
            )?;
            Tensor::from_gpu(out, x.shape().to_vec(), DType::Float32)
        }
    };
    // The backward is linear in gy: its own gradient is the forward window sum/selection.
    let (idx_c, xs) = (idx.cloned(), x.clone());
    Ok(record1(op, &[gy], dx, move |c| {
        let h = c.grad();
        Ok(vec![Some(match &idx_c {
            Some(i) => crate::take_along_axis(&h.flatten(2, 3)?, &i.flatten(2, 3)?, 2)?.reshape(i.shape())?,
            None => {
                let _ = &xs;
                forward_again(h, g)?
            }
        })])
    }))
}

/// Average pooling of `h` with geometry `g` (the gradient of the avg backward).
fn forward_again(h: &Tensor, g: PoolGeom) -> Result<Tensor> {
    Ok(forward("avg_pool2d", h, g, false)?.0)
}

/// Max pooling (`F.max_pool2d`).
pub fn max_pool2d(x: &Tensor, options: &Pool2dOptions) -> Result<Tensor> {
    Ok(max_pool2d_with_index(x, options)?.0)
}

/// Max pooling returning also the int64 flat index (`h·W + w`) of each maximum within its
/// input plane (Paddle's `return_mask=True`).
pub fn max_pool2d_with_index(x: &Tensor, options: &Pool2dOptions) -> Result<(Tensor, Tensor)> {
    let g = fixed_geom("max_pool2d", x, options)?;
    let (y, i) = forward("max_pool2d", x, g, true)?;
    Ok((y, i.expect("max pooling returns indices")))
}

/// Average pooling (`F.avg_pool2d`).
pub fn avg_pool2d(x: &Tensor, options: &Pool2dOptions) -> Result<Tensor> {
    let g = fixed_geom("avg_pool2d", x, options)?;
    Ok(forward("avg_pool2d", x, g, false)?.0)
}

/// Adaptive average pooling to `output_size` (`F.adaptive_avg_pool2d`); 1 is global pooling.
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: impl Into<Size2>) -> Result<Tensor> {
    let g = adaptive_geom("adaptive_avg_pool2d", x, output_size.into())?;
    Ok(forward("adaptive_avg_pool2d", x, g, false)?.0)
}

/// Adaptive max pooling to `output_size` (`F.adaptive_max_pool2d`).
pub fn adaptive_max_pool2d(x: &Tensor, output_size: impl Into<Size2>) -> Result<Tensor> {
    let g = adaptive_geom("adaptive_max_pool2d", x, output_size.into())?;
    Ok(forward("adaptive_max_pool2d", x, g, true)?.0)
}
