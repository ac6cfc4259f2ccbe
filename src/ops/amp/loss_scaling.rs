//! `update_loss_scaling`: inputs `[found_inf, scale, good, bad]`, the last three written in
//! place by Paddle's rule (its `update_loss_scaling` op): one invocation on the GPU.

use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::registry::op::{CpuCall, GpuCall, Op, inputs};
use crate::ops::registry::{AmpList, Facts, registry_entry};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

pub(crate) static LOSS_SCALING_KERNEL: Kernel = Kernel::single("amp/update_loss_scaling.wgsl");

/// The scaler's settings (Paddle's attribute names).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct LossScalingAttrs {
    pub incr_every_n_steps: i64,
    pub decr_every_n_nan_or_inf: i64,
    pub incr_ratio: f64,
    pub decr_ratio: f64,
}

registry_entry!(
    /// Paddle's `update_loss_scaling`, in place.
    UPDATE_LOSS_SCALING: LossScalingOp = "update_loss_scaling", LossScalingAttrs, ()
);

const OP: &str = "update_loss_scaling";

/// One step of the rule, as the GPU kernel computes it (float32 scale).
fn rule(a: &LossScalingAttrs, found: bool, scale: &mut f32, good: &mut i32, bad: &mut i32) {
    if found {
        *good = 0;
        *bad += 1;
        if i64::from(*bad) == a.decr_every_n_nan_or_inf {
            *scale = (*scale * a.decr_ratio as f32).max(1.0);
            *bad = 0;
        }
    } else {
        *bad = 0;
        *good += 1;
        if i64::from(*good) == a.incr_every_n_steps {
            let grown = *scale * a.incr_ratio as f32;
            if grown.is_finite() {
                *scale = grown;
            }
            *good = 0;
        }
    }
}

impl Op for LossScalingOp {
    fn infer(&self, xs: &[&TensorMeta], a: &LossScalingAttrs) -> Result<(Vec<TensorMeta>, ())> {
        let [found, scale, good, bad] = inputs(OP, xs)?;
        super::unscale::check_flag_and_scale(OP, found, scale)?;
        super::unscale::check_scalar(OP, "the good-step counter", good, DType::Int32)?;
        super::unscale::check_scalar(OP, "the bad-step counter", bad, DType::Int32)?;
        if a.incr_every_n_steps < 1 || a.decr_every_n_nan_or_inf < 1 {
            return Err(Error::invalid(OP, "incr_every_n_steps and decr_every_n_nan_or_inf must be at least 1"));
        }
        let growing = a.incr_ratio > 1.0 && a.incr_ratio.is_finite();
        if !(growing && a.decr_ratio > 0.0 && a.decr_ratio < 1.0) {
            return Err(Error::invalid(
                OP,
                format!("incr_ratio must be > 1 and decr_ratio in (0, 1), got {} and {}", a.incr_ratio, a.decr_ratio),
            ));
        }
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &LossScalingAttrs, _: &()) -> Result<Vec<CpuData>> {
        let mut args = k.split().into_iter();
        let found = match args.next() {
            Some(Err(CpuData::Bool(f))) => f[0],
            _ => return Err(Error::invalid(OP, "found_inf must be a read-only bool")),
        };
        match (args.next(), args.next(), args.next()) {
            (Some(Ok(CpuData::F32(s))), Some(Ok(CpuData::I32(g))), Some(Ok(CpuData::I32(b)))) => {
                rule(a, found, &mut s[0], &mut g[0], &mut b[0]);
                Ok(Vec::new())
            }
            _ => Err(Error::invalid(OP, "the scale and counters must be writable")),
        }
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &LossScalingAttrs, _: &()) -> Result<()> {
        let binds = [Bind::read(k.x(0)), Bind::write(k.x(1)), Bind::write(k.x(2)), Bind::write(k.x(3))];
        let params = [
            a.incr_every_n_steps.clamp(1, i32::MAX as i64) as u32,
            a.decr_every_n_nan_or_inf.clamp(1, i32::MAX as i64) as u32,
            (a.incr_ratio as f32).to_bits(),
            (a.decr_ratio as f32).to_bits(),
        ];
        k.ctx.dispatch(&LOSS_SCALING_KERNEL, 0, "main", &binds, &params, 1u64)
    }

    fn inplace(&self, _: usize) -> Vec<usize> {
        vec![1, 2, 3]
    }

    fn facts(&self) -> Facts {
        Facts { amp: AmpList::Keep, ..Facts::NONE }
    }
}
