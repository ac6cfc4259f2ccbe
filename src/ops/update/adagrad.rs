//! Adagrad (Paddle's): `moment += g'²; p -= lr·g' / (√moment + ε)`, with `g' = g + wd·p`.

use super::UpdateOp;
use super::rule::{Checks, RuleOps, UpdateRule, word};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// Adagrad's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdagradKind {
    pub(crate) epsilon: f64,
}

pub(crate) static ADAGRAD_KERNEL: Kernel = Kernel::single("update/adagrad.wgsl");
pub(crate) static ADAGRAD: UpdateOp<AdagradKind> = UpdateOp::new(&ADAGRAD_KERNEL);

impl UpdateRule for AdagradKind {
    const NAME: &'static str = "adagrad";
    const STATES: &'static [&'static str] = &["moment"];
    type Step = (f64, f64, f64);

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &ADAGRAD, merged: None }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m.with("epsilon", self.epsilon)
    }
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self> {
        Ok(AdagradKind { epsilon: m.field(op, "epsilon")? })
    }
    fn validate(&self, c: &Checks) -> Result<()> {
        c.non_negative("epsilon", self.epsilon)
    }
    fn words(&self) -> Vec<u32> {
        vec![word(self.epsilon)]
    }
    fn prepare(&self, lr: f64, wd: f64) -> (f64, f64, f64) {
        (lr, wd, self.epsilon)
    }
    fn step(&(lr, wd, eps): &(f64, f64, f64), p: f64, g: f64, s: &mut [f64]) -> f64 {
        let g = g + wd * p;
        s[0] += g * g;
        p - lr * g / (s[0].sqrt() + eps)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&ADAGRAD], kernels: &[&ADAGRAD_KERNEL] };
