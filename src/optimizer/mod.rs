//! Optimizers (`paddle.optimizer`): SGD, Momentum, Adam, AdamW, RMSProp, Adagrad, Adadelta,
//! Adamax, Lamb, with weight decay,
//! gradient clipping, per-parameter learning-rate multipliers and learning-rate schedulers.
//! Every update runs in place on the parameter's buffer as one fused kernel per parameter.
//!
//! ```no_run
//! # use dygraph::{self as paddle, optimizer::{self, Optimizer}};
//! # fn demo(params: Vec<paddle::Tensor>, loss: paddle::Tensor) -> paddle::Result<()> {
//! let mut opt = optimizer::Adam::new(1e-3, params).weight_decay(1e-4);
//! loss.backward()?;
//! opt.step()?;
//! opt.clear_grad();
//! # Ok(()) }
//! ```

mod adaptive;
mod clip;
pub mod lr;
mod lr_schedules;
mod static_minimize;

use std::sync::Arc;

#[doc(hidden)]
pub use crate::ops::update::{
    AdadeltaKind, AdagradKind, AdamKind, AdamaxKind, Checks, LambKind, MomentumKind, RmsPropKind, RuleOps, SgdKind,
    UpdateRule,
};
pub use adaptive::{Adadelta, Adagrad, Adamax, Lamb};
pub use clip::GradClip;
pub use lr::LrScheduler;

use crate::nn::StateDict;
use crate::ops::update;
use crate::{DType, Error, Place, Result, Tensor};

/// The state-dict key suffix of a parameter's float32 master weight.
const MASTER_WEIGHT: &str = "master_weight";

/// A constant learning rate or a scheduler.
#[derive(Clone)]
pub enum LearningRate {
    /// Fixed.
    Constant(f64),
    /// Read from the scheduler at every step.
    Scheduler(LrScheduler),
}

impl LearningRate {
    fn value(&self) -> f64 {
        match self {
            LearningRate::Constant(v) => *v,
            LearningRate::Scheduler(s) => s.get_lr(),
        }
    }
}

impl From<f64> for LearningRate {
    fn from(v: f64) -> Self {
        LearningRate::Constant(v)
    }
}

impl From<LrScheduler> for LearningRate {
    fn from(s: LrScheduler) -> Self {
        LearningRate::Scheduler(s)
    }
}

impl From<&LrScheduler> for LearningRate {
    fn from(s: &LrScheduler) -> Self {
        LearningRate::Scheduler(s.clone())
    }
}

/// What every optimizer does.
pub trait Optimizer {
    /// Updates every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;
    /// `step`, except where `skip` (a bool `[1]`) is true: then nothing changes. The
    /// decision is made on the device (a `GradScaler` that found an inf or a NaN), with no
    /// value read back to the host.
    fn step_unless(&mut self, skip: &Tensor) -> Result<()>;
    /// The parameters it updates (a `GradScaler` unscales their gradients).
    fn parameter_list(&self) -> Vec<Tensor>;
    /// Paddle's `multi_precision`: float16 and bfloat16 parameters updated through float32 master
    /// weights.
    fn set_multi_precision(&mut self, on: bool);
    /// Updates `new` wherever it updated `old`, for each pair (`amp::decorate` casting a
    /// model's parameters); the states made for `old` are kept.
    fn replace_parameters(&mut self, pairs: &[(Tensor, Tensor)]);
    /// Drops every parameter's gradient (Paddle's `clear_grad()`).
    fn clear_grad(&mut self);
    /// The current learning rate.
    fn get_lr(&self) -> f64;
    /// Sets a constant learning rate (replacing a scheduler).
    fn set_lr(&mut self, lr: f64);
    /// Accumulators and step count by name (`"linear1.weight.moment1"`, `"@step"`).
    fn state_dict(&self) -> StateDict;
    /// Restores `state_dict()` output.
    fn set_state_dict(&mut self, state: &StateDict) -> Result<()>;
    /// Paddle's `minimize`. Eager: applies the gradients already computed (`loss.backward()`
    /// comes first, as in Paddle's dygraph mode; it is not run again). Static (`loss` a
    /// variable of a Program): appends the backward ops and the update ops to the program.
    fn minimize(&mut self, loss: &Tensor) -> Result<()>;
    /// Static `minimize` with `before_update` appended between the backward pass and the
    /// updates: it gets the gradient variables (and may rewrite them in place) and may
    /// return a bool `[1]` variable under which the updates change nothing (a `GradScaler`
    /// unscaling and checking the gradients).
    fn minimize_gated(
        &mut self,
        loss: &Tensor,
        before_update: &mut dyn FnMut(&[Tensor]) -> Result<Option<Tensor>>,
    ) -> Result<()>;
}

