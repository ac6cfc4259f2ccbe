//! 2-D convolution (`paddle.nn.functional.conv2d`, NCHW) and its gradients.
//!
//! Three products make up a convolution layer: the output, the input gradient and the
//! weight gradient. Each is an op here (`conv2d`, `conv2d_grad_input`, `conv2d_grad_weight`)
//! whose own backward is written in the other two, so gradients of any order exist:
//! with `y = conv(x, w)`, `<g, y> = <Dx(g, w), x> = <Dw(x, g), w>` gives
//! `d Dx(g, w) = (conv(h, w), Dw(h, g))` and `d Dw(x, g) = (Dx(g, h), conv(x, h))`.
//! CPU: im2col + GEMM. GPU: implicit GEMM (shaders/conv2d.wgsl).

use crate::autograd::record1;
use crate::backend::cpu::CpuData;
use crate::backend::cpu::conv::{self as cpu_conv, ConvGeom};
use crate::backend::gpu::{Bind, Kernel};
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

pub(crate) static CONV2D: Kernel = Kernel {
    file: "conv2d.wgsl",
    variants: || ["fwd", "dx", "dw"].iter().map(|m| vec![("MODE", m.to_string())]).collect(),
};

/// A height/width pair (`int` or `[h, w]` in Paddle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size2(pub [usize; 2]);

impl From<usize> for Size2 {
    fn from(v: usize) -> Self {
        Size2([v, v])
    }
}

impl From<[usize; 2]> for Size2 {
    fn from(v: [usize; 2]) -> Self {
        Size2(v)
    }
}

/// Convolution padding: explicit `[top, bottom, left, right]`, or Paddle's "SAME" (output
/// `ceil(in / stride)`, the odd pixel at the bottom/right) or "VALID" (none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// `[top, bottom, left, right]`.
    Explicit([usize; 4]),
    /// Keep `ceil(in / stride)` outputs.
    Same,
    /// No padding.
    Valid,
}

impl Padding {
    /// Parses "SAME" or "VALID" (any case).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "SAME" => Ok(Padding::Same),
            "VALID" => Ok(Padding::Valid),
            _ => Err(Error::invalid("conv2d", format!("padding {s:?}: expected \"SAME\", \"VALID\" or numbers"))),
        }
    }
}

impl From<usize> for Padding {
    fn from(p: usize) -> Self {
        Padding::Explicit([p; 4])
    }
}

impl From<[usize; 2]> for Padding {
    /// `[ph, pw]`: symmetric.
    fn from([ph, pw]: [usize; 2]) -> Self {
        Padding::Explicit([ph, ph, pw, pw])
    }
}

impl From<[usize; 4]> for Padding {
    /// `[top, bottom, left, right]`.
    fn from(p: [usize; 4]) -> Self {
        Padding::Explicit(p)
    }
}

/// Paddle's keyword arguments of `F.conv2d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between windows (default 1).
    pub stride: Size2,
    /// Padding (default 0).
    pub padding: Padding,
    /// Spacing of kernel taps (default 1).
    pub dilation: Size2,
    /// Channel groups (default 1; `groups = C` is depthwise).
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: Size2([1, 1]), padding: Padding::Explicit([0; 4]), dilation: Size2([1, 1]), groups: 1 }
    }
}

impl Conv2dOptions {
    /// Sets the stride.
    pub fn stride(mut self, s: impl Into<Size2>) -> Self {
        self.stride = s.into();
        self
    }

    /// Sets the padding.
    pub fn padding(mut self, p: impl Into<Padding>) -> Self {
        self.padding = p.into();
        self
    }

    /// Sets the dilation.
    pub fn dilation(mut self, d: impl Into<Size2>) -> Self {
        self.dilation = d.into();
        self
    }

    /// Sets the number of groups.
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
}

