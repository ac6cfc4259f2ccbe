//! Index ops: index_select, gather, take_along_axis, one_hot, embedding lookup.
//!
//! Every gather-like op is one primitive, [`gather_axis`]: with the input viewed as
//! `(outer, N, inner)` around the axis, `out[o, j, i] = x[o, index(o, j, i), i]`, where the
//! index of `(o, j, i)` sits at `o·so + j·sj + i·si` in the index tensor (a shared 1-D list for
//! index_select/gather/embedding, a full tensor for take_along_axis). Its gradient is the
//! adjoint scatter-add ([`scatter_add_axis`]), whose gradient is the gather again, so every
//! order of derivative works. The GPU scatter-add is deterministic: each gradient element
//! loops over its index column and sums the matches in order (no float atomics), the same
//! order as the CPU loop.
//!
//! Indices are int32 or int64 and must lie in `[0, N)` (no negative indices, as Paddle). On
//! the CPU an index out of range is an `InvalidArgument` error naming the op, the value and the
//! size; the GPU cannot check without a readback, so there an out-of-range index reads 0 (and
//! receives no gradient).

use crate::autograd::record1;
use crate::backend::cpu::{CpuData, gpu_bytes, map_data, par_chunks_mut};
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::elementwise::upcast;
use crate::ops::wgsl;
use crate::tensor::Backend;
use crate::{DType, Error, Result, Tensor};

const INDEX_DTYPES: [DType; 2] = [DType::Int32, DType::Int64];

pub(crate) static GATHER: Kernel = Kernel {
    file: "gather.wgsl",
    variants: || {
        let mut v = Vec::new();
        for words in [1, 2] {
            for index in INDEX_DTYPES {
                v.push(gather_variant(words, index));
            }
        }
        v
    },
};

pub(crate) static SCATTER_ADD: Kernel =
    Kernel { file: "scatter_add.wgsl", variants: || INDEX_DTYPES.iter().map(|&d| index_variant(d)).collect() };

pub(crate) static ONE_HOT: Kernel =
    Kernel { file: "one_hot.wgsl", variants: || INDEX_DTYPES.iter().map(|&d| index_variant(d)).collect() };

/// `I` (the index storage type) and `INDEX_AT` (its bounds-safe read) for an index dtype.
fn index_variant(index: DType) -> Variant {
    let at = if index == DType::Int64 {
        "let v = index[k];\n    return select(0xffffffffu, v.x, v.y == 0u);"
    } else {
        "let v = index[k];\n    return select(0xffffffffu, bitcast<u32>(v), v >= 0);"
    };
    vec![("I", wgsl::storage(index).into()), ("INDEX_AT", at.into())]
}

/// gather.wgsl moves elements as raw words: one u32 (32-bit dtypes) or two (int64).
fn gather_variant(words: usize, index: DType) -> Variant {
    let mut v = vec![("S", if words == 2 { "vec2<u32>" } else { "u32" }.to_string())];
    v.extend(index_variant(index));
    v
}

/// Where a gather reads: the `(outer, n, inner)` input view, `m` output positions along the
/// axis, the index strides `(so, sj, si)`, and an optional padding index whose rows read 0.
#[derive(Clone, Copy, Debug)]
struct Geom {
    outer: usize,
    n: usize,
    m: usize,
    inner: usize,
    so: usize,
    sj: usize,
    si: usize,
    pad: Option<usize>,
}

impl Geom {
    /// One index list of `m` entries shared by every `(o, i)`.
    fn shared(outer: usize, n: usize, m: usize, inner: usize) -> Geom {
        Geom { outer, n, m, inner, so: 0, sj: 1, si: 0, pad: None }
    }

    fn params(&self, total: usize) -> Vec<u32> {
        let pad = self.pad.map_or(u32::MAX, |p| p as u32);
        [total, self.m, self.inner, self.n, self.so, self.sj, self.si].iter().map(|&v| v as u32).chain([pad]).collect()
    }

    /// Position of the index of output `(o, j, i)`.
    fn at(&self, o: usize, j: usize, i: usize) -> usize {
        o * self.so + j * self.sj + i * self.si
    }
}

/// Errors unless `index` is an int32/int64 tensor on `x`'s place.
fn check_index(op: &'static str, x: &Tensor, index: &Tensor) -> Result<()> {
    if !index.dtype().is_int() {
        return Err(Error::unsupported(op, index.dtype(), "for indices (expected int32 or int64)"));
    }
    x.same_place(op, index)
}

