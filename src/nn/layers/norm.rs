//! Normalisation layers: `BatchNorm1D/2D` (running statistics as buffers `_mean` and
//! `_variance`, as Paddle names them), `LayerNorm`, `GroupNorm` and `InstanceNorm1D/2D`.

use crate::nn::Forward;
use crate::nn::init::{BiasAttr, Initializer, ParamAttr, ParamNames, create_parameter};
use crate::ops::nn::BatchNormOptions;
use crate::{DType, Result, Tensor};

/// Batch normalisation over the channel axis 1 (`paddle.nn.BatchNorm1D` / `BatchNorm2D`):
/// batch statistics in training (updating the running ones), running statistics in eval.
#[derive(crate::nn::Layer)]
pub struct BatchNorm {
    /// Scale `[C]` (ones).
    #[layer(param)]
    pub weight: Option<Tensor>,
    /// Shift `[C]` (zeros).
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Running mean `[C]` (zeros).
    #[layer(buffer, name = "_mean")]
    pub mean: Tensor,
    /// Running variance `[C]` (ones).
    #[layer(buffer, name = "_variance")]
    pub variance: Tensor,
    /// `running = momentum · running + (1 − momentum) · batch`.
    #[layer(skip)]
    pub momentum: f64,
    /// Added to the variance.
    #[layer(skip)]
    pub epsilon: f64,
    /// Override of the train/eval choice of statistics.
    #[layer(skip)]
    pub use_global_stats: Option<bool>,
    #[layer(training)]
    training: bool,
}

/// `paddle.nn.BatchNorm1D` (inputs `[N, C]` or `[N, C, L]`).
pub type BatchNorm1D = BatchNorm;
/// `paddle.nn.BatchNorm2D` (inputs `[N, C, H, W]`).
pub type BatchNorm2D = BatchNorm;

impl BatchNorm {
    /// `num_features` channels, momentum 0.9, epsilon 1e-5 (Paddle's defaults).
    pub fn new(num_features: usize) -> Result<Self> {
        BatchNorm::with_attrs(num_features, 0.9, 1e-5, ParamAttr::default(), BiasAttr::default())
    }

    /// Explicit momentum, epsilon and parameter attributes (`bias_attr: false` drops the
    /// shift; a non-trainable `weight_attr` freezes the scale).
    pub fn with_attrs(
        num_features: usize,
        momentum: f64,
        epsilon: f64,
        weight_attr: ParamAttr,
        bias_attr: impl Into<BiasAttr>,
    ) -> Result<Self> {
        let c = [num_features];
        let names = ParamNames::new("batch_norm");
        let weight =
            Some(create_parameter(&c, DType::Float32, &names.weight(&weight_attr), &Initializer::Constant(1.0))?);
        let bias = names.bias(bias_attr.into()).create(&c)?;
        Ok(BatchNorm {
            weight,
            bias,
            mean: names.buffer(1, &c, 0.0)?,
            variance: names.buffer(2, &c, 1.0)?,
            momentum,
            epsilon,
            use_global_stats: None,
            training: true,
        })
    }
}

impl Forward for BatchNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "BatchNorm", x, || {
            let opts = BatchNormOptions {
                training: self.training,
                momentum: self.momentum,
                epsilon: self.epsilon,
                use_global_stats: self.use_global_stats,
            };
            crate::batch_norm(x, &self.mean, &self.variance, self.weight.as_ref(), self.bias.as_ref(), &opts)
        })
    }
}

/// Layer normalisation over the trailing `normalized_shape` (`paddle.nn.LayerNorm`).
#[derive(crate::nn::Layer)]
pub struct LayerNorm {
    /// Scale (ones), shaped `normalized_shape`.
    #[layer(param)]
    pub weight: Option<Tensor>,
    /// Shift (zeros).
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// The normalised trailing dimensions.
    #[layer(skip)]
    pub normalized_shape: Vec<usize>,
    /// Added to the variance.
    #[layer(skip)]
    pub epsilon: f64,
    #[layer(training)]
    training: bool,
}

impl LayerNorm {
    /// Normalises over `normalized_shape` with epsilon 1e-5.
    pub fn new(normalized_shape: &[usize]) -> Result<Self> {
        LayerNorm::with_attrs(normalized_shape, 1e-5, ParamAttr::default(), BiasAttr::default())
    }

