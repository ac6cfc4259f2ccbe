//! The loss-scaling family of mixed precision (`paddle.amp.GradScaler`'s device work):
//! `check_finite_and_unscale` divides every gradient by the loss scale in place and marks a
//! flag where a value is not finite, one pass over each gradient; `update_loss_scaling`
//! moves the scale and its good/bad step counters by that flag. Both run on the tensors'
//! place and read nothing back to the host, so a training step under a scaler costs no
//! synchronisation (the optimizer's gated schedule skips the step on the device).

mod loss_scaling;
mod unscale;

pub(crate) use loss_scaling::LossScalingAttrs;

use crate::ops::registry::apply::apply;
use crate::{Result, Tensor};

/// Divides each of `grads` by `scale` (a float32 `[1]`) in place and sets `found_inf` (a
/// bool `[1]`, written in place, left as it was when every value is finite) where a
/// quotient is a NaN or an infinity (Paddle's `check_finite_and_unscale`).
pub fn check_finite_and_unscale(grads: &[&Tensor], scale: &Tensor, found_inf: &Tensor) -> Result<()> {
    let mut inputs = vec![found_inf, scale];
    inputs.extend_from_slice(grads);
    apply(&unscale::CHECK_FINITE_AND_UNSCALE, &inputs, ())?;
    Ok(())
}

/// Paddle's `update_loss_scaling` on `scale` (float32 `[1]`) and the counters `good`/`bad`
/// (int32 `[1]`), all in place, by the flag `found_inf` (bool `[1]`): a non-finite step
/// zeroes `good` and counts `bad`, and every `decr_every_n_nan_or_inf`-th one multiplies
/// the scale by `decr_ratio` (never below 1); a finite step zeroes `bad` and counts `good`,
/// and every `incr_every_n_steps`-th one multiplies the scale by `incr_ratio` (unless that
/// overflows).
pub fn update_loss_scaling(
    found_inf: &Tensor,
    scale: &Tensor,
    good: &Tensor,
    bad: &Tensor,
    attrs: &LossScalingAttrs,
) -> Result<()> {
    apply(&loss_scaling::UPDATE_LOSS_SCALING, &[found_inf, scale, good, bad], attrs.clone())?;
    Ok(())
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&unscale::CHECK_FINITE_AND_UNSCALE, &loss_scaling::UPDATE_LOSS_SCALING],
    kernels: &[&unscale::UNSCALE_KERNEL, &loss_scaling::LOSS_SCALING_KERNEL],
};
