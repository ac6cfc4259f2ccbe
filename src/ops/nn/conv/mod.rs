//! 2-D convolution (`paddle.nn.functional.conv2d`, NCHW) and its gradients.
//!
//! A convolution layer is three products, each an op here: the output `F(x, w)`, the input
//! gradient `D(dy, w)` and the weight gradient `W(x, dy)`. With `<dy, F(x, w)> =
//! <D(dy, w), x> = <W(x, dy), w>`, each op's backward is written in the other two, so
//! gradients of any order exist:
//! `d D(g, w) · h = (F(h, w), W(h, g))` and `d W(x, g) · h = (D(g, h), F(x, h))`.
//!
//! CPU: im2col + GEMM (`cpu.rs` of this folder). GPU: one implicit-GEMM template
//! (`shaders/conv2d.wgsl`) instantiated for the three products, im2col never materialised:
//! a tiled entry (64-column tiles, K staged through workgroup memory) and a barrier-free
//! entry of small per-invocation blocks for software adapters and thin problems (see
//! `entry`). The weight gradient splits its long reduction (n·oh·ow) over workgroups, each
//! writing a partial slice that is then summed in a fixed order: deterministic, no atomics.

mod block;
pub(crate) mod cpu;
pub(crate) mod epilogue;

use crate::ops::registry::{AmpList, EpilogueHost, Facts};
use std::sync::OnceLock;

use crate::backend::cpu::CpuData;
use crate::backend::cpu::float_kernel;
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel, Variant, grid};
use crate::ops::epilogue::Epilogue;
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::{op_header, registry_entry};
use crate::ops::{split_k, wgsl};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Scalar, Tensor};
use cpu::ConvGeom;

use super::window::{Padding, Pair, check_nchw, check_positive};
use block::{VECTOR_ROWS, WIDE_ROWS, vector_rows, wide_rows};

/// Variant keys: `product·32 + cols/8·16 + rm` ([`conv_key`]), plus [`STRIDED`] for an input
/// gradient whose stride is not 1 (for the columns' `col2im`, or whose dilation is not 1),
/// plus [`VECTOR`] for the columns product's wide block that loads vec4s, plus
/// [`EPILOGUE_STEP`] × the number of an epilogue (forward only); the keys without an
/// epilogue also have float16 variants ([`wgsl::f16_product_keys`]).
pub(crate) static CONV2D: Kernel = Kernel {
    file: "conv2d.wgsl",
    keys: || {
        let mut v = Vec::new();
        for product in [Product::Fwd, Product::BwdData, Product::BwdFilter] {
            v.extend(block_keys(product));
        }
        let columns = WIDE_ROWS.map(|rm| conv_key(Product::BwdCols, rm as u32, 8));
        v.extend(columns);
        v.extend(block_keys(Product::BwdData).into_iter().chain(columns).map(|key| key + STRIDED));
        let vector = VECTOR_ROWS.map(|rm| conv_key(Product::BwdCols, rm as u32, 8) + VECTOR);
        v.extend(vector.into_iter().chain(vector.map(|key| key + STRIDED)));
        let half: Vec<u32> = v.iter().flat_map(|&key| wgsl::f16_product_keys(key)).collect();
        v.extend(half);
        for number in epilogue::EPILOGUES.numbers().into_iter().skip(1) {
            v.extend(block_keys(Product::Fwd).into_iter().map(|key| key + EPILOGUE_STEP * number));
        }
        v
    },
    variant: |key| {
        let (key, mut v, operands, result) = wgsl::f16_product_types(key);
        let base = key % STRIDED;
        let product = PRODUCTS[(base / 32) as usize % PRODUCTS.len()];
        let cols = if base % 32 >= 16 { 8 } else { 4 };
        let (strided, vector) = ((key / STRIDED) % 2 == 1, (key / VECTOR) % 2 == 1);
        v.extend(variant(product, base % 16, cols, strided, vector, operands));
        // The bias has the operands' dtype also where a float16 variant reads f32 slices.
        let bias = if v.iter().any(|(k, _)| *k == "ENABLE") { "f16" } else { "f32" };
        v.extend([("BS", bias.to_string()), ("DS", result.to_string())]);
        v.extend(epilogue::EPILOGUES.variant(key / EPILOGUE_STEP));
        v
    },
};

