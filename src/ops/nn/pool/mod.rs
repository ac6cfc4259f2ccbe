//! 2-D pooling (`paddle.nn.functional.max_pool2d`, `avg_pool2d`, `adaptive_*_pool2d`, NCHW).
//!
//! Max pooling records each window's argmax (first maximum in row-major order wins ties;
//! padding never wins) and routes gradients through it; average pooling divides by the
//! in-input window area (`exclusive`, Paddle's default) or by the window's area inside the
//! padded input (`exclusive = false`: `kh · kw`, less where a `ceil_mode` window reaches past
//! the bottom/right padding, as Paddle and PyTorch). Adaptive pooling
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

pub(crate) mod cpu;

use crate::backend::cpu::CpuData;
use crate::backend::cpu::float_kernel;
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::registry::apply::{apply, apply1};
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::op_header;
use crate::ops::registry::{AmpList, Commute, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};
use cpu::PoolGeom;

use super::window::{Padding, Pair, check_nchw, check_positive};

/// Variant key 1: adaptive bins (`ADAPTIVE` in the shader), 0: fixed windows.
/// Keys: 1 for adaptive bins, with [`wgsl::F16_ELEMENTS`] for float16 tensors.
pub(crate) static POOL2D: Kernel = Kernel {
    file: "pool2d.wgsl",
    keys: || wgsl::with_f16_keys(vec![0, 1]),
    variant: |key| {
        let (adaptive, mut v) = wgsl::element_variant(key);
        v.push(("ADAPTIVE", (adaptive == 1).to_string()));
        v
    },
};

/// The variant key of a pooling kernel over `x`.
fn pool_key(g: &PoolGeom, x: &TensorMeta) -> u32 {
    g.adaptive as u32 | wgsl::f16_bit(x.dtype)
}

/// Paddle's `max_pool2d` / `avg_pool2d` keyword arguments.
#[derive(Clone, Debug, PartialEq, Eq, dygraph_derive::Attrs)]
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
    setters! {
        /// Sets the stride (an int or `[sh, sw]`).
        stride: impl Into<Pair> => Some;
        /// Sets the padding (an int, `[ph, pw]`, `[top, bottom, left, right]` or a [`Padding`]).
        padding: impl Into<Padding>;
        /// Sets `ceil_mode`.
        ceil_mode: bool;
        /// Sets `exclusive` (average pooling).
        exclusive: bool;
    }
}

/// Checks what every pooling needs of `x`: a 4-D float tensor.
fn check_input(op: &'static str, x: &TensorMeta) -> Result<[usize; 4]> {
    x.expect_float(op, "the input")?;
    match *x.dims() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(Error::shape(op, format!("input must be 4-D [N, C, H, W], got shape {:?}", x.dims()))),
    }
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
        g.pb,
        g.pr,
    ]
    .iter()
    .map(|&v| v as u32)
    .collect()
}

/// Runs the one-input `entry` (`avg_fwd`, `avg_bwd`) of pool2d.wgsl from `src` into `out`.
fn gpu_run(k: &GpuCall<'_>, entry: &'static str, g: &PoolGeom) -> Result<()> {
    let n = k.outs[0].numel();
    k.ctx.dispatch(
        &POOL2D,
        pool_key(g, &k.ins[0]),
        entry,
        &[Bind::read(k.x(0)), Bind::write(k.y(0))],
        &params(g, n),
        n as u64,
    )
}

/// How a pooling op gets its window geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Max,
    Avg,
    AdaptiveMax,
    AdaptiveAvg,
}

/// `max_pool2d` / `avg_pool2d` (attributes: the options) and their adaptive forms
/// (attributes: the output size). Max pooling outputs `[out, argmax]` (int32 flat index
/// within the plane).
pub(crate) struct PoolOp<A> {
    name: &'static str,
    kind: Kind,
    _attrs: std::marker::PhantomData<fn() -> A>,
}

impl<A> PoolOp<A> {
    const fn new(name: &'static str, kind: Kind) -> Self {
        PoolOp { name, kind, _attrs: std::marker::PhantomData }
    }
}

/// `adaptive_*_pool2d`'s attribute.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct AdaptiveAttrs {
    pub output_size: Pair,
}

pub(crate) static MAX_POOL2D: PoolOp<Pool2dOptions> = PoolOp::new("max_pool2d", Kind::Max);
pub(crate) static AVG_POOL2D: PoolOp<Pool2dOptions> = PoolOp::new("avg_pool2d", Kind::Avg);
pub(crate) static ADAPTIVE_MAX_POOL2D: PoolOp<AdaptiveAttrs> = PoolOp::new("adaptive_max_pool2d", Kind::AdaptiveMax);
pub(crate) static ADAPTIVE_AVG_POOL2D: PoolOp<AdaptiveAttrs> = PoolOp::new("adaptive_avg_pool2d", Kind::AdaptiveAvg);

