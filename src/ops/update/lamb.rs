//! Lamb (Paddle's): Adam's direction plus decoupled decay, `r = m̂/(√v̂ + ε) + λ·p` with
//! `m̂ = m/(1−β1ᵗ)`, `v̂ = v/(1−β2ᵗ)` (the kernel, which leaves the parameter alone), then
//! the trust-ratio step `p -= lr·(‖p‖/‖r‖)·r` in tensor ops, since it needs the norms.

use super::UpdateOp;
use super::rule::{Checks, RuleOps, UpdateRule, word};
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;
use crate::{NormKind, Result, Tensor};

/// Lamb's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LambKind {
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) epsilon: f64,
    pub(crate) beta1_pow: f64,
    pub(crate) beta2_pow: f64,
    pub(crate) lamb_weight_decay: f64,
}

pub(crate) static LAMB_KERNEL: Kernel = Kernel::single("update/lamb.wgsl");
pub(crate) static LAMB: UpdateOp<LambKind> = UpdateOp::new(&LAMB_KERNEL);

impl UpdateRule for LambKind {
    const NAME: &'static str = "lamb";
    const STATES: &'static [&'static str] = &["moment1", "moment2", "update"];
    type Step = (f64, LambKind);

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &LAMB, merged: None }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("beta1", self.beta1)
            .with("beta2", self.beta2)
            .with("epsilon", self.epsilon)
            .with("beta1_pow", self.beta1_pow)
            .with("beta2_pow", self.beta2_pow)
            .with("lamb_weight_decay", self.lamb_weight_decay)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(LambKind {
            beta1: m.field(op, "beta1")?,
            beta2: m.field(op, "beta2")?,
            epsilon: m.field(op, "epsilon")?,
            beta1_pow: m.field(op, "beta1_pow")?,
            beta2_pow: m.field(op, "beta2_pow")?,
            lamb_weight_decay: m.field(op, "lamb_weight_decay")?,
        })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.unit("beta1", self.beta1)?;
        c.unit("beta2", self.beta2)?;
        c.non_negative("epsilon", self.epsilon)?;
        c.unit("beta1_pow", self.beta1_pow)?;
        c.unit("beta2_pow", self.beta2_pow)?;
        c.non_negative("lamb_weight_decay", self.lamb_weight_decay)
    }
    fn at_step(&self, step: u64) -> Self {
        let (beta1_pow, beta2_pow) = self.schedule_powers(step);
        LambKind { beta1_pow, beta2_pow, ..*self }
    }
    fn power_bases(&self) -> (f64, f64) {
        (self.beta1, self.beta2)
    }
    fn scheduled(&mut self, beta1_pow: f64, beta2_pow: f64) {
        (self.beta1_pow, self.beta2_pow) = (beta1_pow, beta2_pow);
    }
    fn words(&self) -> Vec<u32> {
        [self.beta1, self.beta2, self.epsilon, self.beta1_pow, self.beta2_pow, self.lamb_weight_decay]
            .map(word)
            .to_vec()
    }
    fn prepare(&self, _lr: f64, wd: f64) -> (f64, LambKind) {
        (wd, *self)
    }
    fn step(&(wd, r): &(f64, LambKind), p: f64, g: f64, s: &mut [f64]) -> f64 {
        let g = g + wd * p;
        s[0] = r.beta1 * s[0] + (1.0 - r.beta1) * g;
        s[1] = r.beta2 * s[1] + (1.0 - r.beta2) * g * g;
        let (m_hat, v_hat) = (s[0] / (1.0 - r.beta1_pow), s[1] / (1.0 - r.beta2_pow));
        s[2] = m_hat / (v_hat.sqrt() + r.epsilon) + r.lamb_weight_decay * p;
        p
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

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&LAMB], kernels: &[&LAMB_KERNEL] };
