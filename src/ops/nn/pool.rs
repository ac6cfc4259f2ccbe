//! 2-D pooling (`paddle.nn.functional.max_pool2d`, `avg_pool2d`, `adaptive_*_pool2d`, NCHW).
//!
//! Max pooling records each window's argmax (first maximum in row-major order wins ties;
//! padding never wins) and routes gradients through it; average pooling divides by the
//! in-input window area (`exclusive`, Paddle's default) or by `kh · kw`. Adaptive pooling
//! uses Paddle's bins `[floor(i·in/out), ceil((i+1)·in/out))`; global pooling is adaptive
//! pooling to 1×1.
//!
//! `ceil_mode` follows Paddle/PyTorch: the output may grow by one window, but the last
//! window must start inside the input or its top/left padding. Padding may be at most half
//! the kernel on each side, so no window is empty.
//!
//! Gradients of any order: the backward of average pooling is the transpose of its forward
//! (and vice versa); the max-pool backward (scatter to the argmax) and a plane gather at
//! the argmax are each other's transposes.

use crate::autograd::record1;
use crate::backend::cpu::CpuData;
use crate::backend::cpu::pool::{self as cpu, PoolGeom};
use crate::backend::gpu::{Bind, GpuBuffer, Kernel};
use crate::ops::wgsl;
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

use super::window::{Padding, Pair, check_nchw, check_positive};

pub(crate) static POOL2D: Kernel = Kernel { file: "pool2d.wgsl", variants: || vec![vec![]] };

/// Paddle's `max_pool2d` / `avg_pool2d` keyword arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool2dOptions {
    /// Window size `(kh, kw)`.
    pub kernel_size: Pair,
    /// Window step; `None` (the default) means `kernel_size`, as in Paddle.
    pub stride: Option<Pair>,
    /// Padding (at most half the kernel per side); padded positions never win a max and
    /// are not counted by an exclusive average.
    pub padding: Padding,
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Average pooling only: divide by the number of in-input elements of each window
    /// (true, Paddle's default) or by `kh · kw`.
    pub exclusive: bool,
    /// Only `"NCHW"` is supported.
    pub data_format: String,
}

impl Default for Pool2dOptions {
    /// A 1×1 window; set `kernel_size` (or use [`Pool2dOptions::new`]).
    fn default() -> Self {
        Pool2dOptions::new(1)
    }
}

impl Pool2dOptions {
    /// Options for a `kernel_size` window with Paddle's defaults (stride = kernel size, no
    /// padding, floor mode, exclusive averages).
    pub fn new(kernel_size: impl Into<Pair>) -> Self {
        Pool2dOptions {
            kernel_size: kernel_size.into(),
            stride: None,
            padding: Padding::default(),
            ceil_mode: false,
            exclusive: true,
            data_format: "NCHW".into(),
        }
    }
    /// Sets the stride (an int or `[sh, sw]`).
    pub fn stride(mut self, s: impl Into<Pair>) -> Self {
        self.stride = Some(s.into());
        self
    }
    /// Sets the padding (an int, `[ph, pw]`, `[top, bottom, left, right]` or a [`Padding`]).
    pub fn padding(mut self, p: impl Into<Padding>) -> Self {
        self.padding = p.into();
        self
    }
    /// Sets `ceil_mode`.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.ceil_mode = on;
        self
    }
    /// Sets `exclusive` (average pooling).
    pub fn exclusive(mut self, on: bool) -> Self {
        self.exclusive = on;
        self
    }
}

/// Max pooling over `kernel_size` windows of `x` `[N, C, H, W]`.
pub fn max_pool2d(x: &Tensor, options: &Pool2dOptions) -> Result<Tensor> {
    const OP: &str = "max_pool2d";
    let g = window_geometry(OP, x, options, false)?;
    Ok(max_pool(OP, x, g)?.0)
}

/// Max pooling that also returns, for every output, the flat index (`iy · W + ix`, int64)
/// of its maximum within its `H × W` plane (Paddle's `return_mask=True`).
pub fn max_pool2d_with_index(x: &Tensor, options: &Pool2dOptions) -> Result<(Tensor, Tensor)> {
    const OP: &str = "max_pool2d_with_index";
    let g = window_geometry(OP, x, options, false)?;
    let (out, idx) = max_pool(OP, x, g)?;
    Ok((out, idx.cast(DType::Int64)?))
}

/// Average pooling over `kernel_size` windows of `x` `[N, C, H, W]`.
pub fn avg_pool2d(x: &Tensor, options: &Pool2dOptions) -> Result<Tensor> {
    const OP: &str = "avg_pool2d";
    let g = window_geometry(OP, x, options, true)?;
    pool_float(x, |x| avg_pool(x, g))
}

