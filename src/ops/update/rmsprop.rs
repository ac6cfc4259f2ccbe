//! RMSProp (Paddle's): `ms = ρ·ms + (1−ρ)·g'²`; centered, `mg = ρ·mg + (1−ρ)·g'` and the
//! denominator `ms − mg²`; `mom = μ·mom + lr·g'/√(denom + ε)`; `p -= mom`, with
//! `g' = g + wd·p`.

use super::UpdateOp;
use super::rule::{Checks, RuleOps, UpdateRule, word};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// RMSProp's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsPropKind {
    pub(crate) rho: f64,
    pub(crate) epsilon: f64,
    pub(crate) momentum: f64,
    pub(crate) centered: bool,
}

pub(crate) static RMSPROP_KERNEL: Kernel = Kernel::single("update/rmsprop.wgsl");
pub(crate) static RMSPROP: UpdateOp<RmsPropKind> = UpdateOp::new(&RMSPROP_KERNEL);

/// What one call's elements share.
pub struct RmsPropStep {
    lr: f64,
    wd: f64,
    rule: RmsPropKind,
}

impl UpdateRule for RmsPropKind {
    const NAME: &'static str = "rmsprop";
    const STATES: &'static [&'static str] = &["mean_square", "mean_grad", "moment"];
    type Step = RmsPropStep;

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &RMSPROP, merged: None }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("rho", self.rho)
            .with("epsilon", self.epsilon)
            .with("momentum", self.momentum)
            .with("centered", self.centered)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(RmsPropKind {
            rho: m.field(op, "rho")?,
            epsilon: m.field(op, "epsilon")?,
            momentum: m.field(op, "momentum")?,
            centered: m.field(op, "centered")?,
        })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.unit("rho", self.rho)?;
        c.non_negative("epsilon", self.epsilon)?;
        c.non_negative("momentum", self.momentum)
    }
    fn words(&self) -> Vec<u32> {
        vec![word(self.rho), word(self.epsilon), word(self.momentum), self.centered as u32]
    }
    fn prepare(&self, lr: f64, wd: f64) -> RmsPropStep {
        RmsPropStep { lr, wd, rule: *self }
    }
    fn step(c: &RmsPropStep, p: f64, g: f64, s: &mut [f64]) -> f64 {
        let RmsPropKind { rho, epsilon, momentum, centered } = c.rule;
        let g = g + c.wd * p;
        let ms = rho * s[0] + (1.0 - rho) * g * g;
        s[0] = ms;
        let mut denom = ms;
        if centered {
            let mg = rho * s[1] + (1.0 - rho) * g;
            s[1] = mg;
            denom = ms - mg * mg;
        }
        let mom = momentum * s[2] + c.lr * g / (denom + epsilon).sqrt();
        s[2] = mom;
        p - mom
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&RMSPROP], kernels: &[&RMSPROP_KERNEL] };
