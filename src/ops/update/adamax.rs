//! Adamax (Paddle's): Adam with the infinity norm `u = max(β2·u + ε, |g'|)` in place of the
//! second moment: `m = β1·m + (1−β1)·g'`, `p -= lr/(1−β1ᵗ) · m/u`, with `g' = g + wd·p`.

use super::UpdateOp;
use super::rule::{Checks, RuleOps, UpdateRule, word};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// Adamax's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamaxKind {
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) epsilon: f64,
    pub(crate) beta1_pow: f64,
}

pub(crate) static ADAMAX_KERNEL: Kernel = Kernel::single("update/adamax.wgsl");
pub(crate) static ADAMAX: UpdateOp<AdamaxKind> = UpdateOp::new(&ADAMAX_KERNEL);

impl UpdateRule for AdamaxKind {
    const NAME: &'static str = "adamax";
    const STATES: &'static [&'static str] = &["moment", "inf_norm"];
    type Step = (f64, f64, AdamaxKind);

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &ADAMAX, merged: None }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("beta1", self.beta1)
            .with("beta2", self.beta2)
            .with("epsilon", self.epsilon)
            .with("beta1_pow", self.beta1_pow)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(AdamaxKind {
            beta1: m.field(op, "beta1")?,
            beta2: m.field(op, "beta2")?,
            epsilon: m.field(op, "epsilon")?,
            beta1_pow: m.field(op, "beta1_pow")?,
        })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.unit("beta1", self.beta1)?;
        c.unit("beta2", self.beta2)?;
        c.non_negative("epsilon", self.epsilon)?;
        c.unit("beta1_pow", self.beta1_pow)
    }
    fn at_step(&self, step: u64) -> Self {
        AdamaxKind { beta1_pow: self.schedule_powers(step).0, ..*self }
    }
    fn power_bases(&self) -> (f64, f64) {
        (self.beta1, 0.0)
    }
    fn scheduled(&mut self, beta1_pow: f64, _: f64) {
        self.beta1_pow = beta1_pow;
    }
    fn words(&self) -> Vec<u32> {
        [self.beta1, self.beta2, self.epsilon, self.beta1_pow].map(word).to_vec()
    }
    fn prepare(&self, lr: f64, wd: f64) -> (f64, f64, AdamaxKind) {
        (lr, wd, *self)
    }
    fn step(&(lr, wd, r): &(f64, f64, AdamaxKind), p: f64, g: f64, s: &mut [f64]) -> f64 {
        let g = g + wd * p;
        s[0] = r.beta1 * s[0] + (1.0 - r.beta1) * g;
        s[1] = (r.beta2 * s[1] + r.epsilon).max(g.abs());
        p - lr / (1.0 - r.beta1_pow) * s[0] / s[1]
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&ADAMAX], kernels: &[&ADAMAX_KERNEL] };