/// Adaptive average pooling of `x` `[N, C, H, W]` to `output_size` `(oh, ow)`; an output of
/// 1 is global average pooling.
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: impl Into<Pair>) -> Result<Tensor> {
    const OP: &str = "adaptive_avg_pool2d";
    let g = adaptive_geometry(OP, x, output_size.into())?;
    pool_float(x, |x| avg_pool(x, g))
}

/// Adaptive max pooling of `x` `[N, C, H, W]` to `output_size` `(oh, ow)`.
pub fn adaptive_max_pool2d(x: &Tensor, output_size: impl Into<Pair>) -> Result<Tensor> {
    const OP: &str = "adaptive_max_pool2d";
    let g = adaptive_geometry(OP, x, output_size.into())?;
    Ok(max_pool(OP, x, g)?.0)
}

/// Adaptive max pooling returning also the int64 flat argmax index within each plane.
pub fn adaptive_max_pool2d_with_index(x: &Tensor, output_size: impl Into<Pair>) -> Result<(Tensor, Tensor)> {
    const OP: &str = "adaptive_max_pool2d_with_index";
    let g = adaptive_geometry(OP, x, output_size.into())?;
    let (out, idx) = max_pool(OP, x, g)?;
    Ok((out, idx.cast(DType::Int64)?))
}

/// Checks what every pooling needs of `x`: a 4-D float tensor (no float64 on the GPU).
fn check_input(op: &'static str, x: &Tensor) -> Result<[usize; 4]> {
    if !x.dtype().is_float() {
        return Err(Error::unsupported(op, x.dtype(), "(pooling needs a float tensor)"));
    }
    if matches!(x.place(), crate::Place::Gpu(_)) {
        wgsl::check_gpu_dtype(op, x.dtype(), x.place())?;
    }
    match *x.shape() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(Error::shape(op, format!("input must be 4-D [N, C, H, W], got shape {:?}", x.shape()))),
    }
}

/// Output size along one axis (see the module docs for `ceil_mode`).
fn out_size(
    op: &'static str,
    len: usize,
    (p0, p1): (usize, usize),
    k: usize,
    s: usize,
    ceil: bool,
    shape: &[usize],
) -> Result<usize> {
    let span = len + p0 + p1;
    if span < k {
        return Err(Error::shape(
            op,
            format!("output size would be <= 0: input {shape:?} with padding ({p0}, {p1}) is smaller than kernel {k}"),
        ));
    }
    let mut out = if ceil { (span - k).div_ceil(s) + 1 } else { (span - k) / s + 1 };
    if ceil && (out - 1) * s >= len + p0 {
        out -= 1;
    }
    Ok(out)
}

fn window_geometry(op: &'static str, x: &Tensor, o: &Pool2dOptions, avg: bool) -> Result<PoolGeom> {
    let [n, c, h, w] = check_input(op, x)?;
    check_nchw(op, &o.data_format)?;
    if h == 0 || w == 0 {
        return Err(Error::shape(op, format!("input plane is empty: shape {:?}", x.shape())));
    }
    let k = o.kernel_size;
    let s = o.stride.unwrap_or(k);
    check_positive(op, "kernel_size", k)?;
    check_positive(op, "stride", s)?;
    if o.padding == Padding::Valid && o.ceil_mode {
        return Err(Error::invalid(op, "ceil_mode must be false with padding \"VALID\""));
    }
    let p = o.padding.resolve([h, w], k.0, s.0);
    for (i, &pi) in p.iter().enumerate() {
        let ki = k.0[i / 2];
        if 2 * pi > ki {
            return Err(Error::invalid(
                op,
                format!("padding {p:?} must be at most half the kernel size {:?} on each side", k.0),
            ));
        }
    }
    let oh = out_size(op, h, (p[0], p[1]), k.h(), s.h(), o.ceil_mode, x.shape())?;
    let ow = out_size(op, w, (p[2], p[3]), k.w(), s.w(), o.ceil_mode, x.shape())?;
    Ok(PoolGeom {
        n,
        c,
        h,
        w,
        oh,
        ow,
        kh: k.h(),
        kw: k.w(),
        sh: s.h(),
        sw: s.w(),
        pt: p[0],
        pl: p[2],
        adaptive: false,
        exclusive: !avg || o.exclusive,
    })
}

