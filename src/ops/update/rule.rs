//! What one update rule states: its hyper-parameters (the implementing type), per-parameter
//! states, attributes, checks, the per-element step the CPU kernel runs, and its kernel's
//! setting words. The generic ops (`single.rs`, `merged.rs`) and the optimizers
//! (`crate::optimizer`) are written once over this trait.

use std::fmt::Debug;

use super::{MergedUpdateOp, UpdateOp};
use crate::ops::AttrMap;
use crate::{Error, Result, Tensor};

/// One update rule (`#[doc(hidden)]`: the optimizers' settings types implement it).
pub trait UpdateRule: Clone + PartialEq + Debug + Send + Sync + 'static {
    /// The op's name (Paddle's): `"adam"`.
    const NAME: &'static str;
    /// The per-parameter states, in the kernel's binding order (also their names in an
    /// optimizer's state dict: `"linear.weight.moment1"`).
    const STATES: &'static [&'static str];

    /// The rule's registry entries.
    fn ops() -> RuleOps<Self>;

    /// The hyper-parameters as attributes, added to `m` (which holds `lr` and
    /// `weight_decay`).
    fn to_attrs(&self, m: AttrMap) -> AttrMap;

    /// Parses what [`UpdateRule::to_attrs`] wrote.
    fn from_attrs(op: &'static str, m: &AttrMap) -> Result<Self>;

    /// Errors for hyper-parameters that would turn parameters into NaN or move them uphill.
    fn validate(&self, check: &Checks) -> Result<()>;

    /// The rule for the `step`-th update (1-based): the step-dependent factors (β powers).
    fn at_step(&self, step: u64) -> Self {
        let _ = step;
        self.clone()
    }

    /// The bases of the β powers a schedule tensor carries (`(β1, β2)` for Adam; zeros for
    /// rules without them).
    fn power_bases(&self) -> (f64, f64) {
        (0.0, 0.0)
    }

    /// The β powers a schedule tensor carries for the `step`-th update (`[lr, β1ᵗ, β2ᵗ]`
    /// past the learning rate): the bases to the `step`-th power.
    fn schedule_powers(&self, step: u64) -> (f64, f64) {
        let (b1, b2) = self.power_bases();
        (b1.powi(step as i32), b2.powi(step as i32))
    }

    /// Takes the β powers of a schedule tensor in place of the attributes'.
    fn scheduled(&mut self, beta1_pow: f64, beta2_pow: f64) {
        let _ = (beta1_pow, beta2_pow);
    }

    /// The kernel's setting words after the learning rate and the L2 weight decay (floats
    /// as float32 bits), in the order the rule's `.wgsl` reads them.
    fn words(&self) -> Vec<u32>;

    /// The per-call constants of [`UpdateRule::step`].
    type Step: Sync;

    /// The constants of one call with learning rate `lr` and L2 weight decay `wd`, computed
    /// once rather than per element.
    fn prepare(&self, lr: f64, wd: f64) -> Self::Step;

    /// One element in float64: parameter `p`, gradient `g`, the states `s` (updated in
    /// place); returns the new parameter.
    fn step(c: &Self::Step, p: f64, g: f64, s: &mut [f64]) -> f64;

    /// Work after the kernel on one parameter, in tensor ops so that it runs eagerly and
    /// appends to a static program alike (Lamb's trust ratio); `lr` makes the parameter's
    /// learning rate as a tensor, only when a rule asks for it.
    fn finish(&self, param: &Tensor, states: &[Tensor], lr: &dyn Fn() -> Result<Tensor>) -> Result<()> {
        let _ = (param, states, lr);
        Ok(())
    }
}

/// A rule's registry entries: its single update and, when its kernel updates several
/// parameters in one dispatch, its merged update.
pub struct RuleOps<R: UpdateRule> {
    pub(crate) single: &'static UpdateOp<R>,
    pub(crate) merged: Option<&'static MergedUpdateOp<R>>,
}

/// The range checks of hyper-parameters, naming the op.
pub struct Checks {
    pub(crate) op: &'static str,
}

impl Checks {
    fn check(&self, name: &str, v: f64, ok: bool, range: &str) -> Result<()> {
        if ok && v.is_finite() {
            Ok(())
        } else {
            Err(Error::invalid(self.op, format!("{name} must be {range}, got {v}")))
        }
    }

    /// `v` finite and at least 0.
    pub fn non_negative(&self, name: &str, v: f64) -> Result<()> {
        self.check(name, v, v >= 0.0, "finite and non-negative")
    }

    /// `v` in `[0, 1)` (decay rates, β powers).
    pub fn unit(&self, name: &str, v: f64) -> Result<()> {
        self.check(name, v, (0.0..1.0).contains(&v), "in [0, 1)")
    }
}

/// `v` as float32 bits, a kernel setting word.
pub(crate) fn word(v: f64) -> u32 {
    (v as f32).to_bits()
}
