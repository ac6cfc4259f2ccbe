//! `minimize` in static mode: appends the backward pass and one fused update op per
//! parameter to the loss's program. Accumulators (moments, velocities) are persistable
//! variables `{param}_{state}_0` zero-initialised by the startup program. The step-dependent
//! factors (the scheduled learning rate, Adam's β powers) live in a persistable `schedule`
//! tensor per parameter dtype, `[lr, beta1_pow, beta2_pow]`, which every update op reads
//! (Paddle's static `adam` takes them as tensors too); a run hook counts the optimizer's
//! steps and writes it before every run. The update ops' attributes never change, so an
//! execution plan replays them from its tape like any other op.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Kind, LearningRate, Optim, UpdateRule};
use crate::ops::update;
use crate::static_::{OpRole, RunHook, VarKind, append_backward, create_persistable, current_programs, program_guard};
use crate::{DType, Error, Result, Tensor};

/// Writes the schedule tensors before each run.
struct Schedule<R> {
    first: R,
    lr: LearningRate,
    steps: AtomicU64,
    /// The schedule variable of each parameter dtype.
    vars: Vec<(String, DType)>,
}

impl<R: UpdateRule> RunHook for Schedule<R> {
    fn before_run(&self) -> Result<Vec<(String, Tensor)>> {
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let (b1, b2) = self.first.schedule_powers(step);
        let lr = self.lr.value();
        update::validate(&self.first, lr, 0.0)?;
        self.vars
            .iter()
            .map(|(name, dtype)| {
                let t = match dtype {
                    DType::Float64 => Tensor::from_vec(vec![lr, b1, b2], [3]),
                    _ => Tensor::from_vec(vec![lr as f32, b1 as f32, b2 as f32], [3]),
                }?;
                Ok((name.clone(), t))
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
        let params: Vec<&Tensor> = pairs.iter().map(|(p, _)| p).collect();
        // The ops' learning rates are multipliers of the schedule's.
        let mut updates = self.updates(&params, 1, 1.0)?;
        update::validate(&updates[0].0, self.lr.value(), 0.0)?;
        let names = <K::Rule as UpdateRule>::STATES;
        let vars = program_guard(&program, &startup, || {
            program.with_role(OpRole::Optimize, || -> Result<Vec<(String, DType)>> {
                let grads: Vec<Tensor> = pairs.iter().map(|(_, g)| g.clone()).collect();
                let grads = match &self.grad_clip {
                    Some(c) => c.apply(&grads)?,
                    None => grads,
                };
                let mut schedules: Vec<(String, DType, Tensor)> = Vec::new();
                for (((p, _), g), (rule, l2, lr_mult)) in pairs.iter().zip(&grads).zip(&updates) {
                    let dtype = p.dtype();
                    if !schedules.iter().any(|s| s.1 == dtype) {
                        let name = program.unique_name("optimizer_schedule");
                        let t = create_persistable(&name, &[3], dtype, VarKind::Plain, || crate::zeros([3], dtype))?;
                        schedules.push((name, dtype, t));
                    }
                    let schedule = schedules.iter().find(|s| s.1 == dtype).map(|s| &s.2);
                    let pname = p.name().unwrap_or_default();
                    let states: Vec<Tensor> = names
                        .iter()
                        .map(|s| {
                            create_persistable(&format!("{pname}_{s}_0"), p.shape(), p.dtype(), VarKind::Plain, || {
                                crate::zeros(p.shape(), p.dtype())
                            })
                        })
                        .collect::<Result<_>>()?;
                    update::apply_rule(rule, p, g, &states, schedule, *lr_mult, *l2)?;
                    if let Some(s) = schedule {
                        let lr = || s.slice(&[0], &[0], &[1])?.reshape(&[] as &[usize])?.scale(*lr_mult, 0.0);
                        rule.finish(p, &states, &lr)?;
                    }
                }
                Ok(schedules.into_iter().map(|(name, dtype, _)| (name, dtype)).collect())
            })
        })?;
        let first = updates.swap_remove(0).0;
        program.add_hook(Arc::new(Schedule { first, lr: self.lr.clone(), steps: AtomicU64::new(0), vars }));
        Ok(())
    }
}