/// Checks operands' places and dtypes, then computes the geometry.
fn geometry(x: &Tensor, w: &Tensor, opts: &Conv2dOptions) -> Result<ConvGeom> {
    const OP: &str = "conv2d";
    x.same_place(OP, w)?;
    x.same_dtype(OP, w)?;
    x.expect_float(OP)?;
    geometry_of(x.shape(), w.shape(), opts)
}

/// The geometry (output size, resolved padding) of input `xs` and weight `wsh` shapes.
fn geometry_of(xs: &[usize], wsh: &[usize], opts: &Conv2dOptions) -> Result<ConvGeom> {
    const OP: &str = "conv2d";
    if xs.len() != 4 {
        return Err(Error::shape(OP, format!("input must be 4-D NCHW, got {xs:?}")));
    }
    if wsh.len() != 4 {
        return Err(Error::shape(OP, format!("weight must be 4-D [out, in/groups, kh, kw], got {wsh:?}")));
    }
    let (n, c, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (cout, cin_g, kh, kw) = (wsh[0], wsh[1], wsh[2], wsh[3]);
    let g = opts.groups;
    if g == 0 || c % g != 0 || cout % g != 0 || cin_g * g != c {
        return Err(Error::shape(
            OP,
            format!(
                "channels do not fit groups={g}: input {xs:?} has {c} channels, weight {wsh:?} expects {cin_g}×groups input and {cout} output channels (both must divide by groups)"
            ),
        ));
    }
    let [sh, sw] = opts.stride.0;
    let [dh, dw] = opts.dilation.0;
    if sh == 0 || sw == 0 || dh == 0 || dw == 0 || kh == 0 || kw == 0 {
        return Err(Error::invalid(
            OP,
            format!(
                "stride {:?}, dilation {:?} and kernel {:?} must be positive",
                opts.stride.0,
                opts.dilation.0,
                [kh, kw]
            ),
        ));
    }
    let (ekh, ekw) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
    let [pt, pb, pl, pr] = match opts.padding {
        Padding::Explicit(p) => p,
        Padding::Valid => [0; 4],
        Padding::Same => {
            let pad = |i: usize, s: usize, ek: usize| {
                let out = i.div_ceil(s);
                ((out.saturating_sub(1)) * s + ek).saturating_sub(i)
            };
            let (ph, pw) = (pad(h, sh, ekh), pad(wd, sw, ekw));
            [ph / 2, ph - ph / 2, pw / 2, pw - pw / 2]
        }
    };
    let (hp, wp) = (h + pt + pb, wd + pl + pr);
    if hp < ekh || wp < ekw {
        return Err(Error::shape(
            OP,
            format!(
                "kernel {:?} (dilated to {:?}) is larger than the padded input {:?}",
                [kh, kw],
                [ekh, ekw],
                [hp, wp]
            ),
        ));
    }
    let (oh, ow) = ((hp - ekh) / sh + 1, (wp - ekw) / sw + 1);
    Ok(ConvGeom { n, c, h, w: wd, cout, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw, groups: g })
}

/// Which product of the convolution.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Product {
    Forward,
    GradInput,
    GradWeight,
}

