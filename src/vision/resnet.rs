//! `LeNet`, the ResNet family (`paddle.vision.models.LeNet`, `resnet18/34/50/101/152`) and
//! the VGGs (`vgg11/13/16/19`, with or without batch norm)
//! with Paddle's layer names (`conv1`, `bn1`, `layer1.0.conv1`, `layer2.0.downsample.0`,
//! `fc`; batch norms keep `_mean` / `_variance`), so a state dict converted from Paddle loads
//! with `set_state_dict`.

use crate::nn::{
    self, AdaptiveAvgPool2D, BatchNorm2D, Conv2D, Conv2dOptions, Forward, Linear, MaxPool2D, ParamAttr, Pool2dOptions,
    ReLU, Sequential,
};
use crate::{Result, Tensor};

/// Paddle's `LeNet(num_classes=10)` for `[N, 1, 28, 28]` inputs: `features` (conv 3×3 1→6
/// padding 1, relu, max-pool 2, conv 5×5 6→16, relu, max-pool 2) and `fc` (400→120→84→classes).
#[derive(nn::Layer)]
pub struct LeNet {
    pub features: Sequential,
    pub fc: Sequential,
}

impl LeNet {
    /// A LeNet with `num_classes` outputs.
    pub fn new(num_classes: usize) -> Result<Self> {
        let features = Sequential::new()
            .add(conv(1, 6, 3, 1, 1, true)?)
            .add(ReLU)
            .add(MaxPool2D::new(2))
            .add(conv(6, 16, 5, 1, 0, true)?)
            .add(ReLU)
            .add(MaxPool2D::new(2));
        let fc =
            Sequential::new().add(Linear::new(400, 120)?).add(Linear::new(120, 84)?).add(Linear::new(84, num_classes)?);
        Ok(LeNet { features, fc })
    }
}

impl Forward for LeNet {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.fc.forward(&self.features.forward(x)?.flatten(1, -1)?)
    }
}

fn conv(cin: usize, cout: usize, k: usize, stride: usize, padding: usize, bias: bool) -> Result<Conv2D> {
    Conv2D::with_options(cin, cout, k, Conv2dOptions::new().stride(stride).padding(padding), ParamAttr::default(), bias)
}

/// A residual block's shortcut: `conv 1×1` + batch norm where the shape changes.
fn downsample(cin: usize, cout: usize, stride: usize) -> Result<Option<Sequential>> {
    if stride == 1 && cin == cout {
        return Ok(None);
    }
    Ok(Some(Sequential::new().add(conv(cin, cout, 1, stride, 0, false)?).add(BatchNorm2D::new(cout)?)))
}

/// `relu(y + shortcut(x))`: the block's input, or its downsampled form where the shape changes.
fn add_shortcut(y: &Tensor, x: &Tensor, downsample: Option<&Sequential>) -> Result<Tensor> {
    match downsample {
        Some(d) => y.add(&d.forward(x)?)?.relu(),
        None => y.add(x)?.relu(),
    }
}

/// Two 3×3 convolutions with a shortcut (ResNet-18/34).
#[derive(nn::Layer)]
pub struct BasicBlock {
    pub conv1: Conv2D,
    pub bn1: BatchNorm2D,
    pub conv2: Conv2D,
    pub bn2: BatchNorm2D,
    pub downsample: Option<Sequential>,
}

impl BasicBlock {
    /// Output channels per input plane.
    pub const EXPANSION: usize = 1;

    /// `inplanes → planes` with the first convolution's `stride`.
    pub fn new(inplanes: usize, planes: usize, stride: usize) -> Result<Self> {
        Ok(BasicBlock {
            conv1: conv(inplanes, planes, 3, stride, 1, false)?,
            bn1: BatchNorm2D::new(planes)?,
            conv2: conv(planes, planes, 3, 1, 1, false)?,
            bn2: BatchNorm2D::new(planes)?,
            downsample: downsample(inplanes, planes, stride)?,
        })
    }
}