    /// Explicit epsilon and parameter attributes.
    pub fn with_attrs(
        normalized_shape: &[usize],
        epsilon: f64,
        weight_attr: ParamAttr,
        bias_attr: impl Into<BiasAttr>,
    ) -> Result<Self> {
        let names = ParamNames::new("layer_norm");
        let weight = Some(create_parameter(
            normalized_shape,
            DType::Float32,
            &names.weight(&weight_attr),
            &Initializer::Constant(1.0),
        )?);
        let bias = names.bias(bias_attr.into()).create(normalized_shape)?;
        Ok(LayerNorm { weight, bias, normalized_shape: normalized_shape.to_vec(), epsilon, training: true })
    }
}

impl Forward for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "LayerNorm", x, || {
            crate::layer_norm(x, &self.normalized_shape, self.weight.as_ref(), self.bias.as_ref(), self.epsilon)
        })
    }
}

/// Group normalisation (`paddle.nn.GroupNorm(num_groups, num_channels, epsilon=1e-5)`):
/// per-channel weight (ones) and bias (zeros).
#[derive(crate::nn::Layer)]
pub struct GroupNorm {
    /// `[num_channels]`.
    #[layer(param)]
    pub weight: Option<Tensor>,
    /// `[num_channels]`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Channel groups.
    #[layer(skip)]
    pub num_groups: usize,
    /// Added to the variance.
    #[layer(skip)]
    pub epsilon: f64,
    #[layer(training)]
    training: bool,
}

impl GroupNorm {
    /// `num_channels` channels in `num_groups` groups, epsilon 1e-5.
    pub fn new(num_groups: usize, num_channels: usize) -> Result<Self> {
        let names = ParamNames::new("group_norm");
        let weight = Some(create_parameter(
            &[num_channels],
            DType::Float32,
            &names.weight(&ParamAttr::default()),
            &Initializer::Constant(1.0),
        )?);
        let bias = names.bias(BiasAttr::default()).create(&[num_channels])?;
        Ok(GroupNorm { weight, bias, num_groups, epsilon: 1e-5, training: true })
    }
}

impl Forward for GroupNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "GroupNorm", x, || {
            crate::group_norm(x, self.num_groups, self.epsilon, self.weight.as_ref(), self.bias.as_ref())
        })
    }
}

/// Instance normalisation over `[N, C, L]` (`InstanceNorm1D`) or `[N, C, H, W]`
/// (`InstanceNorm2D`): per-channel `scale` (ones) and `bias` (zeros), Paddle's names.
#[derive(crate::nn::Layer)]
pub struct InstanceNorm {
    /// `[num_features]`.
    #[layer(param)]
    pub scale: Option<Tensor>,
    /// `[num_features]`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Added to the variance.
    #[layer(skip)]
    pub epsilon: f64,
    /// The input rank this layer takes (3 or 4).
    #[layer(skip)]
    rank: usize,
    #[layer(training)]
    training: bool,
}

/// `paddle.nn.InstanceNorm1D`.
pub type InstanceNorm1D = InstanceNorm;
/// `paddle.nn.InstanceNorm2D`.
pub type InstanceNorm2D = InstanceNorm;

impl InstanceNorm {
    fn with_rank(num_features: usize, rank: usize) -> Result<Self> {
        let names = ParamNames::new("instance_norm");
        let scale = Some(create_parameter(
            &[num_features],
            DType::Float32,
            &names.weight(&ParamAttr::default()),
            &Initializer::Constant(1.0),
        )?);
        let bias = names.bias(BiasAttr::default()).create(&[num_features])?;
        Ok(InstanceNorm { scale, bias, epsilon: 1e-5, rank, training: true })
    }

    /// For `[N, C, L]` inputs (`InstanceNorm1D(num_features)`).
    pub fn new_1d(num_features: usize) -> Result<Self> {
        InstanceNorm::with_rank(num_features, 3)
    }

    /// For `[N, C, H, W]` inputs (`InstanceNorm2D(num_features)`).
    pub fn new_2d(num_features: usize) -> Result<Self> {
        InstanceNorm::with_rank(num_features, 4)
    }
}

impl Forward for InstanceNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "InstanceNorm", x, || {
            if x.ndim() != self.rank {
                return Err(crate::Error::shape(
                    "instance_norm",
                    format!("this layer takes {}-D inputs, got {:?}", self.rank, x.shape()),
                ));
            }
            crate::instance_norm(x, self.epsilon, self.scale.as_ref(), self.bias.as_ref())
        })
    }
}
