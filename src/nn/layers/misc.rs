//! `Dropout`, `Dropout2D`, `Embedding`, `Softmax`, `PixelShuffle` and `Upsample` layers.

use crate::nn::init::{Initializer, ParamAttr, ParamNames, create_parameter};
use crate::nn::{Forward, Layer};
use crate::ops::nn::{DropoutMode, DropoutOptions};
use crate::{DType, Error, Result, Tensor};

/// Randomly zeroes elements in training (`paddle.nn.Dropout(p=0.5, mode="upscale_in_train")`).
#[derive(crate::nn::Layer)]
pub struct Dropout {
    /// Probability of zeroing an element.
    #[layer(skip)]
    pub p: f64,
    /// Where the `1/(1−p)` scale goes.
    #[layer(skip)]
    pub mode: DropoutMode,
    #[layer(training)]
    training: bool,
}

impl Dropout {
    /// Dropout with probability `p`, upscaling in training.
    pub fn new(p: f64) -> Self {
        Dropout { p, mode: DropoutMode::UpscaleInTrain, training: true }
    }

    /// Dropout with an explicit mode.
    pub fn with_mode(p: f64, mode: DropoutMode) -> Self {
        Dropout { p, mode, training: true }
    }
}

impl Forward for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Dropout", x, || {
            crate::dropout(x, DropoutOptions { p: self.p, training: self.training, mode: self.mode })
        })
    }
}

/// A lookup table of `num_embeddings` vectors (`paddle.nn.Embedding`), XavierUniform by
/// default; the `padding_idx` row starts at zero and receives no gradient.
#[derive(crate::nn::Layer)]
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    #[layer(param)]
    pub weight: Tensor,
    /// The padding row, if any.
    #[layer(skip)]
    pub padding_idx: Option<i64>,
    #[layer(training)]
    training: bool,
}

impl Embedding {
    /// A table of `num_embeddings × embedding_dim`.
    pub fn new(num_embeddings: usize, embedding_dim: usize, padding_idx: Option<i64>) -> Result<Self> {
        Embedding::with_attr(num_embeddings, embedding_dim, padding_idx, ParamAttr::default())
    }

    /// With an explicit weight attribute.
    pub fn with_attr(
        num_embeddings: usize,
        embedding_dim: usize,
        padding_idx: Option<i64>,
        attr: ParamAttr,
    ) -> Result<Self> {
        let n = num_embeddings as i64;
        let padding_idx = match padding_idx {
            Some(p) if p >= n || p < -n => {
                return Err(Error::invalid("Embedding", format!("padding_idx {p} is outside [-{n}, {n})")));
            }
            Some(p) => Some(if p < 0 { p + n } else { p }),
            None => None,
        };
        let attr = ParamNames::new("embedding").weight(&attr);
        let weight =
            create_parameter(&[num_embeddings, embedding_dim], DType::Float32, &attr, &Initializer::xavier_uniform())?;
        if let Some(p) = padding_idx {
            crate::no_grad(|| -> Result<()> {
                let keep = crate::arange(0, n, 1, DType::Int64)?.to(weight.place())?.not_equal_scalar(p)?;
                let zeroed = weight.mul(&keep.cast(DType::Float32)?.unsqueeze(&[1])?)?;
                weight.assign_(&zeroed)
            })?;
        }
        Ok(Embedding { weight, padding_idx, training: true })
    }
}

impl Forward for Embedding {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Embedding", ids, || crate::embedding(ids, &self.weight, self.padding_idx))
    }
}

/// Softmax over `axis` (`paddle.nn.Softmax(axis=-1)`).
#[derive(Clone, Copy, Debug)]
pub struct Softmax {
    /// The normalised axis.
    pub axis: isize,
}

impl Default for Softmax {
    fn default() -> Self {
        Softmax { axis: -1 }
    }
}

impl Layer for Softmax {}

impl Forward for Softmax {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Softmax", x, || crate::softmax(x, self.axis))
    }
}

/// Drops whole channels of `[N, C, H, W]` in training (`paddle.nn.Dropout2D(p=0.5)`).
#[derive(crate::nn::Layer)]
pub struct Dropout2D {
    /// Probability of zeroing a channel.
    #[layer(skip)]
    pub p: f64,
    #[layer(training)]
    training: bool,
}

impl Dropout2D {
    /// Channel dropout with probability `p`.
    pub fn new(p: f64) -> Self {
        Dropout2D { p, training: true }
    }
}

impl Forward for Dropout2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Dropout2D", x, || crate::dropout2d(x, self.p, self.training))
    }
}

/// `[N, C·r², H, W]` → `[N, C, H·r, W·r]` (`paddle.nn.PixelShuffle(upscale_factor)`).
#[derive(Clone, Copy, Debug)]
pub struct PixelShuffle {
    /// The factor `r`.
    pub upscale_factor: usize,
}

impl PixelShuffle {
    /// Upscales by `upscale_factor`.
    pub fn new(upscale_factor: usize) -> Self {
        PixelShuffle { upscale_factor }
    }
}

impl Layer for PixelShuffle {}

impl Forward for PixelShuffle {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "PixelShuffle", x, || crate::pixel_shuffle(x, self.upscale_factor))
    }
}

/// Resamples `[N, C, H, W]` to a size or by a scale (`paddle.nn.Upsample`).
#[derive(Clone, Copy, Debug)]
pub struct Upsample {
    /// The output size, or
    pub size: Option<[usize; 2]>,
    /// the scale of each dimension.
    pub scale_factor: Option<[f64; 2]>,
    /// Nearest or bilinear.
    pub mode: crate::ops::nn::InterpolateMode,
    /// Bilinear only: corners of input and output meet.
    pub align_corners: bool,
}

impl Upsample {
    /// Scales both dimensions by `scale` with `mode`, corners not aligned.
    pub fn scale(scale: f64, mode: crate::ops::nn::InterpolateMode) -> Self {
        Upsample { size: None, scale_factor: Some([scale, scale]), mode, align_corners: false }
    }
}

impl Layer for Upsample {}

impl Forward for Upsample {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Upsample", x, || {
            crate::interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)
        })
    }
}
