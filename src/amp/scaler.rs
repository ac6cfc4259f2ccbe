//! `paddle.amp.GradScaler`: dynamic loss scaling. The loss is multiplied by the scale
//! before backward so that small float16 gradients do not flush to zero; before the
//! update the gradients are divided by it again and checked for NaN and infinity in one
//! pass on the device (`check_finite_and_unscale`), the optimizer's step is skipped on the
//! device where one was found (a gated schedule), and the scale moves by Paddle's rule
//! (`update_loss_scaling`): halved after `decr_every_n_nan_or_inf` bad steps, doubled
//! after `incr_every_n_steps` good ones. Nothing is read back to the host in a step.

use crate::nn::StateDict;
use crate::ops::amp::{LossScalingAttrs, check_finite_and_unscale, update_loss_scaling};
use crate::optimizer::Optimizer;
use crate::{DType, Error, Place, Result, Tensor};

/// Where a scaler is in its step (Paddle's `OptimizerState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Nothing done to this step's gradients yet.
    Ready,
    /// `unscale_` ran.
    Unscaled,
    /// `step` ran; `update` comes next.
    Stepped,
}

/// The device tensors of a scaler: the scale and its step counters.
#[derive(Clone)]
struct Scale {
    scale: Tensor,
    good: Tensor,
    bad: Tensor,
}

/// `paddle.amp.GradScaler(enable, init_loss_scaling, incr_ratio, decr_ratio,
/// incr_every_n_steps, decr_every_n_nan_or_inf, use_dynamic_loss_scaling)`.
///
/// ```no_run
/// # use dygraph::{self as paddle, amp, nn::{self, Forward}, optimizer::{self, Optimizer}};
/// # fn demo(net: &nn::Linear, x: &paddle::Tensor) -> paddle::Result<()> {
/// let mut opt = optimizer::SGD::new(0.1, nn::Layer::parameters(net));
/// let mut scaler = amp::GradScaler::new().init_loss_scaling(1024.0);
/// let loss = amp::auto_cast(true).scope(|| net.forward(x)?.mean(&[], false))??;
/// let scaled = scaler.scale(&loss)?;
/// scaled.backward()?;
/// scaler.minimize(&mut opt, &scaled)?;
/// opt.clear_grad();
/// # Ok(()) }
/// ```
pub struct GradScaler {
    enable: bool,
    dynamic: bool,
    init_loss_scaling: f64,
    attrs: LossScalingAttrs,
    /// Created on the loss's place by the first `scale`.
    state: Option<Scale>,
    /// This step's flag, set by `unscale_`.
    found_inf: Option<Tensor>,
    stage: Stage,
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

impl GradScaler {
    /// A scaler with Paddle's defaults: enabled, initial scale 2¹⁶, ×2 after 2000 good
    /// steps, ×0.5 after every bad one, dynamic.
    pub fn new() -> Self {
        GradScaler {
            enable: true,
            dynamic: true,
            init_loss_scaling: 65536.0,
            attrs: LossScalingAttrs {
                incr_every_n_steps: 2000,
                decr_every_n_nan_or_inf: 1,
                incr_ratio: 2.0,
                decr_ratio: 0.5,
            },
            state: None,
            found_inf: None,
            stage: Stage::Ready,
        }
    }

    /// Whether the scaler acts (`enable`; disabled, it passes the loss and the step through).
    pub fn enable(mut self, on: bool) -> Self {
        self.enable = on;
        self
    }

    /// The initial scale (`init_loss_scaling`).
    pub fn init_loss_scaling(mut self, v: f64) -> Self {
        self.init_loss_scaling = v;
        self.state = None;
        self
    }

    /// The growth factor (`incr_ratio`, > 1).
    pub fn incr_ratio(mut self, v: f64) -> Self {
        self.attrs.incr_ratio = v;
        self
    }

    /// The shrink factor (`decr_ratio`, in (0, 1)).
    pub fn decr_ratio(mut self, v: f64) -> Self {
        self.attrs.decr_ratio = v;
        self
    }

    /// Good steps before the scale grows (`incr_every_n_steps`).
    pub fn incr_every_n_steps(mut self, n: i64) -> Self {
        self.attrs.incr_every_n_steps = n;
        self
    }

    /// Bad steps before the scale shrinks (`decr_every_n_nan_or_inf`).
    pub fn decr_every_n_nan_or_inf(mut self, n: i64) -> Self {
        self.attrs.decr_every_n_nan_or_inf = n;
        self
    }