/// A product's keys: rows 1, 2 and 4 with 4 columns (the tiled entry's row counts, and the
/// direct entry's on hardware), and [`WIDE_ROWS`] with 8 columns (direct, software).
fn block_keys(product: Product) -> Vec<u32> {
    let narrow = [1, 2, 4].map(|rm| conv_key(product, rm, 4));
    let wide = WIDE_ROWS.map(|rm| conv_key(product, rm as u32, 8));
    narrow.into_iter().chain(wide).collect()
}

/// The variant key flag of an input gradient with a stride above 1 (for the columns'
/// `col2im`, or a dilation above 1): its gather checks that each tap lands on the stride's
/// grid. Unit strides (most convolutions) skip the check at compile time, which software
/// adapters do not do for a uniform branch (lavapipe: the MNIST step's largest kernel,
/// conv2's input gradient, 160 → 72 ms).
const STRIDED: u32 = 128;

/// The variant key flag of the columns product whose wide block loads vec4s (see
/// `gpu_product`): lavapipe loads a vec4 lane by lane as it does an f32, so four values
/// cost about two (MNIST step: 18 → 12 ms).
const VECTOR: u32 = 256;

/// The variant key step of the forward's epilogue number.
pub(crate) const EPILOGUE_STEP: u32 = 512;

fn conv_key(product: Product, rm: u32, cols: u32) -> u32 {
    product as u32 * 32 + cols / 8 * 16 + rm
}

/// Paddle's `conv2d` keyword arguments.
#[derive(Clone, Debug, PartialEq, Eq, dygraph_derive::Attrs)]
pub struct Conv2dOptions {
    /// Window step `(sh, sw)`; default 1.
    pub stride: Pair,
    /// Zero padding; default 0. See [`Padding`].
    pub padding: Padding,
    /// Spacing between kernel taps `(dh, dw)`; default 1.
    pub dilation: Pair,
    /// Channel groups: input and output channels are split into `groups` independent
    /// convolutions (`groups == in_channels` is a depthwise convolution); default 1.
    pub groups: usize,
    /// Only `"NCHW"` is supported.
    pub data_format: String,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: Pair([1, 1]),
            padding: Padding::default(),
            dilation: Pair([1, 1]),
            groups: 1,
            data_format: "NCHW".into(),
        }
    }
}

impl Conv2dOptions {
    /// The defaults: stride 1, padding 0, dilation 1, groups 1.
    pub fn new() -> Self {
        Self::default()
    }
    setters! {
        /// Sets the stride (an int or `[sh, sw]`).
        stride: impl Into<Pair>;
        /// Sets the padding (an int, `[ph, pw]`, `[top, bottom, left, right]` or a [`Padding`]).
        padding: impl Into<Padding>;
        /// Sets the dilation (an int or `[dh, dw]`).
        dilation: impl Into<Pair>;
        /// Sets the number of groups.
        groups: usize;
    }
}

const OP: &str = "conv2d";

registry_entry!(
    /// The convolution's output `F(x, w) + b`: inputs `[x, weight, bias?]`.
    CONV2D_OP: Conv2dOp = OP, Conv2dOptions, ConvGeom
);

