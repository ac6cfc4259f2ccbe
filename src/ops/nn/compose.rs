//! Neural-network functions composed from registered ops: the 1-D convolution and pooling
//! (through their 2-D forms on a height-1 image), the 3-D convolution (one 2-D convolution
//! per depth tap, the output depths batched), `group_norm` and `instance_norm`,
//! `dropout2d`, `pixel_shuffle`, `conv2d_transpose` (the convolution's input-gradient entry)
//! and `interpolate` (index gathers and blends). Gradients, both places and static programs come from
//! the ops they are written in.

use super::{Conv2dOptions, DropoutOptions, Padding, Pool2dOptions};
use crate::{Error, Result, Tensor};

/// 1-D convolution options: stride, zero padding on both ends, dilation, groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dOptions {
    /// Window step (1).
    pub stride: usize,
    /// Zeros added at each end (0).
    pub padding: usize,
    /// Spacing between kernel taps (1).
    pub dilation: usize,
    /// Channel groups (1).
    pub groups: usize,
}

impl Default for Conv1dOptions {
    fn default() -> Self {
        Conv1dOptions { stride: 1, padding: 0, dilation: 1, groups: 1 }
    }
}

fn expect_rank(op: &'static str, x: &Tensor, rank: usize, what: &str) -> Result<()> {
    if x.ndim() != rank {
        return Err(Error::shape(op, format!("input must be {what}, got {:?}", x.shape())));
    }
    Ok(())
}

/// `paddle.nn.functional.conv1d` over `[N, C, L]` with a `[out, C/groups, k]` weight.
pub fn conv1d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, o: &Conv1dOptions) -> Result<Tensor> {
    expect_rank("conv1d", x, 3, "[N, C, L]")?;
    expect_rank("conv1d", weight, 3, "[out, in/groups, k]")?;
    let options = Conv2dOptions {
        stride: [1, o.stride].into(),
        padding: Padding::Explicit([0, 0, o.padding, o.padding]),
        dilation: [1, o.dilation].into(),
        groups: o.groups,
        ..Default::default()
    };
    crate::conv2d(&x.unsqueeze(&[2])?, &weight.unsqueeze(&[2])?, bias, &options)?.squeeze(&[2])
}

/// 3-D convolution options, `[depth, height, width]` each: stride, zero padding on both
/// ends, dilation; and groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv3dOptions {
    /// Window step (1, 1, 1).
    pub stride: [usize; 3],
    /// Zeros added at each end of each axis (0, 0, 0).
    pub padding: [usize; 3],
    /// Spacing between kernel taps (1, 1, 1).
    pub dilation: [usize; 3],
    /// Channel groups (1).
    pub groups: usize,
}

impl Default for Conv3dOptions {
    fn default() -> Self {
        Conv3dOptions { stride: [1; 3], padding: [0; 3], dilation: [1; 3], groups: 1 }
    }
}

