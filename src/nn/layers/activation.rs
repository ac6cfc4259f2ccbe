//! Activation layers: thin wrappers over the functional forms, for use in `Sequential`.

use crate::nn::{Forward, Layer};
use crate::{Result, Tensor};

macro_rules! activation_layers {
    ($($(#[$doc:meta])* $name:ident => |$x:ident| $body:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Layer for $name {}

        impl Forward for $name {
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                crate::nn::summary::traced(self, stringify!($name), $x, || $body)
            }
        }
    )*};
}

activation_layers! {
    /// `max(x, 0)`.
    ReLU => |x| x.relu();
    /// `min(max(x, 0), 6)`.
    ReLU6 => |x| x.relu6();
    /// `1 / (1 + e^-x)`.
    Sigmoid => |x| x.sigmoid();
    /// Hyperbolic tangent.
    Tanh => |x| x.tanh();
    /// `x · sigmoid(x)`.
    Silu => |x| x.silu();
    /// `x · relu6(x + 3) / 6`.
    Hardswish => |x| x.hardswish();
    /// `x · tanh(softplus(x))`.
    Mish => |x| x.mish();
    /// SELU with Paddle's constants (scale 1.0507…, alpha 1.6733…).
    SELU => |x| x.selu(1.0507009873554805, 1.6732632423543772);
    /// The input unchanged (`paddle.nn.Identity`).
    Identity => |x| Ok(x.clone());
}

/// Activation layers with one setting: `Name::new(value)`, and `Name::default()` with
/// Paddle's default value.
macro_rules! activation_layers_with {
    ($($(#[$doc:meta])* $name:ident($(#[$fdoc:meta])* $field:ident: $ty:ty = $default:expr)
        => |$x:ident, $s:ident| $body:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $(#[$fdoc])*
            pub $field: $ty,
        }

        impl $name {
            #[doc = concat!("With the given `", stringify!($field), "`.")]
            pub fn new($field: $ty) -> Self {
                $name { $field }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $field: $default }
            }
        }

        impl Layer for $name {}

        impl Forward for $name {
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                let $s = self;
                crate::nn::summary::traced(self, stringify!($name), $x, || $body)
            }
        }
    )*};
}

activation_layers_with! {
    /// Leaky ReLU (`paddle.nn.LeakyReLU(negative_slope=0.01)`).
    LeakyReLU(
        /// Slope for negative inputs.
        negative_slope: f64 = 0.01
    ) => |x, s| x.leaky_relu(s.negative_slope);
    /// GELU (`paddle.nn.GELU(approximate=False)`).
    GELU(
        /// Use the tanh approximation.
        approximate: bool = false
    ) => |x, s| crate::gelu(x, s.approximate);
    /// Hard sigmoid (`paddle.nn.Hardsigmoid()`: `clamp(x / 6 + 1/2, 0, 1)`).
    Hardsigmoid(
        /// Slope of the linear part.
        slope: f64 = 1.0 / 6.0
    ) => |x, s| x.hardsigmoid(s.slope, 0.5);
    /// Log-softmax over an axis (`paddle.nn.LogSoftmax(axis=-1)`).
    LogSoftmax(
        /// The normalised axis.
        axis: isize = -1
    ) => |x, s| crate::log_softmax(x, s.axis);
    /// Softplus (`paddle.nn.Softplus(beta=1, threshold=20)`), linear above `threshold / beta`.
    Softplus(
        /// Sharpness.
        beta: f64 = 1.0
    ) => |x, s| x.softplus(s.beta, 20.0);
    /// ELU (`paddle.nn.ELU(alpha=1.0)`).
    ELU(
        /// Scale of the negative branch.
        alpha: f64 = 1.0
    ) => |x, s| x.elu(s.alpha);
}

/// Flattens axes `start_axis..=stop_axis` (`paddle.nn.Flatten(start_axis=1, stop_axis=-1)`).
#[derive(Clone, Copy, Debug)]
pub struct Flatten {
    /// First axis merged.
    pub start_axis: isize,
    /// Last axis merged.
    pub stop_axis: isize,
}

impl Flatten {
    /// Merges `start_axis..=stop_axis`.
    pub fn new(start_axis: isize, stop_axis: isize) -> Self {
        Flatten { start_axis, stop_axis }
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start_axis: 1, stop_axis: -1 }
    }
}

impl Layer for Flatten {}

impl Forward for Flatten {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Flatten", x, || x.flatten(self.start_axis, self.stop_axis))
    }
}

/// Parametric ReLU (`paddle.nn.PReLU(num_parameters=1, init=0.25)`): a learned slope for
/// negative inputs, one shared or one per channel (axis 1).
#[derive(crate::nn::Layer)]
pub struct PReLU {
    /// The slopes, `[num_parameters]` (state-dict key `_weight`, as Paddle's).
    #[layer(param, name = "_weight")]
    pub weight: Tensor,
    #[layer(training)]
    training: bool,
}

impl PReLU {
    /// `num_parameters` slopes starting at `init`.
    pub fn new(num_parameters: usize, init: f64) -> Result<Self> {
        let names = crate::nn::init::ParamNames::new("prelu");
        let init = crate::nn::Initializer::Constant(init);
        let attr = names.weight(&crate::nn::ParamAttr::default());
        let weight = crate::nn::create_parameter(&[num_parameters], crate::DType::Float32, &attr, &init)?;
        Ok(PReLU { weight, training: true })
    }
}

impl Forward for PReLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "PReLU", x, || crate::ops::combine::prelu(x, &self.weight))
    }
}
