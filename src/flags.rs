//! Global debugging flags (Paddle's `paddle.set_flags` / `get_flags`) and what they switch
//! on. `FLAGS_check_nan_inf` (also `DYGRAPH_CHECK_NAN_INF=1`, read at first use) checks
//! every output of every op run eagerly, backward rules' ops included, and returns
//! [`Error::NonFinite`] at the first NaN or infinity: the op (`backward of <node>: <op>`
//! inside a backward rule), the output, its shape, and each input's shape and statistics.
//!
//! The check is itself made of registered ops (`x − x` is NaN exactly where `x` is not
//! finite; `any` of that) run without recording, and its one boolean is read back at once,
//! so on a GPU place every checked op waits for the device: a debugging mode, as Paddle's
//! is. A static `Executor` runs its programs op by op while the flag is on (no replayed
//! plans), so their ops are checked the same way.

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::{DType, Error, Result, Tensor};

/// The flags `set_flags` and `get_flags` know.
const KNOWN: &str = "FLAGS_check_nan_inf, FLAGS_shadow";

/// 0: not read yet, 1: off, 2: on.
static CHECK_NAN_INF: AtomicU8 = AtomicU8::new(0);

thread_local! {
    /// Set while a check's own ops run, so they are not checked in turn.
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

fn truthy(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" | "" => Some(false),
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
                let on = truthy(value).ok_or_else(|| {
                    Error::invalid("set_flags", format!("FLAGS_check_nan_inf takes 1/0 or true/false, got {value:?}"))
                })?;
                CHECK_NAN_INF.store(if on { 2 } else { 1 }, Ordering::Relaxed);
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
            "FLAGS_check_nan_inf" => Ok((n.to_string(), (nan_inf_checking() as u8).to_string())),
            "FLAGS_shadow" => Ok((n.to_string(), if crate::shadow::enabled() { "cpu" } else { "off" }.to_string())),
            other => Err(Error::invalid("get_flags", format!("unknown flag {other:?} (known: {KNOWN})"))),
        })
        .collect()
}

/// Whether ops' outputs are checked (the flag, else the environment, read once).
pub(crate) fn nan_inf_checking() -> bool {
    match CHECK_NAN_INF.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var("DYGRAPH_CHECK_NAN_INF").ok().and_then(|v| truthy(&v)).unwrap_or(false);
            // A `set_flags` racing this first read wins.
            let _ = CHECK_NAN_INF.compare_exchange(0, if on { 2 } else { 1 }, Ordering::Relaxed, Ordering::Relaxed);
            CHECK_NAN_INF.load(Ordering::Relaxed) == 2
        }
        v => v == 2,
    }
}

/// Whether each op must run through `apply` on its own (NaN checking or the CPU shadow):
/// a static `Executor` then runs programs op by op, without fusion or replayed plans.
pub(crate) fn per_op_checks() -> bool {
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

/// The check after an eager op `op` computed `outputs` from `inputs`.
pub(crate) fn check_outputs(op: &'static str, inputs: &[&Tensor], outputs: &[Tensor]) -> Result<()> {
    if CHECKING.with(Cell::get) {
        return Ok(());
    }
    CHECKING.with(|c| c.set(true));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CHECKING.with(|c| c.set(false));
        }
    }
    let _reset = Reset;
    let _no_grad = crate::no_grad_guard();
    for (i, out) in outputs.iter().enumerate() {
        if !is_float(out.dtype()) || out.numel() == 0 || !has_non_finite(out)? {
            continue;
        }
        let name = match crate::autograd::current_backward_node() {
            Some(node) => format!("backward of {node}: {op}"),
            None => op.to_string(),
        };
        let ins: Vec<String> = inputs.iter().enumerate().map(|(k, t)| format!("input {k} {}", describe(t))).collect();
        return Err(Error::NonFinite {
            op: name,
            msg: format!("output {i} {} holds NaN or infinity; {}", describe(out), ins.join("; ")),
        });
    }
    Ok(())
}