impl Forward for BasicBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.bn1.forward(&self.conv1.forward(x)?)?.relu()?;
        let y = self.bn2.forward(&self.conv2.forward(&y)?)?;
        add_shortcut(&y, x, self.downsample.as_ref())
    }
}

/// 1×1, 3×3, 1×1 convolutions with a shortcut, four times as many outputs as planes
/// (ResNet-50/101/152).
#[derive(nn::Layer)]
pub struct BottleneckBlock {
    pub conv1: Conv2D,
    pub bn1: BatchNorm2D,
    pub conv2: Conv2D,
    pub bn2: BatchNorm2D,
    pub conv3: Conv2D,
    pub bn3: BatchNorm2D,
    pub downsample: Option<Sequential>,
}

impl BottleneckBlock {
    /// Output channels per input plane.
    pub const EXPANSION: usize = 4;

    /// `inplanes → planes·4` with the 3×3 convolution's `stride`.
    pub fn new(inplanes: usize, planes: usize, stride: usize) -> Result<Self> {
        let out = planes * Self::EXPANSION;
        Ok(BottleneckBlock {
            conv1: conv(inplanes, planes, 1, 1, 0, false)?,
            bn1: BatchNorm2D::new(planes)?,
            conv2: conv(planes, planes, 3, stride, 1, false)?,
            bn2: BatchNorm2D::new(planes)?,
            conv3: conv(planes, out, 1, 1, 0, false)?,
            bn3: BatchNorm2D::new(out)?,
            downsample: downsample(inplanes, out, stride)?,
        })
    }
}

impl Forward for BottleneckBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.bn1.forward(&self.conv1.forward(x)?)?.relu()?;
        let y = self.bn2.forward(&self.conv2.forward(&y)?)?.relu()?;
        let y = self.bn3.forward(&self.conv3.forward(&y)?)?;
        add_shortcut(&y, x, self.downsample.as_ref())
    }
}

/// Paddle's `ResNet(block, depth, num_classes=1000, with_pool=True)`: a 7×7 stride-2 stem
/// (`conv1`, `bn1`, max-pool), four stages `layer1..4` of residual blocks, global average
/// pooling and `fc`. `num_classes = 0` leaves out `fc` (features only).
#[derive(nn::Layer)]
pub struct ResNet {
    pub conv1: Conv2D,
    pub bn1: BatchNorm2D,
    pub layer1: Sequential,
    pub layer2: Sequential,
    pub layer3: Sequential,
    pub layer4: Sequential,
    pub fc: Option<Linear>,
    #[layer(skip)]
    maxpool: MaxPool2D,
    #[layer(skip)]
    avgpool: AdaptiveAvgPool2D,
}

impl ResNet {
    /// ResNet-`depth` (18, 34, 50, 101 or 152) with `num_classes` outputs.
    pub fn new(depth: usize, num_classes: usize) -> Result<Self> {
        let (counts, bottleneck) = match depth {
            18 => ([2, 2, 2, 2], false),
            34 => ([3, 4, 6, 3], false),
            50 => ([3, 4, 6, 3], true),
            101 => ([3, 4, 23, 3], true),
            152 => ([3, 8, 36, 3], true),
            d => return Err(crate::Error::invalid("ResNet", format!("depth {d} (expected 18, 34, 50, 101 or 152)"))),
        };
        let expansion = if bottleneck { BottleneckBlock::EXPANSION } else { BasicBlock::EXPANSION };
        let mut inplanes = 64;
        let mut stage = |planes: usize, blocks: usize, stride: usize| -> Result<Sequential> {
            let mut s = Sequential::new();
            for b in 0..blocks {
                let stride = if b == 0 { stride } else { 1 };
                if bottleneck {
                    s.push(BottleneckBlock::new(inplanes, planes, stride)?);
                } else {
                    s.push(BasicBlock::new(inplanes, planes, stride)?);
                }
                inplanes = planes * expansion;
            }
            Ok(s)
        };
        let conv1 = conv(3, 64, 7, 2, 3, false)?;
        let bn1 = BatchNorm2D::new(64)?;
        let layer1 = stage(64, counts[0], 1)?;
        let layer2 = stage(128, counts[1], 2)?;
        let layer3 = stage(256, counts[2], 2)?;
        let layer4 = stage(512, counts[3], 2)?;
        let fc = if num_classes > 0 { Some(Linear::new(512 * expansion, num_classes)?) } else { None };
        Ok(ResNet {
            conv1,
            bn1,
            layer1,
            layer2,
            layer3,
            layer4,
            fc,
            maxpool: MaxPool2D::with_options(Pool2dOptions::new(3).stride(2).padding(1)),
            avgpool: AdaptiveAvgPool2D::new(1),
        })
    }
}

