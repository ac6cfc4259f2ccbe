//! Dropout (`paddle.nn.functional.dropout`) with Paddle's two scaling modes.
//!
//! The keep-mask comes from the Philox stream (`random.rs`): element `i` is kept when its
//! uniform draw `u = (w >> 8) · 2^-24` (block `i / 4`, word `i % 4`) satisfies `u >= p`, so the
//! mask is identical on every place for the same seed. The op is `x * mask` with the scale
//! folded into the mask, so the gradient is `grad * mask` through the ordinary product rule.
//! Paddle's `axis` argument (one mask shared along some axes) is not supported.

use std::str::FromStr;

use crate::random::dropout_mask;
use crate::{DType, Error, Result, Tensor};

/// How dropout scales (Paddle's `mode` argument).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DropoutMode {
    /// `"upscale_in_train"` (the default): training gives `x · mask / (1 − p)`, eval gives `x`.
    #[default]
    UpscaleInTrain,
    /// `"downscale_in_infer"`: training gives `x · mask`, eval gives `x · (1 − p)`.
    DownscaleInInfer,
}

impl FromStr for DropoutMode {
    type Err = Error;

    /// Parses Paddle's spelling: `"upscale_in_train"` or `"downscale_in_infer"`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "upscale_in_train" => Ok(DropoutMode::UpscaleInTrain),
            "downscale_in_infer" => Ok(DropoutMode::DownscaleInInfer),
            _ => Err(Error::invalid(
                "dropout",
                format!("unknown mode {s:?}; expected \"upscale_in_train\" or \"downscale_in_infer\""),
            )),
        }
    }
}

/// Options of [`dropout`] (Paddle's keyword arguments).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropoutOptions {
    /// Probability of zeroing an element, in `[0, 1]`.
    pub p: f64,
    /// Training mode (drop) or evaluation mode (no randomness).
    pub training: bool,
    /// How the kept values (or the eval output) are scaled.
    pub mode: DropoutMode,
}

impl Default for DropoutOptions {
    /// `p = 0.5`, `training = true`, `upscale_in_train`.
    fn default() -> Self {
        DropoutOptions { p: 0.5, training: true, mode: DropoutMode::UpscaleInTrain }
    }
}

/// Randomly zeroes elements of `x` with probability `p` (`paddle.nn.functional.dropout`).
/// `p = 0` in training and `upscale_in_train` in eval return `x` unchanged; `p = 1` gives
/// zeros (and zero gradients). Each training call draws a fresh mask from the global
/// generator (`dygraph::seed` makes it reproducible, the same on CPU and GPU).
pub fn dropout(x: &Tensor, options: DropoutOptions) -> Result<Tensor> {
    const OP: &str = "dropout";
    let DropoutOptions { p, training, mode } = options;
    x.expect_float(OP)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::invalid(OP, format!("p must be in [0, 1], got {p}")));
    }
    if !training {
        return match mode {
            DropoutMode::UpscaleInTrain => Ok(x.clone()),
            DropoutMode::DownscaleInInfer => x.mul_scalar(1.0 - p),
        };
    }
    if p == 0.0 {
        return Ok(x.clone());
    }
    let mask_dtype = if x.dtype() == DType::Float64 { DType::Float64 } else { DType::Float32 };
    let mask = if p == 1.0 {
        crate::zeros_on(x.shape(), mask_dtype, x.place())?
    } else {
        let scale = match mode {
            DropoutMode::UpscaleInTrain => 1.0 / (1.0 - p),
            DropoutMode::DownscaleInInfer => 1.0,
        };
        dropout_mask(x.shape(), p, scale, mask_dtype, x.place())?
    };
    x.mul(&mask.cast(x.dtype())?)
}
