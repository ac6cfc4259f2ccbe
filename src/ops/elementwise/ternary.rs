//! `where(cond, x, y)` with numpy broadcasting of all three operands.

use crate::backend::cpu::CpuData;
use crate::backend::cpu::elementwise::zip3_strided;
use crate::backend::cpu::{map_data, typed_ref};
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::wgsl;
use crate::shape::{broadcast_shapes, broadcast_strides, strided_params};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

pub(crate) static WHERE: Kernel = Kernel {
    file: "where.wgsl",
    keys: || [DType::Bool, DType::Int32, DType::Int64, DType::Float32].iter().map(|d| d.code()).collect(),
    variant: |key| vec![("S", wgsl::storage(DType::from_code(key)).to_string())],
};

registry_entry!(
    /// `where` (Paddle's `paddle.where`): picks `x` where `cond` is true, else `y`.
    WHERE_OP: WhereOp = "where", (), WherePlan
);

/// The broadcast output shape and each operand's strides over it.
pub(crate) struct WherePlan {
    shape: Vec<usize>,
    strides: [Vec<isize>; 3],
}

impl Op for WhereOp {
    fn infer(&self, x: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, WherePlan)> {
        const OP: &str = "where";
        let [c, a, b] = inputs(OP, x)?;
        if a.dtype != b.dtype {
            return Err(Error::DTypeMismatch { op: OP, lhs: a.dtype, rhs: b.dtype });
        }
        if c.dtype != DType::Bool {
            return Err(Error::unsupported(OP, c.dtype, "for the condition (expected bool)"));
        }
        let shape = broadcast_shapes(OP, c.dims(), a.dims())?;
        let shape = broadcast_shapes(OP, &shape, b.dims())?;
        let st = |t: &TensorMeta| -> Vec<isize> {
            broadcast_strides(t.dims(), &shape).into_iter().map(|s| s as isize).collect()
        };
        let strides = [st(c), st(a), st(b)];
        Ok((vec![TensorMeta::new(shape.clone(), a.dtype, a.place)], WherePlan { shape, strides }))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &(), p: &WherePlan) -> Result<Vec<CpuData>> {
        let CpuData::Bool(c) = k.x(0) else {
            return Err(Error::unsupported("where", k.ins[0].dtype, "for the condition (expected bool)"));
        };
        let b = k.x(2);
        let [sc, sx, sy] = &p.strides;
        let data = map_data!(k.x(1), av => {
            let bv = typed_ref(b).ok_or(Error::DTypeMismatch { op: "where", lhs: k.ins[1].dtype, rhs: k.ins[2].dtype })?;
            zip3_strided((c, sc), (av, sx), (bv, sy), &p.shape, |k, p, q| if k { p } else { q })
        });
        Ok(vec![data])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &(), p: &WherePlan) -> Result<()> {
        let n = k.outs[0].numel();
        let (params, _) = strided_params(n, &p.shape, &p.strides);
        let binds = [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::read(k.x(2)), Bind::write(k.y(0))];
        k.ctx.dispatch(&WHERE, k.outs[0].dtype.code(), "main", &binds, &params, n as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &(), _: &WherePlan) -> Result<Vec<Option<Tensor>>> {
        let (c, dy) = (g.x(0), g.g());
        let zero = || dy.zeros_like();
        let sum_to = |t: Tensor, like: &Tensor| crate::ops::shape::sum_to_shape(&t, like.shape());
        Ok(vec![
            None,
            g.grad_if(1, || sum_to(where_(c, dy, &zero()?)?, g.x(1)))?,
            g.grad_if(2, || sum_to(where_(c, &zero()?, dy)?, g.x(2)))?,
        ])
    }
}

/// Picks `x` where `cond` is true and `y` elsewhere (Paddle's `paddle.where`). `cond` must
/// be bool; `x` and `y` share a dtype; all three broadcast together.
pub fn where_(cond: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    apply1(&WHERE_OP, &[cond, x, y], ())
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&WHERE_OP], kernels: &[&WHERE] };
