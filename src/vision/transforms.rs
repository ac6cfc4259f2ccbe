//! Image transforms applied to samples on the host (`paddle.vision.transforms`).

use crate::{Error, NdArray, Result};

/// A per-sample transform of a CHW float image.
pub trait Transform: Send + Sync {
    /// The transformed image.
    fn apply(&self, image: NdArray<f32>) -> Result<NdArray<f32>>;
}

/// `(x − mean[c]) / std[c]` per channel of a CHW image (`transforms.Normalize`). One value
/// applies to every channel. The MNIST seed's `x / 255 · 2 − 1` is `Normalize([127.5], [127.5])`.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalize {
    /// Per-channel means.
    pub mean: Vec<f32>,
    /// Per-channel standard deviations.
    pub std: Vec<f32>,
}

impl Normalize {
    /// With per-channel (or single) mean and std.
    pub fn new(mean: &[f32], std: &[f32]) -> Result<Self> {
        if mean.is_empty() || mean.len() != std.len() || std.contains(&0.0) {
            return Err(Error::invalid(
                "Normalize",
                format!("mean {mean:?} and std {std:?} must have the same non-zero length, std non-zero"),
            ));
        }
        Ok(Normalize { mean: mean.to_vec(), std: std.to_vec() })
    }
}

impl Transform for Normalize {
    fn apply(&self, mut image: NdArray<f32>) -> Result<NdArray<f32>> {
        let channels = image.shape.first().copied().unwrap_or(1).max(1);
        if image.data.len() != image.shape.iter().product::<usize>() || !image.data.len().is_multiple_of(channels) {
            return Err(Error::shape(
                "Normalize",
                format!("{} values do not fill an image of shape {:?}", image.data.len(), image.shape),
            ));
        }
        if self.mean.len() != 1 && self.mean.len() != channels {
            return Err(Error::shape(
                "Normalize",
                format!("{} means for an image of shape {:?} (CHW)", self.mean.len(), image.shape),
            ));
        }
        let plane = image.data.len() / channels;
        for (c, chunk) in image.data.chunks_mut(plane.max(1)).enumerate() {
            let k = if self.mean.len() == 1 { 0 } else { c };
            let (m, s) = (self.mean[k], self.std[k]);
            for v in chunk {
                *v = (*v - m) / s;
            }
        }
        Ok(image)
    }
}
