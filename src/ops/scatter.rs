//! Writing values into a tensor at indexed positions: one registry entry, `scatter_axis`
//! (`out = x` with `values` assigned, added or summed at `index` along one axis), and the
//! Paddle ops composed from it: `scatter`, `put_along_axis`, `index_add`, `scatter_nd_add`,
//! `scatter_nd`.
//!
//! The index layout is either a 1-D list shared by every position of the other axes
//! (`scatter`, `index_add`) or a full tensor shaped like `values` (`put_along_axis`), the
//! same two layouts the gathers use ([`Geom`]). Each output element loops over the index
//! entries of its column in order, so duplicates resolve deterministically on both places
//! (the last one wins an assignment; sums run in index order). Out-of-range indices are
//! errors on both places.

use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::index::{Geom, INDEX_DTYPES, check_index, host_indices, index_variant, out_of_range};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

const DATA_DTYPES: [DType; 3] = [DType::Float32, DType::Int32, DType::Int64];

pub(crate) static SCATTER_KERNEL: Kernel = Kernel {
    file: "scatter.wgsl",
    keys: || DATA_DTYPES.iter().flat_map(|d| INDEX_DTYPES.map(|i| d.code() * 8 + i.code())).collect(),
    variant: |k| scatter_variant(DType::from_code(k / 8), DType::from_code(k % 8)),
};

fn scatter_variant(data: DType, index: DType) -> Variant {
    let (identity, combine) = match data {
        DType::Int64 => ("vec2<u32>(0u, 0u)", "i64_add(a, b)"),
        DType::Int32 => ("0", "a + b"),
        _ => ("0.0", "a + b"),
    };
    let mut v = index_variant(index);
    v.extend([("S", wgsl::storage(data).into()), ("IDENTITY", identity.into()), ("COMBINE", combine.into())]);
    v
}

/// How written values meet the tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Reduce {
    /// The value replaces the element (the last index entry wins).
    Assign,
    /// The values are added to the element.
    Add,
    /// The element is replaced by the sum of the values written to it.
    Sum,
}

impl Reduce {
    fn parse(s: &str) -> Result<Reduce> {
        match s {
            "assign" => Ok(Reduce::Assign),
            "add" => Ok(Reduce::Add),
            "sum" => Ok(Reduce::Sum),
            other => Err(Error::invalid("scatter_axis", format!("reduce must be assign, add or sum, got {other:?}"))),
        }
    }
}

/// `scatter_axis`'s attributes: the axis, the reduction and the index layout (`along`: the
/// index has `values`' shape; else it is a 1-D list).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ScatterAttrs {
    pub axis: isize,
    pub reduce: String,
    pub along: bool,
}

registry_entry!(
    /// `x` with `values` written at `index` along an axis: inputs `(x, index, values)`.
    SCATTER_AXIS: ScatterAxisOp = "scatter_axis", ScatterAttrs, (Geom, Reduce)
);

