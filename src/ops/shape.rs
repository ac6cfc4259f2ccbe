//! Shape and layout ops, each a registry entry. Reshape-like ops share memory (views); the
//! rest gather a strided view of their input (`copy.rs`): transpose, broadcast_to, slice,
//! flip; concat, pad and slice's gradient assemble their output from pieces.
//! `expand`, `tile`, `stack`, `split`, `chunk` and `t` are compositions of these.

use super::copy::{cpu_assemble, cpu_gather, gpu_assemble, gpu_gather};
use crate::backend::cpu::CpuData;
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{Facts, Fusion};
use crate::shape::{IntoShape, View, broadcast_shapes, checked_numel, contiguous_strides, normalize_axis};
use crate::tensor::TensorMeta;
use crate::{Error, Result, Scalar, Tensor};

/// The gradient of a view op: the output gradient reshaped to the input's shape.
fn reshape_back(g: &GradCall<'_>) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![g.grad_if(0, || reshape(g.g(), &crate::shape::reshape_target(g.x(0).shape())))?])
}

/// Declares a reshape-like op: no kernel, the output shares the input's memory.
macro_rules! view_op {
    ($(#[$doc:meta])* $stat:ident: $ty:ident = $name:literal, $attrs:ty, |$x:ident, $a:ident| $infer:expr
     $(, fusion: $fusion:expr)?) => {
        registry_entry!($(#[$doc])* $stat: $ty = $name, $attrs, ());

        impl Op for $ty {
            fn infer(&self, x: &[&TensorMeta], $a: &$attrs) -> Result<(Vec<TensorMeta>, ())> {
                let [$x] = inputs($name, x)?;
                let dims: Vec<usize> = $infer?;
                Ok((vec![$x.with_shape(dims)], ()))
            }

            fn cpu(&self, _: &mut CpuCall<'_>, _: &$attrs, _: &()) -> Result<Vec<CpuData>> {
                Err(Error::invalid($name, "a view op runs no kernel"))
            }

            fn gpu(&self, _: &GpuCall<'_>, _: &$attrs, _: &()) -> Result<()> {
                Err(Error::invalid($name, "a view op runs no kernel"))
            }

            fn view(&self) -> bool {
                true
            }

            $(fn facts(&self) -> Facts {
                Facts { fusion: Some($fusion), ..Facts::NONE }
            })?

            fn differentiable(&self) -> bool {
                true
            }

            fn backward(&self, g: &GradCall<'_>, _: &$attrs, _: &()) -> Result<Vec<Option<Tensor>>> {
                reshape_back(g)
            }
        }
    };
}

/// `reshape`'s attribute: the target shape (one `-1` inferred, `0` copies the input's dim).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ReshapeAttrs {
    pub shape: Vec<i64>,
}

fn reshape_dims(x: &TensorMeta, shape: &[i64]) -> Result<Vec<usize>> {
    const OP: &str = "reshape";
    let mut dims = Vec::with_capacity(shape.len());
    let mut infer = None;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                dims.push(1);
            }
            -1 => return Err(Error::shape(OP, format!("more than one -1 in {shape:?}"))),
            0 => dims.push(*x.dims().get(i).ok_or_else(|| {
                Error::shape(
                    OP,
                    format!("0 at position {i} of {shape:?} but the input {:?} has rank {}", x.dims(), x.rank()),
                )
            })?),
            d if d < 0 => return Err(Error::invalid(OP, format!("negative dimension {d} in {shape:?}"))),
            d => dims.push(d as usize),
        }
    }
    let known = checked_numel(&dims)
        .ok_or_else(|| Error::shape(OP, format!("cannot reshape {:?} into {shape:?}", x.dims())))?;
    if let Some(i) = infer {
        if known == 0 || !x.numel().is_multiple_of(known) {
            return Err(Error::shape(OP, format!("cannot reshape {:?} into {shape:?}", x.dims())));
        }
        dims[i] = x.numel() / known;
    }
    if dims.iter().product::<usize>() != x.numel() {
        return Err(Error::shape(OP, format!("cannot reshape {:?} ({} elements) into {shape:?}", x.dims(), x.numel())));
    }
    Ok(dims)
}

view_op!(
    /// `paddle.reshape`.
    RESHAPE: ReshapeOp = "reshape", ReshapeAttrs, |x, a| reshape_dims(x, &a.shape), fusion: Fusion::View
);

/// `flatten`'s attributes.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct FlattenAttrs {
    pub start_axis: isize,
    pub stop_axis: isize,
}