/// `paddle.nn.functional.conv3d` over `[N, C, D, H, W]` with a `[out, C/groups, kd, kh, kw]`
/// weight. Depth tap `k` reads input depths `k·dilation + d·stride` for output depth `d`: those
/// slices, batched as `[N·Do, C, H, W]`, go through one 2-D convolution with the weight's
/// `k`-th depth plane, and the `kd` results add up. (Reshapes keep the batch as `-1`, so a
/// static program with an unknown batch size builds.)
pub fn conv3d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, o: &Conv3dOptions) -> Result<Tensor> {
    const OP: &str = "conv3d";
    expect_rank(OP, x, 5, "[N, C, D, H, W]")?;
    expect_rank(OP, weight, 5, "[out, in/groups, kd, kh, kw]")?;
    let (c, depth) = (x.shape()[1], x.shape()[2]);
    let (out, kd) = (weight.shape()[0], weight.shape()[2]);
    let groups = o.groups.max(1);
    if weight.shape()[1] * groups != c || out % groups != 0 || o.stride.contains(&0) || o.dilation.contains(&0) {
        return Err(Error::shape(
            OP,
            format!(
                "input {:?} and weight {:?} with groups {groups}, stride {:?}, dilation {:?}: \
                 need C = weight[1]·groups, out divisible by groups, nonzero stride and dilation",
                x.shape(),
                weight.shape(),
                o.stride,
                o.dilation
            ),
        ));
    }
    let padded = depth + 2 * o.padding[0];
    let reach = o.dilation[0] * (kd.max(1) - 1) + 1;
    if kd == 0 || padded < reach {
        return Err(Error::shape(
            OP,
            format!(
                "a depth-{kd} kernel with dilation {} does not fit depth {depth} padded to {padded}",
                o.dilation[0]
            ),
        ));
    }
    let out_depth = (padded - reach) / o.stride[0] + 1;
    let x = if o.padding[0] > 0 {
        crate::pad(x, &[0, 0, 0, 0, o.padding[0], o.padding[0], 0, 0, 0, 0], 0.0)?
    } else {
        x.clone()
    };
    let plane = Conv2dOptions {
        stride: [o.stride[1], o.stride[2]].into(),
        padding: Padding::Explicit([o.padding[1], o.padding[1], o.padding[2], o.padding[2]]),
        dilation: [o.dilation[1], o.dilation[2]].into(),
        groups,
        ..Default::default()
    };
    let (h, w) = (x.shape()[3], x.shape()[4]);
    let mut sum: Option<Tensor> = None;
    for k in 0..kd {
        let start = (k * o.dilation[0]) as i64;
        let end = start + ((out_depth - 1) * o.stride[0]) as i64 + 1;
        let taps = crate::strided_slice(&x, &[2], &[start], &[end], &[o.stride[0] as i64])?;
        let taps = crate::reshape(&taps.transpose(&[0, 2, 1, 3, 4])?, &[-1, c as i64, h as i64, w as i64])?;
        let w_k = weight.slice(&[2], &[k as i64], &[k as i64 + 1])?.squeeze(&[2])?;
        let y = crate::conv2d(&taps, &w_k, None, &plane)?;
        sum = Some(match sum {
            Some(acc) => acc.add(&y)?,
            None => y,
        });
    }
    let y = sum.expect("kd > 0 checked above");
    let (ho, wo) = (y.shape()[2] as i64, y.shape()[3] as i64);
    let y = crate::reshape(&y, &[-1, out_depth as i64, out as i64, ho, wo])?.transpose(&[0, 2, 1, 3, 4])?;
    match bias {
        Some(b) => y.add(&b.reshape([1, out as i64, 1, 1, 1])?),
        None => Ok(y),
    }
}

fn pool1d_options(kernel: usize, stride: Option<usize>, padding: usize) -> Pool2dOptions {
    Pool2dOptions {
        kernel_size: [1, kernel].into(),
        stride: stride.map(|s| [1, s].into()),
        padding: Padding::Explicit([0, 0, padding, padding]),
        ..Pool2dOptions::new([1, kernel])
    }
}

/// `paddle.nn.functional.max_pool1d` over `[N, C, L]` (stride defaults to the kernel).
pub fn max_pool1d(x: &Tensor, kernel_size: usize, stride: Option<usize>, padding: usize) -> Result<Tensor> {
    expect_rank("max_pool1d", x, 3, "[N, C, L]")?;
    crate::max_pool2d(&x.unsqueeze(&[2])?, &pool1d_options(kernel_size, stride, padding))?.squeeze(&[2])
}

/// `paddle.nn.functional.avg_pool1d` over `[N, C, L]` (padding not counted, as Paddle's
/// `exclusive=True`).
pub fn avg_pool1d(x: &Tensor, kernel_size: usize, stride: Option<usize>, padding: usize) -> Result<Tensor> {
    expect_rank("avg_pool1d", x, 3, "[N, C, L]")?;
    crate::avg_pool2d(&x.unsqueeze(&[2])?, &pool1d_options(kernel_size, stride, padding))?.squeeze(&[2])
}