/// The index values as `usize`, `usize::MAX` marking out-of-range ones (the forward pass
/// rejects them first; the kernels skip them).
fn host_indices(index: &CpuData, n: usize) -> Vec<usize> {
    (0..index.len())
        .map(|k| {
            let v = index.get_i64(k);
            if v >= 0 && (v as u64) < n as u64 { v as usize } else { usize::MAX }
        })
        .collect()
}

/// The first index outside `[0, n)`, if any.
fn out_of_range(index: &CpuData, n: usize) -> Option<i64> {
    (0..index.len()).map(|k| index.get_i64(k)).find(|&v| v < 0 || v as u64 >= n as u64)
}

fn gather_cpu<T: Copy + Default + Send + Sync>(src: &[T], idx: &[usize], g: &Geom, total: usize) -> Vec<T> {
    let mut out = vec![T::default(); total];
    let (m, inner) = (g.m, g.inner);
    par_chunks_mut(&mut out, 1 << 14, |start, chunk| {
        for (k, o_val) in chunk.iter_mut().enumerate() {
            let t = start + k;
            let (o, j, i) = (t / (inner * m), (t / inner) % m, t % inner);
            let v = idx[g.at(o, j, i)];
            if v != usize::MAX && Some(v) != g.pad {
                *o_val = src[(o * g.n + v) * inner + i];
            }
        }
    });
    out
}

fn scatter_add_cpu<T: Copy + Default + std::ops::AddAssign>(grad: &[T], idx: &[usize], g: &Geom) -> Vec<T> {
    let mut out = vec![T::default(); g.outer * g.n * g.inner];
    for o in 0..g.outer {
        for j in 0..g.m {
            for i in 0..g.inner {
                let v = idx[g.at(o, j, i)];
                if v != usize::MAX && Some(v) != g.pad {
                    out[(o * g.n + v) * g.inner + i] += grad[(o * g.m + j) * g.inner + i];
                }
            }
        }
    }
    out
}

/// The gather primitive (see the module docs), recorded for autograd with `op`'s name. On
/// the CPU every index is checked against `n`; `what` names the indexed dimension in errors.
fn gather_axis(op: &'static str, what: &str, x: &Tensor, index: &Tensor, g: Geom, shape: Vec<usize>) -> Result<Tensor> {
    if x.dtype() == DType::Float16 {
        return gather_axis(op, what, &upcast(x)?, index, g, shape)?.cast(DType::Float16);
    }
    let total = g.outer * g.m * g.inner;
    let out = match (x.backend(), index.backend()) {
        (Backend::Cpu(d), Backend::Cpu(ix)) => {
            if let Some(v) = out_of_range(&ix, g.n) {
                return Err(Error::invalid(
                    op,
                    format!("index {v} is out of range for {what} (size {}, valid 0..{})", g.n, g.n),
                ));
            }
            let idx = host_indices(&ix, g.n);
            Tensor::from_cpu(map_data!(&*d, v => gather_cpu(v, &idx, &g, total)), shape)
        }
        (Backend::Gpu(b), Backend::Gpu(ix)) => {
            let ctx = &b.ctx;
            let out = ctx.alloc(op, gpu_bytes(x.dtype(), total))?;
            let variant = gather_variant(wgsl::param_words(x.dtype()), index.dtype());
            let binds = [Bind::read(b), Bind::read(ix), Bind::write(&out)];
            ctx.dispatch_1d(&GATHER, &variant, "main", &binds, &g.params(total), total as u64)?;
            Tensor::from_gpu(out, shape, x.dtype())
        }
        _ => unreachable!("places were checked equal"),
    };
    if !x.dtype().is_float() {
        return Ok(out);
    }
    let (index, x_shape) = (index.clone(), x.shape().to_vec());
    Ok(record1(op, &[x], out, move |c| Ok(vec![Some(scatter_add_axis(op, c.grad(), &index, g, x_shape.clone())?)])))
}

