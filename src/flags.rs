//! Global debugging flags (Paddle's `paddle.set_flags` / `get_flags`) and what they switch
//! on. `FLAGS_check_nan_inf` (also `DYGRAPH_CHECK_NAN_INF`, read at first use) checks every
//! float output of every op, backward rules' ops included, and returns [`Error::NonFinite`]
//! at the first NaN or infinity, naming the op (`backward of <node>: <op>` inside a backward
//! rule), the output and its shape. Two levels:
//!
//! - `1`: CPU outputs are checked at once. A GPU output gets a small kernel recorded after
//!   its op that marks the first NaN/Inf in the device's error flag, and the next readback or
//!   `sync()` reports it (the element and its value): no wait per op. A static `Executor`
//!   keeps its replayed plans (the checks are dispatches like any other, so plans replay
//!   them) but does not fuse ops, so each is checked under its own name.
//! - `2` (the debug level): every output on either place is checked at once, with each
//!   input's shape and statistics in the message. The check is made of registered ops
//!   (`x − x` is NaN exactly where `x` is not finite; `any` of that) run without recording,
//!   and its one boolean is read back at once, so on a GPU every checked op waits for the
//!   device; a static `Executor` runs programs op by op (no replayed plans).

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::{DType, Error, Result, Tensor};

/// The flags `set_flags` and `get_flags` know.
const KNOWN: &str = "FLAGS_check_nan_inf, FLAGS_shadow";

/// 0: not read yet, else the level + 1 (1: off, 2: deferred on the GPU, 3: every op).
static CHECK_NAN_INF: AtomicU8 = AtomicU8::new(0);

thread_local! {
    /// Set while a check's own ops run, so they are not checked in turn.
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

/// `FLAGS_check_nan_inf`'s level from its value: 0 off, 1, or 2 (the debug level).
fn nan_level(v: &str) -> Option<u8> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(1),
        "2" => Some(2),
        "0" | "false" | "off" | "no" | "" => Some(0),
        _ => None,
    }
}

/// Sets flags by Paddle's names (`[("FLAGS_check_nan_inf", "1")]`), and dygraph's
/// `FLAGS_shadow` (`"cpu"` or `"off"`: the CPU shadow mode of [`crate::shadow`]). Unknown
/// names and values are `InvalidArgument` errors naming them.
pub fn set_flags(flags: &[(&str, &str)]) -> Result<()> {
    for &(name, value) in flags {
        match name {
            "FLAGS_check_nan_inf" => {
                let level = nan_level(value).ok_or_else(|| {
                    Error::invalid(
                        "set_flags",
                        format!("FLAGS_check_nan_inf takes 0, 1 (or true/false) or 2 (every op), got {value:?}"),
                    )
                })?;
                CHECK_NAN_INF.store(level + 1, Ordering::Relaxed);
            }
            "FLAGS_shadow" => {
                let on = crate::shadow::parse_setting(value).ok_or_else(|| {
                    Error::invalid("set_flags", format!("FLAGS_shadow takes \"cpu\" or \"off\", got {value:?}"))
                })?;
                crate::shadow::set_enabled(on);
            }
            other => {
                return Err(Error::invalid("set_flags", format!("unknown flag {other:?} (known: {KNOWN})")));
            }
        }
    }
    Ok(())
}

/// The current value of each named flag, as `set_flags` takes it.
pub fn get_flags(names: &[&str]) -> Result<Vec<(String, String)>> {
    names
        .iter()
        .map(|&n| match n {
            "FLAGS_check_nan_inf" => Ok((n.to_string(), nan_inf_level().to_string())),
            "FLAGS_shadow" => Ok((n.to_string(), if crate::shadow::enabled() { "cpu" } else { "off" }.to_string())),
            other => Err(Error::invalid("get_flags", format!("unknown flag {other:?} (known: {KNOWN})"))),
        })
        .collect()
}

/// `FLAGS_check_nan_inf`'s level (the flag, else the environment, read once): 0 off, 1, 2.
pub(crate) fn nan_inf_level() -> u8 {
    match CHECK_NAN_INF.load(Ordering::Relaxed) {
        0 => {
            let level = std::env::var("DYGRAPH_CHECK_NAN_INF").ok().and_then(|v| nan_level(&v)).unwrap_or(0);
            // A `set_flags` racing this first read wins.
            let _ = CHECK_NAN_INF.compare_exchange(0, level + 1, Ordering::Relaxed, Ordering::Relaxed);
            CHECK_NAN_INF.load(Ordering::Relaxed) - 1
        }
        v => v - 1,
    }
}

