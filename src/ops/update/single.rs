//! One rule's update of one parameter as a registry entry: inputs `[param, grad, states...,
//! schedule?]`, the parameter and states written in place.

use super::{UpdateAttrs, UpdateRule, cpu};
use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::registry::op::{CpuCall, GpuCall, Op, OpHeader};
use crate::ops::registry::{Facts, RegisteredOp, Update};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

/// The single update of rule `R`, dispatching `kernel`.
pub(crate) struct UpdateOp<R> {
    kernel: &'static Kernel,
    rule: std::marker::PhantomData<fn() -> R>,
}

impl<R: UpdateRule> UpdateOp<R> {
    pub(crate) const fn new(kernel: &'static Kernel) -> Self {
        UpdateOp { kernel, rule: std::marker::PhantomData }
    }

    pub(super) fn kernel(&self) -> &'static Kernel {
        self.kernel
    }
}

impl<R: UpdateRule> OpHeader for UpdateOp<R> {
    type Attrs = UpdateAttrs<R>;
    type Plan = ();

    fn name(&self) -> &'static str {
        R::NAME
    }
}

impl<R: UpdateRule> Op for UpdateOp<R> {
    fn infer(&self, xs: &[&TensorMeta], a: &UpdateAttrs<R>) -> Result<(Vec<TensorMeta>, ())> {
        let (op, states) = (R::NAME, R::STATES.len());
        if xs.len() != 2 + states && xs.len() != 3 + states {
            return Err(Error::invalid(
                op,
                format!(
                    "takes the parameter, its gradient, {states} states and an optional schedule, got {} tensors",
                    xs.len()
                ),
            ));
        }
        check_member::<R>(op, xs, a)?;
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &UpdateAttrs<R>, _: &()) -> Result<Vec<CpuData>> {
        cpu::update(R::NAME, k, a)
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &UpdateAttrs<R>, _: &()) -> Result<()> {
        let states = R::STATES.len();
        let n = k.ins[0].numel();
        let scheduled = k.ins.len() == 3 + states;
        let mut binds = vec![Bind::write(k.x(0)), Bind::read(k.x(1))];
        binds.extend((2..2 + states).map(|i| Bind::write(k.x(i))));
        binds.push(if scheduled { Bind::read(k.x(2 + states)) } else { Bind::unused(k.ctx) });
        let mut params = vec![n as u32];
        params.extend(a.words(scheduled.then(|| k.ins[2 + states].numel())));
        if R::ops().merged.is_some() {
            // The one parameter's first workgroup and elements (`merged::variant`).
            params.extend([0, n as u32]);
        }
        k.ctx.dispatch(self.kernel, 0, "main", &binds, &params, n as u64)
    }

    fn inplace(&self, _: usize) -> Vec<usize> {
        std::iter::once(0).chain(2..2 + R::STATES.len()).collect()
    }

    fn facts(&self) -> Facts {
        let merged = R::ops().merged.map(|m| m as &'static dyn RegisteredOp);
        Facts { update: Some(Update { per_param: 2 + R::STATES.len(), merged }), ..Facts::NONE }
    }
}

/// The checks of one parameter's tensors `xs` (`[param, grad, states..., schedule?]`).
pub(super) fn check_member<R: UpdateRule>(op: &'static str, xs: &[&TensorMeta], a: &UpdateAttrs<R>) -> Result<()> {
    let states = R::STATES.len();
    let p = xs[0];
    if let Some(s) = xs.get(2 + states) {
        if s.dtype != p.dtype {
            return Err(Error::DTypeMismatch { op, lhs: p.dtype, rhs: s.dtype });
        }
        if s.dims() != [3] && s.dims() != [super::GATED_SCHEDULE] {
            return Err(Error::shape(
                op,
                format!("schedule {:?}, expected [3] (lr, beta1_pow, beta2_pow) or [4] (then skip)", s.dims()),
            ));
        }
    }
    for (i, t) in xs.iter().enumerate().skip(1).take(1 + states) {
        if t.dtype != p.dtype {
            return Err(Error::DTypeMismatch { op, lhs: p.dtype, rhs: t.dtype });
        }
        if t.shape != p.shape {
            let what = if i == 1 { "gradient" } else { "state" };
            return Err(Error::shape(op, format!("{what} {:?} for parameter {:?}", t.dims(), p.dims())));
        }
    }
    a.validate(op)?;
    if !matches!(p.dtype, DType::Float32 | DType::Float64) || (p.place.is_gpu() && p.dtype != DType::Float32) {
        return Err(Error::unsupported(
            op,
            p.dtype,
            "for parameters (float32 parameters are updated in place; float64 on the CPU)",
        ));
    }
    Ok(())
}