impl Op for Conv2dOp {
    fn infer(&self, xs: &[&TensorMeta], o: &Conv2dOptions) -> Result<(Vec<TensorMeta>, ConvGeom)> {
        let (x, w, b) = match xs {
            [x, w] => (x, w, None),
            [x, w, b] => (x, w, Some(b)),
            _ => return Err(Error::invalid(OP, format!("takes 2 or 3 tensors (x, weight, bias), got {}", xs.len()))),
        };
        for p in std::iter::once(w).chain(b) {
            if p.dtype != x.dtype {
                return Err(Error::DTypeMismatch { op: OP, lhs: x.dtype, rhs: p.dtype });
            }
        }
        x.expect_float(OP, "the input")?;
        let g = geometry(x.dims(), w.dims(), b.map(|b| b.dims()), o)?;
        let out = x.with_shape(g.output_shape().to_vec());
        Ok((vec![out], g))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &Conv2dOptions, g: &ConvGeom) -> Result<Vec<CpuData>> {
        let bias = (k.ins.len() == 3).then(|| k.x(2));
        Ok(vec![forward_cpu(k.x(0), k.x(1), bias, g)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &Conv2dOptions, g: &ConvGeom) -> Result<()> {
        let bias = (k.ins.len() == 3).then(|| k.x(2));
        gpu_conv(
            Mode::Fwd,
            k.ctx,
            Operands { a: k.x(1), b: k.x(0), bias, out: k.y(0) },
            k.ins[0].dtype,
            g,
            Epilogue::default(),
        )
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn half(&self) -> Half {
        Half::GpuFloat16
    }

    fn facts(&self) -> Facts {
        let host = EpilogueHost {
            fused: &epilogue::CONV2D_EPILOGUE,
            inputs: (2, 3),
            fits: crate::ops::matmul::epilogue::fits,
        };
        Facts { epilogue: Some(host), amp: AmpList::White, ..Facts::NONE }
    }

    fn backward(&self, c: &GradCall<'_>, _: &Conv2dOptions, g: &ConvGeom) -> Result<Vec<Option<Tensor>>> {
        let (x, w, gy) = (c.x(0), c.x(1), c.g());
        Ok(vec![
            c.grad_if(0, || conv_grad_input(gy, w, *g))?,
            c.grad_if(1, || conv_grad_weight(x, gy, *g))?,
            c.grad_if(2, || gy.sum(&[0, 2, 3], false))?,
        ])
    }
}

/// One product of the conv kernel on a geometry already worked out: `F(x, w)` (inputs
/// `[x, weight]`, for the gradients' gradients), the input gradient `D(dy, w)` (inputs
/// `[dy, weight]`) or the weight gradient `W(x, dy)` (inputs `[x, dy]`).
pub(crate) struct ConvProductOp {
    name: &'static str,
    mode: Mode,
}

pub(crate) static CONV2D_PRODUCT: ConvProductOp = ConvProductOp { name: "conv2d_product", mode: Mode::Fwd };
pub(crate) static CONV2D_GRAD_INPUT: ConvProductOp = ConvProductOp { name: "conv2d_grad_input", mode: Mode::BwdData };
pub(crate) static CONV2D_GRAD_WEIGHT: ConvProductOp =
    ConvProductOp { name: "conv2d_grad_weight", mode: Mode::BwdFilter };

op_header!(ConvProductOp: ConvGeom, ConvGeom; |op| op.name);

impl ConvProductOp {
    /// The shapes of the two operands and of the result.
    fn shapes(&self, g: &ConvGeom) -> [[usize; 4]; 3] {
        let (x, w, y) = (g.input_shape(), g.weight_shape(), g.output_shape());
        match self.mode {
            Mode::Fwd => [x, w, y],
            Mode::BwdData => [y, w, x],
            Mode::BwdFilter => [x, y, w],
        }
    }

    fn cpu_product<T: crate::backend::cpu::WinFloat>(&self, a: &[T], b: &[T], g: &ConvGeom) -> Vec<T> {
        match self.mode {
            Mode::Fwd => cpu::conv2d_forward(a, b, None, g),
            Mode::BwdData => cpu::conv2d_backward_data(a, b, g),
            Mode::BwdFilter => cpu::conv2d_backward_filter(a, b, g),
        }
    }
}

impl Op for ConvProductOp {
    fn facts(&self) -> Facts {
        // The forward product is conv2d's; the gradient products run in backward only.
        let amp = if matches!(self.mode, Mode::Fwd) { AmpList::White } else { AmpList::Gray };
        Facts { amp, ..Facts::NONE }
    }
    /// A geometry with `n = 0` takes the batch from the operands (both lead with it), so a
    /// program's gradient ops fit whatever batch it is fed.
    fn infer(&self, xs: &[&TensorMeta], g: &ConvGeom) -> Result<(Vec<TensorMeta>, ConvGeom)> {
        let [a, b] = inputs(self.name, xs)?;
        let mut g = *g;
        if g.n == 0 {
            g.n = a.dims().first().copied().unwrap_or(0);
        }
        let [sa, sb, out] = self.shapes(&g);
        if a.dims() != sa || b.dims() != sb {
            return Err(Error::shape(
                self.name,
                format!("operands {:?} and {:?} do not fit {sa:?} and {sb:?}", a.dims(), b.dims()),
            ));
        }
        if a.dtype != b.dtype || !a.dtype.is_float() {
            return Err(Error::DTypeMismatch { op: self.name, lhs: a.dtype, rhs: b.dtype });
        }
        Ok((vec![a.with_shape(out.to_vec())], g))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &ConvGeom, g: &ConvGeom) -> Result<Vec<CpuData>> {
        Ok(vec![float_kernel!(self.name; a = k.x(0), b = k.x(1) => self.cpu_product(a, b, g))?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &ConvGeom, g: &ConvGeom) -> Result<()> {
        let operands = Operands { a: k.x(1), b: k.x(0), bias: None, out: k.y(0) };
        gpu_conv(self.mode, k.ctx, operands, k.ins[0].dtype, g, Epilogue::default())
    }

    fn half(&self) -> Half {
        Half::GpuFloat16
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, c: &GradCall<'_>, _: &ConvGeom, g: &ConvGeom) -> Result<Vec<Option<Tensor>>> {
        let (a, b, h) = (c.x(0), c.x(1), c.g());
        Ok(match self.mode {
            // (x, w) -> y
            Mode::Fwd => {
                vec![c.grad_if(0, || conv_grad_input(h, b, *g))?, c.grad_if(1, || conv_grad_weight(a, h, *g))?]
            }
            // (dy, w) -> dx
            Mode::BwdData => {
                vec![c.grad_if(0, || conv_forward(h, b, *g))?, c.grad_if(1, || conv_grad_weight(h, a, *g))?]
            }
            // (x, dy) -> dw
            Mode::BwdFilter => {
                vec![c.grad_if(0, || conv_grad_input(b, h, *g))?, c.grad_if(1, || conv_forward(a, h, *g))?]
            }
        })
    }
}

/// The convolution's output `F(x, w) + b` on the CPU.
pub(crate) fn forward_cpu(x: &CpuData, w: &CpuData, bias: Option<&CpuData>, g: &ConvGeom) -> Result<CpuData> {
    float_kernel!(OP; x = x, w = w => {
        let b = match bias {
            Some(b) => Some(crate::backend::cpu::typed_ref(b)?.as_slice()),
            None => None,
        };
        cpu::conv2d_forward(x, w, b, g)
    })
}

/// The forward product on the GPU into `out`, through `epi`.
pub(crate) fn forward_gpu(
    ctx: &std::sync::Arc<GpuContext>,
    x: &GpuBuffer,
    w: &GpuBuffer,
    bias: Option<&GpuBuffer>,
    g: &ConvGeom,
    out: &GpuBuffer,
    epi: Epilogue<'_>,
) -> Result<()> {
    gpu_conv(Mode::Fwd, ctx, Operands { a: w, b: x, bias, out }, DType::Float32, g, epi)
}

// The products are called with the batch left to the operands (`n = 0`).
fn conv_forward(x: &Tensor, w: &Tensor, g: ConvGeom) -> Result<Tensor> {
    apply1(&CONV2D_PRODUCT, &[x, &w.cast(x.dtype())?], ConvGeom { n: 0, ..g })
}

fn conv_grad_input(dy: &Tensor, w: &Tensor, g: ConvGeom) -> Result<Tensor> {
    apply1(&CONV2D_GRAD_INPUT, &[&dy.cast(w.dtype())?, w], ConvGeom { n: 0, ..g })
}

fn conv_grad_weight(x: &Tensor, dy: &Tensor, g: ConvGeom) -> Result<Tensor> {
    apply1(&CONV2D_GRAD_WEIGHT, &[x, &dy.cast(x.dtype())?], ConvGeom { n: 0, ..g })
}

/// 2-D convolution of `x` `[N, C, H, W]` with `weight` `[out_c, C / groups, kh, kw]`
/// (Paddle's layout) plus an optional `bias` `[out_c]`; the output is
/// `[N, out_c, oh, ow]` with `oh = (H + pad_top + pad_bottom − dh·(kh − 1) − 1) / sh + 1`.
pub fn conv2d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, options: &Conv2dOptions) -> Result<Tensor> {
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    apply1(&CONV2D_OP, &inputs, options.clone())
}

/// Validates the shapes and options and works out the output geometry.
fn geometry(xs: &[usize], ws: &[usize], bs: Option<&[usize]>, o: &Conv2dOptions) -> Result<ConvGeom> {
    check_nchw(OP, &o.data_format)?;
    if xs.len() != 4 {
        return Err(Error::shape(OP, format!("input must be 4-D [N, C, H, W], got shape {xs:?}")));
    }
    if ws.len() != 4 {
        return Err(Error::shape(OP, format!("weight must be 4-D [out_c, in_c / groups, kh, kw], got shape {ws:?}")));
    }
    check_positive(OP, "stride", o.stride)?;
    check_positive(OP, "dilation", o.dilation)?;
    if o.groups == 0 {
        return Err(Error::invalid(OP, "groups must be positive, got 0"));
    }
    let [n, c, h, w] = [xs[0], xs[1], xs[2], xs[3]];
    let [oc, cig, kh, kw] = [ws[0], ws[1], ws[2], ws[3]];
    if ws.contains(&0) {
        return Err(Error::shape(OP, format!("weight shape {ws:?} has a zero dimension")));
    }
    if c != cig * o.groups {
        return Err(Error::shape(
            OP,
            format!(
                "input channels {c} (input shape {xs:?}) must equal weight in_c {cig} × groups {} (weight shape {ws:?})",
                o.groups
            ),
        ));
    }
    if oc % o.groups != 0 {
        return Err(Error::shape(
            OP,
            format!("output channels {oc} (weight shape {ws:?}) are not divisible by groups {}", o.groups),
        ));
    }
    if let Some(bs) = bs
        && bs != [oc]
    {
        return Err(Error::shape(OP, format!("bias must have shape [{oc}] (weight shape {ws:?}), got {bs:?}")));
    }
    let mut dil = o.dilation.0;
    if o.padding == Padding::Same {
        // Paddle's SAME ignores dilation (UpdatePaddingAndDilation resets it to 1).
        dil = [1, 1];
    }
    let p = o.padding.resolve([h, w], [kh, kw], o.stride.0);
    let out = |len: usize, p0: usize, p1: usize, k: usize, d: usize, s: usize| -> Result<usize> {
        let too_big = || {
            Error::invalid(
                OP,
                format!("padding {p:?} or dilation {dil:?} overflows the size arithmetic (input {xs:?})"),
            )
        };
        let eff = d.checked_mul(k - 1).and_then(|v| v.checked_add(1)).ok_or_else(too_big)?;
        let span = len.checked_add(p0).and_then(|v| v.checked_add(p1)).ok_or_else(too_big)?;
        if span < eff {
            return Err(Error::shape(
                OP,
                format!(
                    "output size would be <= 0: input {xs:?}, weight {ws:?}, padding {p:?}, stride {:?}, dilation {dil:?}",
                    o.stride.0
                ),
            ));
        }
        Ok((span - eff) / s + 1)
    };
    let oh = out(h, p[0], p[1], kh, dil[0], o.stride.h())?;
    let ow = out(w, p[2], p[3], kw, dil[1], o.stride.w())?;
    Ok(ConvGeom {
        n,
        c,
        h,
        w,
        oc,
        kh,
        kw,
        oh,
        ow,
        sh: o.stride.h(),
        sw: o.stride.w(),
        pt: p[0],
        pl: p[2],
        dh: dil[0],
        dw: dil[1],
        groups: o.groups,
    })
}

/// Which of a convolution layer's three products an op computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Fwd,
    BwdData,
    BwdFilter,
}

/// Which product a `conv2d.wgsl` instance computes: the ops' three, and `BwdCols`, the input
/// gradient's columns `Wᵀ · dy` before `col2im` sums them into the image (software adapters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Product {
    Fwd,
    BwdData,
    BwdFilter,
    BwdCols,
}

const PRODUCTS: [Product; 4] = [Product::Fwd, Product::BwdData, Product::BwdFilter, Product::BwdCols];

impl Product {
    fn name(self) -> &'static str {
        match self {
            Product::Fwd => "fwd",
            Product::BwdData => "bwd_data",
            Product::BwdFilter => "bwd_filter",
            Product::BwdCols => "bwd_cols",
        }
    }
}

impl From<Mode> for Product {
    fn from(mode: Mode) -> Self {
        match mode {
            Mode::Fwd => Product::Fwd,
            Mode::BwdData => Product::BwdData,
            Mode::BwdFilter => Product::BwdFilter,
        }
    }
}

/// `rm` output rows per invocation: a 16·rm-row tile, or an rm × `cols` block in the direct
/// entry; `strided`: the input gradient's gather checks the stride's grid.
/// `element`: the operands' WGSL type.
fn variant(product: Product, rm: u32, cols: u32, strided: bool, vector: bool, element: &str) -> Variant {
    let mut v = vec![
        ("MODE", product.name().to_string()),
        ("STRIDED", strided.to_string()),
        ("RM", rm.to_string()),
        ("BM", (16 * rm).to_string()),
        ("A_TILE", (256 * rm).to_string()),
        ("ACC", (4 * rm).to_string()),
        ("COLS", cols.to_string()),
    ];
    v.push(("OPERANDS", block::operands(vector, element)));
    v.extend(if vector {
        block::vector_block_lines(product.name(), rm)
    } else {
        block::block_lines(product.name(), rm, cols)
    });
    v
}

/// Which entry runs a product, and the direct entry's columns per invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Tiled,
    Direct { cols: u32 },
}

