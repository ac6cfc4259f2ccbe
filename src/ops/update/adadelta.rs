//! Adadelta (Paddle's): `E[g²] = ρ·E[g²] + (1−ρ)·g'²`, `u = −√((E[u²] + ε)/(E[g²] + ε))·g'`,
//! `E[u²] = ρ·E[u²] + (1−ρ)·u²`, `p += lr·u`, with `g' = g + wd·p`.

use super::UpdateOp;
use super::rule::{Checks, RuleOps, UpdateRule, word};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// Adadelta's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdadeltaKind {
    pub(crate) rho: f64,
    pub(crate) epsilon: f64,
}

pub(crate) static ADADELTA_KERNEL: Kernel = Kernel::single("update/adadelta.wgsl");
pub(crate) static ADADELTA: UpdateOp<AdadeltaKind> = UpdateOp::new(&ADADELTA_KERNEL);

impl UpdateRule for AdadeltaKind {
    const NAME: &'static str = "adadelta";
    const STATES: &'static [&'static str] = &["avg_squared_grad", "avg_squared_update"];
    type Step = (f64, f64, AdadeltaKind);

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &ADADELTA, merged: None }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("rho", self.rho).with("epsilon", self.epsilon)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(AdadeltaKind { rho: m.field(op, "rho")?, epsilon: m.field(op, "epsilon")? })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.unit("rho", self.rho)?;
        c.non_negative("epsilon", self.epsilon)
    }
    fn words(&self) -> Vec<u32> {
        vec![word(self.rho), word(self.epsilon)]
    }
    fn prepare(&self, lr: f64, wd: f64) -> (f64, f64, AdadeltaKind) {
        (lr, wd, *self)
    }
    fn step(&(lr, wd, AdadeltaKind { rho, epsilon }): &(f64, f64, AdadeltaKind), p: f64, g: f64, s: &mut [f64]) -> f64 {
        let g = g + wd * p;
        s[0] = rho * s[0] + (1.0 - rho) * g * g;
        let update = -((s[1] + epsilon) / (s[0] + epsilon)).sqrt() * g;
        s[1] = rho * s[1] + (1.0 - rho) * update * update;
        p + lr * update
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&ADADELTA], kernels: &[&ADADELTA_KERNEL] };
