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