/// The kernel entry for a product with `m` GEMM rows: `main` (tiles through workgroup
/// memory) or `direct` (small per-invocation blocks, no barriers). `direct` serves software
/// adapters, which emulate barriers slowly, in 8-column blocks (each of their loads costs
/// about one per lane, so a wider block's extra products come almost free), and thin
/// problems on hardware (depthwise convolutions, single-channel images), where most rows of
/// a 16-row tile would idle, in 4-column ones.
/// `DYGRAPH_CONV_KERNEL=tiled|direct|direct8` forces one (to exercise each on any machine).
fn entry(ctx: &GpuContext, m: usize) -> Entry {
    static FORCED: OnceLock<Option<Entry>> = OnceLock::new();
    let forced = FORCED.get_or_init(|| match std::env::var("DYGRAPH_CONV_KERNEL").as_deref() {
        Ok("tiled") => Some(Entry::Tiled),
        Ok("direct") => Some(Entry::Direct { cols: 4 }),
        Ok("direct8") => Some(Entry::Direct { cols: 8 }),
        _ => None,
    });
    forced.unwrap_or(if ctx.is_software() {
        Entry::Direct { cols: 8 }
    } else if m < 8 {
        Entry::Direct { cols: 4 }
    } else {
        Entry::Tiled
    })
}

