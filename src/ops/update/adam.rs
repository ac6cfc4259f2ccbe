//! Adam with bias correction (Paddle's kernel), and AdamW's decoupled weight decay:
//!
//! ```text
//! p -= lr·decoupled_wd·p                        (AdamW)
//! g' = g + wd·p                                 (Adam's L2 weight decay)
//! m = β1·m + (1−β1)·g';  v = β2·v + (1−β2)·g'²
//! p -= lr·√(1−β2ᵗ)/(1−β1ᵗ) · m / (√v + ε·√(1−β2ᵗ))
//! ```
//!
//! Merges.

use super::rule::{Checks, RuleOps, UpdateRule, word};
use super::{MergedUpdateOp, UpdateOp, merged};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// Adam's settings; `decoupled_weight_decay` is AdamW's (0 for Adam).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamKind {
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) epsilon: f64,
    pub(crate) beta1_pow: f64,
    pub(crate) beta2_pow: f64,
    pub(crate) decoupled_weight_decay: f64,
}

impl AdamKind {
    /// β1 0.9, β2 0.999, ε 1e-8 (Paddle's defaults), no decoupled decay.
    pub(crate) fn paddle_defaults() -> Self {
        AdamKind {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            beta1_pow: 0.9,
            beta2_pow: 0.999,
            decoupled_weight_decay: 0.0,
        }
    }
}

pub(crate) static ADAM_KERNEL: Kernel =
    Kernel { file: "update/adam.wgsl", keys: merged::keys, variant: merged::variant::<AdamKind, 6> };
pub(crate) static ADAM: UpdateOp<AdamKind> = UpdateOp::new(&ADAM_KERNEL);
pub(crate) static MERGED_ADAM: MergedUpdateOp<AdamKind> = MergedUpdateOp::new("merged_adam", &ADAM);

/// What one call's elements share: the step-constant factors, computed once.
pub struct AdamStep {
    decay: f64,
    wd: f64,
    beta1: f64,
    beta2: f64,
    keep1: f64,
    keep2: f64,
    step: f64,
    eps_hat: f64,
}

impl UpdateRule for AdamKind {
    const NAME: &'static str = "adam";
    const STATES: &'static [&'static str] = &["moment1", "moment2"];
    type Step = AdamStep;

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &ADAM, merged: Some(&MERGED_ADAM) }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("beta1", self.beta1)
            .with("beta2", self.beta2)
            .with("epsilon", self.epsilon)
            .with("beta1_pow", self.beta1_pow)
            .with("beta2_pow", self.beta2_pow)
            .with("decoupled_weight_decay", self.decoupled_weight_decay)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(AdamKind {
            beta1: m.field(op, "beta1")?,
            beta2: m.field(op, "beta2")?,
            epsilon: m.field(op, "epsilon")?,
            beta1_pow: m.field(op, "beta1_pow")?,
            beta2_pow: m.field(op, "beta2_pow")?,
            decoupled_weight_decay: m.field(op, "decoupled_weight_decay")?,
        })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.unit("beta1", self.beta1)?;
        c.unit("beta2", self.beta2)?;
        c.non_negative("epsilon", self.epsilon)?;
        c.non_negative("weight_decay", self.decoupled_weight_decay)?;
        c.unit("beta1_pow", self.beta1_pow)?;
        c.unit("beta2_pow", self.beta2_pow)
    }
    fn at_step(&self, step: u64) -> Self {
        let (beta1_pow, beta2_pow) = self.schedule_powers(step);
        AdamKind { beta1_pow, beta2_pow, ..*self }
    }
    fn power_bases(&self) -> (f64, f64) {
        (self.beta1, self.beta2)
    }
    fn scheduled(&mut self, beta1_pow: f64, beta2_pow: f64) {
        (self.beta1_pow, self.beta2_pow) = (beta1_pow, beta2_pow);
    }
    fn words(&self) -> Vec<u32> {
        [self.decoupled_weight_decay, self.beta1, self.beta2, self.epsilon, self.beta1_pow, self.beta2_pow]
            .map(word)
            .to_vec()
    }
    fn prepare(&self, lr: f64, wd: f64) -> AdamStep {
        let c2 = (1.0 - self.beta2_pow).sqrt();
        AdamStep {
            decay: lr * self.decoupled_weight_decay,
            wd,
            beta1: self.beta1,
            beta2: self.beta2,
            keep1: 1.0 - self.beta1,
            keep2: 1.0 - self.beta2,
            step: lr * c2 / (1.0 - self.beta1_pow),
            eps_hat: self.epsilon * c2,
        }
    }
    fn step(c: &AdamStep, p: f64, g: f64, s: &mut [f64]) -> f64 {
        let p = p - c.decay * p;
        let g = g + c.wd * p;
        let m = c.beta1 * s[0] + c.keep1 * g;
        let v = c.beta2 * s[1] + c.keep2 * g * g;
        s[0] = m;
        s[1] = v;
        p - c.step * (m / (v.sqrt() + c.eps_hat))
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&ADAM, &MERGED_ADAM], kernels: &[&ADAM_KERNEL] };
