//! The dispatcher: every op call walks a stack of modes, outermost first, down to the kernel
//! of its inputs' place. A mode is one small module behind [`Mode`]: it may act before the
//! modes under it, after them, or instead of them. The walk, outermost first:
//!
//! ```text
//! Autocast   amp::auto_cast: casts the inputs to the dtype the op's AMP list says, reruns (instead)
//! Record     records the autograd node of a call whose inputs need gradients (after)
//! Build      appends the call to a static Program instead of running it (instead)
//! Capture    appends it to the program a `jit::to_static` trace builds (instead)
//! Meta       meta tensors in, meta tensors out, no kernel (instead)
//! Check      FLAGS_check_nan_inf: the outputs' NaN/Inf check (after)
//! Shadow     FLAGS_shadow: the GPU op rerun on the CPU and compared (around)
//! Profile    times CPU kernels while a profiler is on (around)
//! the kernel of the place (`apply.rs`)
//! ```
//!
//! Each mode is entered by its guard or flag and keeps its state where it is per thread
//! (`program_guard`, `to_static`) or per process (`set_flags`, `Profiler::start`); outside
//! it, a mode passes the call on. The modes of this floor are built in (the files of this
//! folder); the modes of upper floors (static building and tracing) are installed into
//! their slot when their state is first entered, so the dispatcher names none of them and
//! `apply` names no mode at all.

pub(crate) mod autocast;
pub(crate) mod check;
pub(crate) mod meta;
pub(crate) mod profile;
pub(crate) mod record;
pub(crate) mod shadow;

use std::sync::OnceLock;

use super::RegisteredOp;
use super::attrs::AttrMap;
use crate::tensor::TensorMeta;
use crate::{Result, Tensor};

/// The backward rule of one recorded call: the gradients of its differentiable outputs and
/// which inputs need one, to the inputs' gradients.
pub(crate) type BackwardRule = Box<dyn Fn(&[Tensor], &[bool]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static>;

/// One op call as the modes see it. The op's typed attributes and plan stay inside; what
/// the modes need is asked for here.
pub(crate) trait Call {
    /// The op.
    fn op(&self) -> &'static dyn RegisteredOp;
    /// The inputs.
    fn inputs(&self) -> &[&Tensor];
    /// The attributes as a flat map.
    fn attr_map(&self) -> AttrMap;
    /// The outputs' shapes, dtypes and places: meta inference, run once (every validation).
    fn outs(&mut self) -> Result<&[TensorMeta]>;
    /// The inputs' place check (all on one place unless the op moves data between places).
    fn check_places(&self) -> Result<()>;
    /// Runs the op's kernel of the inputs' place.
    fn kernel(&mut self) -> Result<Vec<Tensor>>;
    /// The op's backward rule over these inputs and `outputs` (kept weakly where they are
    /// differentiable); `None` for an op without one.
    fn backward_rule(&mut self, outputs: &[Tensor]) -> Option<BackwardRule>;
    /// The op again with the same attributes on `inputs`, its `place` attribute (creation
    /// ops) pointed at `place`, through the whole walk.
    fn rerun(&self, inputs: &[&Tensor], place: crate::Place) -> Result<Vec<Tensor>>;
}

/// One mode of the walk.
pub(crate) trait Mode: Sync {
    /// Runs `call`: itself, or by handing it to the modes under it with `next.run(call)`.
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>>;
}

/// The modes under the current one, then the kernel.
pub(crate) struct Next<'a> {
    modes: &'a [&'static dyn Mode],
}

impl Next<'_> {
    /// Hands `call` to the next mode down (the kernel after the last).
    pub(crate) fn run(self, call: &mut dyn Call) -> Result<Vec<Tensor>> {
        match self.modes.split_first() {
            Some((mode, rest)) => mode.run(call, Next { modes: rest }),
            None => call.kernel(),
        }
    }
}

/// The slots of the walk, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Autocast,
    Record,
    Build,
    Capture,
    Meta,
    Check,
    Shadow,
    Profile,
}

const SLOTS: [Slot; 8] =
    [Slot::Autocast, Slot::Record, Slot::Build, Slot::Capture, Slot::Meta, Slot::Check, Slot::Shadow, Slot::Profile];

/// Modes installed by upper floors, by slot.
static INSTALLED: [OnceLock<&'static dyn Mode>; 8] = [const { OnceLock::new() }; 8];

/// The built-in mode of `slot`, if it has one.
fn built_in(slot: Slot) -> Option<&'static dyn Mode> {
    match slot {
        Slot::Autocast => Some(&autocast::AUTOCAST),
        Slot::Record => Some(&record::RECORD),
        Slot::Meta => Some(&meta::META),
        Slot::Check => Some(&check::CHECK),
        Slot::Shadow => Some(&shadow::SHADOW),
        Slot::Profile => Some(&profile::PROFILE),
        Slot::Build | Slot::Capture => None,
    }
}

/// Installs `mode` into `slot` (once; later calls keep the first). Upper floors call it when
/// their mode's state is first entered.
pub(crate) fn install(slot: Slot, mode: &'static dyn Mode) {
    let _ = INSTALLED[slot as usize].set(mode);
}

/// Walks the modes for `call`.
pub(crate) fn run(call: &mut dyn Call) -> Result<Vec<Tensor>> {
    let mut stack: [Option<&'static dyn Mode>; 8] = [None; 8];
    let mut n = 0;
    for slot in SLOTS {
        if let Some(m) = INSTALLED[slot as usize].get().copied().or_else(|| built_in(slot)) {
            stack[n] = Some(m);
            n += 1;
        }
    }
    let modes: [&'static dyn Mode; 8] = stack.map(|m| m.unwrap_or(&PASS));
    Next { modes: &modes[..n] }.run(call)
}

/// A mode that passes every call on (fills the unused end of the stack array).
struct Pass;

impl Mode for Pass {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        next.run(call)
    }
}

static PASS: Pass = Pass;