/// Output columns per workgroup tile and reduction depth per stage (as in the shader).
const BN: usize = 64;
const BK: usize = 16;

/// The input gradient's columns are held to 64 MiB; a larger one runs as one product.
const MAX_COLUMN_BYTES: usize = 64 << 20;

/// Runs one product on the GPU into `out`. `a` is the GEMM's left operand (weight, or `dy`
/// for the filter gradient) and `b` the image-side one (`x`, or `dy` for the input gradient).
///
/// On software adapters the input gradient of a kernel larger than 1×1 runs as two steps:
/// the columns `Wᵀ · dy` (a product with no padding taps) and `col2im`, which sums each
/// pixel's taps. As one product, its transposed window reads dy's padding as zeros: 56% of
/// the taps of MNIST's conv2, each a load as costly there as a live one (lavapipe: 37 ms in
/// one product against 18 + 4 ms in two).
/// Float16 operands (on devices with `SHADER_F16`, without an epilogue) give a float16
/// result; the columns stay float32.
fn gpu_conv(
    mode: Mode,
    ctx: &std::sync::Arc<GpuContext>,
    Operands { a, b, bias, out }: Operands<'_>,
    dtype: DType,
    g: &ConvGeom,
    epi: Epilogue<'_>,
) -> Result<()> {
    if dtype == DType::Float16 && epi.number != 0 {
        return Err(Error::unsupported("conv2d_epilogue", dtype, "(float32 and float64)"));
    }
    let (column_rows, column_cols, _, column_cells) = product_dims(Product::BwdCols, g);
    let column_bytes = 4 * column_cells;
    let columns = mode == Mode::BwdData
        && epi.number == 0
        && entry(ctx, g.cin_g()) == (Entry::Direct { cols: 8 })
        && g.kh * g.kw > 1
        && column_bytes <= MAX_COLUMN_BYTES;
    if !columns {
        return gpu_product(mode.into(), ctx, Operands { a, b, bias, out }, [dtype; 2], g, epi).map(|_| ());
    }
    let numel: usize = g.input_shape().iter().product();
    if numel == 0 || column_bytes == 0 {
        return crate::ops::creation::gpu_fill(ctx, out, dtype, Scalar::Int(0), numel);
    }
    let cols = ctx.alloc(OP, column_bytes as u64)?;
    let operands = Operands { a, b, bias: None, out: &cols };
    let base = gpu_product(Product::BwdCols, ctx, operands, [dtype, DType::Float32], g, Epilogue::default())?;
    let (_, key) = wgsl::product_keys(base, DType::Float32, dtype, true);
    let params = product_params(g, [column_rows, column_cols, 0, 0, 0, 1, 0, 0, 0, numel], false);
    let binds = [Bind::read(&cols), Bind::unused(ctx), Bind::unused(ctx), Bind::write(out)];
    ctx.dispatch(&CONV2D, key, "col2im", &binds, &params, numel as u64)
}

