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
//! Indices are int32 or int64 and must lie in `[0, N)` (no negative indices, as Paddle). An
//! index out of range is an `InvalidArgument` error naming the op, the value and the size: at
//! the call on the CPU; on the GPU the kernel records it in the device's error flag (reading
//! 0 meanwhile) and the next readback or `sync()` returns the error.
//!
//! Registry entries: the public ops (`index_select`, `gather`, `take_along_axis`,
//! `embedding`, `one_hot`) and the two primitives their gradients are written in
//! (`index_gather`, `index_scatter_add`), each of which is the other's gradient.

use crate::backend::cpu::float_kernel;
use crate::backend::cpu::{CpuData, map_data, par_chunks_new};
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

pub(crate) const INDEX_DTYPES: [DType; 2] = [DType::Int32, DType::Int64];

pub(crate) static GATHER: Kernel = Kernel {
    file: "gather.wgsl",
    keys: || {
        let mut v = Vec::new();
        for words in [1, 2] {
            for index in INDEX_DTYPES {
                v.push(gather_key(words, index));
            }
        }
        v
    },
    variant: |key| gather_variant((key / 8) as usize, DType::from_code(key % 8)),
};

fn gather_key(words: usize, index: DType) -> u32 {
    words as u32 * 8 + index.code()
}

pub(crate) static SCATTER_ADD: Kernel =
    Kernel { file: "scatter_add.wgsl", keys: index_keys, variant: |k| index_variant(DType::from_code(k)) };

pub(crate) static ONE_HOT: Kernel =
    Kernel { file: "one_hot.wgsl", keys: index_keys, variant: |k| index_variant(DType::from_code(k)) };

/// The kernel keys of an index-reading kernel: one variant per index dtype.
pub(crate) fn index_keys() -> Vec<u32> {
    INDEX_DTYPES.iter().map(|d| d.code()).collect()
}

/// `I` (the index storage type) and `INDEX_AT` (its bounds-safe read) for an index dtype.
pub(crate) fn index_variant(index: DType) -> Variant {
    let at = if index == DType::Int64 {
        "let v = index[k];\n    return select(0xffffffffu, v.x, v.y == 0u);"
    } else {
        "let v = index[k];\n    return select(0xffffffffu, bitcast<u32>(v), v >= 0);"
    };
    let raw = if index == DType::Int64 {
        "return index[k];"
    } else {
        "let v = index[k];\n    return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));"
    };
    vec![("I", wgsl::storage(index).into()), ("INDEX_AT", at.into()), ("INDEX_RAW", raw.into())]
}

/// gather.wgsl moves elements as raw words: one u32 (32-bit dtypes) or two (int64).
fn gather_variant(words: usize, index: DType) -> Variant {
    let mut v = vec![("S", if words == 2 { "vec2<u32>" } else { "u32" }.to_string())];
    v.extend(index_variant(index));
    v
}

/// Where a gather reads: the `(outer, n, inner)` input view, `m` output positions along the
/// axis, the index strides `(so, sj, si)`, an optional padding index whose rows read 0, and
/// the output shape (`shape`) and the input shape (`in_shape`).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct Geom {
    pub outer: usize,
    pub n: usize,
    pub m: usize,
    pub inner: usize,
    pub so: usize,
    pub sj: usize,
    pub si: usize,
    pub pad: Option<usize>,
    pub out_shape: Vec<usize>,
    pub in_shape: Vec<usize>,
    /// The gathered axis of the input: `(outer, n, inner)` are the sizes around it.
    pub axis: usize,
}

impl Geom {
    /// One index list of `m` entries shared by every `(o, i)`.
    pub(crate) fn shared(
        axis: usize,
        (outer, n, inner): (usize, usize, usize),
        m: usize,
        out: Vec<usize>,
        input: Vec<usize>,
    ) -> Geom {
        let (out_shape, in_shape) = (out, input);
        Geom { outer, n, m, inner, so: 0, sj: 1, si: 0, pad: None, out_shape, in_shape, axis }
    }

