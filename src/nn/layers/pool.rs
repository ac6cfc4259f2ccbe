//! Pooling layers: `MaxPool2D`, `AvgPool2D`, `AdaptiveAvgPool2D`, `AdaptiveMaxPool2D`.

use crate::nn::{Forward, Layer};
use crate::ops::nn::{Pair, Pool2dOptions};
use crate::{Result, Tensor};

/// `paddle.nn.MaxPool2D`.
#[derive(Clone, Debug)]
pub struct MaxPool2D {
    /// Window options.
    pub options: Pool2dOptions,
}

impl MaxPool2D {
    /// A `kernel` window with stride = kernel.
    pub fn new(kernel: impl Into<Pair>) -> Self {
        MaxPool2D { options: Pool2dOptions::new(kernel) }
    }

    /// With explicit options.
    pub fn with_options(options: Pool2dOptions) -> Self {
        MaxPool2D { options }
    }
}

/// `paddle.nn.AvgPool2D` (exclusive by default).
#[derive(Clone, Debug)]
pub struct AvgPool2D {
    /// Window options.
    pub options: Pool2dOptions,
}

impl AvgPool2D {
    /// A `kernel` window with stride = kernel.
    pub fn new(kernel: impl Into<Pair>) -> Self {
        AvgPool2D { options: Pool2dOptions::new(kernel) }
    }

    /// With explicit options.
    pub fn with_options(options: Pool2dOptions) -> Self {
        AvgPool2D { options }
    }
}

/// `paddle.nn.AdaptiveAvgPool2D`.
#[derive(Clone, Debug)]
pub struct AdaptiveAvgPool2D {
    /// Output height and width.
    pub output_size: Pair,
}

impl AdaptiveAvgPool2D {
    /// Pools to `output_size`.
    pub fn new(output_size: impl Into<Pair>) -> Self {
        AdaptiveAvgPool2D { output_size: output_size.into() }
    }
}

/// `paddle.nn.AdaptiveMaxPool2D`.
#[derive(Clone, Debug)]
pub struct AdaptiveMaxPool2D {
    /// Output height and width.
    pub output_size: Pair,
}

impl AdaptiveMaxPool2D {
    /// Pools to `output_size`.
    pub fn new(output_size: impl Into<Pair>) -> Self {
        AdaptiveMaxPool2D { output_size: output_size.into() }
    }
}

impl Layer for MaxPool2D {}
impl Layer for AvgPool2D {}
impl Layer for AdaptiveAvgPool2D {}
impl Layer for AdaptiveMaxPool2D {}

impl Forward for MaxPool2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "MaxPool2D", x, || crate::max_pool2d(x, &self.options))
    }
}

impl Forward for AvgPool2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "AvgPool2D", x, || crate::avg_pool2d(x, &self.options))
    }
}

impl Forward for AdaptiveAvgPool2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "AdaptiveAvgPool2D", x, || crate::adaptive_avg_pool2d(x, self.output_size))
    }
}

impl Forward for AdaptiveMaxPool2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "AdaptiveMaxPool2D", x, || crate::adaptive_max_pool2d(x, self.output_size))
    }
}
