//! Cumulative sums and products along an axis (`cumsum`, `cumprod`), inclusive or
//! exclusive, forwards or reversed, and `cumprod`'s gradient, which needs no division (so
//! zeros in the input give exact gradients).

use crate::backend::cpu::WinFloat;
use crate::backend::cpu::{CpuData, float_kernel};
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::{AmpList, Facts};
use crate::ops::registry::{op_header, registry_entry};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

/// The dtypes a scan's GPU kernel computes in (float16 goes through float32).
const SCAN_DTYPES: [DType; 3] = [DType::Float32, DType::Int32, DType::Int64];

pub(crate) static SCAN_KERNEL: Kernel = Kernel {
    file: "scan.wgsl",
    keys: || [false, true].iter().flat_map(|&p| SCAN_DTYPES.map(|d| scan_key(p, d))).collect(),
    variant: |k| scan_variant(k >= 8, DType::from_code(k % 8)),
};

pub(crate) static CUMPROD_GRAD_KERNEL: Kernel = Kernel::single("cumprod_grad.wgsl");

fn scan_key(product: bool, dtype: DType) -> u32 {
    product as u32 * 8 + dtype.code()
}

fn scan_variant(product: bool, dtype: DType) -> Variant {
    let (identity, combine) = match (product, dtype) {
        (false, DType::Int64) => ("vec2<u32>(0u, 0u)", "i64_add(a, b)"),
        (true, DType::Int64) => ("vec2<u32>(1u, 0u)", "i64_mul(a, b)"),
        (false, DType::Int32) => ("0", "a + b"),
        (true, DType::Int32) => ("1", "a * b"),
        (false, _) => ("0.0", "a + b"),
        (true, _) => ("1.0", "a * b"),
    };
    vec![("S", wgsl::storage(dtype).into()), ("IDENTITY", identity.into()), ("COMBINE", combine.into())]
}

/// `cumsum`/`cumprod`'s attributes (Paddle's `cumsum` op: `exclusive` starts each line at
/// the identity, `reverse` scans from the end).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ScanAttrs {
    pub axis: isize,
    pub exclusive: bool,
    pub reverse: bool,
}

/// A cumulative sum (`product == false`) or product along an axis.
pub(crate) struct ScanOp {
    name: &'static str,
    product: bool,
}

pub(crate) static CUMSUM: ScanOp = ScanOp { name: "cumsum", product: false };
pub(crate) static CUMPROD: ScanOp = ScanOp { name: "cumprod", product: true };

/// `(outer, len, inner)` around the scanned axis.
type AxisSplit = (usize, usize, usize);

op_header!(ScanOp: ScanAttrs, AxisSplit; |op| op.name);

/// The split of `x` around `axis`; a 0-d tensor is one line of one element.
fn split(op: &'static str, x: &TensorMeta, axis: isize) -> Result<AxisSplit> {
    if x.rank() == 0 {
        if axis != 0 && axis != -1 {
            return Err(Error::Axis { op, axis, rank: 0, shape: vec![] });
        }
        return Ok((1, 1, 1));
    }
    Ok(x.shape.around(x.shape.axis(op, axis)?))
}

/// Positions of line `line` of an `(outer, len, inner)` split in scan order.
fn line_positions(&(_, len, inner): &AxisSplit, line: usize, reverse: bool) -> impl Iterator<Item = usize> {
    let base = (line / inner) * len * inner + line % inner;
    (0..len).map(move |s| base + (if reverse { len - 1 - s } else { s }) * inner)
}

/// Every line of `x` scanned with `combine` from `identity`.
fn scan_lines<T: Copy + Default>(
    x: &[T],
    geom: &AxisSplit,
    a: &ScanAttrs,
    identity: T,
    combine: impl Fn(T, T) -> T,
) -> Vec<T> {
    let mut out = vec![T::default(); x.len()];
    for line in 0..geom.0 * geom.2 {
        let mut acc = identity;
        for p in line_positions(geom, line, a.reverse) {
            let next = combine(acc, x[p]);
            out[p] = if a.exclusive { acc } else { next };
            acc = next;
        }
    }
    out
}