/// What an optimizer family contributes: its update rule, and for AdamW which parameters
/// decay and their learning-rate ratios. The rules' settings types implement it directly.
pub trait Kind: Send + 'static {
    /// The rule its updates run.
    #[doc(hidden)]
    type Rule: UpdateRule;
    /// The rule of the `step`-th update (1-based) of `param` under the optimizer's weight
    /// decay `wd`, and the L2 coefficient added to its gradient (0 where the rule decays
    /// the parameter itself, as AdamW does).
    #[doc(hidden)]
    fn rule(&self, step: u64, wd: f64, param: &Tensor) -> (Self::Rule, f64);
    /// What `param`'s learning rate is multiplied by (AdamW's `lr_ratio`).
    #[doc(hidden)]
    fn lr_ratio(&self, param: &Tensor) -> f64 {
        let _ = param;
        1.0
    }
}

impl<R: UpdateRule> Kind for R {
    type Rule = R;
    fn rule(&self, step: u64, wd: f64, _: &Tensor) -> (R, f64) {
        (self.at_step(step), wd)
    }
}

/// An optimizer over a list of parameters with update rule `K`.
pub struct Optim<K: Kind> {
    kind: K,
    params: Vec<Tensor>,
    states: Vec<Vec<Tensor>>,
    lr: LearningRate,
    weight_decay: f64,
    grad_clip: Option<GradClip>,
    steps: u64,
    /// The count of steps taken, on the device, once a skippable step ran (`step_unless`):
    /// the host cannot know whether it was skipped without reading it back.
    device_steps: Option<Tensor>,
    /// Whether float16 and bfloat16 parameters are updated through float32 master weights.
    multi_precision: bool,
    /// Each 16-bit float parameter's float32 master weight (made at its first update).
    masters: Vec<Option<Tensor>>,
}

impl<K: Kind> Optim<K> {
    fn with_kind(kind: K, lr: impl Into<LearningRate>, parameters: Vec<Tensor>, weight_decay: f64) -> Self {
        let n = parameters.len();
        Optim {
            kind,
            params: parameters,
            states: vec![Vec::new(); n],
            lr: lr.into(),
            weight_decay,
            grad_clip: None,
            steps: 0,
            device_steps: None,
            multi_precision: false,
            masters: vec![None; n],
        }
    }

    setters! {
        /// Weight decay coefficient (L2 on the gradient; decoupled for AdamW).
        weight_decay: f64;
        /// Clips gradients before each update.
        grad_clip: GradClip => Some;
    }

    /// Paddle's `multi_precision`: float16 and bfloat16 parameters are updated through float32 master
    /// weights (and float32 states), the parameter rewritten from its master after each
    /// step. `amp::decorate` at O2 sets it.
    pub fn multi_precision(mut self, on: bool) -> Self {
        self.multi_precision = on;
        self
    }

    /// The parameters being optimised.
    pub fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    /// Updates taken so far (after skippable steps, read back from the device).
    pub fn steps(&self) -> u64 {
        match &self.device_steps {
            Some(t) => t.to_f64_vec().ok().and_then(|v| v.first().copied()).map_or(self.steps, |v| v.max(0.0) as u64),
            None => self.steps,
        }
    }

    /// Each of `params`' rule and L2 coefficient for the `step`-th update, and its learning
    /// rate (the optimizer's `lr` times the parameter's multiplier and ratio), every setting
    /// checked before any parameter moves (a bad one fails the whole step).
    fn updates(&self, params: &[&Tensor], step: u64, lr: f64) -> Result<Vec<(K::Rule, f64, f64)>> {
        params
            .iter()
            .map(|p| {
                let (rule, l2) = self.kind.rule(step, self.weight_decay, p);
                let lr = lr * p.learning_rate_multiplier() * self.kind.lr_ratio(p);
                update::validate(&rule, lr, l2)?;
                Ok((rule, l2, lr))
            })
            .collect()
    }

    fn param_name(&self, i: usize) -> String {
        self.params[i].name().unwrap_or_else(|| format!("param_{i}"))
    }
}

