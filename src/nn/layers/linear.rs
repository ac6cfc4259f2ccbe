//! Fully connected layers: `Linear` (Paddle 2.x, `[in, out]` weight) and `FC` (Paddle 1.x,
//! built on the first call from the input's size).

use std::sync::OnceLock;

use crate::nn::init::{BiasAttr, Initializer, ParamAttr, ParamNames, create_parameter};
use crate::nn::{Forward, Layer};
use crate::{DType, Result, Tensor};

/// `y = x·W + b` with `W: [in_features, out_features]` (`paddle.nn.Linear`), weight
/// XavierUniform and bias zeros by default.
#[derive(crate::nn::Layer)]
pub struct Linear {
    /// `[in_features, out_features]`.
    #[layer(param)]
    pub weight: Tensor,
    /// `[out_features]`, absent with `bias_attr = false`.
    #[layer(param)]
    pub bias: Option<Tensor>,
    #[layer(training)]
    training: bool,
}

impl Linear {
    /// A layer with Paddle's default initialisation.
    pub fn new(in_features: usize, out_features: usize) -> Result<Self> {
        Linear::with_attrs(in_features, out_features, ParamAttr::default(), BiasAttr::default())
    }

    /// A layer with explicit weight and bias attributes (`bias_attr: false` drops the bias).
    pub fn with_attrs(
        in_features: usize,
        out_features: usize,
        weight_attr: ParamAttr,
        bias_attr: impl Into<BiasAttr>,
    ) -> Result<Self> {
        let names = ParamNames::new("linear");
        let weight = create_parameter(
            &[in_features, out_features],
            DType::Float32,
            &names.weight(&weight_attr),
            &Initializer::xavier_uniform(),
        )?;
        let bias = names.bias(bias_attr.into()).create(&[out_features])?;
        Ok(Linear { weight, bias, training: true })
    }
}

impl Forward for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "Linear", x, || crate::linear(x, &self.weight, self.bias.as_ref()))
    }
}

/// An activation applied after a layer (Paddle 1.x's `act=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// Softmax over the last axis.
    Softmax,
}

impl Activation {
    /// Applies the activation.
    pub fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Relu => x.relu(),
            Activation::Sigmoid => x.sigmoid(),
            Activation::Tanh => x.tanh(),
            Activation::Softmax => crate::softmax(x, -1),
        }
    }
}

/// Paddle 1.x's `FC`: the input is flattened from `num_flatten_dims` on, and the weight
/// `[flattened, size]` is created on the first call (`build_once`).
pub struct FC {
    size: usize,
    num_flatten_dims: usize,
    act: Option<Activation>,
    param_attr: ParamAttr,
    bias_attr: BiasAttr,
    built: OnceLock<(Tensor, Option<Tensor>)>,
    training: bool,
}

impl FC {
    /// An FC layer of `size` outputs with Paddle's defaults (XavierUniform weight, zero bias,
    /// `num_flatten_dims = 1`, no activation).
    pub fn new(size: usize) -> Self {
        FC {
            size,
            num_flatten_dims: 1,
            act: None,
            param_attr: ParamAttr::default(),
            bias_attr: BiasAttr::default(),
            built: OnceLock::new(),
            training: true,
        }
    }

    setters! {
        /// The weight's attribute.
        param_attr: impl Into<ParamAttr>;
        /// The bias's attribute (`false` for none).
        bias_attr: impl Into<BiasAttr>;
        /// The activation applied to the output.
        act: Activation => Some;
    }

    /// Axes before this one stay; the rest are flattened into the feature axis.
    pub fn num_flatten_dims(mut self, n: usize) -> Self {
        self.num_flatten_dims = n.max(1);
        self
    }

    fn build(&self, features: usize) -> Result<&(Tensor, Option<Tensor>)> {
        if let Some(b) = self.built.get() {
            return Ok(b);
        }
        let names = ParamNames::new("fc");
        let w = create_parameter(
            &[features, self.size],
            DType::Float32,
            &names.weight(&self.param_attr),
            &Initializer::xavier_uniform(),
        )?;
        let b = names.bias(self.bias_attr.clone()).create(&[self.size])?;
        Ok(self.built.get_or_init(|| (w, b)))
    }
}

impl Layer for FC {
    fn is_training(&self) -> bool {
        self.training
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
        if let Some((w, b)) = self.built.get() {
            f("weight", w);
            if let Some(b) = b {
                f("bias", b);
            }
        }
    }

    fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        if let Some((w, b)) = self.built.get_mut() {
            f("weight", w);
            if let Some(b) = b {
                f("bias", b);
            }
        }
    }
}

impl Forward for FC {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        crate::nn::summary::traced(self, "FC", x, || {
            let k = self.num_flatten_dims.min(x.ndim().saturating_sub(1)).max(1);
            let x = x.flatten(k as isize, -1)?;
            let x = if k > 1 { x.flatten(0, k as isize - 1)? } else { x };
            let (w, b) = self.build(x.shape()[x.ndim() - 1])?;
            let y = crate::linear(&x, w, b.as_ref())?;
            match self.act {
                Some(a) => a.apply(&y),
                None => Ok(y),
            }
        })
    }
}
