//! `check_finite_and_unscale`: inputs `[found_inf, scale, grads...]`; the gradients
//! (float32 or float16) are divided by the scale in place and `found_inf` is set where a
//! quotient is not finite. One dispatch per gradient on the GPU, each invocation owning one
//! storage word (two float16 values), so none writes another's.

use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::registry::op::{CpuCall, GpuCall, Half, Op};
use crate::ops::registry::{AmpList, Facts, registry_entry};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

pub(crate) static UNSCALE_KERNEL: Kernel = Kernel::single("amp/check_finite_and_unscale.wgsl");

registry_entry!(
    /// Paddle's `check_finite_and_unscale`, in place.
    CHECK_FINITE_AND_UNSCALE: UnscaleOp = "check_finite_and_unscale", (), ()
);

const OP: &str = "check_finite_and_unscale";

/// The checks of `[found_inf, scale]`: a bool `[1]` and a float32 `[1]` on one place.
pub(super) fn check_flag_and_scale(op: &'static str, found: &TensorMeta, scale: &TensorMeta) -> Result<()> {
    check_scalar(op, "found_inf", found, DType::Bool)?;
    check_scalar(op, "the scale", scale, DType::Float32)
}

/// `t` must be a `[1]` of `dtype`.
pub(super) fn check_scalar(op: &'static str, what: &str, t: &TensorMeta, dtype: DType) -> Result<()> {
    if t.dtype != dtype {
        return Err(Error::unsupported(op, t.dtype, format!("for {what} (a {dtype} [1])")));
    }
    if t.numel() != 1 {
        return Err(Error::shape(op, format!("{what} must be a {dtype} [1], got {:?}", t.dims())));
    }
    Ok(())
}

impl Op for UnscaleOp {
    fn infer(&self, xs: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, ())> {
        if xs.len() < 2 {
            return Err(Error::invalid(
                OP,
                format!("takes found_inf, the scale and the gradients, got {} tensors", xs.len()),
            ));
        }
        check_flag_and_scale(OP, xs[0], xs[1])?;
        for (i, g) in xs.iter().enumerate().skip(2) {
            if !matches!(g.dtype, DType::Float32 | DType::Float16 | DType::BFloat16) {
                return Err(Error::unsupported(
                    OP,
                    g.dtype,
                    format!("for gradient {} (float32, float16 or bfloat16)", i - 2),
                ));
            }
            if g.place != xs[0].place {
                return Err(Error::PlaceMismatch { op: OP, lhs: xs[0].place, rhs: g.place });
            }
        }
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &(), _: &()) -> Result<Vec<CpuData>> {
        let mut args = k.split().into_iter();
        let (Some(Ok(CpuData::Bool(found))), Some(Err(CpuData::F32(scale)))) = (args.next(), args.next()) else {
            return Err(Error::invalid(OP, "found_inf must be writable and the scale read-only"));
        };
        let inv = 1.0f32 / scale[0];
        let mut bad = false;
        for g in args {
            match g {
                Ok(CpuData::F32(v)) => {
                    for x in v.iter_mut() {
                        *x *= inv;
                        bad |= !x.is_finite();
                    }
                }
                Ok(CpuData::F16(v)) => {
                    for x in v.iter_mut() {
                        *x = half::f16::from_f32(x.to_f32() * inv);
                        bad |= !x.is_finite();
                    }
                }
                Ok(CpuData::BF16(v)) => {
                    for x in v.iter_mut() {
                        *x = half::bf16::from_f32(x.to_f32() * inv);
                        bad |= !x.is_finite();
                    }
                }
                _ => return Err(Error::invalid(OP, "the gradients must be writable float tensors")),
            }
        }
        if bad {
            found[0] = true;
        }
        Ok(Vec::new())
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &(), _: &()) -> Result<()> {
        for i in 2..k.ins.len() {
            let n = k.ins[i].numel();
            if n == 0 {
                continue;
            }
            let half = crate::ops::wgsl::half_mode(k.ins[i].dtype);
            let words = if half > 0 { n.div_ceil(2) } else { n };
            let binds = [Bind::write(k.x(0)), Bind::read(k.x(1)), Bind::write(k.x(i))];
            k.ctx.dispatch(&UNSCALE_KERNEL, 0, "main", &binds, &[words as u32, half, n as u32], words as u64)?;
        }
        Ok(())
    }

    fn inplace(&self, inputs: usize) -> Vec<usize> {
        std::iter::once(0).chain(2..inputs).collect()
    }

    fn half(&self) -> Half {
        Half::Native
    }

    fn facts(&self) -> Facts {
        Facts { amp: AmpList::Keep, ..Facts::NONE }
    }
}