fn flatten_dims(x: &TensorMeta, a: &FlattenAttrs) -> Result<Vec<usize>> {
    if x.rank() == 0 {
        return Ok(vec![1]);
    }
    let s = x.shape.axis("flatten", a.start_axis)?;
    let e = x.shape.axis("flatten", a.stop_axis)?;
    if s > e {
        return Err(Error::invalid(
            "flatten",
            format!("start_axis {} is after stop_axis {}", a.start_axis, a.stop_axis),
        ));
    }
    let d = x.dims();
    let mut dims = d[..s].to_vec();
    dims.push(d[s..=e].iter().product());
    dims.extend(&d[e + 1..]);
    Ok(dims)
}

view_op!(
    /// `paddle.flatten`: merges axes `start..=stop`.
    FLATTEN: FlattenOp = "flatten", FlattenAttrs, |x, a| flatten_dims(x, a)
);

/// The axes of `squeeze` / `unsqueeze`.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct AxesAttrs {
    pub axes: Vec<isize>,
}

fn squeeze_dims(x: &TensorMeta, a: &AxesAttrs) -> Result<Vec<usize>> {
    let axes = if a.axes.is_empty() { Vec::new() } else { x.shape.axes("squeeze", &a.axes)? };
    Ok(x.dims()
        .iter()
        .enumerate()
        .filter(|&(i, &d)| !(d == 1 && (axes.is_empty() || axes.contains(&i))))
        .map(|(_, &d)| d)
        .collect())
}

view_op!(
    /// `paddle.squeeze`: removes size-1 axes (those listed, or all).
    SQUEEZE: SqueezeOp = "squeeze", AxesAttrs, |x, a| squeeze_dims(x, a), fusion: Fusion::Squeeze { axes: "axes" }
);

fn unsqueeze_dims(x: &TensorMeta, a: &AxesAttrs) -> Result<Vec<usize>> {
    let rank = x.rank() + a.axes.len();
    let mut pos = Vec::with_capacity(a.axes.len());
    for &ax in &a.axes {
        let p = normalize_axis("unsqueeze", ax, rank, x.dims())?;
        if pos.contains(&p) {
            return Err(Error::invalid("unsqueeze", format!("axis {ax} repeated in {:?}", a.axes)));
        }
        pos.push(p);
    }
    let mut it = x.dims().iter();
    Ok((0..rank).map(|i| if pos.contains(&i) { 1 } else { *it.next().unwrap_or(&1) }).collect())
}

view_op!(
    /// `paddle.unsqueeze`: inserts size-1 axes at `axes` (positions in the result).
    UNSQUEEZE: UnsqueezeOp = "unsqueeze", AxesAttrs, |x, a| unsqueeze_dims(x, a), fusion: Fusion::View
);