impl Forward for ResNet {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.maxpool.forward(&self.bn1.forward(&self.conv1.forward(x)?)?.relu()?)?;
        let y = self.layer4.forward(&self.layer3.forward(&self.layer2.forward(&self.layer1.forward(&y)?)?)?)?;
        let y = self.avgpool.forward(&y)?.flatten(1, -1)?;
        match &self.fc {
            Some(fc) => fc.forward(&y),
            None => Ok(y),
        }
    }
}

/// ResNet-18 (`paddle.vision.models.resnet18`).
pub fn resnet18(num_classes: usize) -> Result<ResNet> {
    ResNet::new(18, num_classes)
}

/// ResNet-34.
pub fn resnet34(num_classes: usize) -> Result<ResNet> {
    ResNet::new(34, num_classes)
}

/// ResNet-50.
pub fn resnet50(num_classes: usize) -> Result<ResNet> {
    ResNet::new(50, num_classes)
}

/// Paddle's `VGG` (`paddle.vision.models.vgg16`): `features` (3×3 convolutions with ReLU,
/// max-pools between stages, `batch_norm` after each convolution when asked), a 7×7 adaptive
/// average pool and `classifier` (4096, 4096, classes with ReLU and dropout 0.5).
#[derive(nn::Layer)]
pub struct Vgg {
    pub features: Sequential,
    pub classifier: Sequential,
    #[layer(skip)]
    avgpool: AdaptiveAvgPool2D,
}

impl Vgg {
    /// VGG with 11, 13, 16 or 19 weight layers.
    pub fn new(depth: usize, batch_norm: bool, num_classes: usize) -> Result<Self> {
        let stages: &[usize] = match depth {
            11 => &[1, 1, 2, 2, 2],
            13 => &[2, 2, 2, 2, 2],
            16 => &[2, 2, 3, 3, 3],
            19 => &[2, 2, 4, 4, 4],
            d => return Err(crate::Error::invalid("VGG", format!("depth {d} (expected 11, 13, 16 or 19)"))),
        };
        let mut features = Sequential::new();
        let mut cin = 3;
        for (stage, &convs) in stages.iter().enumerate() {
            let cout = [64, 128, 256, 512, 512][stage];
            for _ in 0..convs {
                features.push(conv(cin, cout, 3, 1, 1, true)?);
                if batch_norm {
                    features.push(BatchNorm2D::new(cout)?);
                }
                features.push(ReLU);
                cin = cout;
            }
            features.push(MaxPool2D::with_options(Pool2dOptions::new(2).stride(2)));
        }
        let classifier = Sequential::new()
            .add(Linear::new(512 * 7 * 7, 4096)?)
            .add(ReLU)
            .add(nn::Dropout::new(0.5))
            .add(Linear::new(4096, 4096)?)
            .add(ReLU)
            .add(nn::Dropout::new(0.5))
            .add(Linear::new(4096, num_classes)?);
        Ok(Vgg { features, classifier, avgpool: AdaptiveAvgPool2D::new(7) })
    }
}

impl Forward for Vgg {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.avgpool.forward(&self.features.forward(x)?)?.flatten(1, -1)?;
        self.classifier.forward(&y)
    }
}

/// VGG-16 without batch norm (`paddle.vision.models.vgg16`).
pub fn vgg16(num_classes: usize) -> Result<Vgg> {
    Vgg::new(16, false, num_classes)
}