/// Runs one product on the backend of `a` (weight or gradient) and `b` (image or gradient).
fn run(p: Product, a: &Tensor, b: &Tensor, bias: Option<&Tensor>, geo: &ConvGeom) -> Result<Tensor> {
    let shape = match p {
        Product::Forward => vec![geo.n, geo.cout, geo.oh, geo.ow],
        Product::GradInput => vec![geo.n, geo.c, geo.h, geo.w],
        Product::GradWeight => vec![geo.cout, geo.cin_g(), geo.kh, geo.kw],
    };
    let unsupported = || Error::unsupported("conv2d", a.dtype(), "(float32 or float64)");
    match (a.backend(), b.backend()) {
        (Backend::Cpu(ad), Backend::Cpu(bd)) => {
            let bias_data = match bias {
                Some(t) => Some(t.to_cpu_data("conv2d")?),
                None => None,
            };
            let data = match (&*ad, &*bd, &bias_data) {
                (CpuData::F32(a), CpuData::F32(b), bias) => CpuData::F32(match p {
                    Product::Forward => cpu_conv::conv2d_forward(
                        b,
                        a,
                        bias.as_ref().and_then(|d| crate::backend::cpu::typed_ref::<f32>(d)).map(|v| v.as_slice()),
                        geo,
                    ),
                    Product::GradInput => cpu_conv::conv2d_grad_input(b, a, geo),
                    Product::GradWeight => cpu_conv::conv2d_grad_weight(b, a, geo),
                }),
                (CpuData::F64(a), CpuData::F64(b), bias) => CpuData::F64(match p {
                    Product::Forward => cpu_conv::conv2d_forward(
                        b,
                        a,
                        bias.as_ref().and_then(|d| crate::backend::cpu::typed_ref::<f64>(d)).map(|v| v.as_slice()),
                        geo,
                    ),
                    Product::GradInput => cpu_conv::conv2d_grad_input(b, a, geo),
                    Product::GradWeight => cpu_conv::conv2d_grad_weight(b, a, geo),
                }),
                _ => return Err(unsupported()),
            };
            Ok(Tensor::from_cpu(data, shape))
        }
        (Backend::Gpu(ab), Backend::Gpu(bb)) => {
            let ctx = &ab.ctx;
            let numel: usize = shape.iter().product();
            let out = ctx.alloc("conv2d", 4 * numel as u64)?;
            let (m, n, k, mode) = match p {
                Product::Forward => (geo.cout_g(), geo.n * geo.ohw(), geo.k(), "fwd"),
                Product::GradInput => (geo.cin_g(), geo.n * geo.h * geo.w, geo.cout_g() * geo.kh * geo.kw, "dx"),
                Product::GradWeight => (geo.cout_g(), geo.k(), geo.n * geo.ohw(), "dw"),
            };
            if numel > 0 {
                let params = [
                    m,
                    n,
                    k,
                    geo.n,
                    geo.c,
                    geo.h,
                    geo.w,
                    geo.cout,
                    geo.oh,
                    geo.ow,
                    geo.kh,
                    geo.kw,
                    geo.sh,
                    geo.sw,
                    geo.pt,
                    geo.pl,
                    geo.dh,
                    geo.dw,
                    geo.cin_g(),
                    geo.cout_g(),
                    bias.is_some() as usize,
                ]
                .map(|v| v as u32);
                let bias_buf = match bias.map(|t| t.backend()) {
                    Some(Backend::Gpu(bb)) => bb.clone(),
                    _ => ab.clone(),
                };
                let software = ctx.is_software();
                let entry = if software { "direct" } else { "main" };
                let groups = [n.div_ceil(64) as u32, m.div_ceil(64) as u32, geo.groups as u32];
                ctx.dispatch(
                    &CONV2D,
                    &vec![("MODE", mode.to_string())],
                    entry,
                    &[Bind::read(ab), Bind::read(bb), Bind::write(&out), Bind::read(&bias_buf)],
                    &params,
                    groups,
                )?;
            } else if p == Product::GradWeight {
                // No samples: the weight gradient is zero, not uninitialised memory.
                return crate::zeros_on(&shape, a.dtype(), a.place());
            }
            Ok(Tensor::from_gpu(out, shape, DType::Float32))
        }
        _ => unreachable!("places were checked equal"),
    }
}

