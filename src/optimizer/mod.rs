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
#[doc(hidden)]
pub mod update;

pub use adaptive::{Adadelta, Adagrad, Adamax, Lamb};
pub use clip::GradClip;
pub use lr::LrScheduler;

use update::Rule;

use crate::nn::StateDict;
use crate::{DType, Error, Place, Result, Tensor};

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
}

/// The update rule of an optimizer family and its hyper-parameters.
pub trait Kind: Send {
    /// The rule for the `step`-th update (1-based).
    #[doc(hidden)]
    fn rule(&self, step: u64) -> Rule;
    /// Names of the per-parameter accumulators.
    fn state_names(&self) -> &'static [&'static str];
    /// True when weight decay is decoupled (AdamW) rather than L2 added to the gradient.
    fn decoupled(&self) -> bool {
        false
    }
    /// Work after the fused update on each parameter (Lamb's trust-ratio step), in tensor
    /// ops so that it runs eagerly and appends to a static program alike; `lr` makes this
    /// parameter's learning rate as a tensor. It is called only by the rules that use it:
    /// made up front, the tensor cost every other rule an op per parameter and step (two
    /// dispatches per parameter in a replayed plan).
    #[doc(hidden)]
    fn finish(&self, param: &Tensor, states: &[Tensor], lr: &dyn Fn() -> Result<Tensor>) -> Result<()> {
        let _ = (param, states, lr);
        Ok(())
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
        }
    }

    setters! {
        /// Weight decay coefficient (L2 on the gradient; decoupled for AdamW).
        weight_decay: f64;
        /// Clips gradients before each update.
        grad_clip: GradClip => Some;
    }

    /// The parameters being optimised.
    pub fn parameters(&self) -> &[Tensor] {
        &self.params
    }

    /// Updates taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The L2 coefficient added to gradients and the rule with decoupled decay (AdamW).
    fn with_weight_decay(&self, rule: Rule) -> (f64, Rule) {
        match rule {
            Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, .. } if self.kind.decoupled() => {
                (0.0, Rule::Adam { beta1, beta2, eps, beta1_pow, beta2_pow, decoupled_wd: self.weight_decay })
            }
            _ => (self.weight_decay, rule),
        }
    }

    fn param_name(&self, i: usize) -> String {
        self.params[i].name().unwrap_or_else(|| format!("param_{i}"))
    }
}

impl<K: Kind> Optimizer for Optim<K> {
    fn step(&mut self) -> Result<()> {
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
        let rule = self.kind.rule(self.steps + 1);
        let lr = self.lr.value();
        let (l2, rule) = self.with_weight_decay(rule);
        // Every setting checked before any parameter moves (a bad one fails the whole step).
        update::validate(&rule, lr, self.weight_decay)?;
        self.steps += 1;
        let n_states = self.kind.state_names().len();
        for &i in &live {
            if self.states[i].len() != n_states {
                let p = &self.params[i];
                self.states[i] = (0..n_states).map(|_| crate::zeros_like(p)).collect::<Result<_>>()?;
            }
        }
        // On a GPU, adjacent parameters of one learning rate update in one merged op (in as
        // few dispatches as the device's bindings allow); elsewhere, and for the other rules,
        // one by one.
        let mut at = 0;
        while at < live.len() {
            let p = &self.params[live[at]];
            let lr = lr * p.learning_rate_multiplier();
            let mut end = at + 1;
            if update::merges(&rule, p) {
                while end < live.len() {
                    let q = &self.params[live[end]];
                    // A parameter listed twice updates twice, in order: not in one dispatch.
                    let listed = (at..end).any(|j| self.params[live[j]].storage().same_memory(q.storage()));
                    if !update::merges(&rule, q)
                        || q.place() != p.place()
                        || self.lr.value() * q.learning_rate_multiplier() != lr
                        || listed
                    {
                        break;
                    }
                    end += 1;
                }
            }
            if end - at == 1 {
                update::apply_rule(&rule, p, &grads[at], &self.states[live[at]], None, lr, l2)?;
            } else {
                let members: Vec<(&Tensor, &Tensor, &[Tensor])> =
                    (at..end).map(|j| (&self.params[live[j]], &grads[j], self.states[live[j]].as_slice())).collect();
                update::apply_merged(&rule, &members, lr, l2)?;
            }
            for &i in &live[at..end] {
                let p = &self.params[i];
                self.kind.finish(p, &self.states[i], &|| crate::full_on(&[] as &[usize], lr, p.dtype(), p.place()))?;
            }
            at = end;
        }
        Ok(())
    }

