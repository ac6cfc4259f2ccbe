//! The update family: the in-place parameter updates of the optimizers, one kernel dispatch
//! per parameter on the GPU, one loop on the CPU, never through the host. Each rule is one
//! file (`sgd`, `momentum`, `adam` with AdamW's decoupled decay, `rmsprop`, `adagrad`,
//! `adadelta`, `adamax`, `lamb`) implementing [`UpdateRule`]: its hyper-parameters,
//! states, attributes, checks, the per-element step the CPU kernel runs and its kernel in
//! `shaders/update/`. One generic op (`single.rs`) makes each rule a registry entry with
//! inputs `[param, grad, states..., schedule?]`, updating the parameter and the states in
//! place; the rules whose kernels merge also get a merged op (`merged.rs`: `merged_sgd`,
//! `merged_momentum`, `merged_adam`) updating several parameters in one dispatch.
//!
//! The optional `schedule` input is a tensor `[lr, beta1_pow, beta2_pow]` (the parameter's
//! dtype) holding the step-dependent factors, as Paddle's static `adam` op takes
//! `LearningRate` and `Beta1Pow`/`Beta2Pow` tensors: with it, the `lr` attribute is the
//! parameter's learning-rate multiplier and the β powers come from the tensor. Static
//! `minimize` uses it, so a program's update ops keep fixed attributes from step to step
//! and an execution plan replays them like any other op.
//!
//! A gated schedule has a fourth element, `skip`: where it is not zero the update changes
//! nothing (neither the parameter nor its states), so a `GradScaler` that found an inf or a
//! NaN skips the step on the device, with no read back to the host (Paddle's static `adam`
//! takes a `SkipUpdate` tensor for the same purpose). The kernels see it as the
//! `scheduled` setting word 2.

pub(crate) mod adadelta;
pub(crate) mod adagrad;
pub(crate) mod adam;
pub(crate) mod adamax;
mod cpu;
pub(crate) mod lamb;
mod merged;
pub(crate) mod momentum;
pub(crate) mod rmsprop;
mod rule;
pub(crate) mod sgd;
mod single;

pub use adadelta::AdadeltaKind;
pub use adagrad::AdagradKind;
pub use adam::AdamKind;
pub use adamax::AdamaxKind;
pub use lamb::LambKind;
pub(crate) use merged::MergedUpdateOp;
pub use merged::merged_kernel_files;
pub use momentum::MomentumKind;
pub use rmsprop::RmsPropKind;
pub use rule::{Checks, RuleOps, UpdateRule};
pub use sgd::SgdKind;
pub(crate) use single::UpdateOp;

use crate::ops::registry::apply::apply;
use crate::ops::{AttrMap, Attrs};
use crate::{DType, Error, Result, Tensor};

/// The length of a gated schedule `[lr, beta1_pow, beta2_pow, skip]`.
pub(crate) const GATED_SCHEDULE: usize = 4;

/// An update's attributes: the rule with its hyper-parameters, the learning rate and the L2
/// weight decay.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UpdateAttrs<R> {
    pub rule: R,
    pub lr: f64,
    pub wd: f64,
}

impl<R: UpdateRule> Attrs for UpdateAttrs<R> {
    fn to_map(&self) -> AttrMap {
        self.rule.to_attrs(AttrMap::new().with("lr", self.lr).with("weight_decay", self.wd))
    }

    fn from_map(op: &'static str, m: &AttrMap) -> Result<Self> {
        let a = UpdateAttrs { rule: R::from_attrs(op, m)?, lr: m.field(op, "lr")?, wd: m.field(op, "weight_decay")? };
        let known: Vec<String> = a.to_map().iter().map(|(n, _)| n.to_string()).collect();
        m.check_known(op, &known.iter().map(String::as_str).collect::<Vec<_>>())?;
        Ok(a)
    }
}

impl<R: UpdateRule> UpdateAttrs<R> {
    /// The checks every update makes before any parameter moves.
    pub(crate) fn validate(&self, op: &'static str) -> Result<()> {
        let checks = Checks { op };
        checks.non_negative("learning_rate", self.lr)?;
        checks.non_negative("weight_decay", self.wd)?;
        self.rule.validate(&checks)
    }

    /// The kernel's setting words after its element count: the learning rate, the L2 weight
    /// decay, the rule's words, then whether a schedule tensor is bound.
    pub(crate) fn words(&self, schedule: Option<usize>) -> Vec<u32> {
        let mut words = vec![rule::word(self.lr), rule::word(self.wd)];
        words.extend(self.rule.words());
        words.push(match schedule {
            None => 0,
            Some(GATED_SCHEDULE) => 2,
            Some(_) => 1,
        });
        words
    }
}

/// Errors for settings of `rule`, learning rate `lr` or weight decay `wd` that would turn
/// parameters into NaN or move them uphill (the op's name in the error).
pub(crate) fn validate<R: UpdateRule>(rule: &R, lr: f64, wd: f64) -> Result<()> {
    UpdateAttrs { rule: rule.clone(), lr, wd }.validate(R::NAME)
}

/// Applies `rule` to `param` in place with gradient `grad` and state tensors `states`
/// (created by the caller as zeros like the parameter), learning rate `lr` (a multiplier of
/// the schedule's when there is one; see the module docs) and L2 weight decay `wd`.
pub(crate) fn apply_rule<R: UpdateRule>(
    rule: &R,
    param: &Tensor,
    grad: &Tensor,
    states: &[Tensor],
    schedule: Option<&Tensor>,
    lr: f64,
    wd: f64,
) -> Result<()> {
    let mut inputs = vec![param, grad];
    inputs.extend(states);
    inputs.extend(schedule);
    apply(R::ops().single, &inputs, UpdateAttrs { rule: rule.clone(), lr, wd })?;
    Ok(())
}

/// True when `param`'s update by rule `R` may join a merged one: a float32 parameter on a
/// GPU under a rule whose kernel merges.
pub(crate) fn merges<R: UpdateRule>(param: &Tensor) -> bool {
    R::ops().merged.is_some() && param.place().is_gpu() && param.dtype() == DType::Float32
}

/// Applies `rule` to several parameters in one merged op: each `(param, grad, states)` as
/// `apply_rule` takes them, with one schedule, learning rate `lr` and weight decay `wd` for
/// all.
pub(crate) fn apply_merged<R: UpdateRule>(
    rule: &R,
    members: &[(&Tensor, &Tensor, &[Tensor])],
    schedule: Option<&Tensor>,
    lr: f64,
    wd: f64,
) -> Result<()> {
    let op = R::ops().merged.ok_or_else(|| Error::invalid(R::NAME, "has no merged form"))?;
    let mut inputs = Vec::with_capacity(members.len() * (2 + R::STATES.len()) + 1);
    for (p, g, states) in members {
        inputs.extend([*p, *g]);
        inputs.extend(states.iter());
    }
    inputs.extend(schedule);
    apply(op, &inputs, UpdateAttrs { rule: rule.clone(), lr, wd })?;
    Ok(())
}
