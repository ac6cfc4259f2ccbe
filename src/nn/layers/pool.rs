//! Pooling layers: `MaxPool2D`, `AvgPool2D`, `AdaptiveAvgPool2D`, `AdaptiveMaxPool2D`,
//! `MaxPool1D`, `AvgPool1D`.

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

/// 1-D max pooling over `[N, C, L]` (`paddle.nn.MaxPool1D`).
#[derive(Clone, Copy, Debug)]
pub struct MaxPool1D {
    /// Window length.
    pub kernel_size: usize,
    /// Step (the window length when `None`).
    pub stride: Option<usize>,
    /// Padding at each end.
    pub padding: usize,
}

/// 1-D average pooling over `[N, C, L]` (`paddle.nn.AvgPool1D`, padding not counted).
#[derive(Clone, Copy, Debug)]
pub struct AvgPool1D {
    /// Window length.
    pub kernel_size: usize,
    /// Step (the window length when `None`).
    pub stride: Option<usize>,
    /// Padding at each end.
    pub padding: usize,
}

impl MaxPool1D {
    /// A window of `kernel_size` with stride `stride` (the kernel when `None`).
    pub fn new(kernel_size: usize, stride: Option<usize>, padding: usize) -> Self {
        MaxPool1D { kernel_size, stride, padding }
    }
}

impl AvgPool1D {
    /// A window of `kernel_size` with stride `stride` (the kernel when `None`).
    pub fn new(kernel_size: usize, stride: Option<usize>, padding: usize) -> Self {
        AvgPool1D { kernel_size, stride, padding }
    }
}

impl Layer for MaxPool1D {}
impl Layer for AvgPool1D {}

impl Forward for MaxPool1D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "MaxPool1D", x, || {
            crate::max_pool1d(x, self.kernel_size, self.stride, self.padding)
        })
    }
}

impl Forward for AvgPool1D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "AvgPool1D", x, || {
            crate::avg_pool1d(x, self.kernel_size, self.stride, self.padding)
        })
    }
}