impl Op for ScanOp {
    fn facts(&self) -> Facts {
        // cumsum and cumprod are on float16's black list.
        Facts { amp: AmpList::BlackFloat16, ..Facts::NONE }
    }
    fn infer(&self, xs: &[&TensorMeta], a: &ScanAttrs) -> Result<(Vec<TensorMeta>, AxisSplit)> {
        let [x] = inputs(self.name, xs)?;
        if x.dtype == DType::Bool {
            return Err(Error::unsupported(self.name, x.dtype, "(cast to int64 first)"));
        }
        Ok((vec![x.clone()], split(self.name, x, a.axis)?))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &ScanAttrs, geom: &AxisSplit) -> Result<Vec<CpuData>> {
        // Each dtype accumulates in its own precision, as the GPU does.
        let run = |x: &CpuData| -> Option<CpuData> {
            Some(match (x, self.product) {
                (CpuData::F32(v), false) => CpuData::F32(scan_lines(v, geom, a, 0.0, |p, q| p + q)),
                (CpuData::F32(v), true) => CpuData::F32(scan_lines(v, geom, a, 1.0, |p, q| p * q)),
                (CpuData::F64(v), false) => CpuData::F64(scan_lines(v, geom, a, 0.0, |p, q| p + q)),
                (CpuData::F64(v), true) => CpuData::F64(scan_lines(v, geom, a, 1.0, |p, q| p * q)),
                (CpuData::I32(v), false) => CpuData::I32(scan_lines(v, geom, a, 0, i32::wrapping_add)),
                (CpuData::I32(v), true) => CpuData::I32(scan_lines(v, geom, a, 1, i32::wrapping_mul)),
                (CpuData::I64(v), false) => CpuData::I64(scan_lines(v, geom, a, 0, i64::wrapping_add)),
                (CpuData::I64(v), true) => CpuData::I64(scan_lines(v, geom, a, 1, i64::wrapping_mul)),
                _ => return None,
            })
        };
        let x = k.x(0);
        Ok(vec![run(x).ok_or_else(|| Error::unsupported(self.name, x.dtype(), "on the CPU"))?])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &ScanAttrs, &(outer, len, inner): &AxisSplit) -> Result<()> {
        let dtype = k.ins[0].dtype;
        wgsl::check_gpu_dtype(self.name, dtype, k.ins[0].place)?;
        let params = [outer as u32, len as u32, inner as u32, a.exclusive as u32, a.reverse as u32];
        let binds = [Bind::read(k.x(0)), Bind::write(k.y(0))];
        k.ctx.dispatch(&SCAN_KERNEL, scan_key(self.product, dtype), "main", &binds, &params, (outer * inner) as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, a: &ScanAttrs, _: &AxisSplit) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g.grad_if(0, || {
            if self.product {
                apply1(&CUMPROD_GRAD, &[g.x(0), g.g()], a.clone())
            } else {
                // Each input feeds the outputs after it (before it, reversed): the scan
                // of the gradient the other way round.
                apply1(&CUMSUM, &[g.g()], ScanAttrs { reverse: !a.reverse, ..a.clone() })
            }
        })?])
    }
}

registry_entry!(
    /// The gradient of `cumprod` with respect to its input: inputs `x` and the output's
    /// gradient `g`. In scan order, `dx_s = E_s · T_s`, where `E_s` is the product of the
    /// elements before `s` and `T_s = g_s + x_{s+1}·T_{s+1}` (exclusive:
    /// `T_s = g_{s+1} + x_{s+1}·T_{s+1}`), so no element is divided by.
    CUMPROD_GRAD: CumprodGradOp = "cumprod_grad", ScanAttrs, AxisSplit
);

