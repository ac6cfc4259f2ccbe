//! `FLAGS_check_nan_inf` as a mode: after the modes under it return, every float output of
//! the call (and every input it wrote in place) is checked, and the first NaN or infinity is
//! [`Error::NonFinite`] naming the op (`backward of <node>: <op>` inside a backward rule),
//! the output and its shape. Level 1 defers a GPU output's check to a small kernel that
//! marks the device's error flag (reported at the next readback); level 2 checks every
//! output on either place at once with the inputs' statistics (see `crate::flags`).

use std::cell::Cell;

use super::{Call, Mode, Next};
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel};
use crate::flags::{nan_inf_checking, nan_inf_level};
use crate::{DType, Error, Result, Tensor};

/// The deferred NaN/Inf check of one GPU output (`FLAGS_check_nan_inf=1`): marks the first
/// NaN or infinity in the device's error flag, which the next readback reports.
pub(crate) static NAN_CHECK: Kernel = Kernel::single("nan_check.wgsl");

/// The check mode's GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[], kernels: &[&NAN_CHECK] };

/// Records the deferred check of what `op` wrote (`what`), held in `buffer`.
fn gpu_check_finite(
    ctx: &GpuContext,
    op: String,
    what: &str,
    buffer: &GpuBuffer,
    shape: &[usize],
    dtype: DType,
) -> Result<()> {
    let n: usize = shape.iter().product();
    let (code, flag) = ctx.non_finite_flag(op, what, shape, dtype);
    let half = crate::ops::wgsl::half_mode(dtype);
    let binds = [Bind::read(buffer), Bind::flag(&flag)];
    ctx.dispatch(&NAN_CHECK, 0, "main", &binds, &[n as u32, code, half], n as u64)
}

pub(crate) struct Check;

pub(crate) static CHECK: Check = Check;

impl Mode for Check {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        let values = next.run(call)?;
        if nan_inf_checking() {
            let inplace = call.op().inplace(call.inputs().len());
            check_outputs(call.op().name(), call.inputs(), &inplace, &values)?;
        }
        Ok(values)
    }
}

thread_local! {
    /// Set while a check's own ops run, so they are not checked in turn.
    static CHECKING: Cell<bool> = const { Cell::new(false) };
}

fn is_float(d: DType) -> bool {
    d.is_float()
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
fn check_outputs(op: &'static str, inputs: &[&Tensor], inplace: &[usize], outputs: &[Tensor]) -> Result<()> {
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
    let _no_grad = crate::tensor::grad_mode::no_grad_guard();
    let name = || match crate::tensor::graph::current_backward_node() {
        Some(node) => format!("backward of {node}: {op}"),
        None => op.to_string(),
    };
    let deferred = nan_inf_level() == 1;
    for (what, out) in outputs {
        if !is_float(out.dtype()) || out.numel() == 0 {
            continue;
        }
        if deferred && let crate::tensor::Storage::Gpu(buffer) = out.storage() {
            gpu_check_finite(
                &*crate::backend::gpu::context(buffer.device)?,
                name(),
                what,
                buffer,
                out.shape(),
                out.dtype(),
            )?;
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