/// The geometry of one pooling call, from its attributes.
trait PoolAttrs: crate::ops::Attrs {
    fn geometry(&self, op: &'static str, x: &TensorMeta, kind: Kind) -> Result<PoolGeom>;
}

impl PoolAttrs for Pool2dOptions {
    fn geometry(&self, op: &'static str, x: &TensorMeta, kind: Kind) -> Result<PoolGeom> {
        window_geometry(op, x, self, kind == Kind::Avg)
    }
}

impl PoolAttrs for AdaptiveAttrs {
    fn geometry(&self, op: &'static str, x: &TensorMeta, _: Kind) -> Result<PoolGeom> {
        adaptive_geometry(op, x, self.output_size)
    }
}

op_header!(impl<A: PoolAttrs> PoolOp<A>: A, PoolGeom; |op| op.name);

impl<A: PoolAttrs> Op for PoolOp<A> {
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    fn infer(&self, xs: &[&TensorMeta], a: &A) -> Result<(Vec<TensorMeta>, PoolGeom)> {
        let [x] = inputs(self.name, xs)?;
        let g = a.geometry(self.name, x, self.kind)?;
        let out = x.with_shape(g.output_shape().to_vec());
        Ok(match self.kind {
            Kind::Max | Kind::AdaptiveMax => (vec![out.clone(), out.with_dtype(DType::Int32)], g),
            Kind::Avg | Kind::AdaptiveAvg => (vec![out], g),
        })
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &A, g: &PoolGeom) -> Result<Vec<CpuData>> {
        match self.kind {
            Kind::Max | Kind::AdaptiveMax => {
                let (out, idx) = match k.x(0) {
                    CpuData::F32(v) => {
                        let (o, i) = cpu::max_pool(v, g);
                        (CpuData::F32(o), i)
                    }
                    CpuData::F64(v) => {
                        let (o, i) = cpu::max_pool(v, g);
                        (CpuData::F64(o), i)
                    }
                    other => return Err(Error::unsupported(self.name, other.dtype(), "on the CPU")),
                };
                Ok(vec![out, CpuData::I32(idx)])
            }
            Kind::Avg | Kind::AdaptiveAvg => Ok(vec![float_kernel!(self.name; v = k.x(0) => cpu::avg_pool(v, g))?]),
        }
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &A, g: &PoolGeom) -> Result<()> {
        match self.kind {
            Kind::Max | Kind::AdaptiveMax => {
                let n = k.outs[0].numel();
                let binds = [Bind::read(k.x(0)), Bind::write(k.y(0)), Bind::write(k.y(1))];
                k.ctx.dispatch(&POOL2D, pool_key(g, &k.ins[0]), "max_fwd", &binds, &params(g, n), n as u64)
            }
            Kind::Avg | Kind::AdaptiveAvg => gpu_run(k, "avg_fwd", g),
        }
    }

    fn aux_outputs(&self) -> usize {
        matches!(self.kind, Kind::Max | Kind::AdaptiveMax) as usize
    }

    fn facts(&self) -> Facts {
        let max = matches!(self.kind, Kind::Max | Kind::AdaptiveMax);
        // max_pool2d is Paddle's `max_pool2d_with_index`, on float16's white list.
        let amp = if matches!(self.kind, Kind::Max) { AmpList::WhiteFloat16 } else { AmpList::Gray };
        Facts { commute: max.then_some(Commute::MaxWindow { grad: POOL2D_MAX_GRAD.name }), amp, ..Facts::NONE }
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, c: &GradCall<'_>, _: &A, g: &PoolGeom) -> Result<Vec<Option<Tensor>>> {
        let gx = || match self.kind {
            Kind::Max | Kind::AdaptiveMax => apply1(&POOL2D_MAX_GRAD, &[c.g(), &c.y(1)?], PoolGeom { n: 0, ..*g }),
            Kind::Avg | Kind::AdaptiveAvg => apply1(&POOL2D_AVG_GRAD, &[c.g()], PoolGeom { n: 0, ..*g }),
        };
        Ok(vec![c.grad_if(0, gx)?])
    }
}

/// The pooling primitives by explicit geometry, for gradients of any order: average pooling
/// and its transpose, the max-pool gradient (scatter to the argmax, inputs `[dy, argmax]`)
/// and its transpose (a plane gather at the argmax, inputs `[src, argmax]`).
pub(crate) struct PoolPrimitiveOp {
    name: &'static str,
    entry: &'static str,
}

pub(crate) static POOL2D_AVG: PoolPrimitiveOp = PoolPrimitiveOp { name: "pool2d_avg", entry: "avg_fwd" };
pub(crate) static POOL2D_AVG_GRAD: PoolPrimitiveOp = PoolPrimitiveOp { name: "pool2d_avg_grad", entry: "avg_bwd" };
pub(crate) static POOL2D_MAX_GRAD: PoolPrimitiveOp = PoolPrimitiveOp { name: "pool2d_max_grad", entry: "max_bwd" };
pub(crate) static POOL2D_GATHER: PoolPrimitiveOp = PoolPrimitiveOp { name: "pool2d_gather", entry: "gather" };

impl PoolPrimitiveOp {
    /// Reads the input plane and writes the output plane (else the reverse).
    fn forward(&self) -> bool {
        matches!(self.entry, "avg_fwd" | "gather")
    }