/// Declares an op whose output is a strided view of its one input, gathered into new memory.
macro_rules! gather_op {
    ($(#[$doc:meta])* $stat:ident: $ty:ident = $name:literal, $attrs:ty,
     infer: |$x:ident, $a:ident| $infer:expr,
     backward: |$g:ident, $ba:ident| $bw:expr) => {
        registry_entry!($(#[$doc])* $stat: $ty = $name, $attrs, View);

        impl Op for $ty {
            fn infer(&self, x: &[&TensorMeta], $a: &$attrs) -> Result<(Vec<TensorMeta>, View)> {
                let [$x] = inputs($name, x)?;
                let view: View = $infer?;
                Ok((vec![$x.with_shape(view.shape.clone())], view))
            }

            fn cpu(&self, k: &mut CpuCall<'_>, _: &$attrs, view: &View) -> Result<Vec<CpuData>> {
                Ok(vec![cpu_gather(k.x(0), view)])
            }

            fn gpu(&self, k: &GpuCall<'_>, _: &$attrs, view: &View) -> Result<()> {
                gpu_gather(k.ctx, k.ins[0].dtype, k.x(0), view, k.y(0))
            }

            fn differentiable(&self) -> bool {
                true
            }

            #[allow(unused_variables)]
            fn backward(&self, $g: &GradCall<'_>, $ba: &$attrs, _: &View) -> Result<Vec<Option<Tensor>>> {
                Ok(vec![$g.grad_if(0, || $bw)?])
            }
        }
    };
}

/// `transpose`'s attribute: the permutation.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct TransposeAttrs {
    pub perm: Vec<usize>,
}

fn transpose_view(x: &TensorMeta, perm: &[usize]) -> Result<View> {
    let n = x.rank();
    let mut seen = vec![false; n];
    if perm.len() != n || perm.iter().any(|&p| p >= n || std::mem::replace(&mut seen[p], true)) {
        return Err(Error::invalid(
            "transpose",
            format!("perm {perm:?} is not a permutation of the {n} axes of {:?}", x.dims()),
        ));
    }
    let strides = contiguous_strides(x.dims());
    Ok(View {
        shape: perm.iter().map(|&p| x.dims()[p]).collect(),
        strides: perm.iter().map(|&p| strides[p] as isize).collect(),
        offset: 0,
    })
}

gather_op!(
    /// `paddle.transpose`: permutes the axes.
    TRANSPOSE: TransposeOp = "transpose", TransposeAttrs,
    infer: |x, a| transpose_view(x, &a.perm),
    backward: |g, a| {
        let mut inv = vec![0; a.perm.len()];
        for (i, &p) in a.perm.iter().enumerate() {
            inv[p] = i;
        }
        transpose(g.g(), &inv)
    }
);

/// `broadcast_to`'s attribute: the target shape.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct BroadcastAttrs {
    pub shape: Vec<usize>,
}

fn broadcast_view(x: &TensorMeta, shape: &[usize]) -> Result<View> {
    const OP: &str = "broadcast_to";
    let b = broadcast_shapes(OP, x.dims(), shape)?;
    if b != shape {
        return Err(Error::Broadcast { op: OP, lhs: x.dims().to_vec(), rhs: shape.to_vec() });
    }
    Ok(View {
        shape: shape.to_vec(),
        strides: crate::shape::broadcast_strides(x.dims(), shape).into_iter().map(|s| s as isize).collect(),
        offset: 0,
    })
}

gather_op!(
    /// `paddle.broadcast_to` (numpy rules), copying.
    BROADCAST_TO: BroadcastToOp = "broadcast_to", BroadcastAttrs,
    infer: |x, a| broadcast_view(x, &a.shape),
    backward: |g, a| sum_to_shape(g.g(), g.x(0).shape())
);

registry_entry!(
    /// `paddle.expand_as`: input 0 broadcast (numpy rules) to input 1's shape, read when the
    /// op runs (so a program's gradient fits whatever batch it is fed).
    EXPAND_AS: ExpandAsOp = "expand_as", (), View
);

impl Op for ExpandAsOp {
    fn infer(&self, xs: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, View)> {
        let [x, like] = inputs("expand_as", xs)?;
        let view = broadcast_view(x, like.dims()).map_err(|e| e.called_as("broadcast_to", "expand_as"))?;
        Ok((vec![x.with_shape(view.shape.clone())], view))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &(), view: &View) -> Result<Vec<CpuData>> {
        Ok(vec![cpu_gather(k.x(0), view)])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &(), view: &View) -> Result<()> {
        gpu_gather(k.ctx, k.ins[0].dtype, k.x(0), view, k.y(0))
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, _: &(), _: &View) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g.grad_if(0, || sum_to_shape(g.g(), g.x(0).shape()))?, None])
    }

    fn facts(&self) -> Facts {
        Facts { fusion: Some(Fusion::Expand), ..Facts::NONE }
    }

    /// The second operand gives the shape only.
    fn reads_data(&self, i: usize) -> bool {
        i == 0
    }
}

/// Broadcasts `x` to `y`'s shape (`paddle.expand_as`); `x` itself when the shapes agree.
pub fn expand_as(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    if x.shape() == y.shape() {
        return Ok(x.clone());
    }
    apply1(&EXPAND_AS, &[x, y], ())
}

/// `slice`'s attributes (Paddle's `strided_slice`; `slice` is steps of 1).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct SliceAttrs {
    pub axes: Vec<isize>,
    pub starts: Vec<i64>,
    pub ends: Vec<i64>,
    pub steps: Vec<i64>,
}

/// Normalises Paddle-style slice bounds for a dimension of size `d`.
fn bound(v: i64, d: usize) -> usize {
    let d = d as i64;
    (if v < 0 { v.saturating_add(d) } else { v }).clamp(0, d) as usize
}