impl<K: Kind> Optim<K> {
    /// One update of every parameter that has a gradient; with `skip` (a bool `[1]`) each
    /// update op reads a gated schedule and changes nothing where `skip` is true.
    fn update_all(&mut self, skip: Option<&Tensor>) -> Result<()> {
        let _g = crate::no_grad_guard();
        let live: Vec<usize> = (0..self.params.len())
            .filter(|&i| !self.params[i].stop_gradient() && self.params[i].grad().is_some())
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let mut grads: Vec<Tensor> = live.iter().filter_map(|&i| self.params[i].grad()).collect();
        if let Some(clip) = &self.grad_clip {
            grads = clip.apply(&grads)?;
        }
        // What each update writes: the parameter, or its float32 master weight.
        let mut owned: Vec<Tensor> = Vec::with_capacity(live.len());
        for (&i, g) in live.iter().zip(grads.iter_mut()) {
            match self.master(i)? {
                Some(m) => {
                    *g = g.cast(DType::Float32)?;
                    owned.push(m);
                }
                None => owned.push(self.params[i].clone()),
            }
        }
        let schedule = match skip {
            Some(skip) => Some(self.gated_schedule(&owned.iter().collect::<Vec<_>>(), skip)?),
            None => {
                self.sync_steps()?;
                None
            }
        };
        // Names and learning-rate multipliers are the parameters' own, not their masters'.
        let originals: Vec<Tensor> = live.iter().map(|&i| self.params[i].clone()).collect();
        let live_params: Vec<&Tensor> = originals.iter().collect();
        // Under a schedule the ops' learning rates are multipliers of its own.
        let base_lr = if schedule.is_some() { 1.0 } else { self.lr.value() };
        let updates = self.updates(&live_params, self.steps + 1, base_lr)?;
        if schedule.is_none() {
            self.steps += 1;
        }
        let n_states = <K::Rule as UpdateRule>::STATES.len();
        for (&i, p) in live.iter().zip(&owned) {
            if self.states[i].len() != n_states {
                self.states[i] = (0..n_states).map(|_| crate::zeros_like(p)).collect::<Result<_>>()?;
            }
        }
        let schedule = schedule.as_ref();
        // On a GPU, adjacent parameters of one rule and learning rate update in one merged
        // op (in as few dispatches as the device's bindings allow); elsewhere, and for the
        // other rules, one by one.
        let mut at = 0;
        while at < live.len() {
            let p = &owned[at];
            let (rule, l2, lr) = &updates[at];
            let mut end = at + 1;
            if update::merges::<K::Rule>(p) {
                while end < live.len() {
                    let q = &owned[end];
                    // A parameter listed twice updates twice, in order: not in one dispatch.
                    let listed = (at..end).any(|j| owned[j].storage().same_memory(q.storage()));
                    if !update::merges::<K::Rule>(q) || q.place() != p.place() || updates[end] != updates[at] || listed
                    {
                        break;
                    }
                    end += 1;
                }
            }
            if end - at == 1 {
                update::apply_rule(rule, p, &grads[at], &self.states[live[at]], schedule, *lr, *l2)?;
            } else {
                let members: Vec<(&Tensor, &Tensor, &[Tensor])> =
                    (at..end).map(|j| (&owned[j], &grads[j], self.states[live[j]].as_slice())).collect();
                update::apply_merged(rule, &members, schedule, *lr, *l2)?;
            }
            for ((&i, p), (rule, _, lr)) in live[at..end].iter().zip(&owned[at..end]).zip(&updates[at..end]) {
                let lr_tensor = || match schedule {
                    // The schedule's rate times the multiplier, zero for a skipped step.
                    Some(s) => {
                        let at = |k: i64| s.slice(&[0], &[k], &[k + 1])?.reshape(&[] as &[usize]);
                        at(0)?.scale(*lr, 0.0)?.mul(&at(3)?.scale(-1.0, 1.0)?)
                    }
                    None => crate::full_on(&[] as &[usize], *lr, p.dtype(), p.place()),
                };
                rule.finish(p, &self.states[i], &lr_tensor)?;
            }
            at = end;
        }
        // Each 16-bit float parameter takes its master's new value.
        for (&i, m) in live.iter().zip(&owned) {
            let p = &self.params[i];
            if p.dtype() != m.dtype() {
                p.assign_(&m.cast(p.dtype())?)?;
            }
        }
        Ok(())
    }