    /// The kind of index layout without any size: what a gradient op records, taking the
    /// sizes from its operands when it runs (so a program fits any batch).
    fn skeleton(&self) -> Geom {
        let shared = self.so == 0;
        Geom {
            outer: 0,
            n: 0,
            m: 0,
            inner: 0,
            so: (!shared) as usize,
            sj: shared as usize,
            si: (!shared) as usize,
            pad: self.pad,
            out_shape: Vec::new(),
            in_shape: Vec::new(),
            axis: self.axis,
        }
    }

    /// This layout fitted to an output of `out` and an input of `input` dims.
    fn refit(&self, out: &[usize], input: &[usize]) -> Geom {
        let ax = self.axis.min(input.len().saturating_sub(1));
        let outer: usize = input[..ax].iter().product();
        let n = input.get(ax).copied().unwrap_or(1);
        let inner: usize = input.get(ax + 1..).map_or(1, |r| r.iter().product());
        let m = out.iter().product::<usize>().checked_div(outer * inner).unwrap_or(0);
        let (so, sj, si) = if self.so == 0 { (0, 1, 0) } else { (m * inner, inner, 1) };
        Geom {
            outer,
            n,
            m,
            inner,
            so,
            sj,
            si,
            pad: self.pad,
            out_shape: out.to_vec(),
            in_shape: input.to_vec(),
            axis: ax,
        }
    }

    pub(crate) fn params(&self, total: usize) -> Vec<u32> {
        let pad = self.pad.map_or(u32::MAX, |p| p as u32);
        [total, self.m, self.inner, self.n, self.so, self.sj, self.si].iter().map(|&v| v as u32).chain([pad]).collect()
    }

    /// Position of the index of output `(o, j, i)`.
    pub(crate) fn at(&self, o: usize, j: usize, i: usize) -> usize {
        o * self.so + j * self.sj + i * self.si
    }

    /// Elements the index tensor must hold.
    fn index_len(&self) -> usize {
        if self.outer * self.m * self.inner == 0 {
            return 0;
        }
        self.at(self.outer - 1, self.m - 1, self.inner - 1) + 1
    }
}

/// Errors unless `index` holds int32/int64 indices.
pub(crate) fn check_index(op: &'static str, index: &TensorMeta) -> Result<()> {
    index.expect_int(op, "indices")?;
    Ok(())
}

/// The index values as `usize`, `usize::MAX` marking out-of-range ones (the forward pass
/// rejects them first; the kernels skip them).
pub(crate) fn host_indices(index: &CpuData, n: usize) -> Vec<usize> {
    (0..index.len())
        .map(|k| {
            let v = index.get_i64(k);
            if v >= 0 && (v as u64) < n as u64 { v as usize } else { usize::MAX }
        })
        .collect()
}

/// The first index outside `[0, n)`, if any.
pub(crate) fn out_of_range(index: &CpuData, n: usize) -> Option<i64> {
    (0..index.len()).map(|k| index.get_i64(k)).find(|&v| v < 0 || v as u64 >= n as u64)
}