/// `(x − mean) / √(var + ε)` over `axes`, then `· weight + bias` per channel (axis 1).
fn normalize(
    x: &Tensor,
    grouped: &Tensor,
    axes: &[isize],
    eps: f64,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    let mean = grouped.mean(axes, true)?;
    let centered = grouped.subtract(&mean)?;
    let var = centered.square()?.mean(axes, true)?;
    let normed = centered.multiply(&var.add_scalar(eps)?.rsqrt()?)?;
    let normed = crate::reshape(&normed, &crate::shape::reshape_target(x.shape()))?;
    let per_channel = |t: &Tensor| -> Result<Tensor> {
        let mut shape = vec![1usize; x.ndim()];
        shape[1] = x.shape()[1];
        t.reshape(shape)
    };
    let mut y = normed;
    if let Some(w) = weight {
        y = y.multiply(&per_channel(w)?)?;
    }
    if let Some(b) = bias {
        y = y.add(&per_channel(b)?)?;
    }
    Ok(y)
}

/// `paddle.nn.functional.group_norm`: the channels of `[N, C, *]` split into `num_groups`
/// groups, each normalised over its channels and positions (biased variance).
pub fn group_norm(
    x: &Tensor,
    num_groups: usize,
    eps: f64,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    if x.ndim() < 2 || num_groups == 0 || !x.shape()[1].is_multiple_of(num_groups) {
        return Err(Error::shape(
            "group_norm",
            format!("input {:?} must be [N, C, ...] with C a multiple of num_groups {num_groups}", x.shape()),
        ));
    }
    let grouped = crate::reshape(x, &[0, num_groups as i64, -1])?;
    normalize(x, &grouped, &[2], eps, weight, bias)
}

/// `paddle.nn.functional.instance_norm`: each channel of each sample of `[N, C, *]`
/// normalised over its positions.
pub fn instance_norm(x: &Tensor, eps: f64, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<Tensor> {
    if x.ndim() < 3 {
        return Err(Error::shape("instance_norm", format!("input must be [N, C, ...spatial], got {:?}", x.shape())));
    }
    let grouped = crate::reshape(x, &[0, x.shape()[1] as i64, -1])?;
    normalize(x, &grouped, &[2], eps, weight, bias)
}

/// `paddle.nn.functional.dropout2d`: whole channels of `[N, C, H, W]` zeroed with
/// probability `p` in training (the kept ones scaled by `1/(1−p)`).
pub fn dropout2d(x: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    expect_rank("dropout2d", x, 4, "[N, C, H, W]")?;
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    // One mask value per (sample, channel), shaped from the data.
    let ones = crate::full_like(&x.slice(&[2, 3], &[0, 0], &[1, 1])?.detach(), 1)?;
    let mask = crate::dropout(&ones, DropoutOptions { p, training: true, ..Default::default() })?;
    x.multiply(&mask)
}

/// `paddle.nn.functional.pixel_shuffle`: `[N, C·r², H, W]` → `[N, C, H·r, W·r]`.
pub fn pixel_shuffle(x: &Tensor, upscale_factor: usize) -> Result<Tensor> {
    let r = upscale_factor;
    expect_rank("pixel_shuffle", x, 4, "[N, C·r², H, W]")?;
    let (c, h, w) = (x.shape()[1], x.shape()[2], x.shape()[3]);
    if r == 0 || !c.is_multiple_of(r * r) {
        return Err(Error::shape("pixel_shuffle", format!("channels {c} must be a multiple of {r}² = {}", r * r)));
    }
    let (c, r, h, w) = ((c / (r * r)) as i64, r as i64, h as i64, w as i64);
    let y = crate::reshape(x, &[-1, c, r, r, h, w])?.transpose(&[0, 1, 4, 2, 5, 3])?;
    crate::reshape(&y, &[-1, c, h * r, w * r])
}

/// Transposed-convolution options (`paddle.nn.functional.conv2d_transpose`'s keywords).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dOptions {
    /// The forward convolution's stride `(sh, sw)` (1).
    pub stride: [usize; 2],
    /// The forward convolution's zero padding `(ph, pw)` on each side (0).
    pub padding: [usize; 2],
    /// Extra rows / columns added at the bottom / right of the output (0; less than the
    /// stride or the dilation).
    pub output_padding: [usize; 2],
    /// Spacing between kernel taps (1).
    pub dilation: [usize; 2],
    /// Channel groups (1).
    pub groups: usize,
}