/// Whether ops' outputs are checked.
pub(crate) fn nan_inf_checking() -> bool {
    nan_inf_level() > 0
}

/// Whether each op must run through `apply` on its own (NaN checking at the debug level, or
/// the CPU shadow): a static `Executor` then runs programs op by op, with no replayed plan.
pub(crate) fn per_op_checks() -> bool {
    nan_inf_level() == 2 || crate::shadow::enabled()
}

/// Whether ops are checked under their own names (any NaN check, or the shadow): a static
/// `Executor` then fuses nothing.
pub(crate) fn checks_by_op_name() -> bool {
    nan_inf_checking() || crate::shadow::enabled()
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::Float16 | DType::Float32 | DType::Float64)
}

/// Whether `t` holds a NaN or an infinity, by registered ops that are not checked in turn.
fn has_non_finite(t: &Tensor) -> Result<bool> {
    let diff = t.subtract(t)?;
    let bad = diff.not_equal_scalar(0)?.any(&[], false)?;
    Ok(bad.to_vec::<bool>()?.first().copied().unwrap_or(false))
}

/// `shape dtype: min .. max, n NaN, m ±inf` of a tensor (read back to the host).
fn describe(t: &Tensor) -> String {
    let base = format!("{:?} {}", t.shape(), t.dtype());
    match t.to_f64_vec() {
        Ok(v) => {
            let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
            let nan = v.iter().filter(|x| x.is_nan()).count();
            let inf = v.iter().filter(|x| x.is_infinite()).count();
            let (lo, hi) = finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
            let mean = if finite.is_empty() { f64::NAN } else { finite.iter().sum::<f64>() / finite.len() as f64 };
            format!("{base}: finite min {lo:.6e}, max {hi:.6e}, mean {mean:.6e}; {nan} NaN, {inf} ±inf")
        }
        Err(e) => format!("{base}: ({e})"),
    }
}

/// Runs `f` without checking the outputs of the ops it runs (an op's internal steps, such as
/// the casts around a float16 op computed in float32: the op's own outputs are checked).
pub(crate) fn without_checks<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CHECKING.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(CHECKING.with(|c| c.replace(true)));
    f()
}

/// The check after an eager op `op` computed `outputs` from `inputs` and wrote the inputs
/// at positions `inplace`.
pub(crate) fn check_outputs(op: &'static str, inputs: &[&Tensor], inplace: &[usize], outputs: &[Tensor]) -> Result<()> {
    if CHECKING.with(Cell::get) {
        return Ok(());
    }
    let written = outputs
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("output {i}"), t))
        .chain(inplace.iter().map(|&i| (format!("input {i} (written in place)"), inputs[i])));
    let written: Vec<(String, &Tensor)> = written.collect();
    without_checks(|| check_each(op, inputs, &written))
}

fn check_each(op: &'static str, inputs: &[&Tensor], outputs: &[(String, &Tensor)]) -> Result<()> {
    let _no_grad = crate::no_grad_guard();
    let name = || match crate::autograd::current_backward_node() {
        Some(node) => format!("backward of {node}: {op}"),
        None => op.to_string(),
    };
    let deferred = nan_inf_level() == 1;
    for (what, out) in outputs {
        if !is_float(out.dtype()) || out.numel() == 0 {
            continue;
        }
        if deferred && let crate::backend::Storage::Gpu(buffer) = out.storage() {
            buffer.ctx.check_finite(name(), what, buffer, out.shape(), out.dtype())?;
            continue;
        }
        if !has_non_finite(out)? {
            continue;
        }
        let name = name();
        let ins: Vec<String> = inputs.iter().enumerate().map(|(k, t)| format!("input {k} {}", describe(t))).collect();
        return Err(Error::NonFinite {
            op: name,
            msg: format!("{what} {} holds NaN or infinity; {}", describe(out), ins.join("; ")),
        });
    }
    Ok(())
}
