//! Gradient clipping (`paddle.nn.ClipGradByValue`, `ClipGradByNorm`,
//! `ClipGradByGlobalNorm`), in tensor ops on the gradients' place: no host round trip.

use crate::{Error, Result, Tensor};

/// How an optimizer clips gradients before its update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GradClip {
    /// Clamp every element to `[min, max]`.
    ByValue { min: f64, max: f64 },
    /// Rescale each gradient whose L2 norm exceeds `clip_norm`.
    ByNorm { clip_norm: f64 },
    /// Rescale all gradients together when their joint L2 norm exceeds `clip_norm`.
    ByGlobalNorm { clip_norm: f64 },
}

impl GradClip {
    /// Paddle's `ClipGradByValue(max, min=-max)`.
    pub fn by_value(max: f64, min: Option<f64>) -> Self {
        GradClip::ByValue { min: min.unwrap_or(-max), max }
    }

    /// Errors for settings that cannot clip: `max ≤ min`, a NaN bound, a norm that is not
    /// positive and finite.
    pub fn validate(&self) -> Result<()> {
        match *self {
            GradClip::ByValue { min, max } if min >= max || min.is_nan() || max.is_nan() => {
                Err(Error::invalid("ClipGradByValue", format!("max {max} must be greater than min {min}")))
            }
            GradClip::ByNorm { clip_norm } | GradClip::ByGlobalNorm { clip_norm }
                if !(clip_norm > 0.0 && clip_norm.is_finite()) =>
            {
                Err(Error::invalid("ClipGradByNorm", format!("clip_norm must be positive and finite, got {clip_norm}")))
            }
            _ => Ok(()),
        }
    }

    /// Clipped copies of `grads`.
    pub fn apply(&self, grads: &[Tensor]) -> Result<Vec<Tensor>> {
        self.validate()?;
        let _g = crate::no_grad_guard();
        match *self {
            GradClip::ByValue { min, max } => grads.iter().map(|g| g.clip(min, max)).collect(),
            GradClip::ByNorm { clip_norm } => grads
                .iter()
                .map(|g| {
                    let norm = g.square()?.sum(&[], false)?.sqrt()?;
                    g.mul(&norm.maximum_scalar(clip_norm)?.rdiv_scalar(clip_norm)?)
                })
                .collect(),
            GradClip::ByGlobalNorm { clip_norm } => {
                if grads.is_empty() {
                    return Ok(Vec::new());
                }
                let sums: Vec<Tensor> = grads
                    .iter()
                    .map(|g| g.cast(crate::DType::Float32)?.square()?.sum(&[], false)?.to(grads[0].place()))
                    .collect::<Result<_>>()?;
                let norm = crate::add_n(&sums)?.sqrt()?;
                let factor = norm.maximum_scalar(clip_norm)?.rdiv_scalar(clip_norm)?;
                grads.iter().map(|g| g.mul(&factor.cast(g.dtype())?.to(g.place())?)).collect()
            }
        }
    }
}
