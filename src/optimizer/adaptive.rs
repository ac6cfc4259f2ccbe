//! More adaptive optimizers (`paddle.optimizer.Adagrad`, `Adadelta`, `Adamax`, `Lamb`), each
//! a fused in-place update kernel (see `update.rs`); Lamb's trust-ratio step follows its
//! kernel as tensor ops on the parameter's place.

use super::update::Rule;
use super::{Kind, LearningRate, Optim};
use crate::{NormKind, Result, Tensor};

/// Adagrad's accumulator.
pub struct AdagradKind {
    epsilon: f64,
}

impl Kind for AdagradKind {
    fn rule(&self, _step: u64) -> Rule {
        Rule::Adagrad { eps: self.epsilon }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["moment"]
    }
}

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

/// Adadelta's running averages.
pub struct AdadeltaKind {
    rho: f64,
    epsilon: f64,
}

impl Kind for AdadeltaKind {
    fn rule(&self, _step: u64) -> Rule {
        Rule::Adadelta { rho: self.rho, eps: self.epsilon }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["avg_squared_grad", "avg_squared_update"]
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

/// Adamax's moment and infinity norm.
pub struct AdamaxKind {
    beta1: f64,
    beta2: f64,
    epsilon: f64,
}

impl Kind for AdamaxKind {
    fn rule(&self, step: u64) -> Rule {
        Rule::Adamax {
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.epsilon,
            beta1_pow: self.beta1.powi(step as i32),
        }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["moment", "inf_norm"]
    }
}

/// `paddle.optimizer.Adamax`: Adam with the infinity norm `u = max(β2·u + ε, |g|)` in place
/// of the second moment.
pub type Adamax = Optim<AdamaxKind>;

impl Adamax {
    /// Adamax (β1 0.9, β2 0.999, ε 1e-8) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdamaxKind { beta1: 0.9, beta2: 0.999, epsilon: 1e-8 }, lr, parameters, 0.0)
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

/// Lamb's moments, decay and update direction.
pub struct LambKind {
    beta1: f64,
    beta2: f64,
    epsilon: f64,
    lamb_weight_decay: f64,
}

impl Kind for LambKind {
    fn rule(&self, step: u64) -> Rule {
        Rule::Lamb {
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.epsilon,
            beta1_pow: self.beta1.powi(step as i32),
            beta2_pow: self.beta2.powi(step as i32),
            lamb_wd: self.lamb_weight_decay,
        }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["moment1", "moment2", "update"]
    }

    /// `p -= lr·trust·r` with `trust = ‖p‖/‖r‖` (1 when either norm is 0).
    fn finish(&self, param: &Tensor, states: &[Tensor], lr: &dyn Fn() -> Result<Tensor>) -> Result<()> {
        let r = &states[2];
        let p_norm = param.norm(NormKind::Fro, &[], false)?;
        let r_norm = r.norm(NormKind::Fro, &[], false)?;
        let both = p_norm.greater_than_scalar(0)?.logical_and(&r_norm.greater_than_scalar(0)?)?;
        let ones = crate::ones_like(&p_norm)?;
        let trust = crate::where_(&both, &p_norm.divide(&crate::where_(&both, &r_norm, &ones)?)?, &ones)?;
        param.assign_(&param.subtract(&r.mul(&trust.mul(&lr()?)?)?)?)
    }
}

/// `paddle.optimizer.Lamb`: Adam's direction plus decoupled decay `λ·p`, scaled per
/// parameter by the trust ratio `‖p‖/‖r‖`.
pub type Lamb = Optim<LambKind>;

impl Lamb {
    /// Lamb (λ 0.01, β1 0.9, β2 0.999, ε 1e-6: Paddle's defaults) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        let kind = LambKind { beta1: 0.9, beta2: 0.999, epsilon: 1e-6, lamb_weight_decay: 0.01 };
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
