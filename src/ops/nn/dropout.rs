//! Dropout (`paddle.nn.functional.dropout`) with Paddle's two scaling modes.
//!
//! The keep-mask comes from the Philox stream (`random.rs`): element `i` is kept when its
//! uniform draw `u = (w >> 8) · 2^-24` (block `i / 4`, word `i % 4`) satisfies `u >= p`, so the
//! mask is identical on every place for the same seed. The op is `x * mask` with the scale
//! folded into the mask, so the gradient is `grad * mask` through the ordinary product rule.
//! Paddle's `axis` argument (one mask shared along some axes) is not supported.
//!
//! The registry entry `dropout` is the training-mode op: outputs `[out, mask]`; evaluation
//! and `p = 0` need no op.

use crate::ops::registry::{AttrField, AttrValue};
use crate::ops::registry::{AttrMap, Attrs, EvalOp, EvalRewrite, EvalVar, Facts};
use std::str::FromStr;

use crate::backend::cpu::CpuData;
use crate::backend::cpu::float_kernel;
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::random::{cpu_mask_data, gpu_mask};
use crate::tensor::TensorMeta;
use crate::{Error, Result, Tensor};

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
#[derive(Clone, Copy, Debug, PartialEq, dygraph_derive::Attrs)]
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

registry_entry!(
    /// Training-mode dropout: `out = x · mask` with the scale folded into the mask.
    DROPOUT: DropoutOp = "dropout", DropoutOptions, ()
);

impl DropoutOptions {
    fn scale(&self) -> f64 {
        match self.mode {
            DropoutMode::UpscaleInTrain if self.p < 1.0 => 1.0 / (1.0 - self.p),
            _ => 1.0,
        }
    }

    /// The factor evaluation applies: 1 (`upscale_in_train`) or `1 − p` (`downscale_in_infer`).
    pub(crate) fn eval_scale(&self) -> f64 {
        if self.mode == DropoutMode::DownscaleInInfer { 1.0 - self.p } else { 1.0 }
    }
}

/// Dropout in an evaluation program: `x` itself (`upscale_in_train`) or `x · (1 − p)`
/// (`downscale_in_infer`), as one `scale`; the mask is gone.
fn eval_form(attrs: &AttrMap) -> Option<Vec<EvalOp>> {
    let factor = DropoutOptions::from_map("dropout", attrs).ok()?.eval_scale();
    Some(vec![EvalOp {
        op_type: "scale",
        inputs: vec![EvalVar::Input(0)],
        outputs: vec![EvalVar::Output(0)],
        attrs: AttrMap::new().with("scale", factor).with("bias", 0.0),
    }])
}

impl Op for DropoutOp {
    fn infer(&self, xs: &[&TensorMeta], o: &DropoutOptions) -> Result<(Vec<TensorMeta>, ())> {
        const OP: &str = "dropout";
        let [x] = inputs(OP, xs)?;
        x.expect_float(OP, "the input")?;
        if !(0.0..=1.0).contains(&o.p) {
            return Err(Error::invalid(OP, format!("p must be in [0, 1], got {}", o.p)));
        }
        Ok((vec![(*x).clone(), (*x).clone()], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, o: &DropoutOptions, _: &()) -> Result<Vec<CpuData>> {
        let x = k.x(0);
        let mask = cpu_mask_data(x.len(), o.p, o.scale(), x.dtype());
        let out = float_kernel!("dropout"; x = x, m = &mask => x.iter().zip(m).map(|(a, b)| a * b).collect())?;
        Ok(vec![out, mask])
    }

    fn gpu(&self, k: &GpuCall<'_>, o: &DropoutOptions, _: &()) -> Result<()> {
        let n = k.outs[0].numel();
        gpu_mask(k.ctx, n, o.p, o.scale(), k.y(1))?;
        crate::ops::elementwise::binary::gpu_multiply(k.ctx, k.x(0), k.y(1), k.y(0), n)
    }

    fn aux_outputs(&self) -> usize {
        1
    }

    fn facts(&self) -> Facts {
        Facts { eval: Some(EvalRewrite { running: 0, form: eval_form }), random: true, ..Facts::NONE }
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &DropoutOptions, _: &()) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g.grad_if(0, || g.g().mul(&g.y(1)?))?])
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
    apply1(&DROPOUT, &[x], options)
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&DROPOUT], kernels: &[] };

impl AttrField for DropoutMode {
    fn to_attr(&self) -> AttrValue {
        AttrValue::Str(
            match self {
                DropoutMode::UpscaleInTrain => "upscale_in_train",
                DropoutMode::DownscaleInInfer => "downscale_in_infer",
            }
            .into(),
        )
    }
    fn from_attr(v: &AttrValue) -> Option<Self> {
        match v {
            AttrValue::Str(s) => s.parse().ok(),
            _ => None,
        }
    }
}
