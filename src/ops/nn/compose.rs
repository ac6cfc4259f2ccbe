//! Neural-network functions composed from registered ops: the 1-D convolution and pooling
//! (through their 2-D forms on a height-1 image), `group_norm` and `instance_norm`,
//! `dropout2d` and `pixel_shuffle`. Gradients, both places and static programs come from
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
    let normed = crate::reshape(&normed, &crate::static_::reshape_target(x.shape()))?;
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
