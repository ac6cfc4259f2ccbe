//! Global debugging flags (Paddle's `paddle.set_flags` / `get_flags`): the settings only;
//! the checks they switch on are modes of the dispatcher (`ops/registry/dispatch/check.rs`,
//! `shadow.rs`). `FLAGS_check_nan_inf` (also `DYGRAPH_CHECK_NAN_INF`, read at first use) checks every
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
//!
//! `FLAGS_native_float16` (dygraph's; also `DYGRAPH_NATIVE_FLOAT16`, default on): on a GPU
//! whose device has `SHADER_F16`, the elementwise ops, matmul and conv2d run float16 kernels
//! (WGSL `f16` elements, f32 arithmetic, one rounding per result); off, or without the
//! feature, float16 runs through float32 as on the CPU. Both give the same values; the flag
//! exists to compare them and to test the fallback on devices that have the feature.
//!
//! `FLAGS_use_subgroups` (dygraph's; also `DYGRAPH_SUBGROUPS`, default on): on a GPU whose
//! device has `SUBGROUP`, the row kernels' workgroup reductions (softmax, layer and batch
//! norm, their gradients) use subgroup operations; off, or without the feature, tree
//! reductions in workgroup memory. The two sum in different orders (results agree to
//! rounding); the flag exists to compare them and to test the fallback.
//!
//! `FLAGS_use_cooperative_matrix` (dygraph's; also `DYGRAPH_COOPERATIVE_MATRIX`, default on):
//! float16 products run on cooperative matrices (tensor cores) where the adapter has them;
//! off, on the plain float16 kernels.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::{Error, Result};

/// The flags `set_flags` and `get_flags` know.
const KNOWN: &str =
    "FLAGS_check_nan_inf, FLAGS_shadow, FLAGS_native_float16, FLAGS_use_subgroups, FLAGS_use_cooperative_matrix";

/// 0: not read yet, else the level + 1 (1: off, 2: deferred on the GPU, 3: every op).
static CHECK_NAN_INF: AtomicU8 = AtomicU8::new(0);

/// `FLAGS_shadow`: 0 not read yet, 1 off, 2 on.
static SHADOW: AtomicU8 = AtomicU8::new(0);

/// `FLAGS_native_float16`: 0 not read yet, 1 off, 2 on.
static NATIVE_FLOAT16: AtomicU8 = AtomicU8::new(0);

/// `FLAGS_use_subgroups`: 0 not read yet, 1 off, 2 on.
static SUBGROUPS: AtomicU8 = AtomicU8::new(0);

/// `FLAGS_use_cooperative_matrix`: 0 not read yet, 1 off, 2 on.
static COOPERATIVE: AtomicU8 = AtomicU8::new(0);

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
                let on = shadow_setting(value).ok_or_else(|| {
                    Error::invalid("set_flags", format!("FLAGS_shadow takes \"cpu\" or \"off\", got {value:?}"))
                })?;
                SHADOW.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            }
            "FLAGS_native_float16" => {
                let on = switch(value).ok_or_else(|| {
                    Error::invalid(
                        "set_flags",
                        format!("FLAGS_native_float16 takes 1 or 0 (true/false), got {value:?}"),
                    )
                })?;
                NATIVE_FLOAT16.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            }
            "FLAGS_use_subgroups" => {
                let on = switch(value).ok_or_else(|| {
                    Error::invalid("set_flags", format!("FLAGS_use_subgroups takes 1 or 0 (true/false), got {value:?}"))
                })?;
                SUBGROUPS.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            }
            "FLAGS_use_cooperative_matrix" => {
                let on = switch(value).ok_or_else(|| {
                    Error::invalid(
                        "set_flags",
                        format!("FLAGS_use_cooperative_matrix takes 1 or 0 (true/false), got {value:?}"),
                    )
                })?;
                COOPERATIVE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
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
            "FLAGS_shadow" => Ok((n.to_string(), if shadow_enabled() { "cpu" } else { "off" }.to_string())),
            "FLAGS_native_float16" => Ok((n.to_string(), u8::from(native_float16_enabled()).to_string())),
            "FLAGS_use_subgroups" => Ok((n.to_string(), u8::from(subgroups_enabled()).to_string())),
            "FLAGS_use_cooperative_matrix" => Ok((n.to_string(), u8::from(cooperative_matrix_enabled()).to_string())),
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
    nan_inf_level() == 2 || shadow_enabled()
}

/// Whether ops are checked under their own names (any NaN check, or the shadow): a static
/// `Executor` then fuses nothing.
pub(crate) fn checks_by_op_name() -> bool {
    nan_inf_checking() || shadow_enabled()
}

/// An on/off flag's value.
fn switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Some(true),
        "0" | "off" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// An on/off flag held in `cell` (0 not read yet, 1 off, 2 on): its value, else the
/// environment variable `env` parsed by `parse`, else `default`, read once (a `set_flags`
/// racing the first read wins).
fn switch_flag(cell: &AtomicU8, env: &str, parse: fn(&str) -> Option<bool>, default: bool) -> bool {
    if cell.load(Ordering::Relaxed) == 0 {
        let on = std::env::var(env).ok().and_then(|v| parse(&v)).unwrap_or(default);
        let _ = cell.compare_exchange(0, if on { 2 } else { 1 }, Ordering::Relaxed, Ordering::Relaxed);
    }
    cell.load(Ordering::Relaxed) == 2
}

/// Whether float16 may run native GPU kernels (the flag, else `DYGRAPH_NATIVE_FLOAT16`; on by
/// default).
pub(crate) fn native_float16_enabled() -> bool {
    switch_flag(&NATIVE_FLOAT16, "DYGRAPH_NATIVE_FLOAT16", switch, true)
}

/// `FLAGS_use_cooperative_matrix` (else `DYGRAPH_COOPERATIVE_MATRIX`, default on).
pub(crate) fn cooperative_matrix_enabled() -> bool {
    switch_flag(&COOPERATIVE, "DYGRAPH_COOPERATIVE_MATRIX", switch, true)
}

/// `FLAGS_use_subgroups` (else `DYGRAPH_SUBGROUPS`, default on).
pub(crate) fn subgroups_enabled() -> bool {
    switch_flag(&SUBGROUPS, "DYGRAPH_SUBGROUPS", switch, true)
}

/// `FLAGS_shadow`'s value: `cpu` shadows on the CPU, `off`/`0`/empty turns it off.
fn shadow_setting(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "cpu" | "1" | "on" | "true" => Some(true),
        "off" | "0" | "" | "false" | "none" => Some(false),
        _ => None,
    }
}

/// Whether GPU ops are shadowed on the CPU (the flag, else `DYGRAPH_SHADOW`, read once).
pub(crate) fn shadow_enabled() -> bool {
    switch_flag(&SHADOW, "DYGRAPH_SHADOW", shadow_setting, false)
}
