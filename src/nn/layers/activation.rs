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
}

/// Leaky ReLU (`paddle.nn.LeakyReLU(negative_slope=0.01)`).
#[derive(Clone, Copy, Debug)]
pub struct LeakyReLU {
    /// Slope for negative inputs.
    pub negative_slope: f64,
}

impl LeakyReLU {
    /// With the given slope.
    pub fn new(negative_slope: f64) -> Self {
        LeakyReLU { negative_slope }
    }
}

impl Default for LeakyReLU {
    fn default() -> Self {
        LeakyReLU { negative_slope: 0.01 }
    }
}

impl Layer for LeakyReLU {}

impl Forward for LeakyReLU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "LeakyReLU", x, || x.leaky_relu(self.negative_slope))
    }
}

/// GELU (`paddle.nn.GELU(approximate=False)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GELU {
    /// Use the tanh approximation.
    pub approximate: bool,
}

impl GELU {
    /// Exact (erf) or tanh-approximated GELU.
    pub fn new(approximate: bool) -> Self {
        GELU { approximate }
    }
}

impl Layer for GELU {}

impl Forward for GELU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "GELU", x, || crate::gelu(x, self.approximate))
    }
}

/// ELU (`paddle.nn.ELU(alpha=1.0)`).
#[derive(Clone, Copy, Debug)]
pub struct ELU {
    /// Scale of the negative branch.
    pub alpha: f64,
}

impl Default for ELU {
    fn default() -> Self {
        ELU { alpha: 1.0 }
    }
}

impl Layer for ELU {}

impl Forward for ELU {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "ELU", x, || x.elu(self.alpha))
    }
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
