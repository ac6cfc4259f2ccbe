//! Automatic mixed precision (`paddle.amp`): [`auto_cast`] runs each op in the dtype Paddle
//! 3.x's lists give it (float16 for products, float32 for the numerically delicate ops),
//! on every place, in eager code, while a static program is built and inside a `to_static`
//! trace.
//!
//! ```no_run
//! # use dygraph::{self as paddle, nn::{self, Forward}};
//! # fn demo(net: &nn::Linear, x: &paddle::Tensor) -> paddle::Result<()> {
//! let y = paddle::amp::auto_cast(true).level("O1").scope(|| net.forward(x))??;
//! assert_eq!(y.dtype(), paddle::DType::Float32); // matmul ran in float16, the bias add promoted
//! # Ok(()) }
//! ```
//!
//! Each op's list is declared with the op ([`crate::ops::registry::AmpList`]); the table of
//! every op is in `docs/amp.md`, and a test checks it against Paddle's lists. On the CPU,
//! where Paddle turns float16 autocast off, it runs here too (float16 arithmetic through
//! float32 there).

mod decorate;
mod scaler;
pub mod static_;

use std::collections::BTreeSet;

pub use decorate::{Decorate, decorate};
pub use scaler::GradScaler;

pub use crate::ops::registry::AmpList;
pub use crate::ops::registry::dispatch::autocast::{AmpLevel, AmpState, AutocastScope};
use crate::ops::registry::dispatch::autocast::{current, enter, traced};
use crate::{DType, Error, Result};

/// Paddle's op names that are spelled differently here (the lists of `amp_lists.py` use
/// the legacy names): a custom list may use either.
const PADDLE_ALIASES: &[(&str, &str)] = &[
    ("matmul_v2", "matmul"),
    ("reduce_sum", "sum"),
    ("reduce_mean", "mean"),
    ("reduce_prod", "prod"),
    ("softmax_with_cross_entropy", "cross_entropy_with_softmax"),
    ("lookup_table_v2", "index_gather"),
    ("lookup_table", "index_gather"),
];

/// The settings of an [`auto_cast`] scope, with Paddle's defaults: level O1, float16, the
/// default lists, `use_promote`.
#[derive(Clone, Debug)]
pub struct AutoCast {
    enable: bool,
    white: Vec<String>,
    black: Vec<String>,
    level: String,
    dtype: String,
    use_promote: bool,
}

/// `paddle.amp.auto_cast(enable, ...)`: the settings of a mixed-precision scope, entered with
/// [`AutoCast::enter`] (a guard) or [`AutoCast::scope`] (a closure).
pub fn auto_cast(enable: bool) -> AutoCast {
    AutoCast {
        enable,
        white: Vec::new(),
        black: Vec::new(),
        level: "O1".into(),
        dtype: "float16".into(),
        use_promote: true,
    }
}

impl AutoCast {
    /// Ops to run in the low dtype whatever their list (`custom_white_list`).
    pub fn custom_white_list<S: AsRef<str>>(mut self, ops: impl IntoIterator<Item = S>) -> Self {
        self.white = ops.into_iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// Ops to run in float32 whatever their list (`custom_black_list`).
    pub fn custom_black_list<S: AsRef<str>>(mut self, ops: impl IntoIterator<Item = S>) -> Self {
        self.black = ops.into_iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// `"O0"`, `"OD"`, `"O1"` (default) or `"O2"`.
    pub fn level(mut self, level: &str) -> Self {
        self.level = level.to_string();
        self
    }

    /// `"float16"` (default) or `"bfloat16"`.
    pub fn dtype(mut self, dtype: &str) -> Self {
        self.dtype = dtype.to_string();
        self
    }

    /// At O2, whether a gray op with a float32 input runs in float32 (default true; O1
    /// always promotes).
    pub fn use_promote(mut self, on: bool) -> Self {
        self.use_promote = on;
        self
    }

    /// The settings, checked: the level and dtype known, the custom lists naming registered
    /// ops (Paddle's legacy names accepted) and not overlapping.
    pub fn state(&self) -> Result<AmpState> {
        const OP: &str = "auto_cast";
        let level: AmpLevel = self.level.parse()?;
        let dtype = match self.dtype.to_ascii_lowercase().as_str() {
            "float16" => DType::Float16,
            "bfloat16" => DType::BFloat16,
            other => {
                return Err(Error::invalid(
                    OP,
                    format!("if enable amp, dtype should be 'float16' or 'bfloat16', got {other:?}"),
                ));
            }
        };
        let names = |list: &[String]| -> Result<BTreeSet<String>> { list.iter().map(|n| op_name(n)).collect() };
        let (white, black) = (names(&self.white)?, names(&self.black)?);
        if let Some(both) = white.intersection(&black).next() {
            return Err(Error::invalid(OP, format!("custom white list overlaps custom black list at {both:?}")));
        }
        let level = if self.enable { level } else { AmpLevel::O0 };
        Ok(AmpState { level, dtype, white, black, use_promote: self.use_promote })
    }

    /// Enters the scope until the guard drops.
    pub fn enter(&self) -> Result<AutocastScope> {
        Ok(enter(self.state()?))
    }

    /// Runs `f` inside the scope.
    pub fn scope<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        let _scope = self.enter()?;
        Ok(f())
    }
}

/// The registered op a custom list entry names.
fn op_name(name: &str) -> Result<String> {
    let ours = PADDLE_ALIASES.iter().find(|(paddle, _)| *paddle == name).map_or(name, |(_, ours)| ours);
    crate::ops::registry::find_op(ours).map(|op| op.name().to_string()).map_err(|_| {
        Error::invalid("auto_cast", format!("the custom list names {name:?}, which is not a registered op"))
    })
}

/// The settings of the innermost `auto_cast` scope on this thread (`None` outside one).
pub fn amp_state() -> Option<AmpState> {
    current()
}

/// True inside an enabled `auto_cast` scope at any level but O0.
pub fn is_auto_cast_enabled() -> bool {
    current().is_some_and(|s| s.level != AmpLevel::O0)
}

/// Runs `f` and lists the ops it called inside `auto_cast` scopes, each with the dtype of its
/// first output (what ran in float16 and what in float32), in call order.
pub fn op_dtypes<T>(f: impl FnOnce() -> T) -> (T, Vec<(&'static str, DType)>) {
    traced(f)
}

/// `op_dtypes`'s list in runs: `conv2d float16, add float32 ×2, ...` (consecutive repeats of
/// one op and dtype counted).
pub fn describe_op_dtypes(calls: &[(&'static str, DType)]) -> String {
    let mut runs: Vec<(&str, DType, usize)> = Vec::new();
    for &(op, dtype) in calls {
        match runs.last_mut() {
            Some((o, d, n)) if *o == op && *d == dtype => *n += 1,
            _ => runs.push((op, dtype, 1)),
        }
    }
    let parts: Vec<String> =
        runs.iter().map(|(op, d, n)| if *n > 1 { format!("{op} {d} ×{n}") } else { format!("{op} {d}") }).collect();
    parts.join(", ")
}

/// `state` with every float tensor cast to `dtype` (what Paddle's `decorate(save_dtype=...)`
/// hook does to `state_dict()`): an O2 model saved as float32 loads into a float32 model.
pub fn cast_state_dict(state: &crate::nn::StateDict, dtype: DType) -> Result<crate::nn::StateDict> {
    let mut out = crate::nn::StateDict::new();
    for (name, t) in state.iter() {
        let t = if t.dtype().is_float() && t.dtype() != dtype { t.cast(dtype)? } else { t.clone() };
        out.insert(name.to_string(), t);
    }
    Ok(out)
}