/// The shader's parameter words (see `conv2d.wgsl`): the geometry, then `rest` = [M, NC,
/// K, tiles_m, k_chunk, splits, z_base, row_blocks, col_blocks, outputs] around has_bias.
fn product_params(g: &ConvGeom, rest: [usize; 10], has_bias: bool) -> Vec<u32> {
    let [m, nc, k, tiles_m, k_chunk, splits, z_base, row_blocks, col_blocks, outputs] = rest;
    #[rustfmt::skip]
    let words = [
        g.n, g.c, g.h, g.w, g.oc, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw,
        g.cin_g(), g.cout_g(), m, nc, k, tiles_m, k_chunk, splits, has_bias as usize, z_base,
        row_blocks, col_blocks, outputs,
    ];
    words.iter().map(|&v| v as u32).collect()
}

/// A product's GEMM rows M, columns NC and depth K per group, and its outputs in all.
fn product_dims(product: Product, g: &ConvGeom) -> (usize, usize, usize, usize) {
    let (khw, l) = (g.kh * g.kw, g.out_hw());
    match product {
        Product::Fwd => (g.cout_g(), g.n * l, g.k_len(), g.output_shape().iter().product()),
        Product::BwdData => (g.cin_g(), g.n * g.h * g.w, g.cout_g() * khw, g.input_shape().iter().product()),
        Product::BwdFilter => (g.cout_g(), g.k_len(), g.n * l, g.weight_shape().iter().product()),
        Product::BwdCols => (g.cin_g() * khw, g.n * l, g.cout_g(), g.c * khw * g.n * l),
    }
}

