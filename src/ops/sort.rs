//! Sorting: `argsort` is a registry entry (stable, ascending or descending, NaN sorting as
//! the largest value, as numpy); `sort` and `topk` are compositions with
//! `take_along_axis` and `slice`, so their gradients flow through those ops.

use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::elementwise::cast::gpu_cast;
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

pub(crate) static ARGSORT_KERNEL: Kernel = Kernel {
    file: "argsort.wgsl",
    keys: || {
        let mut v = Vec::new();
        for descending in [false, true] {
            for d in [DType::Float32, DType::Int32, DType::Int64] {
                v.push(key(descending, d));
            }
        }
        v
    },
    variant: |k| variant(k >= 8, DType::from_code(k % 8)),
};

fn key(descending: bool, dtype: DType) -> u32 {
    descending as u32 * 8 + dtype.code()
}

fn variant(descending: bool, dtype: DType) -> Variant {
    let before = match (descending, dtype) {
        (false, DType::Int64) => "i64_lt(a, b)",
        (true, DType::Int64) => "i64_lt(b, a)",
        (false, DType::Int32) => "a < b",
        (true, DType::Int32) => "a > b",
        (false, _) => "a < b || (!is_nan_f(a) && is_nan_f(b))",
        (true, _) => "a > b || (is_nan_f(a) && !is_nan_f(b))",
    };
    vec![("S", wgsl::storage(dtype).into()), ("BEFORE", before.into())]
}

/// `argsort`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ArgsortAttrs {
    pub axis: isize,
    pub descending: bool,
}

registry_entry!(
    /// Indices that sort `x` along `axis` (`paddle.argsort`), int64; stable.
    ARGSORT: ArgsortOp = "argsort", ArgsortAttrs, (usize, usize, usize)
);

impl Op for ArgsortOp {
    fn infer(&self, xs: &[&TensorMeta], a: &ArgsortAttrs) -> Result<(Vec<TensorMeta>, (usize, usize, usize))> {
        let [x] = inputs("argsort", xs)?;
        let geom = if x.rank() == 0 { (1, 1, 1) } else { x.shape.around(x.shape.axis("argsort", a.axis)?) };
        Ok((vec![x.with_dtype(DType::Int64)], geom))
    }

    fn cpu(
        &self,
        k: &mut CpuCall<'_>,
        a: &ArgsortAttrs,
        &(o, l, inner): &(usize, usize, usize),
    ) -> Result<Vec<CpuData>> {
        let d = k.x(0);
        let n = d.len();
        let mut out = vec![0i64; n];
        let is_int = d.dtype().is_int();
        let before = |x: usize, y: usize| -> std::cmp::Ordering {
            let ord = if is_int {
                d.get_i64(x).cmp(&d.get_i64(y))
            } else {
                // NaN is the largest value.
                let (p, q) = (d.get_f64(x), d.get_f64(y));
                match (p.is_nan(), q.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ => p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal),
                }
            };
            if a.descending { ord.reverse() } else { ord }
        };
        for oo in 0..o {
            for ii in 0..inner {
                let at = |r: usize| (oo * l + r) * inner + ii;
                let mut idx: Vec<usize> = (0..l).collect();
                idx.sort_by(|&x, &y| before(at(x), at(y)));
                for (r, &i) in idx.iter().enumerate() {
                    out[at(r)] = i as i64;
                }
            }
        }
        Ok(vec![CpuData::I64(out)])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &ArgsortAttrs, geom: &(usize, usize, usize)) -> Result<()> {
        let (ctx, dtype, n) = (k.ctx, k.ins[0].dtype, k.ins[0].numel());
        let cast;
        let (src, dtype) = if dtype == DType::Bool {
            cast = gpu_cast(ctx, k.x(0), dtype, DType::Float32, n)?;
            (&cast, DType::Float32)
        } else {
            (k.x(0), dtype)
        };
        let params = [geom.0 as u32, geom.1 as u32, geom.2 as u32];
        let binds = [Bind::read(src), Bind::write(k.y(0))];
        ctx.dispatch(&ARGSORT_KERNEL, key(a.descending, dtype), "main", &binds, &params, n as u64)
    }
}

/// The indices that sort `x` along `axis` (`paddle.argsort`), int64. The sort is stable
/// (equal values keep their order) and NaN sorts as the largest value.
pub fn argsort(x: &Tensor, axis: isize, descending: bool) -> Result<Tensor> {
    apply1(&ARGSORT, &[x], ArgsortAttrs { axis, descending })
}

/// `x` sorted along `axis` (`paddle.sort`); differentiable.
pub fn sort(x: &Tensor, axis: isize, descending: bool) -> Result<Tensor> {
    let idx = argsort(x, axis, descending)?;
    if x.ndim() == 0 {
        return Ok(x.clone());
    }
    crate::take_along_axis(x, &idx, axis)
}

/// The `k` largest (or smallest) values along `axis` and their int64 indices
/// (`paddle.topk`), in sorted order.
pub fn topk(x: &Tensor, k: usize, axis: isize, largest: bool) -> Result<(Tensor, Tensor)> {
    let ax = x.shape_ref().axis("topk", axis)?;
    let len = x.shape()[ax];
    if k > len {
        return Err(Error::invalid("topk", format!("k = {k} exceeds the size {len} of axis {ax} of {:?}", x.shape())));
    }
    let idx = argsort(x, axis, largest)?;
    let idx = crate::slice(&idx, &[ax as isize], &[0], &[k as i64])?;
    Ok((crate::take_along_axis(x, &idx, ax as isize)?, idx))
}

impl Tensor {
    /// `argsort` as a method.
    pub fn argsort(&self, axis: isize, descending: bool) -> Result<Tensor> {
        argsort(self, axis, descending)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&ARGSORT], kernels: &[&ARGSORT_KERNEL] };