impl Op for ScatterAxisOp {
    fn facts(&self) -> Facts {
        // Serves `paddle.scatter`, on the extra black list.
        Facts { amp: AmpList::Black, ..Facts::NONE }
    }
    fn infer(&self, xs: &[&TensorMeta], a: &ScatterAttrs) -> Result<(Vec<TensorMeta>, (Geom, Reduce))> {
        const OP: &str = "scatter_axis";
        let [x, ix, v] = inputs(OP, xs)?;
        check_index(OP, ix)?;
        let reduce = Reduce::parse(&a.reduce)?;
        if x.dtype != v.dtype {
            return Err(Error::DTypeMismatch { op: OP, lhs: x.dtype, rhs: v.dtype });
        }
        if x.dtype == DType::Bool {
            return Err(Error::unsupported(OP, x.dtype, "(cast to an integer or float dtype first)"));
        }
        let ax = x.shape.axis(OP, a.axis)?;
        let (outer, n, inner) = x.shape.around(ax);
        let (geom, values_shape) = if a.along {
            let fits = ix.rank() == x.rank() && (0..x.rank()).all(|d| d == ax || ix.dims()[d] == x.dims()[d]);
            if !fits {
                return Err(Error::shape(
                    OP,
                    format!("index {:?} must match x {:?} outside axis {ax}", ix.dims(), x.dims()),
                ));
            }
            let m = ix.dims()[ax];
            let g = Geom {
                outer,
                n,
                m,
                inner,
                so: m * inner,
                sj: inner,
                si: 1,
                pad: None,
                out_shape: ix.dims().to_vec(),
                in_shape: x.dims().to_vec(),
                axis: ax,
            };
            (g, ix.dims().to_vec())
        } else {
            if ix.rank() > 1 {
                return Err(Error::shape(OP, format!("index must be 0-D or 1-D, got shape {:?}", ix.dims())));
            }
            let m = ix.numel();
            let mut shape = x.dims().to_vec();
            shape[ax] = m;
            (Geom::shared(ax, (outer, n, inner), m, shape.clone(), x.dims().to_vec()), shape)
        };
        if v.dims() != values_shape {
            return Err(Error::shape(
                OP,
                format!(
                    "values {:?} must have shape {values_shape:?} (x {:?}, index {:?})",
                    v.dims(),
                    x.dims(),
                    ix.dims()
                ),
            ));
        }
        Ok((vec![x.clone()], (geom, reduce)))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &ScatterAttrs, (g, reduce): &(Geom, Reduce)) -> Result<Vec<CpuData>> {
        let (x, ix, v) = (k.x(0), k.x(1), k.x(2));
        if let Some(bad) = out_of_range(ix, g.n) {
            return Err(Error::invalid(
                "scatter_axis",
                format!("index {bad} is out of range for axis {} of x {:?} (valid 0..{})", g.axis, g.in_shape, g.n),
            ));
        }
        let idx = host_indices(ix, g.n);
        let out = match (x, v) {
            (CpuData::F32(x), CpuData::F32(v)) => CpuData::F32(scatter_cpu(x, &idx, v, g, *reduce, |a, b| a + b)),
            (CpuData::F64(x), CpuData::F64(v)) => CpuData::F64(scatter_cpu(x, &idx, v, g, *reduce, |a, b| a + b)),
            (CpuData::I32(x), CpuData::I32(v)) => CpuData::I32(scatter_cpu(x, &idx, v, g, *reduce, i32::wrapping_add)),
            (CpuData::I64(x), CpuData::I64(v)) => CpuData::I64(scatter_cpu(x, &idx, v, g, *reduce, i64::wrapping_add)),
            _ => return Err(Error::unsupported("scatter_axis", x.dtype(), "on the CPU")),
        };
        Ok(vec![out])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &ScatterAttrs, (g, reduce): &(Geom, Reduce)) -> Result<()> {
        let dtype = k.ins[0].dtype;
        wgsl::check_gpu_dtype("scatter_axis", dtype, k.ins[0].place)?;
        let total = g.outer * g.n * g.inner;
        let (code, flag) = k.ctx.index_flag("scatter_axis");
        let binds =
            [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::read(k.x(2)), Bind::write(k.y(0)), Bind::flag(&flag)];
        let mut params = g.params(total);
        params.extend([code, *reduce as u32]);
        let key = dtype.code() * 8 + k.ins[1].dtype.code();
        k.ctx.dispatch(&SCATTER_KERNEL, key, "main", &binds, &params, total as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(
        &self,
        g: &GradCall<'_>,
        a: &ScatterAttrs,
        (geom, reduce): &(Geom, Reduce),
    ) -> Result<Vec<Option<Tensor>>> {
        let (index, axis) = (g.x(1), geom.axis as isize);
        // The elements a value replaced get no gradient (Paddle's rule for duplicates too:
        // each value entry receives the output gradient at its target).
        let dx = g.grad_if(0, || match reduce {
            Reduce::Add => Ok(g.g().clone()),
            _ => {
                let attrs = ScatterAttrs { reduce: "assign".into(), ..a.clone() };
                apply1(&SCATTER_AXIS, &[g.g(), index, &g.x(2).zeros_like()?], attrs)
            }
        })?;
        let dv = g.grad_if(2, || {
            if a.along {
                crate::take_along_axis(g.g(), index, axis)
            } else {
                crate::index_select(g.g(), &flat(index)?, axis)
            }
        })?;
        Ok(vec![dx, None, dv])
    }
}

/// A 0-d index as a 1-element list.
fn flat(index: &Tensor) -> Result<Tensor> {
    if index.ndim() == 0 { index.reshape([1usize]) } else { Ok(index.clone()) }
}

fn scatter_cpu<T: Copy>(x: &[T], idx: &[usize], v: &[T], g: &Geom, reduce: Reduce, add: impl Fn(T, T) -> T) -> Vec<T> {
    let mut out = x.to_vec();
    if reduce == Reduce::Sum {
        // Every written element restarts from the values alone.
        let mut first = vec![true; out.len()];
        for_each_write(idx, g, |target, value| {
            out[target] = if std::mem::take(&mut first[target]) { v[value] } else { add(out[target], v[value]) };
        });
        return out;
    }
    for_each_write(idx, g, |target, value| {
        out[target] = if reduce == Reduce::Assign { v[value] } else { add(out[target], v[value]) };
    });
    out
}

/// Calls `f(target, value)` for every index entry in order: the flat output position it
/// writes and the flat position of its value.
fn for_each_write(idx: &[usize], g: &Geom, mut f: impl FnMut(usize, usize)) {
    for o in 0..g.outer {
        for j in 0..g.m {
            for i in 0..g.inner {
                let t = idx[g.at(o, j, i)];
                f((o * g.n + t) * g.inner + i, (o * g.m + j) * g.inner + i);
            }
        }
    }
}

fn scatter_axis(x: &Tensor, index: &Tensor, values: &Tensor, axis: isize, reduce: &str, along: bool) -> Result<Tensor> {
    apply1(&SCATTER_AXIS, &[x, index, values], ScatterAttrs { axis, reduce: reduce.into(), along })
}

/// `x` with the rows (along axis 0) at `index` replaced by the rows of `updates`
/// (`paddle.scatter`): with `overwrite` the last duplicate wins; without it the rows an
/// index names are set to the sum of their updates.
pub fn scatter(x: &Tensor, index: &Tensor, updates: &Tensor, overwrite: bool) -> Result<Tensor> {
    scatter_axis(x, &flat(index)?, updates, 0, if overwrite { "assign" } else { "sum" }, false)
}

/// `x` with `value`'s slices along `axis` added at the positions in the 1-D `index`
/// (`paddle.index_add`): `out[.., index[j], ..] += value[.., j, ..]`.
pub fn index_add(x: &Tensor, index: &Tensor, axis: isize, value: &Tensor) -> Result<Tensor> {
    scatter_axis(x, index, value, axis, "add", false)
}

/// `arr` with `values` (broadcast to `indices`' shape) written along `axis` at `indices`
/// (`paddle.put_along_axis`); `reduce` is `"assign"` or `"add"`.
pub fn put_along_axis(arr: &Tensor, indices: &Tensor, values: &Tensor, axis: isize, reduce: &str) -> Result<Tensor> {
    if reduce != "assign" && reduce != "add" {
        return Err(Error::invalid("put_along_axis", format!("reduce must be \"assign\" or \"add\", got {reduce:?}")));
    }
    let values =
        if values.shape() == indices.shape() { values.clone() } else { values.broadcast_to(indices.shape())? };
    scatter_axis(arr, indices, &values, axis, reduce, true)
}

/// `x` with `updates` added at the multi-indices in `index` (`paddle.scatter_nd_add`):
/// `index[..., :]` holds `k` coordinates into the first `k` dimensions of `x`, and `updates`
/// has shape `index.shape[:-1] + x.shape[k:]`. An out-of-range coordinate is an error.
pub fn scatter_nd_add(x: &Tensor, index: &Tensor, updates: &Tensor) -> Result<Tensor> {
    const OP: &str = "scatter_nd_add";
    if !index.dtype().is_int() {
        return Err(Error::unsupported(OP, index.dtype(), "for the index (expected int32 or int64)"));
    }
    let k = index.shape().last().copied().unwrap_or(0);
    if index.ndim() == 0 || k == 0 || k > x.ndim() {
        return Err(Error::shape(
            OP,
            format!("index {:?} must end in 1 to {} coordinates (x {:?})", index.shape(), x.ndim(), x.shape()),
        ));
    }
    let lead = &index.shape()[..index.ndim() - 1];
    let rest = &x.shape()[k..];
    let want: Vec<usize> = lead.iter().chain(rest).copied().collect();
    if updates.shape() != want.as_slice() {
        return Err(Error::shape(
            OP,
            format!(
                "updates {:?} must have shape {want:?} (x {:?}, index {:?})",
                updates.shape(),
                x.shape(),
                index.shape()
            ),
        ));
    }
    // Row-major position of each multi-index among the first k dims; a coordinate out of
    // its range makes the whole position -1, which the scatter reports.
    let dims = &x.shape()[..k];
    let mut strides = vec![1i64; k];
    for d in (0..k.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1] as i64;
    }
    // Column by column, so that a static program needs no host constants.
    let ix = index.cast(DType::Int64)?;
    let last = [index.ndim() as isize - 1];
    let mut linear = crate::full_like(&crate::slice(&ix, &last, &[0], &[1])?, 0)?;
    let mut bad = linear.not_equal(&linear)?;
    for (d, (&stride, &size)) in strides.iter().zip(dims).enumerate() {
        let col = crate::slice(&ix, &last, &[d as i64], &[d as i64 + 1])?;
        bad = bad.logical_or(&col.less_than_scalar(0)?.logical_or(&col.greater_equal_scalar(size as i64)?)?)?;
        linear = linear.add(&col.mul_scalar(stride)?)?;
    }
    let linear = crate::where_(&bad, &crate::full_like(&linear, -1)?, &linear)?.flatten(0, -1)?;
    let rows: usize = dims.iter().product();
    let flat_x = x.reshape([rows].iter().chain(rest).copied().collect::<Vec<usize>>())?;
    let m = linear.shape()[0];
    let flat_u = updates.reshape([m].iter().chain(rest).copied().collect::<Vec<usize>>())?;
    scatter_axis(&flat_x, &linear, &flat_u, 0, "add", false)?.reshape(x.shape())
}

/// Zeros of `shape` (`updates`' dtype and place) with `updates` added at the multi-indices
/// in `index` (`paddle.scatter_nd`).
pub fn scatter_nd(index: &Tensor, updates: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let zeros = crate::zeros_on(shape, updates.dtype(), updates.place())?;
    scatter_nd_add(&zeros, index, updates)
}

impl Tensor {
    /// `scatter` as a method.
    pub fn scatter(&self, index: &Tensor, updates: &Tensor, overwrite: bool) -> Result<Tensor> {
        scatter(self, index, updates, overwrite)
    }

    /// `index_add` as a method.
    pub fn index_add(&self, index: &Tensor, axis: isize, value: &Tensor) -> Result<Tensor> {
        index_add(self, index, axis, value)
    }

    /// `put_along_axis` as a method.
    pub fn put_along_axis(&self, indices: &Tensor, values: &Tensor, axis: isize, reduce: &str) -> Result<Tensor> {
        put_along_axis(self, indices, values, axis, reduce)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&SCATTER_AXIS], kernels: &[&SCATTER_KERNEL] };
