//! Shape and layout ops. Reshape-like ops share memory; the rest are views of the strided
//! copy primitive (`copy.rs`).

use super::copy::{assemble, gather_view};
use crate::autograd::{record, record1};
use crate::shape::{IntoShape, View, broadcast_shapes, contiguous_strides};
use crate::{Error, Result, Tensor};

fn view_of(x: &Tensor) -> View {
    View::contiguous(x.shape())
}

/// Records a zero-copy reshape of `x` into `out`.
fn reshaped(op: &'static str, x: &Tensor, shape: Vec<usize>) -> Tensor {
    let out = x.with_shape(shape);
    let orig = x.shape().to_vec();
    record1(op, &[x], out, move |c| Ok(vec![Some(c.grad().with_shape(orig.clone()))]))
}

/// Reshapes without copying. `shape` may hold one `-1` (inferred) and `0`s (copy the input's
/// dimension at that position), as Paddle.
pub fn reshape(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
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
            0 => dims.push(*x.shape().get(i).ok_or_else(|| {
                Error::shape(
                    OP,
                    format!("0 at position {i} of {shape:?} but the input {:?} has rank {}", x.shape(), x.ndim()),
                )
            })?),
            d if d < 0 => {
                return Err(Error::invalid(OP, format!("negative dimension {d} in {shape:?}")));
            }
            d => dims.push(d as usize),
        }
    }
    let known = crate::shape::checked_numel(&dims)
        .ok_or_else(|| Error::shape(OP, format!("cannot reshape {:?} into {shape:?}", x.shape())))?;
    if let Some(i) = infer {
        if known == 0 || !x.numel().is_multiple_of(known) {
            return Err(Error::shape(OP, format!("cannot reshape {:?} into {shape:?}", x.shape())));
        }
        dims[i] = x.numel() / known;
    }
    if dims.iter().product::<usize>() != x.numel() {
        return Err(Error::shape(
            OP,
            format!("cannot reshape {:?} ({} elements) into {shape:?}", x.shape(), x.numel()),
        ));
    }
    Ok(reshaped(OP, x, dims))
}

/// Merges axes `start..=stop` into one (`paddle.flatten`).
pub fn flatten(x: &Tensor, start_axis: isize, stop_axis: isize) -> Result<Tensor> {
    if x.ndim() == 0 {
        return Ok(reshaped("flatten", x, vec![1]));
    }
    let s = x.shape_ref().axis("flatten", start_axis)?;
    let e = x.shape_ref().axis("flatten", stop_axis)?;
    if s > e {
        return Err(Error::invalid("flatten", format!("start_axis {start_axis} is after stop_axis {stop_axis}")));
    }
    let d = x.shape();
    let mut dims = d[..s].to_vec();
    dims.push(d[s..=e].iter().product());
    dims.extend(&d[e + 1..]);
    Ok(reshaped("flatten", x, dims))
}

/// Removes size-1 axes: those listed (others listed are left alone, as Paddle), or all.
pub fn squeeze(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    let axes = if axes.is_empty() { Vec::new() } else { x.shape_ref().axes("squeeze", axes)? };
    let dims: Vec<usize> = x
        .shape()
        .iter()
        .enumerate()
        .filter(|&(i, &d)| !(d == 1 && (axes.is_empty() || axes.contains(&i))))
        .map(|(_, &d)| d)
        .collect();
    Ok(reshaped("squeeze", x, dims))
}

/// Inserts size-1 axes at `axes` (positions in the result).
pub fn unsqueeze(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    let rank = x.ndim() + axes.len();
    let mut pos = Vec::with_capacity(axes.len());
    for &a in axes {
        let p = crate::shape::normalize_axis("unsqueeze", a, rank, x.shape())?;
        if pos.contains(&p) {
            return Err(Error::invalid("unsqueeze", format!("axis {a} repeated in {axes:?}")));
        }
        pos.push(p);
    }
    let mut it = x.shape().iter();
    let dims = (0..rank).map(|i| if pos.contains(&i) { 1 } else { *it.next().unwrap_or(&1) }).collect();
    Ok(reshaped("unsqueeze", x, dims))
}

