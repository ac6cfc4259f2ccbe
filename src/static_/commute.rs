//! A rewrite the Executor makes before fusion: `max_pool(relu(x))` becomes
//! `relu(max_pool(x))`, forward and backward, so relu and its gradient touch a quarter of
//! the elements (a 2×2 pooling) and the full-size relu output is never stored.
//!
//! The two orders give the same bits, gradients included, for every input:
//! - relu is non-decreasing, keeps NaN, and maps everything else at or below zero to `0.0`;
//!   the pooling keeps the first maximum (the first NaN) of each window. Where a window's
//!   maximum is positive (or NaN), both orders pick the same element; where it is at most
//!   zero, both output `0.0` and both pass a zero gradient (relu's gradient there is 0).
//! - So the gradient scatter `g · [x > 0]` at each window's argmax sums the same terms per
//!   input element in the same order; the rewritten one adds exact zeros where a window's
//!   maximum is not positive, which changes no value. This relies on `relu_grad` being a
//!   select (`b` where `a > 0`, else `0.0`), not a product: `g · 0` would turn an infinite or
//!   NaN gradient into NaN, at a different index in each order.
//!
//! The pattern is the one a training program holds (`r = relu(x)`, `(p, i) = max_pool(r)`,
//! `gr = pool2d_max_grad(gp, i)`, `gx = relu_grad(r, gr)`), each intermediate read by these
//! ops only; it is rewritten to `(q, i') = max_pool(x)`, `p = relu(q)`,
//! `gq = relu_grad(p, gp)`, `gx = pool2d_max_grad(gq, i')`, reusing `r`, `i` and `gr` as
//! `q`, `i'` and `gq` (`q` and `gq` take `p`'s shape; `i'` may differ from `i` in windows
//! whose maximum is not positive). Those three values are listed as removed, so a run
//! fetching one runs the program as written.
//!
//! The GPU kernels are the same selects and the same first-maximum scan, so the argument
//! holds there too. On the CPU the gain is time (relu on a quarter of the elements). On a
//! GPU relu would otherwise run free inside the convolution producing `x` (an epilogue), and
//! the rewrite adds one small dispatch; the gain there is memory: the written program keeps
//! the full-size relu output alive from the forward pass until relu's gradient near the end
//! of the backward pass, the rewritten one frees `x` once it is pooled. On an H100 the MNIST
//! step's plan needs 9.1 MiB instead of 11.9 with its wall time unchanged (BENCHMARKS.md).

use std::collections::{HashMap, HashSet};

use super::program::{OpDesc, VarDesc, VarId};
use crate::DType;
use crate::ops::Commute;

/// A program's global block after the rewrite.
pub(super) struct Commuted {
    pub ops: Vec<OpDesc>,
    /// Values whose contents differ from the written program's.
    pub eliminated: HashSet<VarId>,
    /// `(v, like)`: variable `v` now has the shape of `like`.
    pub reshaped: Vec<(VarId, VarId)>,
}

/// Rewrites every `max_pool(relu(x))` of `ops` (block 0) with its gradient; None when there
/// is none.
pub(super) fn relu_after_max_pool(ops: &[OpDesc], vars: &[VarDesc]) -> Option<Commuted> {
    let mut readers: HashMap<VarId, Vec<(usize, usize)>> = HashMap::new();
    let mut producer: HashMap<VarId, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        for (slot, &v) in op.inputs.iter().enumerate() {
            readers.entry(v).or_default().push((i, slot));
        }
        for &v in &op.outputs {
            producer.insert(v, i);
        }
    }
    let reads = |v: VarId| readers.get(&v).map_or(&[][..], Vec::as_slice);
    let mut replaced: HashMap<usize, Vec<OpDesc>> = HashMap::new();
    let mut removed = HashSet::new();
    let mut eliminated = HashSet::new();
    let mut reshaped = Vec::new();
    for (i2, pool) in ops.iter().enumerate() {
        // Patterns never share an op: each relu output, index and gradient has one pooling.
        let Some(m) = Match::at(ops, vars, i2, pool, &producer, &reads) else { continue };
        let (relu, grad, relu_grad) = (&ops[m.relu], &ops[m.pool_grad], &ops[m.relu_grad]);
        let [r, p, idx, gr] = [relu.outputs[0], pool.outputs[0], pool.outputs[1], grad.outputs[0]];
        let with = |op: &OpDesc, inputs: Vec<VarId>, outputs: Vec<VarId>| OpDesc { inputs, outputs, ..op.clone() };
        removed.insert(m.relu);
        replaced.insert(i2, vec![with(pool, relu.inputs.clone(), vec![r, idx]), with(relu, vec![r], vec![p])]);
        replaced.insert(m.pool_grad, vec![with(relu_grad, vec![p, grad.inputs[0]], vec![gr])]);
        replaced.insert(m.relu_grad, vec![with(grad, vec![gr, idx], relu_grad.outputs.clone())]);
        eliminated.extend([r, idx, gr]);
        reshaped.extend([(r, p), (gr, p)]);
    }
    if replaced.is_empty() {
        return None;
    }
    let ops = (0..ops.len())
        .filter(|i| !removed.contains(i))
        .flat_map(|i| replaced.remove(&i).unwrap_or_else(|| vec![ops[i].clone()]))
        .collect();
    Some(Commuted { ops, eliminated, reshaped })
}