    /// Whether the scale moves (`use_dynamic_loss_scaling`; otherwise it stays, and steps
    /// with an inf or a NaN are still skipped).
    pub fn use_dynamic_loss_scaling(mut self, on: bool) -> Self {
        self.dynamic = on;
        self
    }

    /// `is_enable()`.
    pub fn is_enable(&self) -> bool {
        self.enable
    }

    /// `is_use_dynamic_loss_scaling()`.
    pub fn is_use_dynamic_loss_scaling(&self) -> bool {
        self.dynamic
    }

    /// `get_init_loss_scaling()`.
    pub fn get_init_loss_scaling(&self) -> f64 {
        self.init_loss_scaling
    }

    /// `set_init_loss_scaling(v)`: the scale restarts at `v`.
    pub fn set_init_loss_scaling(&mut self, v: f64) {
        self.init_loss_scaling = v;
        self.state = None;
    }

    /// `get_incr_ratio()`.
    pub fn get_incr_ratio(&self) -> f64 {
        self.attrs.incr_ratio
    }

    /// `get_decr_ratio()`.
    pub fn get_decr_ratio(&self) -> f64 {
        self.attrs.decr_ratio
    }

    /// `get_incr_every_n_steps()`.
    pub fn get_incr_every_n_steps(&self) -> i64 {
        self.attrs.incr_every_n_steps
    }

    /// `get_decr_every_n_nan_or_inf()`.
    pub fn get_decr_every_n_nan_or_inf(&self) -> i64 {
        self.attrs.decr_every_n_nan_or_inf
    }

    /// The current scale, read back from the device (the initial one before the first step).
    pub fn get_loss_scaling(&self) -> Result<f64> {
        match &self.state {
            Some(s) => Ok(s.scale.to_f64_vec()?.first().copied().unwrap_or(self.init_loss_scaling)),
            None => Ok(self.init_loss_scaling),
        }
    }

    /// The flag of the current step (bool `[1]`, on the device): whether `unscale_` found an
    /// inf or a NaN. `None` before `unscale_`/`step`/`minimize` of this step.
    pub fn found_inf(&self) -> Option<&Tensor> {
        self.found_inf.as_ref()
    }

    fn check_settings(&self) -> Result<()> {
        const OP: &str = "GradScaler";
        let s = self.init_loss_scaling;
        if !(s.is_finite() && s > 0.0) {
            return Err(Error::invalid(OP, format!("init_loss_scaling must be finite and positive, got {s}")));
        }
        Ok(())
    }

    /// The device tensors on `place`, created at the first use (and moved if the loss moves).
    fn state_on(&mut self, place: Place) -> Result<&Scale> {
        self.check_settings()?;
        let fresh = || -> Result<Scale> {
            Ok(Scale {
                scale: crate::full_on([1], self.init_loss_scaling, DType::Float32, place)?,
                good: crate::zeros_on([1], DType::Int32, place)?,
                bad: crate::zeros_on([1], DType::Int32, place)?,
            })
        };
        let state = match self.state.take() {
            Some(s) if s.scale.place() == place => s,
            Some(s) => Scale { scale: s.scale.to(place)?, good: s.good.to(place)?, bad: s.bad.to(place)? },
            None => fresh()?,
        };
        Ok(self.state.insert(state))
    }

    /// `scale(loss)`: the loss (in float32) times the scale, to run backward from. For a
    /// static program's loss the scale and its counters are persistable variables of the
    /// program (initialised by its startup program).
    pub fn scale(&mut self, loss: &Tensor) -> Result<Tensor> {
        if !self.enable {
            return Ok(loss.clone());
        }
        let scale = if loss.is_static_var() {
            self.static_state(loss)?.scale.reshape(&[] as &[usize])?
        } else {
            self.state_on(loss.place())?.scale.reshape(&[] as &[usize])?
        };
        loss.cast(DType::Float32)?.mul(&scale)
    }

    /// The scale as a program's persistable variable, once `scale` made it for a program's
    /// loss.
    pub(crate) fn scale_var(&self) -> Option<Tensor> {
        self.state.as_ref().map(|s| s.scale.clone()).filter(|s| s.is_static_var())
    }