/// The view of `x` a slice reads.
fn slice_view(x: &TensorMeta, a: &SliceAttrs) -> Result<View> {
    const OP: &str = "slice";
    let SliceAttrs { axes, starts, ends, steps } = a;
    if axes.len() != starts.len() || axes.len() != ends.len() || axes.len() != steps.len() {
        return Err(Error::invalid(
            OP,
            format!("axes {axes:?}, starts {starts:?}, ends {ends:?} and steps {steps:?} differ in length"),
        ));
    }
    let mut view = View::contiguous(x.dims());
    for (k, &ax) in axes.iter().enumerate() {
        let ax = x.shape.axis(OP, ax)?;
        let d = x.dims()[ax];
        let step = steps[k];
        if step == 0 {
            return Err(Error::invalid(OP, "step must not be zero"));
        }
        let (start, len) = if step > 0 {
            let (s, e) = (bound(starts[k], d), bound(ends[k], d));
            (s, if e > s { (e - s).div_ceil(step as usize) } else { 0 })
        } else {
            let di = d as i64;
            let s = if starts[k] < 0 { starts[k].saturating_add(di) } else { starts[k] }.clamp(-1, di - 1);
            let e = if ends[k] < 0 && ends[k] >= -di { ends[k] + di } else { ends[k] }.clamp(-1, di - 1);
            let len = if s > e { ((s - e) as usize).div_ceil(step.unsigned_abs() as usize) } else { 0 };
            (s.max(0) as usize, len)
        };
        view.offset = (view.offset as isize + start as isize * view.strides[ax]) as usize;
        view.shape[ax] = len;
        view.strides[ax] *= step as isize;
    }
    Ok(view)
}

gather_op!(
    /// `paddle.slice` / `paddle.strided_slice`: negative bounds count from the end,
    /// out-of-range bounds clamp, a negative step walks backwards.
    SLICE: SliceOp = "slice", SliceAttrs,
    infer: |x, a| slice_view(x, a),
    backward: |g, a| slice_grad(g.g(), g.x(0), a)
);

/// `slice_grad`'s attributes: the sliced input's shape (empty when the input is passed as a
/// second operand, whose shape is then read when the op runs) and the slice.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct SliceGradAttrs {
    pub shape: Vec<usize>,
    pub axes: Vec<isize>,
    pub starts: Vec<i64>,
    pub ends: Vec<i64>,
    pub steps: Vec<i64>,
}

impl SliceGradAttrs {
    fn slice(&self) -> SliceAttrs {
        SliceAttrs {
            axes: self.axes.clone(),
            starts: self.starts.clone(),
            ends: self.ends.clone(),
            steps: self.steps.clone(),
        }
    }
}

registry_entry!(
    /// The gradient of `slice`: zeros of the input's shape with the gradient written where the
    /// slice read (its own gradient is the slice again). Inputs `(g)` with the shape as an
    /// attribute, or `(g, sliced input)`: then only the slice is recorded and a static
    /// program fits whatever batch it is fed.
    SLICE_GRAD: SliceGradOp = "slice_grad", SliceGradAttrs, View
);

