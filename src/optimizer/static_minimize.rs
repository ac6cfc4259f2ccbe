//! `minimize` in static mode: appends the backward pass and one fused update op per
//! parameter to the loss's program. Accumulators (moments, velocities) are persistable
//! variables `{param}_{state}_0` zero-initialised by the startup program. The update's
//! step-dependent factors (Adam's β powers) and the scheduled learning rate are set before
//! every run of the program by a run hook, which counts the optimizer's steps.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::update::{self, Rule, UpdateAttrs};
use super::{Kind, LearningRate, Optim};
use crate::ops::{AttrMap, Attrs};
use crate::static_::{OpRole, RunHook, VarKind, append_backward, create_persistable, current_programs, program_guard};
use crate::{Error, Result, Tensor};

/// One appended update op: its index in block 0, and its parameter's factors.
struct UpdateSite {
    op: usize,
    lr_mult: f64,
    l2: f64,
    decoupled_wd: Option<f64>,
}

/// Rewrites the update ops' attributes before each run.
struct Schedule {
    first: Rule,
    lr: LearningRate,
    steps: AtomicU64,
    sites: Vec<UpdateSite>,
}

/// `rule` (as built for step 1) at `step`: Adam's bias corrections move, the rest do not.
fn at_step(rule: Rule, step: u64) -> Rule {
    match rule {
        Rule::Adam { beta1, beta2, eps, decoupled_wd, .. } => Rule::Adam {
            beta1,
            beta2,
            eps,
            beta1_pow: beta1.powi(step as i32),
            beta2_pow: beta2.powi(step as i32),
            decoupled_wd,
        },
        other => other,
    }
}

fn with_decoupled(rule: Rule, wd: Option<f64>) -> Rule {
    match (rule, wd) {
        (Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, .. }, Some(wd)) => {
            Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd: wd }
        }
        (r, _) => r,
    }
}

impl RunHook for Schedule {
    fn before_run(&self) -> Vec<(usize, usize, AttrMap)> {
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let rule = at_step(self.first, step);
        let lr = self.lr.value();
        self.sites
            .iter()
            .map(|s| {
                let a = UpdateAttrs { rule: with_decoupled(rule, s.decoupled_wd), lr: lr * s.lr_mult, wd: s.l2 };
                (0, s.op, a.to_map())
            })
            .collect()
    }
}

impl<K: Kind> Optim<K> {
    pub(super) fn minimize_static(&mut self, loss: &Tensor) -> Result<()> {
        const OP: &str = "minimize";
        let program = loss.var_ref().map(|v| v.program.clone()).ok_or_else(|| Error::invalid(OP, "not static"))?;
        let pairs = append_backward(loss, Some(&self.params))?;
        if pairs.is_empty() {
            return Err(Error::invalid(OP, "the loss depends on none of the optimizer's trainable parameters"));
        }
        let startup = current_programs().1;
        let first = self.kind.rule(1);
        let (l2, rule) = self.with_weight_decay(first);
        update::validate(&rule, self.lr.value(), self.weight_decay)?;
        let decoupled_wd = match rule {
            Rule::Adam { decoupled_wd, .. } if self.kind.decoupled() => Some(decoupled_wd),
            _ => None,
        };
        let names = self.kind.state_names();
        let sites = program_guard(&program, &startup, || {
            program.with_role(OpRole::Optimize, || -> Result<Vec<UpdateSite>> {
                let grads: Vec<Tensor> = pairs.iter().map(|(_, g)| g.clone()).collect();
                let grads = match &self.grad_clip {
                    Some(c) => c.apply(&grads)?,
                    None => grads,
                };
                let mut sites = Vec::with_capacity(pairs.len());
                for ((p, _), g) in pairs.iter().zip(&grads) {
                    let pname = p.name().unwrap_or_default();
                    let states: Vec<Tensor> = names
                        .iter()
                        .map(|s| {
                            create_persistable(&format!("{pname}_{s}_0"), p.shape(), p.dtype(), VarKind::Plain, || {
                                crate::zeros(p.shape(), p.dtype())
                            })
                        })
                        .collect::<Result<_>>()?;
                    let op = program.data().blocks[0].ops.len();
                    let mult = p.learning_rate_multiplier();
                    update::apply_rule(&rule, p, g, &states, self.lr.value() * mult, l2)?;
                    sites.push(UpdateSite { op, lr_mult: mult, l2, decoupled_wd });
                }
                Ok(sites)
            })
        })?;
        program.add_hook(Arc::new(Schedule { first: rule, lr: self.lr.clone(), steps: AtomicU64::new(0), sites }));
        Ok(())
    }
}