/// Permutes the axes (`paddle.transpose(x, perm)`).
pub fn transpose(x: &Tensor, perm: &[usize]) -> Result<Tensor> {
    const OP: &str = "transpose";
    let n = x.ndim();
    let mut seen = vec![false; n];
    if perm.len() != n || perm.iter().any(|&p| p >= n || std::mem::replace(&mut seen[p], true)) {
        return Err(Error::invalid(
            OP,
            format!("perm {perm:?} is not a permutation of the {n} axes of {:?}", x.shape()),
        ));
    }
    let strides = contiguous_strides(x.shape());
    let view = View {
        shape: perm.iter().map(|&p| x.shape()[p]).collect(),
        strides: perm.iter().map(|&p| strides[p] as isize).collect(),
        offset: 0,
    };
    let out = if perm.iter().enumerate().all(|(i, &p)| i == p) { x.detach() } else { gather_view(x, &view)? };
    let mut inv = vec![0; n];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    Ok(record1(OP, &[x], out, move |c| Ok(vec![Some(transpose(c.grad(), &inv)?)])))
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

/// Broadcasts to `shape` (numpy rules), copying.
pub fn broadcast_to(x: &Tensor, shape: &[usize]) -> Result<Tensor> {
    const OP: &str = "broadcast_to";
    let b = broadcast_shapes(OP, x.shape(), shape)?;
    if b != shape {
        return Err(Error::Broadcast { op: OP, lhs: x.shape().to_vec(), rhs: shape.to_vec() });
    }
    if x.shape() == shape {
        return Ok(x.clone());
    }
    let view = View {
        shape: shape.to_vec(),
        strides: crate::shape::broadcast_strides(x.shape(), shape).into_iter().map(|s| s as isize).collect(),
        offset: 0,
    };
    let out = gather_view(x, &view)?;
    let orig = x.shape().to_vec();
    Ok(record1(OP, &[x], out, move |c| Ok(vec![Some(super::reduce::sum_to_shape(c.grad(), &orig)?)])))
}

/// Normalises Paddle-style slice bounds for a dimension of size `d`.
fn bound(v: i64, d: usize) -> usize {
    let d = d as i64;
    (if v < 0 { v + d } else { v }).clamp(0, d) as usize
}

/// `x[starts[i]:ends[i]]` along each of `axes` (`paddle.slice`): negative bounds count from
/// the end, out-of-range bounds clamp.
pub fn slice(x: &Tensor, axes: &[isize], starts: &[i64], ends: &[i64]) -> Result<Tensor> {
    strided_slice(x, axes, starts, ends, &vec![1; axes.len()])
}

/// `slice` with steps (`paddle.strided_slice`); a negative step walks backwards.
pub fn strided_slice(x: &Tensor, axes: &[isize], starts: &[i64], ends: &[i64], steps: &[i64]) -> Result<Tensor> {
    const OP: &str = "slice";
    if axes.len() != starts.len() || axes.len() != ends.len() || axes.len() != steps.len() {
        return Err(Error::invalid(
            OP,
            format!("axes {axes:?}, starts {starts:?}, ends {ends:?} and steps {steps:?} differ in length"),
        ));
    }
    let mut view = view_of(x);
    for (k, &a) in axes.iter().enumerate() {
        let ax = x.shape_ref().axis(OP, a)?;
        let d = x.shape()[ax];
        let step = steps[k];
        if step == 0 {
            return Err(Error::invalid(OP, "step must not be zero"));
        }
        let (start, len) = if step > 0 {
            let (s, e) = (bound(starts[k], d), bound(ends[k], d));
            (s, if e > s { (e - s).div_ceil(step as usize) } else { 0 })
        } else {
            let s = if starts[k] < 0 { starts[k] + d as i64 } else { starts[k] }.clamp(-1, d as i64 - 1);
            let e = if ends[k] < 0 && ends[k] >= -(d as i64) { ends[k] + d as i64 } else { ends[k] }
                .clamp(-1, d as i64 - 1);
            let len = if s > e { ((s - e) as usize).div_ceil((-step) as usize) } else { 0 };
            (s.max(0) as usize, len)
        };
        view.offset = (view.offset as isize + start as isize * view.strides[ax]) as usize;
        view.shape[ax] = len;
        view.strides[ax] *= step as isize;
    }
    slice_view(OP, x, view)
}

/// Gathers `view` of `x`; its gradient scatters back into zeros of `x`'s shape.
fn slice_view(op: &'static str, x: &Tensor, view: View) -> Result<Tensor> {
    let out = gather_view(x, &view)?;
    let (shape, dtype, place) = (x.shape().to_vec(), x.dtype(), x.place());
    Ok(record1(op, &[x], out, move |c| {
        Ok(vec![Some(assemble(&shape, dtype, place, Some(0i64.into()), &[(c.grad().clone(), view.clone())])?)])
    }))
}

/// Joins tensors along `axis` (`paddle.concat`).
pub fn concat(xs: &[Tensor], axis: isize) -> Result<Tensor> {
    const OP: &str = "concat";
    let first = xs.first().ok_or_else(|| Error::invalid(OP, "needs at least one tensor"))?;
    let ax = first.shape_ref().axis(OP, axis)?;
    let mut shape = first.shape().to_vec();
    shape[ax] = 0;
    for (i, x) in xs.iter().enumerate() {
        first.same_place(OP, x)?;
        first.same_dtype(OP, x)?;
        let ok = x.ndim() == first.ndim()
            && x.shape().iter().zip(first.shape()).enumerate().all(|(k, (a, b))| k == ax || a == b);
        if !ok {
            return Err(Error::shape(
                OP,
                format!(
                    "tensor {i} has shape {:?}, which does not match {:?} outside axis {ax}",
                    x.shape(),
                    first.shape()
                ),
            ));
        }
        shape[ax] += x.shape()[ax];
    }
    let out_strides = contiguous_strides(&shape);
    let mut pieces = Vec::with_capacity(xs.len());
    let mut offset = 0;
    for x in xs {
        pieces.push((
            x.clone(),
            View {
                shape: x.shape().to_vec(),
                strides: out_strides.iter().map(|&s| s as isize).collect(),
                offset: offset * out_strides[ax],
            },
        ));
        offset += x.shape()[ax];
    }
    let out = assemble(&shape, first.dtype(), first.place(), None, &pieces)?;
    let sizes: Vec<usize> = xs.iter().map(|x| x.shape()[ax]).collect();
    let refs: Vec<&Tensor> = xs.iter().collect();
    record(OP, &refs, &[&out], move |c| {
        let mut grads = Vec::with_capacity(sizes.len());
        let mut start = 0i64;
        for (i, &s) in sizes.iter().enumerate() {
            let end = start + s as i64;
            grads.push(if c.needs(i) { Some(slice(c.grad(), &[ax as isize], &[start], &[end])?) } else { None });
            start = end;
        }
        Ok(grads)
    });
    Ok(out)
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

/// Reverses the order along `axes` (`paddle.flip`).
pub fn flip(x: &Tensor, axes: &[isize]) -> Result<Tensor> {
    let axes = x.shape_ref().axes("flip", axes)?;
    let mut view = view_of(x);
    for &a in &axes {
        if x.shape()[a] > 0 {
            view.offset = (view.offset as isize + (x.shape()[a] as isize - 1) * view.strides[a]) as usize;
        }
        view.strides[a] = -view.strides[a];
    }
    let out = gather_view(x, &view)?;
    let axes: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    Ok(record1("flip", &[x], out, move |c| Ok(vec![Some(flip(c.grad(), &axes)?)])))
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

/// Constant padding (`paddle.nn.functional.pad` with mode "constant"). With `2·rank` values
/// they pad every axis from the first (`[before0, after0, before1, ...]`); with fewer they pad
/// the last axes from the last one backwards (`[left, right, top, bottom]` for NCHW).
pub fn pad(x: &Tensor, pad: &[usize], value: f64) -> Result<Tensor> {
    const OP: &str = "pad";
    let n = x.ndim();
    if !pad.len().is_multiple_of(2) || pad.len() > 2 * n {
        return Err(Error::invalid(OP, format!("pad {pad:?} must hold two values per padded axis of {:?}", x.shape())));
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
    let shape: Vec<usize> = (0..n).map(|i| x.shape()[i] + before[i] + after[i]).collect();
    let strides = contiguous_strides(&shape);
    let inner = View {
        shape: x.shape().to_vec(),
        strides: strides.iter().map(|&s| s as isize).collect(),
        offset: (0..n).map(|i| before[i] * strides[i]).sum(),
    };
    let out = assemble(&shape, x.dtype(), x.place(), Some(value.into()), &[(x.clone(), inner.clone())])?;
    Ok(record1(OP, &[x], out, move |c| Ok(vec![Some(gather_view(c.grad(), &inner)?)])))
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
