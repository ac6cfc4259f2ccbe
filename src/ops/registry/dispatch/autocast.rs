//! Autocast (`amp::auto_cast`, Paddle's `amp_guard`): inside the guard, each op call picks
//! the dtype it runs in from its place in Paddle 3.x's lists ([`AmpList`], declared with the
//! op; the user's custom lists first), casts its float inputs to it with ordinary `cast`
//! calls and runs on the cast inputs. The mode is the outermost of the walk, so the casts
//! and the op go through every mode below: autograd records the casts (gradients flow back
//! into float32 parameters), a static program being built appends them, a trace captures
//! them.
//!
//! Paddle's rule (`GetAmpDestDtype` of its eager AMP), for the low dtype `L`:
//!
//! ```text
//! level  white  white·f16  black  black·f16        gray                   keep
//! O0     —      —          —      —                —                      —
//! OD     L      L (f16)    f32    f32              f32                    —
//! O1     L      L (f16)    f32    f32 (f16)        widest input           —
//! O2     L      L (f16)    f32    gray             widest (use_promote)   —
//!                                                  or L (promote off)
//! ```
//!
//! "widest input": float32 if any float input is float32 (input 0 alone for the norms),
//! else `L`. float64 and integer inputs are never cast, and an op updating an input in
//! place (optimizer updates, `assign_`) is kept as it is. Backward rules run without
//! autocast (`suspended`), in the dtypes their forward ran in, as Paddle's grad nodes do.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

use super::{Call, Mode, Next};
use crate::ops::registry::{AmpList, RegisteredOp};
use crate::{DType, Error, Result, Tensor};

/// Paddle's AMP levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AmpLevel {
    /// Off: every op runs in its inputs' dtypes.
    O0,
    /// Only the white list in the low dtype, everything else in float32.
    OD,
    /// Mixed precision: the white list low, the black list float32, the rest promoted.
    O1,
    /// "Pure" low precision: everything but the black list low (with parameters cast by
    /// `amp::decorate`).
    O2,
}

impl std::str::FromStr for AmpLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "O0" => Ok(AmpLevel::O0),
            "OD" => Ok(AmpLevel::OD),
            "O1" => Ok(AmpLevel::O1),
            "O2" => Ok(AmpLevel::O2),
            _ => Err(Error::invalid("auto_cast", format!("level should be O0, OD, O1 or O2, got {s:?}"))),
        }
    }
}

/// The settings of one `auto_cast` scope.
#[derive(Clone, Debug, PartialEq)]
pub struct AmpState {
    /// The level.
    pub level: AmpLevel,
    /// The low dtype.
    pub dtype: DType,
    /// Ops forced into the low dtype (the user's `custom_white_list`).
    pub white: BTreeSet<String>,
    /// Ops forced into float32 (the user's `custom_black_list`).
    pub black: BTreeSet<String>,
    /// Gray ops at O2 take the widest input's dtype (always so at O1).
    pub use_promote: bool,
}

impl AmpState {
    /// The dtype `op` runs in under these settings, for float inputs of `dtypes` (input 0's
    /// first); `None` runs it as it comes.
    pub fn dtype_for(&self, op: &dyn RegisteredOp, dtypes: &[DType]) -> Option<DType> {
        if self.level == AmpLevel::O0 || !op.inplace(dtypes.len()).is_empty() {
            return None;
        }
        let facts = op.facts();
        let list = if self.white.contains(op.name()) {
            AmpList::White
        } else if self.black.contains(op.name()) {
            AmpList::Black
        } else {
            facts.amp
        };
        let f16 = self.dtype == DType::Float16;
        let gray = || {
            let promote = self.level != AmpLevel::O2 || self.use_promote;
            if self.level == AmpLevel::OD {
                DType::Float32
            } else if !promote {
                self.dtype
            } else {
                let considered = if facts.amp_by_first { &dtypes[..dtypes.len().min(1)] } else { dtypes };
                if considered.contains(&DType::Float32) { DType::Float32 } else { self.dtype }
            }
        };
        Some(match list {
            AmpList::Keep => return None,
            AmpList::White => self.dtype,
            AmpList::WhiteFloat16 if f16 => self.dtype,
            AmpList::Black => DType::Float32,
            AmpList::BlackFloat16 if f16 && self.level != AmpLevel::O2 => DType::Float32,
            AmpList::WhiteFloat16 | AmpList::BlackFloat16 | AmpList::Gray => gray(),
        })
    }
}

