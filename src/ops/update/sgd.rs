//! Plain gradient descent: `p -= lr·(g + wd·p)`. Merges.

use super::rule::{Checks, RuleOps, UpdateRule};
use super::{MergedUpdateOp, UpdateOp, merged};
use crate::Result;
use crate::backend::gpu::Kernel;
use crate::ops::AttrMap;

/// SGD's settings: none beyond the learning rate and weight decay.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SgdKind;

pub(crate) static SGD_KERNEL: Kernel =
    Kernel { file: "update/sgd.wgsl", keys: merged::keys, variant: merged::variant::<SgdKind, 0> };
pub(crate) static SGD: UpdateOp<SgdKind> = UpdateOp::new(&SGD_KERNEL);
pub(crate) static MERGED_SGD: MergedUpdateOp<SgdKind> = MergedUpdateOp::new("merged_sgd", &SGD);

impl UpdateRule for SgdKind {
    const NAME: &'static str = "sgd";
    const STATES: &'static [&'static str] = &[];
    type Step = (f64, f64);

    fn ops() -> RuleOps<Self> {
        RuleOps { single: &SGD, merged: Some(&MERGED_SGD) }
    }
    fn to_attrs(&self, m: AttrMap) -> AttrMap {
        m
    }
    fn from_attrs(_: &'static str, _: &AttrMap) -> Result<Self> {
        Ok(SgdKind)
    }
    fn validate(&self, _: &Checks) -> Result<()> {
        Ok(())
    }
    fn words(&self) -> Vec<u32> {
        Vec::new()
    }
    fn prepare(&self, lr: f64, wd: f64) -> (f64, f64) {
        (lr, wd)
    }
    fn step(&(lr, wd): &(f64, f64), p: f64, g: f64, _: &mut [f64]) -> f64 {
        p - lr * (g + wd * p)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&SGD, &MERGED_SGD], kernels: &[&SGD_KERNEL] };
