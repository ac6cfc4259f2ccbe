//! Ready-made networks (`paddle.vision.models`): the MNIST tutorial's convolutional network,
//! shared by the MNIST example and the browser demo so both train and load the same weights;
//! `LeNet`, the ResNets, the VGGs and MobileNetV2.

pub use super::mobilenet::{InvertedResidual, MobileNetV2, mobilenet_v2};
pub use super::resnet::{BasicBlock, BottleneckBlock, LeNet, ResNet, Vgg, resnet18, resnet34, resnet50, vgg16};
use crate::nn::{self, Forward, Initializer, ParamAttr, Pool2dOptions};
use crate::{self as paddle, Result, Tensor};

/// conv → relu → max-pool, Paddle 1.x's `SimpleImgConvPool` with `act="relu"`.
#[derive(nn::Layer)]
pub struct SimpleImgConvPool {
    conv2d: nn::Conv2D,
    pool2d: nn::MaxPool2D,
}

impl SimpleImgConvPool {
    pub fn new(
        num_channels: usize,
        num_filters: usize,
        filter_size: usize,
        pool_size: usize,
        pool_stride: usize,
    ) -> Result<Self> {
        Ok(SimpleImgConvPool {
            conv2d: nn::Conv2D::new(num_channels, num_filters, filter_size)?,
            pool2d: nn::MaxPool2D::with_options(Pool2dOptions::new(pool_size).stride(pool_stride)),
        })
    }
}

impl Forward for SimpleImgConvPool {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.pool2d.forward(&self.conv2d.forward(x)?.relu()?)
    }
}

/// The MNIST tutorial's network (seed 002): two `SimpleImgConvPool` blocks (conv 5×5 1→20 and
/// 20→50, relu, max-pool 2×2 stride 2) and an FC 800→10; `forward` takes `[N, 1, 28, 28]`
/// images scaled to [−1, 1] and returns class probabilities (softmax).
#[derive(nn::Layer)]
pub struct MnistNet {
    simple_img_conv_pool_1: SimpleImgConvPool,
    simple_img_conv_pool_2: SimpleImgConvPool,
    fc: nn::Linear,
}

impl MnistNet {
    /// A freshly initialised network on the current place.
    pub fn new() -> Result<Self> {
        let pool_2_shape = 50 * 4 * 4;
        let size = 10;
        let scale = (2.0 / ((pool_2_shape * pool_2_shape * size) as f64)).sqrt();
        let fc_attr = ParamAttr::with_initializer(Initializer::Normal { mean: 0.0, std: scale });
        Ok(MnistNet {
            simple_img_conv_pool_1: SimpleImgConvPool::new(1, 20, 5, 2, 2)?,
            simple_img_conv_pool_2: SimpleImgConvPool::new(20, 50, 5, 2, 2)?,
            fc: nn::Linear::with_attrs(pool_2_shape, size, fc_attr, true)?,
        })
    }
}

impl Forward for MnistNet {
    fn forward(&self, inputs: &Tensor) -> Result<Tensor> {
        let x = self.simple_img_conv_pool_1.forward(inputs)?;
        let x = self.simple_img_conv_pool_2.forward(&x)?;
        paddle::softmax(&self.fc.forward(&x.flatten(1, -1)?)?, -1)
    }
}

impl MnistNet {
    /// The seed's `cost, acc = mnist(img, label)`: the class probabilities and the batch's
    /// top-1 accuracy (`paddle.metric.accuracy`).
    pub fn forward_with_label(&self, img: &Tensor, label: &Tensor) -> Result<(Tensor, Tensor)> {
        let cost = self.forward(img)?;
        let acc = crate::metric::accuracy(&cost, label, 1)?;
        Ok((cost, acc))
    }
}

/// The tutorial's `fluid.layers.cross_entropy(cost, label)` on probabilities, averaged.
pub fn mnist_loss(probs: &Tensor, label: &Tensor) -> Result<Tensor> {
    nn::functional::cross_entropy(probs, label, &nn::CrossEntropyOptions { use_softmax: false, ..Default::default() })
}
