//! Stateless neural-network functions (`paddle.nn.functional`, imported as `F`).

pub use crate::nn::ctc_loss::ctc_loss;
pub use crate::nn::loss::{
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss, nll_loss, smooth_l1_loss,
};
pub use crate::nn::pair_loss::{
    cosine_embedding_loss, hinge_embedding_loss, kl_div, margin_ranking_loss, multi_label_soft_margin_loss,
    triplet_margin_loss,
};
pub use crate::ops::combine::prelu;
pub use crate::ops::elementwise::{
    elu, gelu, hardsigmoid, hardswish, leaky_relu, mish, relu, relu6, selu, sigmoid, silu, softplus, tanh,
};
pub use crate::ops::index::*;
pub use crate::ops::matmul::linear;
pub use crate::ops::nn::*;
pub use crate::ops::shape::pad;