    /// Parameter `i`'s float32 master weight, made from it at the first call, when the
    /// parameter is float16 or bfloat16 and the optimizer is multi-precision; `None` for the
    /// others.
    fn master(&mut self, i: usize) -> Result<Option<Tensor>> {
        let p = &self.params[i];
        if !p.dtype().is_half() {
            return Ok(None);
        }
        if !self.multi_precision {
            return Err(Error::unsupported(
                <K::Rule as UpdateRule>::NAME,
                p.dtype(),
                "for parameters without master weights: create the optimizer with .multi_precision(true), or decorate the model and optimizer with amp::decorate at O2",
            ));
        }
        if self.masters.len() < self.params.len() {
            self.masters.resize(self.params.len(), None);
        }
        if self.masters[i].is_none() {
            let m = p.detach().cast(DType::Float32)?.clone_data()?;
            if let Some(n) = p.name() {
                m.set_name(format!("{n}_fp32_master"));
            }
            self.masters[i] = Some(m);
        }
        Ok(self.masters[i].clone())
    }

    /// The gated schedule `[lr, β1ᵗ, β2ᵗ, skip]` of a step that `skip` may cancel, with `t`
    /// the count of steps taken, kept on the device (a skipped step does not count, as
    /// Paddle's β-power accumulators do not move when a step is skipped).
    fn gated_schedule(&mut self, params: &[&Tensor], skip: &Tensor) -> Result<Tensor> {
        const OP: &str = "optimizer.step (gated)";
        let (place, dtype) = (params[0].place(), params[0].dtype());
        if let Some(q) = params.iter().find(|q| q.place() != place || q.dtype() != dtype) {
            return Err(Error::invalid(
                OP,
                format!(
                    "a skippable step needs every parameter on one place and dtype: {place} {dtype} and {} {}",
                    q.place(),
                    q.dtype()
                ),
            ));
        }
        if skip.dtype() != DType::Bool || skip.numel() != 1 {
            return Err(Error::invalid(
                OP,
                format!("skip must be a bool [1], got {} {:?}", skip.dtype(), skip.shape()),
            ));
        }
        let skip = skip.to(place)?.cast(dtype)?.reshape([1])?;
        let taken = match self.device_steps.take() {
            Some(t) => t,
            None => crate::full_on([1], self.steps as f64, dtype, place)?,
        };
        let t = taken.add(&skip.scale(-1.0, 1.0)?)?;
        let (b1, b2) = self.kind.rule(1, self.weight_decay, params[0]).0.power_bases();
        let bases = Tensor::from_vec_on(vec![b1, b2], [2], Place::Cpu)?.cast(dtype)?.to(place)?;
        let lr = crate::full_on([1], self.lr.value(), dtype, place)?;
        let schedule = crate::concat(&[lr, bases.pow(&t)?, skip], 0)?;
        self.device_steps = Some(t);
        Ok(schedule)
    }

    /// Takes the device's count of steps back to the host after skippable steps (one read,
    /// only when such steps were taken).
    fn sync_steps(&mut self) -> Result<()> {
        if let Some(t) = self.device_steps.take() {
            self.steps = t.to_f64_vec()?.first().copied().unwrap_or(0.0).max(0.0).round() as u64;
        }
        Ok(())
    }
}

impl<K: Kind> Optimizer for Optim<K> {
    fn step(&mut self) -> Result<()> {
        self.update_all(None)
    }

    fn step_unless(&mut self, skip: &Tensor) -> Result<()> {
        self.update_all(Some(skip))
    }

    fn parameter_list(&self) -> Vec<Tensor> {
        self.params.clone()
    }

    fn set_multi_precision(&mut self, on: bool) {
        self.multi_precision = on;
    }

    fn replace_parameters(&mut self, pairs: &[(Tensor, Tensor)]) {
        self.masters.resize(self.params.len(), None);
        for (p, master) in self.params.iter_mut().zip(self.masters.iter_mut()) {
            if let Some((old, new)) = pairs.iter().find(|(old, _)| old.storage().same_memory(p.storage())) {
                // A float32 parameter cast down keeps its exact value as the master weight
                // (Paddle's master is made from the float16 copy).
                if old.dtype() == DType::Float32 && new.dtype().is_half() {
                    *master = old.detach().clone_data().ok();
                }
                *p = new.clone();
            }
        }
    }

    fn minimize(&mut self, loss: &Tensor) -> Result<()> {
        if loss.is_static_var() { self.minimize_static(loss) } else { self.step() }
    }