thread_local! {
    /// The innermost `auto_cast` scope of this thread.
    static STATE: RefCell<Option<Rc<AmpState>>> = const { RefCell::new(None) };
    /// Set while autocast's own casts and reruns, and backward rules, run.
    static SUSPENDED: Cell<bool> = const { Cell::new(false) };
    /// The calls made inside a scope while `traced` runs: each op and the dtype of its first
    /// output.
    static TRACE: RefCell<Option<Vec<(&'static str, DType)>>> = const { RefCell::new(None) };
}

/// Runs `f`, also returning every op it called inside an autocast scope with the dtype of
/// the op's first output (the casts autocast inserted are not listed).
pub fn traced<T>(f: impl FnOnce() -> T) -> (T, Vec<(&'static str, DType)>) {
    let previous = TRACE.with(|t| t.replace(Some(Vec::new())));
    let out = f();
    let calls = TRACE.with(|t| t.replace(previous)).unwrap_or_default();
    (out, calls)
}

fn note(op: &'static str, values: &Result<Vec<Tensor>>) {
    if let Ok(v) = values
        && let Some(first) = v.first()
    {
        TRACE.with(|t| {
            if let Some(list) = t.borrow_mut().as_mut() {
                list.push((op, first.dtype()));
            }
        });
    }
}

/// The innermost scope's settings on this thread.
pub fn current() -> Option<AmpState> {
    STATE.with(|s| s.borrow().as_deref().cloned())
}

/// Enters `state` until the returned guard drops (scopes nest; the previous one returns).
pub fn enter(state: AmpState) -> AutocastScope {
    let previous = STATE.with(|s| s.replace(Some(Rc::new(state))));
    AutocastScope { previous, _not_send: std::marker::PhantomData }
}

/// An `auto_cast` scope: the settings in force until it drops.
#[must_use = "autocast holds only while the scope lives"]
pub struct AutocastScope {
    previous: Option<Rc<AmpState>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for AutocastScope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        STATE.with(|s| *s.borrow_mut() = previous);
    }
}

/// Runs `f` with autocast off on this thread (backward rules, autocast's own calls).
pub(crate) fn suspended<T>(f: impl FnOnce() -> T) -> T {
    let was = SUSPENDED.with(|s| s.replace(true));
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SUSPENDED.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(was);
    f()
}

/// True for a dtype autocast converts (float64 and the integers stay).
fn castable(dtype: DType) -> bool {
    matches!(dtype, DType::Float16 | DType::BFloat16 | DType::Float32)
}

pub(crate) struct Autocast;

pub(crate) static AUTOCAST: Autocast = Autocast;

impl Mode for Autocast {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        if SUSPENDED.with(Cell::get) {
            return next.run(call);
        }
        let Some(state) = STATE.with(|s| s.borrow().clone()) else {
            return next.run(call);
        };
        let inputs = call.inputs();
        let floats: Vec<DType> = inputs.iter().map(|t| t.dtype()).filter(|d| castable(*d)).collect();
        let target = match state.dtype_for(call.op(), &floats) {
            Some(d) if floats.iter().any(|f| *f != d) => d,
            _ => {
                let values = suspended(|| next.run(call));
                note(call.op().name(), &values);
                return values;
            }
        };
        let values = suspended(|| {
            let cast: Vec<Tensor> = inputs
                .iter()
                .map(|t| if castable(t.dtype()) { t.cast(target) } else { Ok((*t).clone()) })
                .collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = cast.iter().collect();
            let place = inputs.first().map_or(crate::Place::Cpu, |t| t.place());
            call.rerun(&refs, place)
        });
        note(call.op().name(), &values);
        values
    }
}