    fn uses_argmax(&self) -> bool {
        matches!(self.entry, "max_bwd" | "gather")
    }
}

op_header!(PoolPrimitiveOp: PoolGeom, PoolGeom; |op| op.name);

impl Op for PoolPrimitiveOp {
    fn half(&self) -> Half {
        Half::GpuFloat16
    }
    /// A geometry with `n = 0` takes the batch from input 0 (see the conv products).
    fn infer(&self, xs: &[&TensorMeta], g: &PoolGeom) -> Result<(Vec<TensorMeta>, PoolGeom)> {
        let mut g = *g;
        if g.n == 0 {
            g.n = xs.first().and_then(|x| x.dims().first().copied()).unwrap_or(0);
        }
        let (src_shape, dst_shape) =
            if self.forward() { (g.input_shape(), g.output_shape()) } else { (g.output_shape(), g.input_shape()) };
        let n = 1 + self.uses_argmax() as usize;
        if xs.len() != n {
            return Err(Error::invalid(self.name, format!("takes {n} tensors, got {}", xs.len())));
        }
        let x = xs[0];
        x.expect_float(self.name, "the input")?;
        if x.dims() != src_shape {
            return Err(Error::shape(self.name, format!("input {:?} {} does not fit {g:?}", x.dims(), x.dtype)));
        }
        if self.uses_argmax() && (xs[1].dims() != g.output_shape() || xs[1].dtype != DType::Int32) {
            return Err(Error::shape(
                self.name,
                format!("argmax {:?} {} does not fit {g:?}", xs[1].dims(), xs[1].dtype),
            ));
        }
        Ok((vec![x.with_shape(dst_shape.to_vec())], g))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &PoolGeom, g: &PoolGeom) -> Result<Vec<CpuData>> {
        let idx = || match k.x(1) {
            CpuData::I32(i) => Ok(i),
            other => Err(Error::unsupported(self.name, other.dtype(), "for the argmax (expected int32)")),
        };
        Ok(vec![match self.entry {
            "avg_fwd" => float_kernel!(self.name; v = k.x(0) => cpu::avg_pool(v, g))?,
            "avg_bwd" => float_kernel!(self.name; v = k.x(0) => cpu::avg_pool_backward(v, g))?,
            "max_bwd" => {
                let i = idx()?;
                float_kernel!(self.name; v = k.x(0) => cpu::max_pool_backward(v, i, g))?
            }
            _ => {
                let i = idx()?;
                float_kernel!(self.name; v = k.x(0) => cpu::plane_gather(v, i, g))?
            }
        }])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &PoolGeom, g: &PoolGeom) -> Result<()> {
        if !self.uses_argmax() {
            return gpu_run(k, self.entry, g);
        }
        let binds = [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::write(k.y(0))];
        if self.entry == "max_bwd" && g.tiles_input() {
            let windows = k.ins[0].numel();
            return k.ctx.dispatch(
                &POOL2D,
                pool_key(g, &k.ins[0]),
                "max_bwd_tiles",
                &binds,
                &params(g, windows),
                windows as u64,
            );
        }
        let n = k.outs[0].numel();
        k.ctx.dispatch(&POOL2D, pool_key(g, &k.ins[0]), self.entry, &binds, &params(g, n), n as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, c: &GradCall<'_>, _: &PoolGeom, g: &PoolGeom) -> Result<Vec<Option<Tensor>>> {
        let h = c.g();
        let g = PoolGeom { n: 0, ..*g };
        let gx = || match self.entry {
            "avg_fwd" => apply1(&POOL2D_AVG_GRAD, &[h], g),
            "avg_bwd" => apply1(&POOL2D_AVG, &[h], g),
            "max_bwd" => apply1(&POOL2D_GATHER, &[h, c.x(1)], g),
            _ => apply1(&POOL2D_MAX_GRAD, &[h, c.x(1)], g),
        };
        let mut v = vec![c.grad_if(0, gx)?];
        if self.uses_argmax() {
            v.push(None);
        }
        Ok(v)
    }
}

fn with_index(op: &'static str, v: Vec<Tensor>) -> Result<(Tensor, Tensor)> {
    let [out, idx] = <[Tensor; 2]>::try_from(v).map_err(|_| Error::invalid(op, "expected two outputs"))?;
    Ok((out, idx.cast(DType::Int64)?))
}

/// Max pooling over `kernel_size` windows of `x` `[N, C, H, W]`.
pub fn max_pool2d(x: &Tensor, options: &Pool2dOptions) -> Result<Tensor> {
    apply1(&MAX_POOL2D, &[x], options.clone())
}

/// Max pooling that also returns, for every output, the flat index (`iy · W + ix`, int64)
/// of its maximum within its `H × W` plane (Paddle's `return_mask=True`).
pub fn max_pool2d_with_index(x: &Tensor, options: &Pool2dOptions) -> Result<(Tensor, Tensor)> {
    let outs =
        apply(&MAX_POOL2D, &[x], options.clone()).map_err(|e| e.called_as("max_pool2d", "max_pool2d_with_index"))?;
    with_index("max_pool2d_with_index", outs)
}

/// Average pooling over `kernel_size` windows of `x` `[N, C, H, W]`.
pub fn avg_pool2d(x: &Tensor, options: &Pool2dOptions) -> Result<Tensor> {
    apply1(&AVG_POOL2D, &[x], options.clone())
}

/// Adaptive average pooling of `x` `[N, C, H, W]` to `output_size` `(oh, ow)`; an output of
/// 1 is global average pooling.
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: impl Into<Pair>) -> Result<Tensor> {
    apply1(&ADAPTIVE_AVG_POOL2D, &[x], AdaptiveAttrs { output_size: output_size.into() })
}

/// Adaptive max pooling of `x` `[N, C, H, W]` to `output_size` `(oh, ow)`.
pub fn adaptive_max_pool2d(x: &Tensor, output_size: impl Into<Pair>) -> Result<Tensor> {
    apply1(&ADAPTIVE_MAX_POOL2D, &[x], AdaptiveAttrs { output_size: output_size.into() })
}

/// Adaptive max pooling returning also the int64 flat argmax index within each plane.
pub fn adaptive_max_pool2d_with_index(x: &Tensor, output_size: impl Into<Pair>) -> Result<(Tensor, Tensor)> {
    let outs = apply(&ADAPTIVE_MAX_POOL2D, &[x], AdaptiveAttrs { output_size: output_size.into() })
        .map_err(|e| e.called_as("adaptive_max_pool2d", "adaptive_max_pool2d_with_index"))?;
    with_index("adaptive_max_pool2d_with_index", outs)
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

fn window_geometry(op: &'static str, x: &TensorMeta, o: &Pool2dOptions, avg: bool) -> Result<PoolGeom> {
    let [n, c, h, w] = check_input(op, x)?;
    check_nchw(op, &o.data_format)?;
    if h == 0 || w == 0 {
        return Err(Error::shape(op, format!("input plane is empty: shape {:?}", x.dims())));
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
        if pi > ki / 2 {
            return Err(Error::invalid(
                op,
                format!("padding {p:?} must be at most half the kernel size {:?} on each side", k.0),
            ));
        }
    }
    let oh = out_size(op, h, (p[0], p[1]), k.h(), s.h(), o.ceil_mode, x.dims())?;
    let ow = out_size(op, w, (p[2], p[3]), k.w(), s.w(), o.ceil_mode, x.dims())?;
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
        pb: p[1],
        pr: p[3],
        adaptive: false,
        exclusive: !avg || o.exclusive,
    })
}

fn adaptive_geometry(op: &'static str, x: &TensorMeta, out: Pair) -> Result<PoolGeom> {
    let [n, c, h, w] = check_input(op, x)?;
    check_positive(op, "output_size", out)?;
    if h == 0 || w == 0 {
        return Err(Error::shape(op, format!("input plane is empty: shape {:?}", x.dims())));
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
        pb: 0,
        pr: 0,
        adaptive: true,
        exclusive: true,
    })
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[
        &MAX_POOL2D,
        &AVG_POOL2D,
        &ADAPTIVE_MAX_POOL2D,
        &ADAPTIVE_AVG_POOL2D,
        &POOL2D_AVG,
        &POOL2D_AVG_GRAD,
        &POOL2D_MAX_GRAD,
        &POOL2D_GATHER,
    ],
    kernels: &[&POOL2D],
};