    fn minimize_gated(
        &mut self,
        loss: &Tensor,
        before_update: &mut dyn FnMut(&[Tensor]) -> Result<Option<Tensor>>,
    ) -> Result<()> {
        if !loss.is_static_var() {
            return Err(Error::invalid(
                "minimize_gated",
                "takes a static program's loss (eager steps use step_unless)",
            ));
        }
        self.minimize_static_gated(loss, before_update)
    }

    fn clear_grad(&mut self) {
        for p in &self.params {
            p.clear_gradient();
        }
    }

    fn get_lr(&self) -> f64 {
        self.lr.value()
    }

    fn set_lr(&mut self, lr: f64) {
        self.lr = LearningRate::Constant(lr);
    }

    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict::new();
        for (i, states) in self.states.iter().enumerate() {
            for (name, t) in <K::Rule as UpdateRule>::STATES.iter().zip(states) {
                sd.insert(format!("{}.{name}", self.param_name(i)), t.clone());
            }
        }
        for (i, m) in self.masters.iter().enumerate() {
            if let Some(m) = m {
                sd.insert(format!("{}.{MASTER_WEIGHT}", self.param_name(i)), m.clone());
            }
        }
        if let Ok(step) = Tensor::from_vec_on(vec![self.steps() as i64], &[] as &[usize], Place::Cpu) {
            sd.insert("@step", step);
        }
        if let LearningRate::Scheduler(s) = &self.lr
            && let Ok(epoch) = Tensor::from_vec_on(vec![s.last_epoch()], &[] as &[usize], Place::Cpu)
        {
            sd.insert("@lr_epoch", epoch);
        }
        sd
    }

    fn set_state_dict(&mut self, state: &StateDict) -> Result<()> {
        const OP: &str = "optimizer.set_state_dict";
        let mut known = vec!["@step".to_string(), "@lr_epoch".to_string()];
        let mut new_states = self.states.clone();
        let mut new_masters = self.masters.clone();
        new_masters.resize(self.params.len(), None);
        for (i, master) in new_masters.iter_mut().enumerate() {
            let key = format!("{}.{MASTER_WEIGHT}", self.param_name(i));
            if let Some(t) = state.get(&key) {
                let p = &self.params[i];
                if t.shape() != p.shape() || !p.dtype().is_half() || !self.multi_precision {
                    return Err(Error::invalid(
                        OP,
                        format!(
                            "{key} ({} {:?}) fits no 16-bit float parameter of a multi-precision optimizer ({} {:?})",
                            t.dtype(),
                            t.shape(),
                            p.dtype(),
                            p.shape()
                        ),
                    ));
                }
                *master = Some(t.cast(DType::Float32)?.to(p.place())?.clone_data()?);
            }
            known.push(key);
        }
        for (i, slot) in new_states.iter_mut().enumerate() {
            let names = <K::Rule as UpdateRule>::STATES;
            let keys: Vec<String> = names.iter().map(|n| format!("{}.{n}", self.param_name(i))).collect();
            known.extend(keys.iter().cloned());
            let found: Vec<Option<&Tensor>> = keys.iter().map(|k| state.get(k)).collect();
            if found.iter().all(|f| f.is_none()) {
                continue;
            }
            let p = &self.params[i];
            let mut loaded = Vec::new();
            for (k, f) in keys.iter().zip(found) {
                let t = f.ok_or_else(|| Error::invalid(OP, format!("missing key {k}")))?;
                if t.shape() != p.shape() {
                    return Err(Error::invalid(
                        OP,
                        format!("{k} has shape {:?} but the parameter has {:?}", t.shape(), p.shape()),
                    ));
                }
                // The states of a parameter with a master weight are float32, as the master.
                let dtype = if self.multi_precision && p.dtype().is_half() { DType::Float32 } else { p.dtype() };
                loaded.push(t.cast(dtype)?.to(p.place())?.clone_data()?);
            }
            *slot = loaded;
        }
        let unexpected: Vec<String> = state.keys().into_iter().filter(|k| !known.contains(k)).collect();
        if !unexpected.is_empty() {
            return Err(Error::invalid(OP, format!("unexpected keys {unexpected:?}")));
        }
        self.states = new_states;
        self.masters = new_masters;
        if let Some(s) = state.get("@step") {
            self.steps = s.cast(DType::Int64)?.item::<i64>()?.max(0) as u64;
            self.device_steps = None;
        }
        if let (Some(e), LearningRate::Scheduler(s)) = (state.get("@lr_epoch"), &self.lr) {
            s.set_epoch(e.cast(DType::Int64)?.item::<i64>()?);
        }
        Ok(())
    }
}

