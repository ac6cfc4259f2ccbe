//! More adaptive optimizers (`paddle.optimizer.Adagrad`, `Adadelta`, `Adamax`, `Lamb`), each
//! a fused in-place update (their rules are in `crate::ops::update`); Lamb's trust-ratio
//! step follows its kernel as tensor ops on the parameter's place.

use super::{AdadeltaKind, AdagradKind, AdamaxKind, LambKind, LearningRate, Optim};
use crate::Tensor;

/// `paddle.optimizer.Adagrad`: `moment += g²; p -= lr·g / (√moment + ε)`.
pub type Adagrad = Optim<AdagradKind>;

impl Adagrad {
    /// Adagrad (ε 1e-6, Paddle's default) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdagradKind { epsilon: 1e-6 }, lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// ε.
        epsilon: f64;
    }
}

/// `paddle.optimizer.Adadelta`: steps of `√((E[u²] + ε)/(E[g²] + ε))·g`, scaled by `lr`.
pub type Adadelta = Optim<AdadeltaKind>;

impl Adadelta {
    /// Adadelta (ρ 0.95, ε 1e-6, Paddle's defaults) with learning rate `lr` (Paddle's
    /// default is 0.001).
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdadeltaKind { rho: 0.95, epsilon: 1e-6 }, lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// ρ.
        rho: f64;
        /// ε.
        epsilon: f64;
    }
}

/// `paddle.optimizer.Adamax`: Adam with the infinity norm `u = max(β2·u + ε, |g|)` in place
/// of the second moment.
pub type Adamax = Optim<AdamaxKind>;

impl Adamax {
    /// Adamax (β1 0.9, β2 0.999, ε 1e-8) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdamaxKind { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, beta1_pow: 0.9 }, lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// β1.
        beta1: f64;
        /// β2.
        beta2: f64;
        /// ε.
        epsilon: f64;
    }
}

/// `paddle.optimizer.Lamb`: Adam's direction plus decoupled decay `λ·p`, scaled per
/// parameter by the trust ratio `‖p‖/‖r‖`.
pub type Lamb = Optim<LambKind>;

impl Lamb {
    /// Lamb (λ 0.01, β1 0.9, β2 0.999, ε 1e-6: Paddle's defaults) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        let kind = LambKind {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-6,
            beta1_pow: 0.9,
            beta2_pow: 0.999,
            lamb_weight_decay: 0.01,
        };
        Optim::with_kind(kind, lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// β1.
        beta1: f64;
        /// β2.
        beta2: f64;
        /// ε.
        epsilon: f64;
        /// The decoupled decay λ.
        lamb_weight_decay: f64;
    }
}
