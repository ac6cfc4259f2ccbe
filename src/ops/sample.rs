//! Sampling from distributions (`paddle.bernoulli`, `paddle.multinomial`), composed from the
//! generator's uniform draws and registered ops: the same seed draws the same samples on
//! every place, and no value leaves the device.

use crate::{DType, Error, Result, Tensor};

/// 1 with probability `p`, else 0, element-wise (`paddle.bernoulli`); `p` in `[0, 1]`
/// (float), the output has its dtype.
pub fn bernoulli(p: &Tensor) -> Result<Tensor> {
    if !p.dtype().is_float() {
        return Err(Error::unsupported("bernoulli", p.dtype(), "for the probabilities (expected a float dtype)"));
    }
    let u = crate::uniform_on(p.shape(), p.dtype(), 0.0, 1.0, p.place())?;
    u.less_than(&p.detach())?.cast(p.dtype())
}

/// `num_samples` class indices per row of `probs` (`[C]` or `[N, C]`, non-negative weights,
/// not necessarily normalised), int64 (`paddle.multinomial`). With `replacement` each draw
/// inverts the row's cumulative distribution; without it the rows' Gumbel-perturbed log
/// weights are ranked (a draw without replacement in proportion to the weights), so
/// `num_samples` may not exceed the classes.
pub fn multinomial(probs: &Tensor, num_samples: usize, replacement: bool) -> Result<Tensor> {
    const OP: &str = "multinomial";
    if !probs.dtype().is_float() {
        return Err(Error::unsupported(OP, probs.dtype(), "for the probabilities (expected a float dtype)"));
    }
    if probs.ndim() == 0 || probs.ndim() > 2 {
        return Err(Error::shape(OP, format!("probabilities must be [C] or [N, C], got {:?}", probs.shape())));
    }
    let rows = if probs.ndim() == 1 { probs.unsqueeze(&[0])? } else { probs.detach() };
    let (n, c) = (rows.shape()[0], rows.shape()[1]);
    if num_samples == 0 || (!replacement && num_samples > c) {
        return Err(Error::invalid(
            OP,
            format!("num_samples {num_samples} must be positive and, without replacement, at most the {c} classes"),
        ));
    }
    let f32s = rows.cast(DType::Float32)?;
    let samples = if replacement {
        let cdf = crate::cumsum(&f32s, Some(1))?;
        let total = cdf.slice(&[1], &[c as i64 - 1], &[c as i64])?;
        let u = crate::uniform_on([n, num_samples], DType::Float32, 0.0, 1.0, probs.place())?.multiply(&total)?;
        // The index of the first cumulative weight above u: the count of those at or below.
        let below = cdf.unsqueeze(&[1])?.less_equal(&u.unsqueeze(&[2])?)?;
        crate::sum(&below.cast(DType::Int64)?, &[2], false)?.minimum_scalar(c as i64 - 1)?
    } else {
        let u = crate::uniform_on([n, c], DType::Float32, 1e-12, 1.0, probs.place())?;
        let gumbel = u.log()?.neg()?.log()?.neg()?;
        let keys = f32s.log()?.add(&gumbel)?;
        crate::topk(&keys, num_samples, 1, true)?.1
    };
    if probs.ndim() == 1 { samples.squeeze(&[0]) } else { Ok(samples) }
}