/// A product's buffers: the GEMM's operands `a` and `b` (as in [`gpu_conv`]), the forward's
/// bias, and the result.
struct Operands<'a> {
    a: &'a GpuBuffer,
    b: &'a GpuBuffer,
    bias: Option<&'a GpuBuffer>,
    out: &'a GpuBuffer,
}

/// Runs one kernel product of operands and result of the dtypes `[operands, result]` into
/// `out` and returns its variant key without the float16 bits.
fn gpu_product(
    product: Product,
    ctx: &std::sync::Arc<GpuContext>,
    Operands { a, b, bias, out }: Operands<'_>,
    [operands, result]: [DType; 2],
    g: &ConvGeom,
    epi: Epilogue<'_>,
) -> Result<u32> {
    let (m, ncols, k, numel) = product_dims(product, g);
    let entry = match product {
        Product::BwdCols => Entry::Direct { cols: 8 },
        _ => entry(ctx, m),
    };
    // Rows per invocation block (direct) or 16·rm rows per workgroup tile (tiled).
    // On software adapters the columns product loads its operands as vec4s when its rows
    // (cin_g·kh·kw) and each image's columns (oh·ow) come in fours. (The forward and the
    // filter gradient did so too, stepping k by 4, 10% faster on lavapipe; Chromium's
    // SwiftShader lost the device on that block, so they load one value at a time.)
    let vector = product == Product::BwdCols && m.is_multiple_of(4) && g.out_hw().is_multiple_of(4);
    let (rm, cols) = match (entry, m) {
        _ if vector => (vector_rows(m), 8),
        (Entry::Direct { cols: 8 }, _) => (wide_rows(m), 8),
        (Entry::Direct { cols }, 1 | 2) => (m, cols as usize),
        (Entry::Direct { cols }, _) => (4, cols as usize),
        (Entry::Tiled, 0..=16) => (1, 4),
        (Entry::Tiled, 17..=32) => (2, 4),
        (Entry::Tiled, _) => (4, 4),
    };
    // The input gradient's gather tests each tap against the stride's grid; `col2im` (the
    // columns' key) tests each tap also for a dilation above 1.
    let strided = match product {
        Product::BwdData => (g.sh, g.sw) != (1, 1),
        Product::BwdCols => (g.sh, g.sw, g.dh, g.dw) != (1, 1, 1, 1),
        _ => false,
    };
    let key =
        conv_key(product, rm as u32, cols as u32) + if strided { STRIDED } else { 0 } + EPILOGUE_STEP * epi.number;
    if k == 0 || numel == 0 {
        crate::ops::creation::gpu_fill(ctx, out, result, Scalar::Int(0), numel)?;
        return Ok(key);
    }
    let direct = entry != Entry::Tiled;
    let (row_blocks, col_blocks) = (m.div_ceil(rm), ncols.div_ceil(cols));
    let tiles_m = m.div_ceil(16 * rm);
    let tiles = if direct { (row_blocks * col_blocks).div_ceil(256) } else { tiles_m * ncols.div_ceil(BN) };
    let max_z = ctx.limits.max_compute_workgroups_per_dimension.max(1) as usize;
    let wanted = split_count(ctx, product, tiles * g.groups, k, numel).min((max_z / g.groups).max(1));
    let split = split_k::Split::new(ctx, OP, wanted, k, BK, numel)?;
    let dst = split.target(out);
    let (main_key, finish_key) = wgsl::product_keys(key, operands, result, split.partial.is_some());
    let [gx, gy, _] = grid(ctx, tiles as u64)?;
    let total_z = g.groups * split.slices;
    let rest = [m, ncols, k, tiles_m, split.k_chunk, split.slices, 0, row_blocks, col_blocks, numel];
    let mut params = product_params(g, rest, bias.is_some());
    epi.append_params(OP, &mut params)?;
    let mut z0 = 0;
    let bias = || bias.map_or_else(|| Bind::unused(ctx), Bind::read);
    while z0 < total_z {
        let zn = (total_z - z0).min(max_z);
        params[24] = z0 as u32;
        let mut binds = vec![Bind::read(a), Bind::read(b), bias(), Bind::write(dst)];
        binds.extend(epi.extras.iter().map(|x| Bind::read(x)));
        let name = if direct { "direct" } else { "main" };
        let product_key = if vector { main_key + VECTOR } else { main_key };
        ctx.dispatch(&CONV2D, product_key, name, &binds, &params, [gx, gy, zn as u32])?;
        z0 += zn;
    }
    if let Some(p) = &split.partial {
        let mut binds = vec![Bind::read(p), Bind::unused(ctx), bias(), Bind::write(out)];
        binds.extend(epi.extras.iter().map(|x| Bind::read(x)));
        ctx.dispatch(&CONV2D, finish_key, "finish", &binds, &params, numel as u64)?;
    }
    Ok(key)
}

/// How many slices the product's reduction (`k` deep) is split into: `split_k::slices`, and
/// for the filter gradient (few outputs, a reduction over every pixel) at least one per 256
/// of K on any adapter, up to 64.
fn split_count(ctx: &GpuContext, product: Product, workgroups: usize, k: usize, numel: usize) -> usize {
    let floor = if product == Product::BwdFilter { (k / 256).clamp(1, 64) } else { 1 };
    split_k::slices(ctx, workgroups, k, numel, floor)
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&CONV2D_OP, &CONV2D_PRODUCT, &CONV2D_GRAD_INPUT, &CONV2D_GRAD_WEIGHT, &epilogue::CONV2D_EPILOGUE],
    kernels: &[&CONV2D],
};