/// The ops of one pattern around the pooling.
struct Match {
    relu: usize,
    pool_grad: usize,
    relu_grad: usize,
}

impl Match {
    fn at<'a>(
        ops: &[OpDesc],
        vars: &[VarDesc],
        i2: usize,
        pool: &OpDesc,
        producer: &HashMap<VarId, usize>,
        reads: &impl Fn(VarId) -> &'a [(usize, usize)],
    ) -> Option<Match> {
        let Some(Commute::MaxWindow { grad: pool_grad }) = pool.facts().commute else { return None };
        if pool.inputs.len() != 1 || pool.outputs.len() != 2 {
            return None;
        }
        let (r, p, idx) = (pool.inputs[0], pool.outputs[0], pool.outputs[1]);
        let i1 = *producer.get(&r)?;
        let relu = &ops[i1];
        let Some(Commute::ZeroFloor { grad: relu_grad_op }) = relu.facts().commute else { return None };
        if relu.inputs.len() != 1 || relu.outputs != [r] || i1 > i2 {
            return None;
        }
        let x = relu.inputs[0];
        if !matches!(vars[r].dtype, DType::Float32 | DType::Float64) || vars[x].dtype != vars[r].dtype {
            return None;
        }
        // The index is read by the pooling's gradient only (a user reading it sees `i`).
        let &[(j1, 1)] = reads(idx) else { return None };
        let grad = &ops[j1];
        if grad.op_type != pool_grad || grad.inputs.len() != 2 || grad.outputs.len() != 1 {
            return None;
        }
        let gr = grad.outputs[0];
        let &[(j2, 1)] = reads(gr) else { return None };
        let relu_grad = &ops[j2];
        if relu_grad.op_type != relu_grad_op
            || relu_grad.inputs.len() != 2
            || relu_grad.inputs[0] != r
            || relu_grad.outputs.len() != 1
        {
            return None;
        }
        // `r` is read by the pooling and relu's gradient, nothing else.
        let mut r_reads = reads(r).to_vec();
        r_reads.sort_unstable();
        if r_reads != [(i2, 0), (j2, 0)] || !(i2 < j1 && j1 < j2) {
            return None;
        }
        let produced_once = [(idx, i2), (gr, j1)].iter().all(|(v, at)| producer.get(v) == Some(at));
        if !produced_once || [r, idx, gr].iter().any(|&v| vars[v].persistable) {
            return None;
        }
        // The pooling now reads `x` at its own position and relu's gradient reads `p` at
        // the pooling gradient's: neither may be written in between.
        if written_between(ops, x, i1, i2) || written_between(ops, p, i2, j1) {
            return None;
        }
        Some(Match { relu: i1, pool_grad: j1, relu_grad: j2 })
    }
}

/// True when an op strictly between `from` and `to` writes `v` (as an output or in place).
fn written_between(ops: &[OpDesc], v: VarId, from: usize, to: usize) -> bool {
    ops[from + 1..to].iter().any(|op| {
        let inplace = crate::ops::find_op(&op.op_type).map(|o| o.inplace(op.inputs.len())).unwrap_or_default();
        op.outputs.contains(&v) || inplace.iter().filter_map(|&j| op.inputs.get(j)).any(|&w| w == v)
    })
}