    /// The persistable scale and counters of `loss`'s program, made at the first call.
    fn static_state(&mut self, loss: &Tensor) -> Result<&Scale> {
        self.check_settings()?;
        let program = loss.var_ref().map(|v| v.program.clone());
        let same = |s: &Scale| s.scale.var_ref().zip(program.as_ref()).is_some_and(|(v, p)| v.program.same_program(p));
        if !self.state.as_ref().is_some_and(same) {
            let Some(program) = program else {
                return Err(Error::invalid("GradScaler.scale", "the loss is not a program's variable"));
            };
            let init = self.init_loss_scaling;
            let var = |what: &str, dtype: DType, value: f64| {
                let name = program.unique_name(what);
                crate::static_::create_persistable(&name, &[1], dtype, crate::static_::VarKind::Plain, || {
                    crate::full([1], value, dtype)
                })
            };
            self.state = Some(Scale {
                scale: var("loss_scaling", DType::Float32, init)?,
                good: var("num_good_steps", DType::Int32, 0.0)?,
                bad: var("num_bad_steps", DType::Int32, 0.0)?,
            });
        }
        self.state.as_ref().ok_or_else(|| Error::invalid("GradScaler.scale", "no state"))
    }

    /// `unscale_(optimizer)`: divides the optimizer's gradients by the scale in place and
    /// sets this step's flag, once per step.
    pub fn unscale_(&mut self, optimizer: &mut dyn Optimizer) -> Result<()> {
        const OP: &str = "GradScaler.unscale_";
        if !self.enable {
            return Ok(());
        }
        match self.stage {
            Stage::Ready => {}
            Stage::Unscaled => {
                return Err(Error::invalid(OP, "unscale_() has already been called since the last update()"));
            }
            Stage::Stepped => return Err(Error::invalid(OP, "unscale_() is being called after step()")),
        }
        let params = optimizer.parameter_list();
        let grads: Vec<Tensor> = params.iter().filter(|p| !p.stop_gradient()).filter_map(Tensor::grad).collect();
        let place = grads.first().map(Tensor::place).or_else(|| self.state.as_ref().map(|s| s.scale.place()));
        let place = place.unwrap_or(Place::Cpu);
        let scale = self.state_on(place)?.scale.clone();
        let found = crate::zeros_on([1], DType::Bool, place)?;
        let _no_grad = crate::no_grad_guard();
        if !grads.is_empty() {
            check_finite_and_unscale(&grads.iter().collect::<Vec<_>>(), &scale, &found)?;
        }
        self.found_inf = Some(found);
        self.stage = Stage::Unscaled;
        Ok(())
    }

    /// `step(optimizer)`: unscales (unless `unscale_` ran) and updates the parameters, the
    /// update skipped on the device where a gradient held an inf or a NaN.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) -> Result<()> {
        if !self.enable {
            return optimizer.step();
        }
        if self.stage == Stage::Stepped {
            return Err(Error::invalid("GradScaler.step", "step() has already been called since the last update()"));
        }
        if self.stage == Stage::Ready {
            self.unscale_(optimizer)?;
        }
        let found = self.found_inf.clone().ok_or_else(|| Error::invalid("GradScaler.step", "no flag"))?;
        optimizer.step_unless(&found)?;
        self.stage = Stage::Stepped;
        Ok(())
    }

    /// `update()`: moves the scale by this step's flag (when dynamic) and readies the next
    /// step.
    pub fn update(&mut self) -> Result<()> {
        if !self.enable {
            return Ok(());
        }
        if let (true, Some(found), Some(s)) = (self.dynamic, &self.found_inf, &self.state) {
            let _no_grad = crate::no_grad_guard();
            update_loss_scaling(found, &s.scale, &s.good, &s.bad, &self.attrs)?;
        }
        self.found_inf = None;
        self.stage = Stage::Ready;
        Ok(())
    }

    /// `minimize(optimizer, scaled_loss)`: `step` then `update` (eager mode: backward has
    /// run, as in Paddle's dygraph).
    pub fn minimize(&mut self, optimizer: &mut dyn Optimizer, scaled_loss: &Tensor) -> Result<()> {
        if scaled_loss.is_static_var() {
            return self.minimize_static(optimizer, scaled_loss);
        }
        self.step(optimizer)?;
        self.update()
    }