    fn minimize(&mut self, loss: &Tensor) -> Result<()> {
        if loss.is_static_var() { self.minimize_static(loss) } else { self.step() }
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
            for (name, t) in self.kind.state_names().iter().zip(states) {
                sd.insert(format!("{}.{name}", self.param_name(i)), t.clone());
            }
        }
        if let Ok(step) = Tensor::from_vec_on(vec![self.steps as i64], &[] as &[usize], Place::Cpu) {
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
        for (i, slot) in new_states.iter_mut().enumerate() {
            let names = self.kind.state_names();
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
                loaded.push(t.cast(p.dtype())?.to(p.place())?.clone_data()?);
            }
            *slot = loaded;
        }
        let unexpected: Vec<String> = state.keys().into_iter().filter(|k| !known.contains(k)).collect();
        if !unexpected.is_empty() {
            return Err(Error::invalid(OP, format!("unexpected keys {unexpected:?}")));
        }
        self.states = new_states;
        if let Some(s) = state.get("@step") {
            self.steps = s.cast(DType::Int64)?.item::<i64>()?.max(0) as u64;
        }
        if let (Some(e), LearningRate::Scheduler(s)) = (state.get("@lr_epoch"), &self.lr) {
            s.set_epoch(e.cast(DType::Int64)?.item::<i64>()?);
        }
        Ok(())
    }
}

/// Plain gradient descent.
pub struct SgdKind;

impl Kind for SgdKind {
    fn rule(&self, _step: u64) -> Rule {
        Rule::Sgd
    }
    fn state_names(&self) -> &'static [&'static str] {
        &[]
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

/// Heavy-ball momentum, optionally Nesterov.
pub struct MomentumKind {
    momentum: f64,
    nesterov: bool,
}

impl Kind for MomentumKind {
    fn rule(&self, _step: u64) -> Rule {
        Rule::Momentum { mu: self.momentum, nesterov: self.nesterov }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["velocity"]
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

/// Adam's moments (`decoupled` = AdamW).
pub struct AdamKind {
    beta1: f64,
    beta2: f64,
    epsilon: f64,
    decoupled: bool,
}

impl Kind for AdamKind {
    fn rule(&self, step: u64) -> Rule {
        Rule::Adam {
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.epsilon,
            beta1_pow: self.beta1.powi(step as i32),
            beta2_pow: self.beta2.powi(step as i32),
            decoupled_wd: 0.0,
        }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["moment1", "moment2"]
    }
    fn decoupled(&self) -> bool {
        self.decoupled
    }
}

/// `paddle.optimizer.Adam`.
pub type Adam = Optim<AdamKind>;

/// `paddle.optimizer.AdamW` (decoupled weight decay, default 0.01).
pub type AdamW = Optim<AdamKind>;

impl Optim<AdamKind> {
    /// Adam (β1 0.9, β2 0.999, ε 1e-8) with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdamKind { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, decoupled: false }, lr, parameters, 0.0)
    }

    /// AdamW: Adam with decoupled weight decay `0.01` (change with `weight_decay`).
    pub fn adamw(lr: impl Into<LearningRate>, parameters: Vec<Tensor>) -> Self {
        Optim::with_kind(AdamKind { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, decoupled: true }, lr, parameters, 0.01)
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

/// RMSProp.
pub struct RmsPropKind {
    rho: f64,
    epsilon: f64,
    momentum: f64,
    centered: bool,
}

impl Kind for RmsPropKind {
    fn rule(&self, _step: u64) -> Rule {
        Rule::RmsProp { rho: self.rho, eps: self.epsilon, momentum: self.momentum, centered: self.centered }
    }
    fn state_names(&self) -> &'static [&'static str] {
        &["mean_square", "mean_grad", "moment"]
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
