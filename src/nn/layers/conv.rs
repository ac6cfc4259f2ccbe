//! `Conv2D` (`paddle.nn.Conv2D`): weight `[out, in/groups, kh, kw]`, KaimingNormal, bias
//! zeros.

use crate::nn::Forward;
use crate::nn::init::{BiasAttr, Initializer, ParamAttr, ParamNames, create_parameter};
use crate::ops::nn::{Conv2dOptions, Pair};
use crate::{DType, Result, Tensor};

/// A 2-D convolution layer over NCHW inputs.
#[derive(crate::nn::Layer)]
pub struct Conv2D {
    /// `[out_channels, in_channels / groups, kh, kw]`.
    #[layer(param)]
    pub weight: Tensor,
    /// `[out_channels]`, absent with `bias_attr = false`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    #[layer(skip)]
    pub options: Conv2dOptions,
    #[layer(training)]
    training: bool,
}

impl Conv2D {
    /// `in_channels → out_channels` with a `kernel_size` kernel and Paddle's defaults.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: impl Into<Pair>) -> Result<Self> {
        Conv2D::with_options(
            in_channels,
            out_channels,
            kernel_size,
            Conv2dOptions::default(),
            ParamAttr::default(),
            BiasAttr::default(),
        )
    }

    /// With explicit options and parameter attributes.
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel_size: impl Into<Pair>,
        options: Conv2dOptions,
        weight_attr: ParamAttr,
        bias_attr: impl Into<BiasAttr>,
    ) -> Result<Self> {
        let [kh, kw] = kernel_size.into().0;
        let groups = options.groups.max(1);
        let shape = [out_channels, in_channels / groups, kh, kw];
        let names = ParamNames::new("conv2d");
        let weight =
            create_parameter(&shape, DType::Float32, &names.weight(&weight_attr), &Initializer::kaiming_normal())?;
        let bias = names.bias(bias_attr.into()).create(&[out_channels])?;
        Ok(Conv2D { weight, bias, options, training: true })
    }
}

impl Forward for Conv2D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Conv2D", x, || {
            crate::conv2d(x, &self.weight, self.bias.as_ref(), &self.options)
        })
    }
}

/// A 1-D convolution layer over `[N, C, L]` inputs (`paddle.nn.Conv1D`): weight
/// `[out, in/groups, k]`, KaimingNormal, bias zeros.
#[derive(crate::nn::Layer)]
pub struct Conv1D {
    /// `[out_channels, in_channels / groups, k]`.
    #[layer(param)]
    pub weight: Tensor,
    /// `[out_channels]`, absent with `bias_attr = false`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    #[layer(skip)]
    pub options: crate::ops::nn::Conv1dOptions,
    #[layer(training)]
    training: bool,
}

impl Conv1D {
    /// `in_channels → out_channels` with a `kernel_size` kernel and Paddle's defaults.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Result<Self> {
        Conv1D::with_options(in_channels, out_channels, kernel_size, Default::default(), true)
    }

    /// With explicit options (`bias: false` drops the bias).
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        options: crate::ops::nn::Conv1dOptions,
        bias: bool,
    ) -> Result<Self> {
        let shape = [out_channels, in_channels / options.groups.max(1), kernel_size];
        let names = ParamNames::new("conv1d");
        let attr = names.weight(&ParamAttr::default());
        let weight = create_parameter(&shape, DType::Float32, &attr, &Initializer::kaiming_normal())?;
        let bias = names.bias(BiasAttr::from(bias)).create(&[out_channels])?;
        Ok(Conv1D { weight, bias, options, training: true })
    }
}

impl Forward for Conv1D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Conv1D", x, || {
            crate::conv1d(x, &self.weight, self.bias.as_ref(), &self.options)
        })
    }
}

/// A 3-D convolution layer over `[N, C, D, H, W]` inputs (`paddle.nn.Conv3D`): weight
/// `[out, in/groups, kd, kh, kw]`, KaimingNormal, bias zeros.
#[derive(crate::nn::Layer)]
pub struct Conv3D {
    /// `[out_channels, in_channels / groups, kd, kh, kw]`.
    #[layer(param)]
    pub weight: Tensor,
    /// `[out_channels]`, absent with `bias: false`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, dilation and groups.
    #[layer(skip)]
    pub options: crate::ops::nn::Conv3dOptions,
    #[layer(training)]
    training: bool,
}

impl Conv3D {
    /// `in_channels → out_channels` with a cubic `kernel_size` kernel and Paddle's defaults.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Result<Self> {
        Conv3D::with_options(in_channels, out_channels, [kernel_size; 3], Default::default(), true)
    }

    /// With an explicit `[kd, kh, kw]` kernel and options (`bias: false` drops the bias).
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 3],
        options: crate::ops::nn::Conv3dOptions,
        bias: bool,
    ) -> Result<Self> {
        let [kd, kh, kw] = kernel_size;
        let shape = [out_channels, in_channels / options.groups.max(1), kd, kh, kw];
        let names = ParamNames::new("conv3d");
        let attr = names.weight(&ParamAttr::default());
        let weight = create_parameter(&shape, DType::Float32, &attr, &Initializer::kaiming_normal())?;
        let bias = names.bias(BiasAttr::from(bias)).create(&[out_channels])?;
        Ok(Conv3D { weight, bias, options, training: true })
    }
}

impl Forward for Conv3D {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Conv3D", x, || {
            crate::conv3d(x, &self.weight, self.bias.as_ref(), &self.options)
        })
    }
}

/// A transposed 2-D convolution (`paddle.nn.Conv2DTranspose`): weight
/// `[in, out/groups, kh, kw]`, bias `[out]`.
#[derive(crate::nn::Layer)]
pub struct Conv2DTranspose {
    /// `[in_channels, out_channels / groups, kh, kw]`.
    #[layer(param)]
    pub weight: Tensor,
    /// `[out_channels]`, absent with `bias: false`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    /// Stride, padding, output padding, dilation and groups.
    #[layer(skip)]
    pub options: crate::ops::nn::ConvTranspose2dOptions,
    #[layer(training)]
    training: bool,
}

impl Conv2DTranspose {
    /// `in_channels → out_channels` with a square `kernel_size` and Paddle's defaults.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Result<Self> {
        Conv2DTranspose::with_options(in_channels, out_channels, [kernel_size; 2], Default::default(), true)
    }

    /// With explicit options (`bias: false` drops the bias).
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel_size: [usize; 2],
        options: crate::ops::nn::ConvTranspose2dOptions,
        bias: bool,
    ) -> Result<Self> {
        let shape = [in_channels, out_channels / options.groups.max(1), kernel_size[0], kernel_size[1]];
        let names = ParamNames::new("conv2d_transpose");
        let attr = names.weight(&ParamAttr::default());
        let weight = create_parameter(&shape, DType::Float32, &attr, &Initializer::kaiming_normal())?;
        let bias = names.bias(BiasAttr::from(bias)).create(&[out_channels])?;
        Ok(Conv2DTranspose { weight, bias, options, training: true })
    }
}

impl Forward for Conv2DTranspose {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Conv2DTranspose", x, || {
            crate::conv2d_transpose(x, &self.weight, self.bias.as_ref(), &self.options)
        })
    }
}
