//! Heavy-ball momentum, optionally Nesterov's (Paddle's): `v = μ·v + g'`, then
//! `p -= lr·(g' + μ·v)` (Nesterov) or `p -= lr·v`, with `g' = g + wd·p`. Merges.

use super::rule::{Checks, RuleOps, UpdateRule, word};
use super::{MergedUpdateOp, UpdateOp, merged};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// Momentum's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MomentumKind {
    pub(crate) momentum: f64,
    pub(crate) nesterov: bool,
}

pub(crate) static MOMENTUM_KERNEL: Kernel =
    Kernel { file: "update/momentum.wgsl", keys: merged::keys, variant: merged::variant::<MomentumKind, 2> };
pub(crate) static MOMENTUM: UpdateOp<MomentumKind> = UpdateOp::new(&MOMENTUM_KERNEL);
pub(crate) static MERGED_MOMENTUM: MergedUpdateOp<MomentumKind> = MergedUpdateOp::new("merged_momentum", &MOMENTUM);

/// What one call's elements share.
pub struct MomentumStep {
    lr: f64,
    wd: f64,
    mu: f64,
    nesterov: bool,
}

impl UpdateRule for MomentumKind {
    const NAME: &'static str = "momentum";
    const STATES: &'static [&'static str] = &["velocity"];
    type Step = MomentumStep;

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &MOMENTUM, merged: Some(&MERGED_MOMENTUM) }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("mu", self.momentum).with("nesterov", self.nesterov)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(MomentumKind { momentum: m.field(op, "mu")?, nesterov: m.field(op, "nesterov")? })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.non_negative("momentum", self.momentum)
    }
    fn words(&self) -> Vec<u32> {
        vec![word(self.momentum), self.nesterov as u32]
    }
    fn prepare(&self, lr: f64, wd: f64) -> MomentumStep {
        MomentumStep { lr, wd, mu: self.momentum, nesterov: self.nesterov }
    }
    fn step(c: &MomentumStep, p: f64, g: f64, s: &mut [f64]) -> f64 {
        let g = g + c.wd * p;
        let v = c.mu * s[0] + g;
        s[0] = v;
        if c.nesterov { p - c.lr * (g + c.mu * v) } else { p - c.lr * v }
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&MOMENTUM, &MERGED_MOMENTUM], kernels: &[&MOMENTUM_KERNEL] };