    /// Static mode: appends the backward pass, the unscale and check of every gradient, the
    /// scale's update and the updates gated by the flag (Paddle's static
    /// `OptimizerWithMixedPrecision`): each run of the program does a whole scaled step on
    /// the device.
    fn minimize_static(&mut self, optimizer: &mut dyn Optimizer, scaled_loss: &Tensor) -> Result<()> {
        const OP: &str = "GradScaler.minimize";
        if !self.enable {
            return optimizer.minimize(scaled_loss);
        }
        let state =
            self.state.clone().filter(|s| s.scale.is_static_var()).ok_or_else(|| {
                Error::invalid(OP, "scale() the program's loss first: the scale lives in the program")
            })?;
        let (dynamic, attrs) = (self.dynamic, self.attrs.clone());
        optimizer.minimize_gated(scaled_loss, &mut |grads| {
            let found = crate::zeros([1], DType::Bool)?;
            check_finite_and_unscale(&grads.iter().collect::<Vec<_>>(), &state.scale, &found)?;
            if dynamic {
                update_loss_scaling(&found, &state.scale, &state.good, &state.bad, &attrs)?;
            }
            Ok(Some(found))
        })
    }

    /// `state_dict()`: the scale and settings under Paddle's keys (empty when disabled).
    pub fn state_dict(&self) -> Result<StateDict> {
        let mut sd = StateDict::new();
        if !self.enable {
            return Ok(sd);
        }
        let scalar = |v: f64| Tensor::from_vec_on(vec![v], [1], Place::Cpu);
        let count = |t: Option<&Tensor>| -> Result<f64> {
            Ok(t.map(|t| t.to_f64_vec()).transpose()?.and_then(|v| v.first().copied()).unwrap_or(0.0))
        };
        sd.insert("scale", Tensor::from_vec_on(vec![self.get_loss_scaling()? as f32], [1], Place::Cpu)?);
        sd.insert("incr_ratio", scalar(self.attrs.incr_ratio)?);
        sd.insert("decr_ratio", scalar(self.attrs.decr_ratio)?);
        sd.insert("incr_every_n_steps", Tensor::from_vec_on(vec![self.attrs.incr_every_n_steps], [1], Place::Cpu)?);
        sd.insert(
            "decr_every_n_nan_or_inf",
            Tensor::from_vec_on(vec![self.attrs.decr_every_n_nan_or_inf], [1], Place::Cpu)?,
        );
        sd.insert(
            "incr_count",
            Tensor::from_vec_on(vec![count(self.state.as_ref().map(|s| &s.good))? as i64], [1], Place::Cpu)?,
        );
        sd.insert(
            "decr_count",
            Tensor::from_vec_on(vec![count(self.state.as_ref().map(|s| &s.bad))? as i64], [1], Place::Cpu)?,
        );
        sd.insert("use_dynamic_loss_scaling", Tensor::from_vec_on(vec![self.dynamic], [1], Place::Cpu)?);
        Ok(sd)
    }

    /// `load_state_dict(state)`: restores what `state_dict` wrote.
    pub fn load_state_dict(&mut self, state: &StateDict) -> Result<()> {
        const OP: &str = "GradScaler.load_state_dict";
        if state.keys().is_empty() {
            return Err(Error::invalid(OP, "the state is empty: it was saved by a disabled GradScaler"));
        }
        let get = |k: &str| -> Result<f64> {
            let t = state.get(k).ok_or_else(|| Error::invalid(OP, format!("missing key {k}")))?;
            t.to_f64_vec()?.first().copied().ok_or_else(|| Error::invalid(OP, format!("{k} is empty")))
        };
        let (scale, good, bad) = (get("scale")?, get("incr_count")?, get("decr_count")?);
        self.attrs = LossScalingAttrs {
            incr_every_n_steps: get("incr_every_n_steps")? as i64,
            decr_every_n_nan_or_inf: get("decr_every_n_nan_or_inf")? as i64,
            incr_ratio: get("incr_ratio")?,
            decr_ratio: get("decr_ratio")?,
        };
        self.dynamic = get("use_dynamic_loss_scaling")? != 0.0;
        self.init_loss_scaling = scale;
        let place = self.state.as_ref().map_or(Place::Cpu, |s| s.scale.place());
        self.state = Some(Scale {
            scale: crate::full_on([1], scale, DType::Float32, place)?,
            good: crate::full_on([1], good, DType::Int32, place)?,
            bad: crate::full_on([1], bad, DType::Int32, place)?,
        });
        self.found_inf = None;
        self.stage = Stage::Ready;
        Ok(())
    }
}
