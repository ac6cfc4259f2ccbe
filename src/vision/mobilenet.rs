//! `MobileNetV2` (`paddle.vision.models.mobilenet_v2`) with Paddle's layer names: `features`
//! (a stride-2 3×3 stem, the 17 inverted-residual blocks as `features.N.conv`, a 1×1
//! widening to 1280 channels), global average pooling and `classifier` (dropout 0.2, linear).
//! Every convolution is bias-free and followed by a batch norm; `ReLU6` is the activation.

use crate::nn::{
    self, AdaptiveAvgPool2D, BatchNorm2D, Conv2D, Conv2dOptions, Forward, Linear, ParamAttr, ReLU6, Sequential,
};
use crate::{Error, Result, Tensor};

/// `v` rounded to the nearest multiple of `divisor`, never below 90% of `v` (torchvision's
/// and Paddle's `_make_divisible`).
fn make_divisible(v: f64, divisor: usize) -> usize {
    let d = divisor as f64;
    let mut out = ((v + d / 2.0) / d).floor().max(1.0) as usize * divisor;
    if (out as f64) < 0.9 * v {
        out += divisor;
    }
    out
}

/// conv (no bias) → batch norm → ReLU6 (Paddle's `ConvNormActivation`, keys `0`, `1`).
fn conv_bn_relu6(cin: usize, cout: usize, kernel: usize, stride: usize, groups: usize) -> Result<Sequential> {
    let options = Conv2dOptions::new().stride(stride).padding((kernel - 1) / 2).groups(groups);
    Ok(Sequential::new()
        .add(Conv2D::with_options(cin, cout, kernel, options, ParamAttr::default(), false)?)
        .add(BatchNorm2D::new(cout)?)
        .add(ReLU6))
}

/// Expand (1×1, unless the ratio is 1), depthwise 3×3, project (1×1 + batch norm, no
/// activation); the input is added back when the shape is kept.
#[derive(nn::Layer)]
pub struct InvertedResidual {
    pub conv: Sequential,
    #[layer(skip)]
    residual: bool,
}

impl InvertedResidual {
    /// `cin → cout` with the depthwise convolution's `stride` and hidden width
    /// `round(cin · expand_ratio)`.
    pub fn new(cin: usize, cout: usize, stride: usize, expand_ratio: f64) -> Result<Self> {
        let hidden = (cin as f64 * expand_ratio).round() as usize;
        let mut conv = Sequential::new();
        if expand_ratio != 1.0 {
            conv.push(conv_bn_relu6(cin, hidden, 1, 1, 1)?);
        }
        conv.push(conv_bn_relu6(hidden, hidden, 3, stride, hidden)?);
        conv.push(Conv2D::with_options(hidden, cout, 1, Conv2dOptions::new(), ParamAttr::default(), false)?);
        conv.push(BatchNorm2D::new(cout)?);
        Ok(InvertedResidual { conv, residual: stride == 1 && cin == cout })
    }
}

impl Forward for InvertedResidual {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.conv.forward(x)?;
        if self.residual { x.add(&y) } else { Ok(y) }
    }
}

/// Paddle's `MobileNetV2(scale, num_classes, with_pool)`.
#[derive(nn::Layer)]
pub struct MobileNetV2 {
    pub features: Sequential,
    pub classifier: Option<Sequential>,
    #[layer(skip)]
    pool: Option<AdaptiveAvgPool2D>,
}

impl MobileNetV2 {
    /// Width multiplier `scale` (1.0 is the standard network), `num_classes = 0` leaves out
    /// the classifier, `with_pool = false` the global pooling.
    pub fn new(scale: f64, num_classes: usize, with_pool: bool) -> Result<Self> {
        if !(scale > 0.0 && scale.is_finite()) {
            return Err(Error::invalid("MobileNetV2", format!("scale {scale} must be positive")));
        }
        // (expansion, channels, repeats, first stride)
        const SETTING: [(f64, usize, usize, usize); 7] = [
            (1.0, 16, 1, 1),
            (6.0, 24, 2, 2),
            (6.0, 32, 3, 2),
            (6.0, 64, 4, 2),
            (6.0, 96, 3, 1),
            (6.0, 160, 3, 2),
            (6.0, 320, 1, 1),
        ];
        let mut cin = make_divisible(32.0 * scale, 8);
        let last = make_divisible(1280.0 * scale.max(1.0), 8);
        let mut features = Sequential::new().add(conv_bn_relu6(3, cin, 3, 2, 1)?);
        for (t, c, n, s) in SETTING {
            let cout = make_divisible(c as f64 * scale, 8);
            for i in 0..n {
                features.push(InvertedResidual::new(cin, cout, if i == 0 { s } else { 1 }, t)?);
                cin = cout;
            }
        }
        features.push(conv_bn_relu6(cin, last, 1, 1, 1)?);
        let classifier = if num_classes > 0 {
            Some(Sequential::new().add(nn::Dropout::new(0.2)).add(Linear::new(last, num_classes)?))
        } else {
            None
        };
        Ok(MobileNetV2 { features, classifier, pool: with_pool.then(|| AdaptiveAvgPool2D::new(1)) })
    }
}

impl Forward for MobileNetV2 {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = self.features.forward(x)?;
        if let Some(p) = &self.pool {
            y = p.forward(&y)?;
        }
        match &self.classifier {
            Some(c) => c.forward(&y.flatten(1, -1)?),
            None => Ok(y),
        }
    }
}

/// The standard MobileNetV2 (`paddle.vision.models.mobilenet_v2(scale=1.0)`).
pub fn mobilenet_v2(num_classes: usize) -> Result<MobileNetV2> {
    MobileNetV2::new(1.0, num_classes, true)
}