impl Default for ConvTranspose2dOptions {
    fn default() -> Self {
        ConvTranspose2dOptions { stride: [1, 1], padding: [0, 0], output_padding: [0, 0], dilation: [1, 1], groups: 1 }
    }
}

/// `paddle.nn.functional.conv2d_transpose` over `[N, C_in, H, W]` with a
/// `[C_in, C_out/groups, kh, kw]` weight: the gradient of a convolution with respect to its
/// input (the same registry entry), so `H_out = (H − 1)·s − 2p + d·(kh − 1) + output_padding + 1`.
pub fn conv2d_transpose(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    o: &ConvTranspose2dOptions,
) -> Result<Tensor> {
    const OP: &str = "conv2d_transpose";
    expect_rank(OP, x, 4, "[N, C_in, H, W]")?;
    expect_rank(OP, weight, 4, "[C_in, C_out/groups, kh, kw]")?;
    let (xs, ws) = (x.shape(), weight.shape());
    let groups = o.groups.max(1);
    if ws[0] != xs[1] || !xs[1].is_multiple_of(groups) {
        return Err(Error::shape(OP, format!("weight {ws:?} does not fit input {xs:?} with {groups} groups")));
    }
    let out = |i: usize| -> Result<usize> {
        let (n, s, p, d, k, op) = (xs[2 + i], o.stride[i], o.padding[i], o.dilation[i], ws[2 + i], o.output_padding[i]);
        if s == 0 || d == 0 || (op >= s && op >= d) {
            return Err(Error::invalid(
                OP,
                format!("stride {s} and dilation {d} must be positive, output_padding {op} below one of them"),
            ));
        }
        ((n - 1) * s + d * (k - 1) + op + 1)
            .checked_sub(2 * p)
            .filter(|&v| v > 0)
            .ok_or_else(|| Error::shape(OP, format!("padding {p} leaves no output for input {xs:?} and kernel {ws:?}")))
    };
    let (oh, ow) = (out(0)?, out(1)?);
    let geom = crate::ops::nn::conv::cpu::ConvGeom {
        n: 0,
        c: ws[1] * groups,
        h: oh,
        w: ow,
        oc: xs[1],
        kh: ws[2],
        kw: ws[3],
        oh: xs[2],
        ow: xs[3],
        sh: o.stride[0],
        sw: o.stride[1],
        pt: o.padding[0],
        pl: o.padding[1],
        dh: o.dilation[0],
        dw: o.dilation[1],
        groups,
    };
    let y = crate::ops::registry::apply::apply1(&super::conv::CONV2D_GRAD_INPUT, &[x, weight], geom)?;
    match bias {
        Some(b) => y.add(&b.reshape([1, b.numel(), 1, 1])?),
        None => Ok(y),
    }
}

/// How `interpolate` fills new positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpolateMode {
    /// The nearest input position.
    Nearest,
    /// Linear in height and width.
    Bilinear,
}