impl Op for CumprodGradOp {
    fn infer(&self, xs: &[&TensorMeta], a: &ScanAttrs) -> Result<(Vec<TensorMeta>, AxisSplit)> {
        let [x, g] = inputs("cumprod_grad", xs)?;
        x.expect_float("cumprod_grad", "the input")?;
        if x.shape != g.shape || x.dtype != g.dtype {
            return Err(Error::invalid(
                "cumprod_grad",
                format!("the gradient {:?} {} must match the input {:?} {}", g.dims(), g.dtype, x.dims(), x.dtype),
            ));
        }
        Ok((vec![x.clone()], split("cumprod_grad", x, a.axis)?))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &ScanAttrs, geom: &AxisSplit) -> Result<Vec<CpuData>> {
        let (x, g) = (k.x(0), k.x(1));
        float_kernel!("cumprod_grad"; x = x, g = g => cumprod_grad_lines(x, g, geom, a)).map(|d| vec![d])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &ScanAttrs, &(outer, len, inner): &AxisSplit) -> Result<()> {
        wgsl::check_gpu_dtype("cumprod_grad", k.ins[0].dtype, k.ins[0].place)?;
        let params = [outer as u32, len as u32, inner as u32, a.exclusive as u32, a.reverse as u32];
        let binds = [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::write(k.y(0))];
        k.ctx.dispatch(&CUMPROD_GRAD_KERNEL, 0, "main", &binds, &params, (outer * inner) as u64)
    }
}

/// `cumprod`'s input gradient line by line (see [`CumprodGradOp`]), in `x`'s precision.
fn cumprod_grad_lines<T: WinFloat>(x: &[T], g: &[T], geom: &AxisSplit, a: &ScanAttrs) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    for line in 0..geom.0 * geom.2 {
        let pos: Vec<usize> = line_positions(geom, line, a.reverse).collect();
        let mut before = T::ONE;
        for &p in &pos {
            out[p] = before;
            before = before * x[p];
        }
        let mut tail = T::ZERO;
        for s in (0..pos.len()).rev() {
            tail = match (a.exclusive, pos.get(s + 1)) {
                (false, None) => g[pos[s]],
                (false, Some(&q)) => g[pos[s]] + x[q] * tail,
                (true, None) => T::ZERO,
                (true, Some(&q)) => g[q] + x[q] * tail,
            };
            out[pos[s]] = out[pos[s]] * tail;
        }
    }
    out
}

fn scan(op: &'static ScanOp, x: &Tensor, axis: Option<isize>, exclusive: bool, reverse: bool) -> Result<Tensor> {
    match axis {
        Some(axis) => apply1(op, &[x], ScanAttrs { axis, exclusive, reverse }),
        None => apply1(op, &[&x.flatten(0, -1)?], ScanAttrs { axis: 0, exclusive, reverse }),
    }
}

/// The cumulative sum along `axis` (`paddle.cumsum`); over the flattened tensor when
/// `None`. Integer sums wrap on overflow.
pub fn cumsum(x: &Tensor, axis: Option<isize>) -> Result<Tensor> {
    scan(&CUMSUM, x, axis, false, false)
}

/// `cumsum` with Paddle's op attributes: `exclusive` leaves each element out of its own
/// sum (the first is 0), `reverse` sums from the end of the axis.
pub fn cumsum_with(x: &Tensor, axis: Option<isize>, exclusive: bool, reverse: bool) -> Result<Tensor> {
    scan(&CUMSUM, x, axis, exclusive, reverse)
}

/// The cumulative product along `dim` (`paddle.cumprod`); over the flattened tensor when
/// `None`. Differentiable, with exact gradients where the input has zeros.
pub fn cumprod(x: &Tensor, dim: Option<isize>) -> Result<Tensor> {
    scan(&CUMPROD, x, dim, false, false)
}

/// `cumprod` exclusive (each element left out of its own product) and/or reversed.
pub fn cumprod_with(x: &Tensor, dim: Option<isize>, exclusive: bool, reverse: bool) -> Result<Tensor> {
    scan(&CUMPROD, x, dim, exclusive, reverse)
}

impl Tensor {
    /// `cumsum` as a method.
    pub fn cumsum(&self, axis: Option<isize>) -> Result<Tensor> {
        cumsum(self, axis)
    }

    /// `cumprod` as a method.
    pub fn cumprod(&self, dim: Option<isize>) -> Result<Tensor> {
        cumprod(self, dim)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&CUMSUM, &CUMPROD, &CUMPROD_GRAD],
    kernels: &[&SCAN_KERNEL, &CUMPROD_GRAD_KERNEL],
};