/// `paddle.optimizer.SGD`.
pub type SGD = Optim<SgdKind>;

impl SGD {
    /// SGD with learning rate `lr` over `parameters`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(SgdKind, lr, parameters, 0.0)
    }
}

/// `paddle.optimizer.Momentum`.
pub type Momentum = Optim<MomentumKind>;

impl Momentum {
    /// Momentum 0.9 (Paddle's default) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(MomentumKind { momentum: 0.9, nesterov: false }, lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// The momentum factor.
        momentum: f64;
    }

    /// Nesterov's variant.
    pub fn use_nesterov(mut self, on: bool) -> Self {
        self.kind.nesterov = on;
        self
    }
}

/// `paddle.optimizer.Adam` (weight decay, when set, is L2 on the gradient).
pub type Adam = Optim<AdamKind>;

impl Adam {
    /// Adam (β1 0.9, β2 0.999, ε 1e-8: Paddle's defaults) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdamKind::paddle_defaults(), lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// β1.
        beta1: f64;
        /// β2.
        beta2: f64;
        /// ε.
        epsilon: f64;
    }
}

/// Which parameters decay, by name (AdamW's `apply_decay_param_fun`).
type DecayFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A parameter's learning-rate ratio (AdamW's `lr_ratio`).
type LrRatio = Arc<dyn Fn(&Tensor) -> f64 + Send + Sync>;

/// AdamW's settings: Adam's, which parameters decay and their learning-rate ratios.
pub struct AdamWKind {
    adam: AdamKind,
    apply_decay_param_fun: Option<DecayFilter>,
    lr_ratio: Option<LrRatio>,
}

impl Kind for AdamWKind {
    type Rule = AdamKind;
    fn rule(&self, step: u64, wd: f64, param: &Tensor) -> (AdamKind, f64) {
        let decays = self.apply_decay_param_fun.as_ref().is_none_or(|f| f(&param.name().unwrap_or_default()));
        let decay = if decays { wd } else { 0.0 };
        (AdamKind { decoupled_weight_decay: decay, ..self.adam.at_step(step) }, 0.0)
    }
    fn lr_ratio(&self, param: &Tensor) -> f64 {
        self.lr_ratio.as_ref().map_or(1.0, |f| f(param))
    }
}

/// `paddle.optimizer.AdamW`: Adam with decoupled weight decay, `p -= lr·weight_decay·p`
/// before each Adam step (Paddle's defaults: weight decay 0.01, every parameter decays).
pub type AdamW = Optim<AdamWKind>;

impl AdamW {
    /// AdamW (β1 0.9, β2 0.999, ε 1e-8, weight decay 0.01: Paddle's defaults) with learning
    /// rate `lr`; `weight_decay` changes the coefficient.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        let kind = AdamWKind { adam: AdamKind::paddle_defaults(), apply_decay_param_fun: None, lr_ratio: None };
        Optim::with_kind(kind, lr, parameters, 0.01)
    }

    setters! {
        kind.adam:
        /// β1.
        beta1: f64;
        /// β2.
        beta2: f64;
        /// ε.
        epsilon: f64;
    }

    /// Decays only the parameters whose names `f` accepts (Paddle's
    /// `apply_decay_param_fun`; parameters without a name are asked with `""`).
    pub fn apply_decay_param_fun(mut self, f: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.kind.apply_decay_param_fun = Some(Arc::new(f));
        self
    }

    /// Multiplies each parameter's learning rate by `f(param)` (Paddle's `lr_ratio`, for
    /// layer-wise decay), the decoupled decay included.
    pub fn lr_ratio(mut self, f: impl Fn(&Tensor) -> f64 + Send + Sync + 'static) -> Self {
        self.kind.lr_ratio = Some(Arc::new(f));
        self
    }
}

/// `paddle.optimizer.RMSProp`.
pub type RMSProp = Optim<RmsPropKind>;

impl RMSProp {
    /// RMSProp (ρ 0.95, ε 1e-6, momentum 0, not centered: Paddle's defaults).
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(RmsPropKind { rho: 0.95, epsilon: 1e-6, momentum: 0.0, centered: false }, lr, parameters, 0.0)
    }

    setters! {
        kind:
        /// ρ (decay of the squared-gradient average).
        rho: f64;
        /// ε.
        epsilon: f64;
        /// Momentum factor.
        momentum: f64;
        /// Centered variant (normalise by the gradient's variance).
        centered: bool;
    }
}