impl Op for SliceGradOp {
    fn infer(&self, x: &[&TensorMeta], a: &SliceGradAttrs) -> Result<(Vec<TensorMeta>, View)> {
        let (g, shape) = match x {
            [g] => (*g, a.shape.clone()),
            [g, like] => (*g, like.dims().to_vec()),
            _ => return Err(Error::invalid("slice_grad", format!("takes 1 or 2 tensors, got {}", x.len()))),
        };
        let out = g.with_shape(shape);
        let view = slice_view(&out, &a.slice())?;
        if view.shape != g.dims() {
            return Err(Error::shape(
                "slice_grad",
                format!("gradient {:?} does not match the slice {:?} of {:?}", g.dims(), view.shape, a.shape),
            ));
        }
        Ok((vec![out], view))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &SliceGradAttrs, view: &View) -> Result<Vec<CpuData>> {
        let o = &k.outs[0];
        Ok(vec![cpu_assemble(o.numel(), o.dtype, Some(Scalar::Int(0)), &[(k.x(0), view)])?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &SliceGradAttrs, view: &View) -> Result<()> {
        let o = &k.outs[0];
        gpu_assemble(k.ctx, o.dtype, k.y(0), o.numel(), Some(Scalar::Int(0)), &[(k.x(0), view)])
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, a: &SliceGradAttrs, _: &View) -> Result<Vec<Option<Tensor>>> {
        let s = a.slice();
        let mut grads = vec![g.grad_if(0, || strided_slice(g.g(), &s.axes, &s.starts, &s.ends, &s.steps))?];
        grads.resize(g.num_inputs(), None);
        Ok(grads)
    }

    /// The sliced input gives the shape only.
    fn reads_data(&self, i: usize) -> bool {
        i == 0
    }
}

/// The gradient of a slice of `x`, shaped like `x` when it runs.
fn slice_grad(g: &Tensor, x: &Tensor, a: &SliceAttrs) -> Result<Tensor> {
    let attrs = SliceGradAttrs {
        shape: Vec::new(),
        axes: a.axes.clone(),
        starts: a.starts.clone(),
        ends: a.ends.clone(),
        steps: a.steps.clone(),
    };
    apply1(&SLICE_GRAD, &[g, x], attrs)
}

gather_op!(
    /// `paddle.flip`: reverses the order along `axes`.
    FLIP: FlipOp = "flip", AxesAttrs,
    infer: |x, a| {
        x.shape.axes("flip", &a.axes).map(|axes| {
            let mut view = View::contiguous(x.dims());
            for &ax in &axes {
                if x.dims()[ax] > 0 {
                    view.offset = (view.offset as isize + (x.dims()[ax] as isize - 1) * view.strides[ax]) as usize;
                }
                view.strides[ax] = -view.strides[ax];
            }
            view
        })
    },
    backward: |g, a| flip(g.g(), &a.axes)
);

/// `concat`'s attribute: the axis.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct AxisAttrs {
    pub axis: isize,
}

/// Where each input lands in the output, and the axis.
type ConcatPlan = (Vec<View>, usize);

registry_entry!(
    /// Joins tensors along an axis (`paddle.concat`).
    CONCAT: ConcatOp = "concat", AxisAttrs, ConcatPlan
);

impl Op for ConcatOp {
    fn infer(&self, xs: &[&TensorMeta], a: &AxisAttrs) -> Result<(Vec<TensorMeta>, (Vec<View>, usize))> {
        const OP: &str = "concat";
        let first = xs.first().ok_or_else(|| Error::invalid(OP, "needs at least one tensor"))?;
        let ax = first.shape.axis(OP, a.axis)?;
        let mut shape = first.dims().to_vec();
        shape[ax] = 0;
        for (i, x) in xs.iter().enumerate() {
            if x.dtype != first.dtype {
                return Err(Error::DTypeMismatch { op: OP, lhs: first.dtype, rhs: x.dtype });
            }
            let ok = x.rank() == first.rank()
                && x.dims().iter().zip(first.dims()).enumerate().all(|(k, (p, q))| k == ax || p == q);
            if !ok {
                return Err(Error::shape(
                    OP,
                    format!(
                        "tensor {i} has shape {:?}, which does not match {:?} outside axis {ax}",
                        x.dims(),
                        first.dims()
                    ),
                ));
            }
            shape[ax] += x.dims()[ax];
        }
        let out_strides = contiguous_strides(&shape);
        let mut views = Vec::with_capacity(xs.len());
        let mut offset = 0;
        for x in xs {
            views.push(View {
                shape: x.dims().to_vec(),
                strides: out_strides.iter().map(|&s| s as isize).collect(),
                offset: offset * out_strides[ax],
            });
            offset += x.dims()[ax];
        }
        Ok((vec![first.with_shape(shape)], (views, ax)))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &AxisAttrs, (views, _): &(Vec<View>, usize)) -> Result<Vec<CpuData>> {
        let pieces: Vec<(&CpuData, &View)> = views.iter().enumerate().map(|(i, v)| (k.x(i), v)).collect();
        let o = &k.outs[0];
        Ok(vec![cpu_assemble(o.numel(), o.dtype, None, &pieces)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &AxisAttrs, (views, _): &(Vec<View>, usize)) -> Result<()> {
        let pieces: Vec<_> = views.iter().enumerate().map(|(i, v)| (k.x(i), v)).collect();
        let o = &k.outs[0];
        gpu_assemble(k.ctx, o.dtype, k.y(0), o.numel(), None, &pieces)
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(
        &self,
        g: &GradCall<'_>,
        _: &AxisAttrs,
        (views, ax): &(Vec<View>, usize),
    ) -> Result<Vec<Option<Tensor>>> {
        let mut grads = Vec::with_capacity(views.len());
        let mut start = 0i64;
        for (i, v) in views.iter().enumerate() {
            let end = start + v.shape[*ax] as i64;
            grads.push(g.grad_if(i, || slice(g.g(), &[*ax as isize], &[start], &[end]))?);
            start = end;
        }
        Ok(grads)
    }
}

/// `pad`'s attributes: paddings and the fill value.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct PadAttrs {
    pub pad: Vec<usize>,
    pub value: f64,
}

/// Where the input lands, and the padding before each axis.
type PadPlan = (View, Vec<usize>);

registry_entry!(
    /// Constant padding (`paddle.nn.functional.pad`, mode "constant").
    PAD: PadOp = "pad", PadAttrs, PadPlan
);

impl Op for PadOp {
    fn infer(&self, x: &[&TensorMeta], a: &PadAttrs) -> Result<(Vec<TensorMeta>, (View, Vec<usize>))> {
        const OP: &str = "pad";
        let [x] = inputs(OP, x)?;
        let (n, pad) = (x.rank(), &a.pad);
        if !pad.len().is_multiple_of(2) || pad.len() > 2 * n {
            return Err(Error::invalid(
                OP,
                format!("pad {pad:?} must hold two values per padded axis of {:?}", x.dims()),
            ));
        }
        let mut before = vec![0; n];
        let mut after = vec![0; n];
        if pad.len() == 2 * n {
            for i in 0..n {
                before[i] = pad[2 * i];
                after[i] = pad[2 * i + 1];
            }
        } else {
            for k in 0..pad.len() / 2 {
                before[n - 1 - k] = pad[2 * k];
                after[n - 1 - k] = pad[2 * k + 1];
            }
        }
        let too_big = || Error::invalid(OP, format!("padding {:?} by {pad:?} overflows the address space", x.dims()));
        let shape: Vec<usize> = (0..n)
            .map(|i| x.dims()[i].checked_add(before[i]).and_then(|d| d.checked_add(after[i])).ok_or_else(too_big))
            .collect::<Result<_>>()?;
        let strides = contiguous_strides(&shape);
        let inner = View {
            shape: x.dims().to_vec(),
            strides: strides.iter().map(|&s| s as isize).collect(),
            offset: (0..n).map(|i| before[i] * strides[i]).sum(),
        };
        Ok((vec![x.with_shape(shape)], (inner, before)))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &PadAttrs, (inner, _): &(View, Vec<usize>)) -> Result<Vec<CpuData>> {
        let o = &k.outs[0];
        Ok(vec![cpu_assemble(o.numel(), o.dtype, Some(a.value.into()), &[(k.x(0), inner)])?])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &PadAttrs, (inner, _): &(View, Vec<usize>)) -> Result<()> {
        let o = &k.outs[0];
        gpu_assemble(k.ctx, o.dtype, k.y(0), o.numel(), Some(a.value.into()), &[(k.x(0), inner)])
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(
        &self,
        g: &GradCall<'_>,
        _: &PadAttrs,
        (inner, before): &(View, Vec<usize>),
    ) -> Result<Vec<Option<Tensor>>> {
        let axes: Vec<isize> = (0..before.len() as isize).collect();
        let starts: Vec<i64> = before.iter().map(|&b| b as i64).collect();
        let ends: Vec<i64> = before.iter().zip(&inner.shape).map(|(&b, &d)| (b + d) as i64).collect();
        Ok(vec![g.grad_if(0, || slice(g.g(), &axes, &starts, &ends))?])
    }
}

/// Reshapes without copying. `shape` may hold one `-1` (inferred) and `0`s (copy the input's
/// dimension at that position), as Paddle.
pub fn reshape(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    apply1(&RESHAPE, &[x], ReshapeAttrs { shape: shape.to_vec() })
}

/// Merges axes `start..=stop` into one (`paddle.flatten`).
pub fn flatten(x: &Tensor, start_axis: isize, stop_axis: isize) -> Result<Tensor> {
    apply1(&FLATTEN, &[x], FlattenAttrs { start_axis, stop_axis })
}

/// Removes size-1 axes: those listed (others listed are left alone, as Paddle), or all.
pub fn squeeze(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    apply1(&SQUEEZE, &[x], AxesAttrs { axes: axes.to_vec() })
}

/// Inserts size-1 axes at `axes` (positions in the result).
pub fn unsqueeze(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    apply1(&UNSQUEEZE, &[x], AxesAttrs { axes: axes.to_vec() })
}

/// Permutes the axes (`paddle.transpose(x, perm)`).
pub fn transpose(x: &Tensor, perm: &[usize]) -> Result<Tensor> {
    apply1(&TRANSPOSE, &[x], TransposeAttrs { perm: perm.to_vec() })
}

/// Swaps the last two axes (matrix transpose); vectors are returned unchanged.
pub fn t(x: &Tensor) -> Result<Tensor> {
    let n = x.ndim();
    if n < 2 {
        return Ok(x.clone());
    }
    let mut perm: Vec<usize> = (0..n).collect();
    perm.swap(n - 1, n - 2);
    transpose(x, &perm)
}

/// Broadcasts to `shape` (numpy rules; `-1` keeps the input's size), copying.
pub fn expand(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    const OP: &str = "expand";
    if shape.len() < x.ndim() {
        return Err(Error::shape(OP, format!("cannot expand {:?} to fewer dimensions {shape:?}", x.shape())));
    }
    let lead = shape.len() - x.ndim();
    let target: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| match d {
            -1 if i >= lead => Ok(x.shape()[i - lead]),
            d if d >= 0 => Ok(d as usize),
            d => Err(Error::invalid(OP, format!("invalid dimension {d} in {shape:?}"))),
        })
        .collect::<Result<_>>()?;
    broadcast_to(x, &target)
}

/// Broadcasts to `shape` (numpy rules), copying; the same tensor when the shape is already
/// `shape`.
pub fn broadcast_to(x: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if x.shape() == shape {
        return Ok(x.clone());
    }
    apply1(&BROADCAST_TO, &[x], BroadcastAttrs { shape: shape.to_vec() })
}

/// `x[starts[i]:ends[i]]` along each of `axes` (`paddle.slice`): negative bounds count from
/// the end, out-of-range bounds clamp.
pub fn slice(x: &Tensor, axes: &[isize], starts: &[i64], ends: &[i64]) -> Result<Tensor> {
    strided_slice(x, axes, starts, ends, &vec![1; axes.len()])
}

/// `slice` with steps (`paddle.strided_slice`); a negative step walks backwards.
pub fn strided_slice(x: &Tensor, axes: &[isize], starts: &[i64], ends: &[i64], steps: &[i64]) -> Result<Tensor> {
    let attrs = SliceAttrs { axes: axes.to_vec(), starts: starts.to_vec(), ends: ends.to_vec(), steps: steps.to_vec() };
    apply1(&SLICE, &[x], attrs)
}

/// Joins tensors along `axis` (`paddle.concat`).
pub fn concat(xs: &[Tensor], axis: isize) -> Result<Tensor> {
    let refs: Vec<&Tensor> = xs.iter().collect();
    apply1(&CONCAT, &refs, AxisAttrs { axis })
}

/// Reverses the order along `axes` (`paddle.flip`).
pub fn flip(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    apply1(&FLIP, &[x], AxesAttrs { axes: axes.to_vec() })
}

/// Constant padding (`paddle.nn.functional.pad` with mode "constant"). With `2·rank` values
/// they pad every axis from the first (`[before0, after0, before1, ...]`); with fewer they pad
/// the last axes from the last one backwards (`[left, right, top, bottom]` for NCHW).
pub fn pad(x: &Tensor, pad: &[usize], value: f64) -> Result<Tensor> {
    apply1(&PAD, &[x], PadAttrs { pad: pad.to_vec(), value })
}

/// Stacks equally shaped tensors along a new axis (`paddle.stack`).
pub fn stack(xs: &[Tensor], axis: isize) -> Result<Tensor> {
    let first = xs.first().ok_or_else(|| Error::invalid("stack", "needs at least one tensor"))?;
    let rank = first.ndim() + 1;
    let ax = crate::shape::normalize_axis("stack", axis, rank, first.shape())?;
    for (i, x) in xs.iter().enumerate() {
        if x.shape() != first.shape() {
            return Err(Error::shape(
                "stack",
                format!("tensor {i} has shape {:?} but tensor 0 has {:?}", x.shape(), first.shape()),
            ));
        }
    }
    let parts: Vec<Tensor> = xs.iter().map(|x| unsqueeze(x, &[ax as isize])).collect::<Result<_>>()?;
    concat(&parts, ax as isize)
}

/// How `split` divides an axis.
#[derive(Clone, Debug)]
pub enum Sections {
    /// This many equal parts (the axis must divide evenly).
    Count(usize),
    /// Parts of these sizes; one may be -1 (the rest).
    Sizes(Vec<i64>),
}

impl From<usize> for Sections {
    fn from(n: usize) -> Self {
        Sections::Count(n)
    }
}

impl From<&[i64]> for Sections {
    fn from(s: &[i64]) -> Self {
        Sections::Sizes(s.to_vec())
    }
}

impl<const N: usize> From<[i64; N]> for Sections {
    fn from(s: [i64; N]) -> Self {
        Sections::Sizes(s.to_vec())
    }
}

/// Splits along `axis` into equal parts or parts of given sizes (`paddle.split`).
pub fn split(x: &Tensor, sections: impl Into<Sections>, axis: isize) -> Result<Vec<Tensor>> {
    const OP: &str = "split";
    let ax = x.shape_ref().axis(OP, axis)?;
    let d = x.shape()[ax];
    let sizes: Vec<usize> = match sections.into() {
        Sections::Count(0) => return Err(Error::invalid(OP, "cannot split into 0 parts")),
        Sections::Count(n) => {
            if !d.is_multiple_of(n) {
                return Err(Error::shape(
                    OP,
                    format!("axis {ax} of size {d} ({:?}) does not divide into {n} parts", x.shape()),
                ));
            }
            vec![d / n; n]
        }
        Sections::Sizes(s) => {
            let known: i64 = s.iter().filter(|&&v| v >= 0).sum();
            let unknown = s.iter().filter(|&&v| v < 0).count();
            if unknown > 1 || s.iter().any(|&v| v < -1) || known > d as i64 || (unknown == 0 && known != d as i64) {
                return Err(Error::shape(OP, format!("sections {s:?} do not add up to axis {ax} of size {d}")));
            }
            s.iter().map(|&v| if v < 0 { d - known as usize } else { v as usize }).collect()
        }
    };
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = 0i64;
    for s in sizes {
        out.push(slice(x, &[ax as isize], &[start], &[start + s as i64])?);
        start += s as i64;
    }
    Ok(out)
}

/// Splits into `chunks` equal parts along `axis` (`paddle.chunk`).
pub fn chunk(x: &Tensor, chunks: usize, axis: isize) -> Result<Vec<Tensor>> {
    split(x, chunks, axis)
}

/// Repeats the tensor `repeat_times[i]` times along each axis (`paddle.tile`).
pub fn tile(x: &Tensor, repeat_times: &[usize]) -> Result<Tensor> {
    let rank = x.ndim().max(repeat_times.len());
    let xs: Vec<usize> = std::iter::repeat_n(1, rank - x.ndim()).chain(x.shape().iter().copied()).collect();
    let reps: Vec<usize> =
        std::iter::repeat_n(1, rank - repeat_times.len()).chain(repeat_times.iter().copied()).collect();
    // [a, b] tiled by [r, s] = reshape [1, a, 1, b] → broadcast [r, a, s, b] → [r·a, s·b].
    let inter: Vec<i64> = xs.iter().flat_map(|&d| [1, d as i64]).collect();
    let wide: Vec<usize> = xs.iter().zip(&reps).flat_map(|(&d, &r)| [r, d]).collect();
    let fin: Vec<i64> = xs.iter().zip(&reps).map(|(&d, &r)| (d * r) as i64).collect();
    reshape(&broadcast_to(&reshape(x, &inter)?, &wide)?, &fin)
}

impl Tensor {
    /// `reshape` as a method.
    pub fn reshape(&self, shape: impl IntoShape) -> Result<Tensor> {
        let dims = shape.into_dims("reshape")?;
        reshape(self, &dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
    }

    /// `flatten` as a method.
    pub fn flatten(&self, start_axis: isize, stop_axis: isize) -> Result<Tensor> {
        flatten(self, start_axis, stop_axis)
    }

    /// `squeeze` as a method.
    pub fn squeeze(&self, axes: &[isize]) -> Result<Tensor> {
        squeeze(self, axes)
    }

    /// `unsqueeze` as a method.
    pub fn unsqueeze(&self, axes: &[isize]) -> Result<Tensor> {
        unsqueeze(self, axes)
    }

    /// `transpose` as a method.
    pub fn transpose(&self, perm: &[usize]) -> Result<Tensor> {
        transpose(self, perm)
    }

    /// Matrix transpose of the last two axes.
    pub fn t(&self) -> Result<Tensor> {
        t(self)
    }

    /// `broadcast_to` as a method.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        broadcast_to(self, shape)
    }

    /// `expand` as a method.
    pub fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        expand(self, shape)
    }

    /// `slice` as a method.
    pub fn slice(&self, axes: &[isize], starts: &[i64], ends: &[i64]) -> Result<Tensor> {
        slice(self, axes, starts, ends)
    }

    /// `split` as a method.
    pub fn split(&self, sections: impl Into<Sections>, axis: isize) -> Result<Vec<Tensor>> {
        split(self, sections, axis)
    }

    /// `chunk` as a method.
    pub fn chunk(&self, chunks: usize, axis: isize) -> Result<Vec<Tensor>> {
        chunk(self, chunks, axis)
    }

    /// `flip` as a method.
    pub fn flip(&self, axes: &[isize]) -> Result<Tensor> {
        flip(self, axes)
    }

    /// `tile` as a method.
    pub fn tile(&self, repeat_times: &[usize]) -> Result<Tensor> {
        tile(self, repeat_times)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[
        &RESHAPE,
        &FLATTEN,
        &SQUEEZE,
        &UNSQUEEZE,
        &TRANSPOSE,
        &BROADCAST_TO,
        &EXPAND_AS,
        &SLICE,
        &SLICE_GRAD,
        &FLIP,
        &CONCAT,
        &PAD,
    ],
    kernels: &[],
};

/// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
pub(crate) fn sum_to_shape(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let lead = g.ndim() - shape.len();
    let axes: Vec<isize> = (0..g.ndim())
        .filter(|&i| i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1))
        .map(|i| i as isize)
        .collect();
    let s = if axes.is_empty() { g.clone() } else { crate::ops::reduce::sum(g, &axes, true)? };
    reshape(&s, &crate::shape::reshape_target(shape))
}