fn adaptive_geometry(op: &'static str, x: &Tensor, out: Pair) -> Result<PoolGeom> {
    let [n, c, h, w] = check_input(op, x)?;
    check_positive(op, "output_size", out)?;
    if h == 0 || w == 0 {
        return Err(Error::shape(op, format!("input plane is empty: shape {:?}", x.shape())));
    }
    Ok(PoolGeom {
        n,
        c,
        h,
        w,
        oh: out.h(),
        ow: out.w(),
        kh: 0,
        kw: 0,
        sh: 1,
        sw: 1,
        pt: 0,
        pl: 0,
        adaptive: true,
        exclusive: true,
    })
}

/// Runs `f` in float32 for a float16 input and casts back.
fn pool_float(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    if x.dtype() == DType::Float16 {
        return f(&x.cast(DType::Float32)?)?.cast(DType::Float16);
    }
    f(x)
}

/// `pool2d.wgsl` parameters for `total` invocations.
fn params(g: &PoolGeom, total: usize) -> Vec<u32> {
    [
        total,
        g.planes(),
        g.h,
        g.w,
        g.oh,
        g.ow,
        g.kh,
        g.kw,
        g.sh,
        g.sw,
        g.pt,
        g.pl,
        g.adaptive as usize,
        g.exclusive as usize,
    ]
    .iter()
    .map(|&v| v as u32)
    .collect()
}

/// A new float32 GPU tensor of `shape` computed by the one-input `entry` (`avg_fwd`,
/// `avg_bwd`) from `src`.
fn gpu_run(op: &'static str, entry: &str, src: &GpuBuffer, g: &PoolGeom, shape: [usize; 4]) -> Result<Tensor> {
    let ctx = &src.ctx;
    let n: usize = shape.iter().product();
    let out = ctx.alloc(op, 4 * n.max(1) as u64)?;
    ctx.dispatch_1d(&POOL2D, &vec![], entry, &[Bind::read(src), Bind::write(&out)], &params(g, n), n as u64)?;
    Ok(Tensor::from_gpu(out, shape.to_vec(), DType::Float32))
}

/// Max pooling: `(out, int32 argmax)`, the output recorded for autograd.
fn max_pool(op: &'static str, x: &Tensor, g: PoolGeom) -> Result<(Tensor, Tensor)> {
    if x.dtype() == DType::Float16 {
        let (out, idx) = max_pool(op, &x.cast(DType::Float32)?, g)?;
        return Ok((out.cast(DType::Float16)?, idx));
    }
    let (out, idx) = match x.backend() {
        Backend::Cpu(d) => {
            let (out, idx) = match &*d {
                CpuData::F32(v) => {
                    let (o, i) = cpu::max_pool(v, &g);
                    (CpuData::F32(o), i)
                }
                CpuData::F64(v) => {
                    let (o, i) = cpu::max_pool(v, &g);
                    (CpuData::F64(o), i)
                }
                other => return Err(Error::unsupported(op, other.dtype(), "on the CPU")),
            };
            let shape = g.output_shape().to_vec();
            (Tensor::from_cpu(out, shape.clone()), Tensor::from_cpu(CpuData::I32(idx), shape))
        }
        Backend::Gpu(b) => {
            let ctx = &b.ctx;
            let n = g.planes() * g.out_plane();
            let out = ctx.alloc(op, 4 * n.max(1) as u64)?;
            let idx = ctx.alloc(op, 4 * n.max(1) as u64)?;
            let binds = [Bind::read(b), Bind::write(&out), Bind::write(&idx)];
            ctx.dispatch_1d(&POOL2D, &vec![], "max_fwd", &binds, &params(&g, n), n as u64)?;
            let shape = g.output_shape().to_vec();
            (Tensor::from_gpu(out, shape.clone(), DType::Float32), Tensor::from_gpu(idx, shape, DType::Int32))
        }
    };
    let idx_c = idx.clone();
    let out = record1(op, &[x], out, move |c| Ok(vec![Some(max_pool_grad(c.grad(), &idx_c, g)?)]));
    Ok((out, idx))
}

