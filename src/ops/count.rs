//! Counting and selecting: `histogram` (fixed bins, composed from registered ops), and the
//! ops whose output size depends on the values — `bincount`, `nonzero`, `masked_select`,
//! `unique` — which read their input back and build the result on its place (eager only;
//! a static program cannot size them before it runs).

use crate::{DType, Error, Result, Tensor};

/// Counts of `x`'s elements in `bins` equal-width bins over `[min, max]` (`paddle.histogram`),
/// float32 `[bins]`; the last bin includes `max`, values outside are not counted. With
/// `min == max == 0` the range is the data's own.
pub fn histogram(x: &Tensor, bins: usize, min: f64, max: f64) -> Result<Tensor> {
    const OP: &str = "histogram";
    if bins == 0 {
        return Err(Error::invalid(OP, "bins must be at least 1"));
    }
    let xf = x.cast(DType::Float32)?.flatten(0, -1)?.detach();
    let (lo, hi) = if min == 0.0 && max == 0.0 && xf.numel() > 0 {
        (crate::min(&xf, &[], false)?.item::<f32>()? as f64, crate::max(&xf, &[], false)?.item::<f32>()? as f64)
    } else {
        (min, max)
    };
    if !lo.is_finite() || !hi.is_finite() || lo > hi {
        return Err(Error::invalid(OP, format!("range [{lo}, {hi}] must be finite with min <= max")));
    }
    let width = if hi > lo { (hi - lo) / bins as f64 } else { 1.0 };
    let inside = xf.greater_equal_scalar(lo)?.logical_and(&xf.less_equal_scalar(hi)?)?;
    let idx = xf.scale(1.0 / width, -lo / width)?.floor()?.clip(0.0, bins as f64 - 1.0)?.cast(DType::Int64)?;
    let hits = crate::one_hot(&idx, bins)?.multiply(&inside.cast(DType::Float32)?.unsqueeze(&[1])?)?;
    hits.sum(&[0], false)
}

fn eager(op: &'static str, x: &Tensor) -> Result<()> {
    if x.is_static_var() {
        return Err(Error::invalid(op, "its output size depends on the values, so it runs eagerly only"));
    }
    Ok(())
}

/// How often each value `0..` occurs in the non-negative integer vector `x`
/// (`paddle.bincount`), or the sum of `weights` at its positions; the length is
/// `max(max(x) + 1, minlength)`.
pub fn bincount(x: &Tensor, weights: Option<&Tensor>, minlength: usize) -> Result<Tensor> {
    const OP: &str = "bincount";
    eager(OP, x)?;
    if x.ndim() != 1 || !x.dtype().is_int() {
        return Err(Error::shape(OP, format!("input must be a 1-D integer tensor, got {:?} {}", x.shape(), x.dtype())));
    }
    let v = x.cast(DType::Int64)?.to_vec::<i64>()?;
    if let Some(bad) = v.iter().find(|&&a| a < 0) {
        return Err(Error::invalid(OP, format!("values must be non-negative, got {bad}")));
    }
    let len = (v.iter().copied().max().map_or(0, |m| m as usize + 1)).max(minlength);
    let index = Tensor::from_vec_on(v, [x.numel()], x.place())?;
    let (values, dtype) = match weights {
        Some(w) if w.shape() == x.shape() => (w.clone(), w.dtype()),
        Some(w) => {
            return Err(Error::shape(OP, format!("weights {:?} must match the input {:?}", w.shape(), x.shape())));
        }
        None => (crate::ones_on([x.numel()], DType::Int64, x.place())?, DType::Int64),
    };
    let zeros = crate::zeros_on([len], dtype, x.place())?;
    crate::index_add(&zeros, &index, 0, &values)
}

/// The coordinates of the nonzero (true) elements of `x`, `[count, rank]` int64 in
/// row-major order (`paddle.nonzero`).
pub fn nonzero(x: &Tensor) -> Result<Tensor> {
    eager("nonzero", x)?;
    let flags = x.not_equal_scalar(0)?.cast(DType::Int32)?.to_vec::<i32>()?;
    let shape = x.shape().to_vec();
    let mut coords = Vec::new();
    for (flat, _) in flags.iter().enumerate().filter(|(_, f)| **f != 0) {
        let mut rem = flat;
        let mut c = vec![0i64; shape.len()];
        for d in (0..shape.len()).rev() {
            c[d] = (rem % shape[d]) as i64;
            rem /= shape[d];
        }
        coords.extend(c);
    }
    let count = coords.len() / shape.len().max(1);
    let count = if shape.is_empty() { flags.iter().filter(|f| **f != 0).count() } else { count };
    Tensor::from_vec_on(coords, [count, shape.len()], x.place())
}

/// The elements of `x` where `mask` (broadcast to `x`'s shape) is true, as a 1-D tensor in
/// row-major order (`paddle.masked_select`); gradients flow back to the selected elements.
pub fn masked_select(x: &Tensor, mask: &Tensor) -> Result<Tensor> {
    const OP: &str = "masked_select";
    eager(OP, x)?;
    if mask.dtype() != DType::Bool {
        return Err(Error::unsupported(OP, mask.dtype(), "for the mask (expected bool)"));
    }
    let mask = mask.broadcast_to(x.shape())?;
    let flags = mask.cast(DType::Int32)?.to_vec::<i32>()?;
    let picked: Vec<i64> = flags.iter().enumerate().filter(|(_, f)| **f != 0).map(|(i, _)| i as i64).collect();
    let n = picked.len();
    let index = Tensor::from_vec_on(picked, [n], x.place())?;
    crate::index_select(&x.flatten(0, -1)?, &index, 0)
}

/// What `unique` returns besides the sorted distinct values.
#[derive(Debug)]
pub struct Unique {
    /// The distinct values, ascending, 1-D.
    pub values: Tensor,
    /// For each input element (row-major), the index of its value in `values`, int64.
    pub inverse: Tensor,
    /// How often each value occurs, int64.
    pub counts: Tensor,
}

/// The sorted distinct values of `x` (flattened), with the inverse indices and the counts
/// (`paddle.unique(return_inverse=True, return_counts=True)`); NaNs compare equal to each
/// other and sort last.
pub fn unique(x: &Tensor) -> Result<Unique> {
    eager("unique", x)?;
    let v = x.to_f64_vec()?;
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
    let (mut firsts, mut counts, mut inverse) = (Vec::new(), Vec::<i64>::new(), vec![0i64; v.len()]);
    for &i in &order {
        match firsts.last() {
            Some(&f) if same(v[f], v[i]) => *counts.last_mut().unwrap_or(&mut 0) += 1,
            _ => {
                firsts.push(i);
                counts.push(1);
            }
        }
        inverse[i] = firsts.len() as i64 - 1;
    }
    let place = x.place();
    let picks: Vec<i64> = firsts.iter().map(|&i| i as i64).collect();
    let n = picks.len();
    let values = crate::index_select(&x.flatten(0, -1)?.detach(), &Tensor::from_vec_on(picks, [n], place)?, 0)?;
    Ok(Unique {
        values,
        inverse: Tensor::from_vec_on(inverse, x.shape(), place)?,
        counts: Tensor::from_vec_on(counts, [n], place)?,
    })
}
