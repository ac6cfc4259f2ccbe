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
        self.minimize_static_gated(loss, &mut |_| Ok(None))
    }

    /// `minimize_static` with `before_update` appended between the backward pass and the
    /// updates: it receives the gradient variables (and may rewrite them in place) and may
    /// return a bool `[1]` variable that skips the updates where true (a `GradScaler`'s
    /// flag). Skippable updates count their steps in a persistable variable, so a skipped
    /// step does not advance the β powers.
    pub(super) fn minimize_static_gated(
        &mut self,
        loss: &Tensor,
        before_update: &mut dyn FnMut(&[Tensor]) -> Result<Option<Tensor>>,
    ) -> Result<()> {
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
                let skip = before_update(&grads)?;
                let grads = match &self.grad_clip {
                    Some(c) => c.apply(&grads)?,
                    None => grads,
                };
                let mut schedules: Vec<(String, DType, Tensor)> = Vec::new();
                // The gated form of each dtype's schedule, made once.
                let mut gated: Vec<(DType, Tensor)> = Vec::new();
                for (((p, _), g), (rule, l2, lr_mult)) in pairs.iter().zip(&grads).zip(&updates) {
                    let dtype = p.dtype();
                    if !schedules.iter().any(|s| s.1 == dtype) {
                        let name = program.unique_name("optimizer_schedule");
                        let t = create_persistable(&name, &[3], dtype, VarKind::Plain, || crate::zeros([3], dtype))?;
                        schedules.push((name, dtype, t));
                    }
                    let mut schedule = schedules.iter().find(|s| s.1 == dtype).map(|s| s.2.clone());
                    if let (Some(skip), Some(s)) = (&skip, &schedule) {
                        if !gated.iter().any(|g| g.0 == dtype) {
                            let g = gated_schedule(&program, s, skip, rule.power_bases(), dtype)?;
                            gated.push((dtype, g));
                        }
                        schedule = gated.iter().find(|g| g.0 == dtype).map(|g| g.1.clone());
                    }
                    let schedule = schedule.as_ref();
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
                        let at = |k: i64| s.slice(&[0], &[k], &[k + 1])?.reshape(&[] as &[usize]);
                        // A gated schedule's rate is zero for a skipped step.
                        let lr = || match skip {
                            Some(_) => at(0)?.scale(*lr_mult, 0.0)?.mul(&at(3)?.scale(-1.0, 1.0)?),
                            None => at(0)?.scale(*lr_mult, 0.0),
                        };
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

/// The gated schedule `[lr, β1ᵗ, β2ᵗ, skip]` of a program: the rate from the hook-written
/// `schedule`, the powers from a persistable count `t` of the steps taken (`t += 1 − skip`
/// each run, `βᵗ = exp(t · ln β)`), the skip flag from the variable `skip`.
fn gated_schedule(
    program: &crate::static_::Program,
    schedule: &Tensor,
    skip: &Tensor,
    bases: (f64, f64),
    dtype: DType,
) -> Result<Tensor> {
    let name = program.unique_name("optimizer_steps_taken");
    // Counted in float32 whatever the parameters' dtype: float16 counts exactly only to 2048.
    let t = create_persistable(&name, &[1], DType::Float32, VarKind::Plain, || crate::zeros([1], DType::Float32))?;
    let skip = skip.cast(DType::Float32)?.reshape([1])?;
    let taken = t.add(&skip.scale(-1.0, 1.0)?)?;
    t.assign_(&taken)?;
    let power = |b: f64| match b > 0.0 {
        true => taken.scale(b.ln(), 0.0)?.exp()?.cast(dtype),
        false => crate::zeros([1], dtype),
    };
    let lr = schedule.slice(&[0], &[0], &[1])?;
    crate::concat(&[lr, power(bases.0)?, power(bases.1)?, skip.cast(dtype)?], 0)
}