/// Gradient of max pooling: `dy` scattered to the argmax positions.
fn max_pool_grad(dy: &Tensor, idx: &Tensor, g: PoolGeom) -> Result<Tensor> {
    const OP: &str = "max_pool2d_grad";
    dy.same_place(OP, idx)?;
    let dx = match (dy.backend(), idx.backend()) {
        (Backend::Cpu(d), Backend::Cpu(i)) => {
            let CpuData::I32(i) = &*i else { unreachable!("argmax indices are int32") };
            let data = match &*d {
                CpuData::F32(v) => CpuData::F32(cpu::max_pool_backward(v, i, &g)),
                CpuData::F64(v) => CpuData::F64(cpu::max_pool_backward(v, i, &g)),
                other => return Err(Error::unsupported(OP, other.dtype(), "on the CPU")),
            };
            Tensor::from_cpu(data, g.input_shape().to_vec())
        }
        (Backend::Gpu(d), Backend::Gpu(i)) => {
            let total = g.planes() * g.in_plane();
            let ctx = &d.ctx;
            let out = ctx.alloc(OP, 4 * total.max(1) as u64)?;
            let binds = [Bind::read(d), Bind::read(i), Bind::write(&out)];
            ctx.dispatch_1d(&POOL2D, &vec![], "max_bwd", &binds, &params(&g, total), total as u64)?;
            Tensor::from_gpu(out, g.input_shape().to_vec(), DType::Float32)
        }
        _ => unreachable!("places were checked equal"),
    };
    let idx_c = idx.clone();
    Ok(record1(OP, &[dy], dx, move |c| Ok(vec![Some(plane_gather(c.grad(), &idx_c, g)?)])))
}

/// `out[p, o] = src[p, idx[p, o]]`: the gradient of `max_pool_grad`.
fn plane_gather(src: &Tensor, idx: &Tensor, g: PoolGeom) -> Result<Tensor> {
    const OP: &str = "max_pool2d_grad_grad";
    src.same_place(OP, idx)?;
    let out = match (src.backend(), idx.backend()) {
        (Backend::Cpu(s), Backend::Cpu(i)) => {
            let CpuData::I32(i) = &*i else { unreachable!("argmax indices are int32") };
            let data = match &*s {
                CpuData::F32(v) => CpuData::F32(cpu::plane_gather(v, i, &g)),
                CpuData::F64(v) => CpuData::F64(cpu::plane_gather(v, i, &g)),
                other => return Err(Error::unsupported(OP, other.dtype(), "on the CPU")),
            };
            Tensor::from_cpu(data, g.output_shape().to_vec())
        }
        (Backend::Gpu(s), Backend::Gpu(i)) => {
            let total = g.planes() * g.out_plane();
            let ctx = &s.ctx;
            let out = ctx.alloc(OP, 4 * total.max(1) as u64)?;
            let binds = [Bind::read(s), Bind::read(i), Bind::write(&out)];
            ctx.dispatch_1d(&POOL2D, &vec![], "gather", &binds, &params(&g, total), total as u64)?;
            Tensor::from_gpu(out, g.output_shape().to_vec(), DType::Float32)
        }
        _ => unreachable!("places were checked equal"),
    };
    let idx_c = idx.clone();
    Ok(record1(OP, &[src], out, move |c| Ok(vec![Some(max_pool_grad(c.grad(), &idx_c, g)?)])))
}

/// Average pooling, recorded for autograd (its backward is `avg_pool_grad`).
fn avg_pool(x: &Tensor, g: PoolGeom) -> Result<Tensor> {
    const OP: &str = "avg_pool2d";
    let out = match x.backend() {
        Backend::Cpu(d) => {
            let data = match &*d {
                CpuData::F32(v) => CpuData::F32(cpu::avg_pool(v, &g)),
                CpuData::F64(v) => CpuData::F64(cpu::avg_pool(v, &g)),
                other => return Err(Error::unsupported(OP, other.dtype(), "on the CPU")),
            };
            Tensor::from_cpu(data, g.output_shape().to_vec())
        }
        Backend::Gpu(b) => gpu_run(OP, "avg_fwd", b, &g, g.output_shape())?,
    };
    Ok(record1(OP, &[x], out, move |c| Ok(vec![Some(avg_pool_grad(c.grad(), g)?)])))
}

/// Gradient of average pooling (the transpose of `avg_pool`, whose gradient it is in turn).
fn avg_pool_grad(dy: &Tensor, g: PoolGeom) -> Result<Tensor> {
    const OP: &str = "avg_pool2d_grad";
    let dx = match dy.backend() {
        Backend::Cpu(d) => {
            let data = match &*d {
                CpuData::F32(v) => CpuData::F32(cpu::avg_pool_backward(v, &g)),
                CpuData::F64(v) => CpuData::F64(cpu::avg_pool_backward(v, &g)),
                other => return Err(Error::unsupported(OP, other.dtype(), "on the CPU")),
            };
            Tensor::from_cpu(data, g.input_shape().to_vec())
        }
        Backend::Gpu(b) => gpu_run(OP, "avg_bwd", b, &g, g.input_shape())?,
    };
    Ok(record1(OP, &[dy], dx, move |c| Ok(vec![Some(avg_pool(c.grad(), g)?)])))
}