fn gather_cpu<T: Copy + Default + Send + Sync>(src: &[T], idx: &[usize], g: &Geom, total: usize) -> Vec<T> {
    let (m, inner) = (g.m, g.inner);
    par_chunks_new(total, T::default(), 1 << 14, |start, chunk| {
        for (k, o_val) in chunk.iter_mut().enumerate() {
            let t = start + k;
            let (o, j, i) = (t / (inner * m), (t / inner) % m, t % inner);
            let v = idx[g.at(o, j, i)];
            if v != usize::MAX && Some(v) != g.pad {
                *o_val = src[(o * g.n + v) * inner + i];
            }
        }
    })
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

/// The gather kernels, shared by every gather-like op: `x` (input 0) read at `index`
/// (input 1); `what` names the indexed dimension in the CPU's range error.
fn gather_cpu_kernel(op: &'static str, what: &str, k: &CpuCall<'_>, g: &Geom) -> Result<CpuData> {
    let (x, ix) = (k.x(0), k.x(1));
    if let Some(v) = out_of_range(ix, g.n) {
        return Err(Error::invalid(
            op,
            format!("index {v} is out of range for {what} (size {}, valid 0..{})", g.n, g.n),
        ));
    }
    let idx = host_indices(ix, g.n);
    let total = g.outer * g.m * g.inner;
    Ok(map_data!(x, v => gather_cpu(v, &idx, g, total)))
}

fn gather_gpu_kernel(op: &'static str, k: &GpuCall<'_>, g: &Geom) -> Result<()> {
    let total = g.outer * g.m * g.inner;
    let key = gather_key(wgsl::param_words(k.ins[0].dtype), k.ins[1].dtype);
    let (code, flag) = k.ctx.index_flag(op);
    let binds = [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::write(k.y(0)), Bind::flag(&flag)];
    let mut params = g.params(total);
    params.push(code);
    k.ctx.dispatch(&GATHER, key, "main", &binds, &params, total as u64)
}

/// The gradient of every gather: `dy` summed into zeros of the input's shape.
/// The gradient of a gather: a scatter-add into the gathered input's shape, its sizes read
/// from the operands when it runs.
fn gather_backward(op_index: &Tensor, g: &GradCall<'_>, geom: &Geom) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![g.grad_if(0, || apply1(&INDEX_SCATTER_ADD, &[g.g(), op_index, g.x(0)], geom.skeleton()))?, None])
}

/// Declares a public gather-like op: meta inference computes its `Geom`; the kernels and
/// the backward rule are the shared ones.
macro_rules! gather_like {
    ($(#[$doc:meta])* $stat:ident: $ty:ident = $name:literal, $attrs:ty, $(amp: $amp:expr,)? |$x:ident, $ix:ident, $a:ident| $geom:expr) => {
        registry_entry!($(#[$doc])* $stat: $ty = $name, $attrs, (Geom, String));

        impl Op for $ty {
            fn infer(&self, xs: &[&TensorMeta], $a: &$attrs) -> Result<(Vec<TensorMeta>, (Geom, String))> {
                let [$x, $ix] = inputs($name, xs)?;
                check_index($name, $ix)?;
                let geom_of = || -> Result<(Geom, String)> { $geom };
                let (geom, what) = geom_of()?;
                if $ix.numel() != geom.index_len() && geom.index_len() > 0 {
                    return Err(Error::shape($name, format!("index {:?} does not fit the gather", $ix.dims())));
                }
                Ok((vec![TensorMeta::new(geom.out_shape.clone(), $x.dtype, $x.place)], (geom, what)))
            }

            fn cpu(&self, k: &mut CpuCall<'_>, _: &$attrs, (g, what): &(Geom, String)) -> Result<Vec<CpuData>> {
                Ok(vec![gather_cpu_kernel($name, what, k, g)?])
            }

            fn gpu(&self, k: &GpuCall<'_>, _: &$attrs, (g, _): &(Geom, String)) -> Result<()> {
                gather_gpu_kernel($name, k, g)
            }

            fn differentiable(&self) -> bool {
                true
            }

            fn backward(&self, g: &GradCall<'_>, _: &$attrs, (geom, _): &(Geom, String)) -> Result<Vec<Option<Tensor>>> {
                gather_backward(g.x(1), g, geom)
            }

            fn facts(&self) -> Facts {
                Facts { amp: [$($amp,)? AmpList::Gray][0], ..Facts::NONE }
            }
        }
    };
}

/// The axis of an index op.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct IndexAxisAttrs {
    pub axis: isize,
}

fn select_geom(
    op: &'static str,
    x: &TensorMeta,
    index: &TensorMeta,
    axis: isize,
    scalar_ok: bool,
) -> Result<(Geom, String)> {
    let ax = x.shape.axis(op, axis)?;
    let scalar = index.rank() == 0;
    if index.rank() != 1 && !(scalar_ok && scalar) {
        let expected = if scalar_ok { "0-D or 1-D" } else { "1-D" };
        return Err(Error::shape(op, format!("index must be {expected}, got shape {:?}", index.dims())));
    }
    let (outer, n, inner) = x.shape.around(ax);
    let m = index.numel();
    let mut shape = x.dims().to_vec();
    if scalar {
        shape.remove(ax);
    } else {
        shape[ax] = m;
    }
    let what = format!("axis {ax} of shape {:?}", x.dims());
    Ok((Geom::shared(ax, (outer, n, inner), m, shape, x.dims().to_vec()), what))
}

gather_like!(
    /// `paddle.index_select`.
    INDEX_SELECT: IndexSelectOp = "index_select", IndexAxisAttrs,
    |x, ix, a| select_geom("index_select", x, ix, a.axis, false)
);

gather_like!(
    /// `paddle.gather` (2.x).
    GATHER_OP: GatherOp = "gather", IndexAxisAttrs,
    |x, ix, a| select_geom("gather", x, ix, a.axis, true)
);

gather_like!(
    /// `paddle.take_along_axis` on operands already broadcast against each other (the
    /// public function broadcasts them).
    TAKE_ALONG_AXIS: TakeAlongAxisOp = "take_along_axis", IndexAxisAttrs,
    |arr, ix, a| {
        const OP: &str = "take_along_axis";
        let ax = arr.shape.axis(OP, a.axis)?;
        let same_rank = ix.rank() == arr.rank();
        let others_match = same_rank && (0..arr.rank()).all(|d| d == ax || arr.dims()[d] == ix.dims()[d]);
        if !others_match {
            return Err(Error::shape(
                OP,
                format!("indices {:?} must match arr {:?} outside axis {ax}", ix.dims(), arr.dims()),
            ));
        }
        let (outer, n, inner) = arr.shape.around(ax);
        let m = ix.dims()[ax];
        let what = format!("axis {ax} of arr {:?}", arr.dims());
        let g = Geom {
            outer, n, m, inner, so: m * inner, sj: inner, si: 1, pad: None,
            out_shape: ix.dims().to_vec(), in_shape: arr.dims().to_vec(), axis: ax,
        };
        Ok((g, what))
    }
);

/// `embedding`'s attribute.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct EmbeddingAttrs {
    pub padding_idx: Option<i64>,
}

gather_like!(
    /// `paddle.nn.functional.embedding`: inputs `(weight, ids)`.
    EMBEDDING: EmbeddingOp = "embedding", EmbeddingAttrs,
    // Paddle's `lookup_table_v2`, on its extra black list.
    amp: AmpList::Black,
    |weight, ids, a| {
        const OP: &str = "embedding";
        if weight.rank() != 2 {
            return Err(Error::shape(OP, format!("weight must be 2-D [num_embeddings, dim], got {:?}", weight.dims())));
        }
        let (rows, dim) = (weight.dims()[0], weight.dims()[1]);
        let pad = match a.padding_idx {
            None => None,
            Some(p) if p >= -(rows as i64) && p < rows as i64 => Some(if p < 0 { p + rows as i64 } else { p } as usize),
            Some(p) => return Err(Error::invalid(OP, format!("padding_idx {p} is out of range for {rows} embeddings"))),
        };
        let mut shape = ids.dims().to_vec();
        shape.push(dim);
        let g = Geom { pad, ..Geom::shared(0, (1, rows, dim), ids.numel(), shape, weight.dims().to_vec()) };
        Ok((g, format!("the rows of weight {:?}", weight.dims())))
    }
);

registry_entry!(
    /// The gather primitive by explicit geometry: inputs `(x, index)`; the gradient of
    /// `index_scatter_add`.
    INDEX_GATHER: IndexGatherOp = "index_gather", Geom, ()
);

impl Op for IndexGatherOp {
    fn infer(&self, xs: &[&TensorMeta], g: &Geom) -> Result<(Vec<TensorMeta>, ())> {
        const OP: &str = "index_gather";
        let [x, ix] = inputs(OP, xs)?;
        check_index(OP, ix)?;
        if x.dims() != g.in_shape || ix.numel() < g.index_len() {
            return Err(Error::shape(OP, format!("input {:?} / index {:?} do not fit {g:?}", x.dims(), ix.dims())));
        }
        Ok((vec![TensorMeta::new(g.out_shape.clone(), x.dtype, x.place)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, g: &Geom, _: &()) -> Result<Vec<CpuData>> {
        Ok(vec![gather_cpu_kernel("index_gather", "the gathered axis", k, g)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, g: &Geom, _: &()) -> Result<()> {
        gather_gpu_kernel("index_gather", k, g)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, geom: &Geom, _: &()) -> Result<Vec<Option<Tensor>>> {
        gather_backward(g.x(1), g, geom)
    }
}

registry_entry!(
    /// The adjoint of a gather: sums `grad` (input 0, shaped like the gather's output) into zeros
    /// of the gather's input shape at the indexed positions (input 1). Deterministic on both
    /// places. With a third input (the gathered tensor) the geometry's sizes are taken from
    /// the operands, so only the index layout and axis are recorded.
    INDEX_SCATTER_ADD: IndexScatterAddOp = "index_scatter_add", Geom, Geom
);

impl Op for IndexScatterAddOp {
    fn infer(&self, xs: &[&TensorMeta], g: &Geom) -> Result<(Vec<TensorMeta>, Geom)> {
        const OP: &str = "index_scatter_add";
        let (grad, ix, g) = match xs {
            [grad, ix] => (grad, ix, g.clone()),
            [grad, ix, like] => (grad, ix, g.refit(grad.dims(), like.dims())),
            _ => return Err(Error::invalid(OP, format!("takes 2 or 3 tensors, got {}", xs.len()))),
        };
        check_index(OP, ix)?;
        grad.expect_float(OP, "gradients")?;
        if grad.dims() != g.out_shape || ix.numel() < g.index_len() {
            return Err(Error::shape(
                OP,
                format!("gradient {:?} / index {:?} do not fit {g:?}", grad.dims(), ix.dims()),
            ));
        }
        Ok((vec![TensorMeta::new(g.in_shape.clone(), grad.dtype, grad.place)], g))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &Geom, g: &Geom) -> Result<Vec<CpuData>> {
        let idx = host_indices(k.x(1), g.n);
        Ok(vec![float_kernel!("index_scatter_add"; v = k.x(0) => scatter_add_cpu(v, &idx, g))?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &Geom, g: &Geom) -> Result<()> {
        let total = g.outer * g.n * g.inner;
        let (code, flag) = k.ctx.index_flag("index_scatter_add");
        let binds = [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::write(k.y(0)), Bind::flag(&flag)];
        let mut params = g.params(total);
        params.push(code);
        k.ctx.dispatch(&SCATTER_ADD, k.ins[1].dtype.code(), "main", &binds, &params, total as u64)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &Geom, geom: &Geom) -> Result<Vec<Option<Tensor>>> {
        let mut v = vec![g.grad_if(0, || apply1(&INDEX_GATHER, &[g.g(), g.x(1)], geom.clone()))?, None];
        v.resize(g.num_inputs(), None);
        Ok(v)
    }

    /// A third operand gives the gathered tensor's shape only.
    fn reads_data(&self, i: usize) -> bool {
        i < 2
    }
}

/// `one_hot`'s attribute.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct OneHotAttrs {
    pub num_classes: usize,
}

registry_entry!(
    /// One-hot encoding of integer labels (`paddle.nn.functional.one_hot`).
    ONE_HOT_OP: OneHotOp = "one_hot", OneHotAttrs, ()
);

impl Op for OneHotOp {
    fn infer(&self, xs: &[&TensorMeta], a: &OneHotAttrs) -> Result<(Vec<TensorMeta>, ())> {
        const OP: &str = "one_hot";
        let [x] = inputs(OP, xs)?;
        x.expect_int(OP, "labels")?;
        if a.num_classes == 0 {
            return Err(Error::invalid(OP, "num_classes must be at least 1"));
        }
        let mut shape = x.dims().to_vec();
        shape.push(a.num_classes);
        Ok((vec![TensorMeta::new(shape, DType::Float32, x.place)], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &OneHotAttrs, _: &()) -> Result<Vec<CpuData>> {
        let (d, c) = (k.x(0), a.num_classes);
        if let Some(v) = out_of_range(d, c) {
            return Err(Error::invalid(
                "one_hot",
                format!("label {v} is out of range for num_classes {c} (valid 0..{c})"),
            ));
        }
        let mut out = vec![0.0f32; d.len() * c];
        for i in 0..d.len() {
            out[i * c + d.get_i64(i) as usize] = 1.0;
        }
        Ok(vec![CpuData::F32(out)])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &OneHotAttrs, _: &()) -> Result<()> {
        let total = k.outs[0].numel();
        let (code, flag) = k.ctx.index_flag("one_hot");
        let params = [total as u32, a.num_classes as u32, code];
        let binds = [Bind::read(k.x(0)), Bind::write(k.y(0)), Bind::flag(&flag)];
        k.ctx.dispatch(&ONE_HOT, k.ins[0].dtype.code(), "main", &binds, &params, total as u64)
    }
}

/// Selects entries of `x` along `axis` at the positions in the 1-D `index`
/// (`paddle.index_select`): the output has `index.len()` entries along `axis`.
pub fn index_select(x: &Tensor, index: &Tensor, axis: isize) -> Result<Tensor> {
    apply1(&INDEX_SELECT, &[x, index], IndexAxisAttrs { axis })
}

/// `paddle.gather` (2.x): like [`index_select`] for a 1-D `index`; a 0-D `index` selects one
/// entry and drops `axis`.
pub fn gather(x: &Tensor, index: &Tensor, axis: isize) -> Result<Tensor> {
    apply1(&GATHER_OP, &[x, index], IndexAxisAttrs { axis })
}

/// Picks `arr` values along `axis` at `indices` (`paddle.take_along_axis`): `indices` has
/// `arr`'s rank; the other dimensions broadcast against each other (numpy rules), and the
/// output has `indices`'s size along `axis`.
pub fn take_along_axis(arr: &Tensor, indices: &Tensor, axis: isize) -> Result<Tensor> {
    const OP: &str = "take_along_axis";
    check_index(OP, &indices.to_meta())?;
    arr.same_place(OP, indices)?;
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
    apply1(&TAKE_ALONG_AXIS, &[&arr_b, &idx_b], IndexAxisAttrs { axis })
}

/// One-hot encoding of integer labels (`paddle.nn.functional.one_hot`): float32 of shape
/// `x.shape + [num_classes]`. Labels must lie in `[0, num_classes)` (an error on the CPU; an
/// all-zero row on the GPU).
pub fn one_hot(x: &Tensor, num_classes: usize) -> Result<Tensor> {
    apply1(&ONE_HOT_OP, &[x], OneHotAttrs { num_classes })
}

/// Embedding lookup (`paddle.nn.functional.embedding`): rows of `weight` (`[num_embeddings,
/// dim]`) at the integer `ids`, shaped `ids.shape + [dim]`. Positions whose id equals
/// `padding_idx` (negative values count from the end) are zero and send no gradient to that
/// row. The weight gradient is a deterministic scatter-add.
pub fn embedding(ids: &Tensor, weight: &Tensor, padding_idx: Option<i64>) -> Result<Tensor> {
    apply1(&EMBEDDING, &[weight, ids], EmbeddingAttrs { padding_idx })
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

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&INDEX_SELECT, &GATHER_OP, &TAKE_ALONG_AXIS, &EMBEDDING, &INDEX_GATHER, &INDEX_SCATTER_ADD, &ONE_HOT_OP],
    kernels: &[&GATHER, &SCATTER_ADD, &ONE_HOT],
};