/// The adjoint of [`gather_axis`]: sums `grad` (shaped like the gather's output) into a
/// zero tensor of `shape` (the gather's input) at the indexed positions.
fn scatter_add_axis(op: &'static str, grad: &Tensor, index: &Tensor, g: Geom, shape: Vec<usize>) -> Result<Tensor> {
    if grad.dtype() == DType::Float16 {
        return scatter_add_axis(op, &upcast(grad)?, index, g, shape)?.cast(DType::Float16);
    }
    let total = g.outer * g.n * g.inner;
    let out = match (grad.backend(), index.backend()) {
        (Backend::Cpu(d), Backend::Cpu(ix)) => {
            let idx = host_indices(&ix, g.n);
            let data = match &*d {
                CpuData::F32(v) => CpuData::F32(scatter_add_cpu(v, &idx, &g)),
                CpuData::F64(v) => CpuData::F64(scatter_add_cpu(v, &idx, &g)),
                other => {
                    return Err(Error::unsupported(op, other.dtype(), "for gradients (expected a float dtype)"));
                }
            };
            Tensor::from_cpu(data, shape)
        }
        (Backend::Gpu(b), Backend::Gpu(ix)) => {
            grad.expect_dtype(op, DType::Float32)?;
            let ctx = &b.ctx;
            let out = ctx.alloc(op, gpu_bytes(DType::Float32, total))?;
            let binds = [Bind::read(b), Bind::read(ix), Bind::write(&out)];
            ctx.dispatch_1d(
                &SCATTER_ADD,
                &index_variant(index.dtype()),
                "main",
                &binds,
                &g.params(total),
                total as u64,
            )?;
            Tensor::from_gpu(out, shape, DType::Float32)
        }
        _ => unreachable!("gradients live on their tensor's place"),
    };
    let (index, grad_shape) = (index.clone(), grad.shape().to_vec());
    Ok(record1(op, &[grad], out, move |c| {
        Ok(vec![Some(gather_axis(op, "the gathered axis", c.grad(), &index, g, grad_shape.clone())?)])
    }))
}

/// Selects entries of `x` along `axis` at the positions in the 1-D `index`
/// (`paddle.index_select`): the output has `index.len()` entries along `axis`.
pub fn index_select(x: &Tensor, index: &Tensor, axis: isize) -> Result<Tensor> {
    select_along("index_select", x, index, axis, false)
}

/// `paddle.gather` (2.x): like [`index_select`] for a 1-D `index`; a 0-D `index` selects one
/// entry and drops `axis`.
pub fn gather(x: &Tensor, index: &Tensor, axis: isize) -> Result<Tensor> {
    select_along("gather", x, index, axis, true)
}

fn select_along(op: &'static str, x: &Tensor, index: &Tensor, axis: isize, scalar_ok: bool) -> Result<Tensor> {
    check_index(op, x, index)?;
    let ax = x.shape_ref().axis(op, axis)?;
    let scalar = index.ndim() == 0;
    if index.ndim() != 1 && !(scalar_ok && scalar) {
        let expected = if scalar_ok { "0-D or 1-D" } else { "1-D" };
        return Err(Error::shape(op, format!("index must be {expected}, got shape {:?}", index.shape())));
    }
    let (outer, n, inner) = x.shape_ref().around(ax);
    let m = index.numel();
    let mut shape = x.shape().to_vec();
    if scalar {
        shape.remove(ax);
    } else {
        shape[ax] = m;
    }
    let what = format!("axis {ax} of shape {:?}", x.shape());
    gather_axis(op, &what, x, index, Geom::shared(outer, n, m, inner), shape)
}

/// Picks `arr` values along `axis` at `indices` (`paddle.take_along_axis`): `indices` has
/// `arr`'s rank; the other dimensions broadcast against each other (numpy rules), and the
/// output has `indices`'s size along `axis`.
pub fn take_along_axis(arr: &Tensor, indices: &Tensor, axis: isize) -> Result<Tensor> {
    const OP: &str = "take_along_axis";
    check_index(OP, arr, indices)?;
    if indices.ndim() != arr.ndim() {
        return Err(Error::shape(
            OP,
            format!("indices {:?} must have the rank of arr {:?}", indices.shape(), arr.shape()),
        ));
    }
    let ax = arr.shape_ref().axis(OP, axis)?;
    let mut shape = Vec::with_capacity(arr.ndim());
    for (d, (&a, &i)) in arr.shape().iter().zip(indices.shape()).enumerate() {
        shape.push(match (a, i) {
            _ if d == ax => i,
            (a, i) if a == i || i == 1 => a,
            (1, i) => i,
            _ => {
                return Err(Error::shape(
                    OP,
                    format!(
                        "indices {:?} do not broadcast against arr {:?} (dimension {d}: {i} vs {a})",
                        indices.shape(),
                        arr.shape()
                    ),
                ));
            }
        });
    }
    let mut arr_shape = shape.clone();
    arr_shape[ax] = arr.shape()[ax];
    let arr_b = crate::broadcast_to(arr, &arr_shape)?;
    let idx_b = crate::broadcast_to(indices, &shape)?;
    let (outer, n, inner) = arr_b.shape_ref().around(ax);
    let m = shape[ax];
    let g = Geom { outer, n, m, inner, so: m * inner, sj: inner, si: 1, pad: None };
    let what = format!("axis {ax} of arr {:?}", arr.shape());
    gather_axis(OP, &what, &arr_b, &idx_b, g, shape)
}