fn conv_impl(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: Conv2dOptions) -> Result<Tensor> {
    let geo = geometry(x, weight, &opts)?;
    if let Some(b) = bias {
        x.same_place("conv2d", b)?;
        x.same_dtype("conv2d", b)?;
        if b.shape() != [geo.cout] {
            return Err(Error::shape(
                "conv2d",
                format!("bias {:?} must be [{}] (the weight's output channels)", b.shape(), geo.cout),
            ));
        }
    }
    let out = run(Product::Forward, weight, x, bias, &geo)?;
    let (xs, ws) = (x.clone(), weight.clone());
    let mut inputs = vec![x, weight];
    if let Some(b) = bias {
        inputs.push(b);
    }
    Ok(record1("conv2d", &inputs, out, move |c| {
        let g = c.grad();
        Ok(vec![
            if c.needs(0) { Some(grad_input(g, &ws, xs.shape(), opts)?) } else { None },
            if c.needs(1) { Some(grad_weight(&xs, g, ws.shape(), opts)?) } else { None },
            if c.needs(2) { Some(g.sum(&[0, 2, 3], false)?) } else { None },
        ])
    }))
}

/// 2-D convolution of `x: [N, C, H, W]` with `weight: [Cout, C/groups, KH, KW]` plus an
/// optional `bias: [Cout]` (`paddle.nn.functional.conv2d`).
pub fn conv2d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, options: &Conv2dOptions) -> Result<Tensor> {
    if x.dtype() == DType::Float16 {
        let f = |t: &Tensor| t.cast(DType::Float32);
        let b = bias.map(f).transpose()?;
        return conv_impl(&f(x)?, &f(weight)?, b.as_ref(), *options)?.cast(DType::Float16);
    }
    conv_impl(x, weight, bias, *options)
}

/// `∂<g, conv(x, w)>/∂x`: the input gradient (a transposed convolution of `g`).
pub fn conv2d_grad_input(g: &Tensor, weight: &Tensor, x_shape: &[usize], options: Conv2dOptions) -> Result<Tensor> {
    grad_input(g, weight, x_shape, options)
}

/// `∂<g, conv(x, w)>/∂w`: the weight gradient.
pub fn conv2d_grad_weight(x: &Tensor, g: &Tensor, w_shape: &[usize], options: Conv2dOptions) -> Result<Tensor> {
    grad_weight(x, g, w_shape, options)
}

fn grad_input(g: &Tensor, w: &Tensor, x_shape: &[usize], opts: Conv2dOptions) -> Result<Tensor> {
    g.same_place("conv2d", w)?;
    g.same_dtype("conv2d", w)?;
    let geo = geometry_of(x_shape, w.shape(), &opts)?;
    check_grad_shape(g, &geo)?;
    let out = run(Product::GradInput, w, g, None, &geo)?;
    let (gs, ws) = (g.clone(), w.clone());
    Ok(record1("conv2d_grad_input", &[g, w], out, move |c| {
        let h = c.grad();
        Ok(vec![
            if c.needs(0) { Some(conv_impl(h, &ws, None, opts)?) } else { None },
            if c.needs(1) { Some(grad_weight(h, &gs, ws.shape(), opts)?) } else { None },
        ])
    }))
}

fn grad_weight(x: &Tensor, g: &Tensor, w_shape: &[usize], opts: Conv2dOptions) -> Result<Tensor> {
    x.same_place("conv2d", g)?;
    x.same_dtype("conv2d", g)?;
    let geo = geometry_of(x.shape(), w_shape, &opts)?;
    check_grad_shape(g, &geo)?;
    let out = run(Product::GradWeight, g, x, None, &geo)?;
    let (xs, gs) = (x.clone(), g.clone());
    Ok(record1("conv2d_grad_weight", &[x, g], out, move |c| {
        let h = c.grad();
        Ok(vec![
            if c.needs(0) { Some(grad_input(&gs, h, xs.shape(), opts)?) } else { None },
            if c.needs(1) { Some(conv_impl(&xs, h, None, opts)?) } else { None },
        ])
    }))
}

fn check_grad_shape(g: &Tensor, geo: &ConvGeom) -> Result<()> {
    let expect = [geo.n, geo.cout, geo.oh, geo.ow];
    if g.shape() != expect {
        return Err(Error::shape(
            "conv2d",
            format!("output gradient {:?} does not match the output shape {expect:?}", g.shape()),
        ));
    }
    Ok(())
}