/// Source coordinates of `out` positions over `input` positions, with Paddle's mapping: with
/// `align_corners` the corners meet (`i·(in − 1)/(out − 1)`); else nearest takes
/// `floor(i·ratio)` and bilinear the half-pixel centres `(i + 0.5)·ratio − 0.5` (clamped at 0),
/// `ratio` being `1/scale` when a scale was given, else `in/out`.
fn source_coords(
    input: usize,
    out: usize,
    scale: Option<f64>,
    mode: InterpolateMode,
    align: bool,
    like: &Tensor,
) -> Result<Tensor> {
    let dtype = if like.dtype() == crate::DType::Float64 { crate::DType::Float64 } else { crate::DType::Float32 };
    let i = crate::arange_on(0i64, out as i64, 1i64, dtype, like.place())?;
    if align {
        let r = if out > 1 { (input as f64 - 1.0) / (out as f64 - 1.0) } else { 0.0 };
        return i.scale(r, 0.0);
    }
    let ratio = scale.map_or(input as f64 / out as f64, |s| 1.0 / s);
    match mode {
        InterpolateMode::Nearest => i.scale(ratio, 0.0)?.floor(),
        InterpolateMode::Bilinear => i.scale(ratio, 0.5 * ratio - 0.5)?.clip(0.0, f64::MAX),
    }
}

/// Resamples `x` along `axis` to `out` positions.
fn resample(
    x: &Tensor,
    axis: isize,
    out: usize,
    scale: Option<f64>,
    mode: InterpolateMode,
    align: bool,
) -> Result<Tensor> {
    let input = x.shape()[axis as usize];
    let src = source_coords(input, out, scale, mode, align, x)?;
    let last = (input - 1) as f64;
    let shape_of = |t: Tensor| -> Result<Tensor> { if axis == 2 { t.reshape([out, 1]) } else { Ok(t) } };
    match mode {
        InterpolateMode::Nearest => crate::index_select(x, &src.clip(0.0, last)?.cast(crate::DType::Int64)?, axis),
        InterpolateMode::Bilinear => {
            let lo = src.floor()?.clip(0.0, last)?;
            let hi = lo.add_scalar(1.0)?.clip(0.0, last)?;
            let w_hi = src.subtract(&lo)?.cast(x.dtype())?;
            let a = crate::index_select(x, &lo.cast(crate::DType::Int64)?, axis)?;
            let b = crate::index_select(x, &hi.cast(crate::DType::Int64)?, axis)?;
            a.add(&b.subtract(&a)?.multiply(&shape_of(w_hi)?)?)
        }
    }
}

/// `paddle.nn.functional.interpolate` for `[N, C, H, W]` (`NCHW`): to `size`, or to
/// `floor(in·scale_factor)`; nearest or bilinear, with or without `align_corners`.
pub fn interpolate(
    x: &Tensor,
    size: Option<[usize; 2]>,
    scale_factor: Option<[f64; 2]>,
    mode: InterpolateMode,
    align_corners: bool,
) -> Result<Tensor> {
    const OP: &str = "interpolate";
    expect_rank(OP, x, 4, "[N, C, H, W]")?;
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let (out, scale) = match (size, scale_factor) {
        (Some(s), None) => (s, None),
        (None, Some(f)) if f.iter().all(|v| *v > 0.0 && v.is_finite()) => {
            ([(h as f64 * f[0]).floor() as usize, (w as f64 * f[1]).floor() as usize], Some(f))
        }
        _ => return Err(Error::invalid(OP, "give exactly one of size and a positive, finite scale_factor")),
    };
    if out.contains(&0) || h == 0 || w == 0 {
        return Err(Error::shape(OP, format!("cannot resample {:?} to {out:?}", x.shape())));
    }
    if align_corners && mode == InterpolateMode::Nearest {
        return Err(Error::invalid(OP, "align_corners applies to bilinear mode only (as in Paddle)"));
    }
    let y = resample(x, 2, out[0], scale.map(|s| s[0]), mode, align_corners)?;
    resample(&y, 3, out[1], scale.map(|s| s[1]), mode, align_corners)
}