/// One-hot encoding of integer labels (`paddle.nn.functional.one_hot`): float32 of shape
/// `x.shape + [num_classes]`. Labels must lie in `[0, num_classes)` (an error on the CPU; an
/// all-zero row on the GPU).
pub fn one_hot(x: &Tensor, num_classes: usize) -> Result<Tensor> {
    const OP: &str = "one_hot";
    if !x.dtype().is_int() {
        return Err(Error::unsupported(OP, x.dtype(), "for labels (expected int32 or int64)"));
    }
    if num_classes == 0 {
        return Err(Error::invalid(OP, "num_classes must be at least 1"));
    }
    let mut shape = x.shape().to_vec();
    shape.push(num_classes);
    let total = x.numel() * num_classes;
    match x.backend() {
        Backend::Cpu(d) => {
            if let Some(v) = out_of_range(&d, num_classes) {
                return Err(Error::invalid(
                    OP,
                    format!("label {v} is out of range for num_classes {num_classes} (valid 0..{num_classes})"),
                ));
            }
            let mut out = vec![0.0f32; total];
            for k in 0..d.len() {
                out[k * num_classes + d.get_i64(k) as usize] = 1.0;
            }
            Ok(Tensor::from_cpu(CpuData::F32(out), shape))
        }
        Backend::Gpu(b) => {
            let ctx = &b.ctx;
            let out = ctx.alloc(OP, gpu_bytes(DType::Float32, total))?;
            let params = [total as u32, num_classes as u32];
            ctx.dispatch_1d(
                &ONE_HOT,
                &index_variant(x.dtype()),
                "main",
                &[Bind::read(b), Bind::write(&out)],
                &params,
                total as u64,
            )?;
            Ok(Tensor::from_gpu(out, shape, DType::Float32))
        }
    }
}

/// Embedding lookup (`paddle.nn.functional.embedding`): rows of `weight` (`[num_embeddings,
/// dim]`) at the integer `ids`, shaped `ids.shape + [dim]`. Positions whose id equals
/// `padding_idx` (negative values count from the end) are zero and send no gradient to that
/// row. The weight gradient is a deterministic scatter-add.
pub fn embedding(ids: &Tensor, weight: &Tensor, padding_idx: Option<i64>) -> Result<Tensor> {
    const OP: &str = "embedding";
    check_index(OP, weight, ids)?;
    if weight.ndim() != 2 {
        return Err(Error::shape(OP, format!("weight must be 2-D [num_embeddings, dim], got {:?}", weight.shape())));
    }
    let (rows, dim) = (weight.shape()[0], weight.shape()[1]);
    let pad = match padding_idx {
        None => None,
        Some(p) if p >= -(rows as i64) && p < rows as i64 => Some(if p < 0 { p + rows as i64 } else { p } as usize),
        Some(p) => {
            return Err(Error::invalid(OP, format!("padding_idx {p} is out of range for {rows} embeddings")));
        }
    };
    let mut shape = ids.shape().to_vec();
    shape.push(dim);
    let g = Geom { pad, ..Geom::shared(1, rows, ids.numel(), dim) };
    let what = format!("the rows of weight {:?}", weight.shape());
    gather_axis(OP, &what, weight, ids, g, shape)
}

impl Tensor {
    /// [`index_select`] on this tensor.
    pub fn index_select(&self, index: &Tensor, axis: isize) -> Result<Tensor> {
        index_select(self, index, axis)
    }

    /// [`gather`] on this tensor.
    pub fn gather(&self, index: &Tensor, axis: isize) -> Result<Tensor> {
        gather(self, index, axis)
    }

    /// [`take_along_axis`] on this tensor.
    pub fn take_along_axis(&self, indices: &Tensor, axis: isize) -> Result<Tensor> {
        take_along_axis(self, indices, axis)
    }
}
