//! The fusion pass: chains of elementwise table ops in a program's global block become one
//! `fused_elementwise` op each (one kernel, no intermediate buffers), for the Executor.
//!
//! An op joins the chain that produced one of its inputs when that value has no other
//! reader and is not persistable, so every chain is a tree whose root (its last op) is the
//! only value that leaves it; operands broadcast as they did op by op (broadcasting
//! commutes with elementwise ops). A `reshape` / `unsqueeze` / `squeeze` that only adds or
//! drops leading 1s (a `squeeze` only of sizes the program knows), and an `expand_as` whose
//! operand broadcasts into its target for any batch, join too (`s.view`, `s.expand`):
//! broadcasting aligns shapes from the right, so they change no element's value, and a chain
//! holding them is kept only where its operands' broadcast shape is its result's (checked on
//! the program's shapes; a view at the root that adds 1s stays out). The pass runs on the
//! whole program after the backward and optimizer ops were appended, so it fuses gradient
//! chains too; the values it removes are listed, and a run fetching one of them runs the
//! unfused program instead.
//!
//! A `matmul` or `conv2d` whose output only such a chain (or a single fusable op) reads,
//! with every other input of the chain broadcasting into that output's shape (a bias, a
//! scale), joins it as a `matmul_epilogue` / `conv2d_epilogue` op: the chain runs in the
//! product kernel's store. A reduction (`sum`, `mean`, `prod`, `max`, `min`) whose input only
//! a chain produces and reads, every input of the chain having the chain's own shape, becomes
//! a `reduce_prologue` op: the reduction computes the chain as it reads each element.
//! Epilogues and prologues are made for GPU places only.

use std::collections::{HashMap, HashSet};

use super::program::{OpDesc, VarDesc, VarId};
use crate::DType;
use crate::ops::fused::{FUSED, MAX_INPUTS, MAX_NODES};
use crate::ops::{AttrField, AttrMap, AttrValue, EpilogueHost, Fusion, RegisteredOp};

/// One fused op replacing a chain.
pub(super) struct Fused {
    /// Index of the chain's root in block 0 (where the fused op goes).
    pub root: usize,
    pub desc: OpDesc,
    /// The chain's other ops.
    pub members: Vec<usize>,
}

/// The token of a fusable op (`u.name:p0:p1` or `b.name`), if `op` is one on `dtype`.
fn token(op: &OpDesc, vars: &[VarDesc]) -> Option<String> {
    let out = *op.outputs.first()?;
    if op.outputs.len() != 1 || !matches!(vars[out].dtype, DType::Float32 | DType::Float64) {
        return None;
    }
    if op.inputs.iter().any(|&v| vars[v].dtype != vars[out].dtype) {
        return None;
    }
    let shape = |v: VarId| vars[v].shape.as_slice();
    match (op.facts().fusion?, op.inputs.as_slice()) {
        // A scalar constant (the `ones` seeding a backward pass) is a leaf: a chain reading
        // it makes no fill kernel. Its rank 0 leaves the chain's broadcast shape unchanged.
        (Fusion::Constant { value }, []) if vars[out].shape.is_empty() => {
            let v = op.attrs.get(value).and_then(f64::from_attr)?;
            v.is_finite().then(|| format!("c.{v:?}"))
        }
        (Fusion::Unary { params }, [_]) => {
            let mut p = [0.0f64; 2];
            for (slot, name) in p.iter_mut().zip(params) {
                *slot = op.attrs.get(name).and_then(f64::from_attr)?;
            }
            // Parameters travel as float32 bits on the GPU: keep exact values only.
            if p.iter().any(|v| !v.is_finite()) {
                return None;
            }
            Some(format!("u.{}:{:?}:{:?}", op.op_type, p[0], p[1]))
        }
        (Fusion::Binary, [_, _]) => Some(format!("b.{}", op.op_type)),
        (Fusion::View, &[x]) if same_but_leading_ones(shape(x), shape(out)) => Some("s.view".into()),
        // `squeeze` drops the dimensions that are 1 when it runs: a batch of 1 would go too.
        (Fusion::Squeeze { axes }, &[x])
            if same_but_leading_ones(shape(x), shape(out)) && squeezes_known(op, axes, shape(x)) =>
        {
            Some("s.view".into())
        }
        (Fusion::Expand, &[x, like]) if expands_into(shape(x), shape(like)) && shape(like) == shape(out) => {
            Some("s.expand".into())
        }
        _ => None,
    }
}

/// True when `a` and `b` are one shape but for leading 1s, with at most one unknown size
/// (so the sizes a run feeds cannot move between dimensions).
fn same_but_leading_ones(a: &[i64], b: &[i64]) -> bool {
    fn strip(s: &[i64]) -> &[i64] {
        &s[s.iter().position(|&d| d != 1).unwrap_or(s.len())..]
    }
    strip(a) == strip(b) && strip(a).iter().filter(|&&d| d < 0).count() <= 1
}

/// True when every dimension `squeeze` may drop from `x` (those its attribute `axes` lists,
/// or all) is known.
fn squeezes_known(op: &OpDesc, axes: &str, x: &[i64]) -> bool {
    let Some(axes) = op.attrs.get(axes).and_then(Vec::<i64>::from_attr) else { return false };
    let rank = x.len() as i64;
    if axes.is_empty() {
        return x.iter().all(|&d| d >= 0);
    }
    axes.iter().all(|&a| {
        let a = if a < 0 { a + rank } else { a };
        (0..rank).contains(&a) && x[a as usize] >= 0
    })
}

/// True when `x` broadcasts into `like` whatever sizes a run feeds: each of its dimensions
/// is 1 or a known size equal to `like`'s.
fn expands_into(x: &[i64], like: &[i64]) -> bool {
    x.len() <= like.len() && x.iter().rev().zip(like.iter().rev()).all(|(&d, &l)| d == 1 || (d == l && d >= 0))
}

/// The shape `shapes` broadcast to, from the program's shapes: None where a run's sizes
/// decide it (an unknown size against a known one other than 1) or they do not broadcast.
fn static_broadcast<'a>(shapes: impl IntoIterator<Item = &'a [i64]>) -> Option<Vec<i64>> {
    let mut out: Vec<i64> = Vec::new();
    for s in shapes {
        if s.len() > out.len() {
            let mut wider = vec![1; s.len() - out.len()];
            wider.extend(&out);
            out = wider;
        }
        let k = out.len() - s.len();
        for (o, &d) in out[k..].iter_mut().zip(s) {
            *o = match (*o, d) {
                (a, b) if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => return None,
            };
        }
    }
    Some(out)
}

/// Which fusions the pass makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Kinds {
    /// Elementwise chains into one `fused_elementwise`.
    pub chains: bool,
    /// A chain after a `matmul` / `conv2d` into its store.
    pub epilogues: bool,
    /// A chain before a reduction into its loads.
    pub prologues: bool,
    /// `max_pool(relu(x))` as `relu(max_pool(x))` (see `commute`).
    pub commute: bool,
    /// Adjacent optimizer updates into one merged op (`merge.rs`).
    pub merge: bool,
}

impl Kinds {
    /// What a place fuses: epilogues and prologues only on a GPU (on the CPU the separate,
    /// vectorised kernels are faster than one loop evaluating the chain), the relu–pooling
    /// rewrite on both, merged updates on a GPU. `DYGRAPH_FUSION` narrows it, for
    /// measurement: a comma-separated list of `chains`, `epilogues`, `prologues`, `commute`,
    /// `merge` (`0` for none is handled by the Executor).
    pub(super) fn for_place(gpu: bool) -> Kinds {
        Kinds::from_setting(gpu, std::env::var("DYGRAPH_FUSION").ok().as_deref())
    }

    fn from_setting(gpu: bool, setting: Option<&str>) -> Kinds {
        let all = Kinds { chains: true, epilogues: gpu, prologues: gpu, commute: true, merge: gpu };
        match setting {
            Some(list) if list.contains(|c: char| c.is_ascii_alphabetic()) => {
                let has = |k: &str| list.split(',').any(|s| s.trim() == k);
                Kinds {
                    chains: has("chains"),
                    epilogues: all.epilogues && has("epilogues"),
                    prologues: all.prologues && has("prologues"),
                    commute: all.commute && has("commute"),
                    merge: all.merge && has("merge"),
                }
            }
            _ => all,
        }
    }
}

/// Finds the chains of block 0's `ops` worth fusing (two ops or more), and as `kinds` allows
/// the epilogues of products and prologues of reductions.
pub(super) fn fuse(ops: &[OpDesc], vars: &[VarDesc], kinds: Kinds) -> Vec<Fused> {
    let mut readers = vec![0usize; vars.len()];
    for op in ops {
        for &v in &op.inputs {
            readers[v] += 1;
        }
    }
    // A loaded program may write a value more than once, or overwrite one that an earlier op
    // (or the same op) read, a feed or a persistable: such a value has two values in the
    // block, and neither joins nor leaves a chain, so each chain's values have one producer,
    // the one `postfix` looks up (and never one reached again from its own inputs).
    let mut writers = vec![0usize; vars.len()];
    let mut first_write: Vec<Option<usize>> = vec![None; vars.len()];
    for (i, op) in ops.iter().enumerate() {
        for &v in &op.outputs {
            writers[v] += 1;
            first_write[v].get_or_insert(i);
        }
    }
    for (i, op) in ops.iter().enumerate() {
        for &v in &op.inputs {
            if first_write[v].is_some_and(|w| w >= i) {
                writers[v] = writers[v].max(2);
            }
        }
    }
    let tokens: Vec<Option<String>> =
        ops.iter().map(|o| token(o, vars).filter(|_| o.outputs.iter().all(|&v| writers[v] == 1))).collect();
    let mut producer: HashMap<VarId, usize> = HashMap::new();
    // group of each op; groups as member lists (the last member is the root)
    let mut group_of: Vec<Option<usize>> = vec![None; ops.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        for &o in op.outputs.iter().filter(|&&o| writers[o] == 1) {
            producer.insert(o, i);
        }
        if tokens[i].is_none() {
            continue;
        }
        let mut merged: Vec<usize> = op
            .inputs
            .iter()
            .filter(|&&v| readers[v] == 1 && !vars[v].persistable)
            .filter_map(|v| producer.get(v).and_then(|&p| group_of[p]))
            .filter(|&g| groups[g].last().is_some_and(|&r| ops[r].outputs.iter().any(|o| op.inputs.contains(o))))
            .collect();
        merged.dedup();
        let mut members: Vec<usize> = merged.iter().flat_map(|&g| groups[g].clone()).collect();
        members.sort_unstable();
        members.push(i);
        // A view may leave the chain's shape wrong for a while (an `unsqueeze` before the
        // `expand_as` that fixes it); any other op joins only where it is right.
        let agrees = tokens[i].as_deref() == Some("s.view") || shapes_agree(&members, ops, vars, &tokens);
        if merged.is_empty() || !within_limits(&members, ops) || !agrees {
            group_of[i] = Some(groups.len());
            groups.push(vec![i]);
            continue;
        }
        for &g in &merged {
            groups[g].clear();
        }
        for &m in &members {
            group_of[m] = Some(groups.len());
        }
        groups.push(members);
    }
    // The one op reading each value read once.
    let mut reader: HashMap<VarId, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        for &v in &op.inputs {
            if readers[v] == 1 {
                reader.insert(v, i);
            }
        }
    }
    let mut fused = Vec::new();
    for mut g in groups.into_iter().filter(|g| !g.is_empty()) {
        // A view at the root that leaves the chain's shape wrong stays out of it.
        while g.len() > 1
            && tokens[g[g.len() - 1]].as_deref() == Some("s.view")
            && !shapes_agree(&g, ops, vars, &tokens)
        {
            g.pop();
        }
        // Views and broadcasts alone compute nothing a kernel would save.
        if g.iter().all(|&m| tokens[m].as_deref().is_some_and(|t| t.starts_with("s."))) {
            continue;
        }
        let root = *g.last().expect("groups are not empty");
        let member_outputs: HashSet<VarId> = g.iter().flat_map(|&m| ops[m].outputs.clone()).collect();
        let epilogue = kinds.epilogues.then(|| epilogue_product(&g, ops, vars, &readers, &producer, &member_outputs));
        if let Some((j, product, host)) = epilogue.flatten() {
            let mut inputs = vec![product];
            let program = postfix(root, ops, &tokens, &member_outputs, &producer, &mut inputs);
            let mut attrs = ops[j].attrs.clone();
            attrs.set("program", AttrValue::Str(program));
            let mut desc_inputs = ops[j].inputs.clone();
            desc_inputs.extend(&inputs[1..]);
            let desc = replacing(&ops[root], host.fused.name().to_string(), desc_inputs, attrs);
            let mut members = vec![j];
            members.extend(&g[..g.len() - 1]);
            fused.push(Fused { root, desc, members });
            continue;
        }
        if let Some((r, prologue)) =
            kinds.prologues.then(|| prologue_reduction(&g, ops, vars, &reader, &member_outputs)).flatten()
        {
            let mut inputs: Vec<VarId> = Vec::new();
            let program = postfix(root, ops, &tokens, &member_outputs, &producer, &mut inputs);
            let mut attrs = ops[r].attrs.clone();
            attrs.set("reduce", AttrValue::Str(ops[r].op_type.clone()));
            attrs.set("program", AttrValue::Str(program));
            let desc = replacing(&ops[r], prologue.name().to_string(), inputs, attrs);
            fused.push(Fused { root: r, desc, members: g.clone() });
            continue;
        }
        if !kinds.chains || g.len() < 2 || overwritten_between(&g, ops) {
            continue;
        }
        let mut inputs: Vec<VarId> = Vec::new();
        let program = postfix(root, ops, &tokens, &member_outputs, &producer, &mut inputs);
        if inputs.is_empty() {
            // Constants alone: the fused op's shape comes from its operands.
            continue;
        }
        let mut attrs = AttrMap::new();
        attrs.set("program", AttrValue::Str(program));
        let desc = replacing(&ops[root], FUSED.name().to_string(), inputs, attrs);
        fused.push(Fused { root, desc, members: g[..g.len() - 1].to_vec() });
    }
    fused
}

/// The distinct values chain `g` reads from outside, in order, and how many reads of them
/// it makes (its postfix program's input nodes).
fn external_inputs(g: &[usize], ops: &[OpDesc], member_outputs: &HashSet<VarId>) -> (Vec<VarId>, usize) {
    let mut ext: Vec<VarId> = Vec::new();
    let mut leaves = 0;
    for &m in g {
        for &v in &ops[m].inputs {
            if !member_outputs.contains(&v) {
                leaves += 1;
                if !ext.contains(&v) {
                    ext.push(v);
                }
            }
        }
    }
    (ext, leaves)
}

/// The op of `op_type` replacing a chain at `last`, its last op: `last`'s outputs and role.
fn replacing(last: &OpDesc, op_type: String, inputs: Vec<VarId>, attrs: AttrMap) -> OpDesc {
    OpDesc { op_type, inputs, outputs: last.outputs.clone(), attrs, sub_blocks: Vec::new(), role: last.role }
}

/// The reduction (its index and fused form) that can take chain `g` as its prologue: it is
/// the only reader of the chain's result (not persistable), every input of the chain has
/// the result's shape, the chain fits a prologue, and nothing between the chain and the
/// reduction writes what the chain reads.
fn prologue_reduction(
    g: &[usize],
    ops: &[OpDesc],
    vars: &[VarDesc],
    reader: &HashMap<VarId, usize>,
    member_outputs: &HashSet<VarId>,
) -> Option<(usize, &'static dyn RegisteredOp)> {
    let root = *g.last()?;
    let v = *ops[root].outputs.first()?;
    let r = *reader.get(&v)?;
    let op = &ops[r];
    let host = op.facts().prologue?;
    if op.inputs != [v] || op.outputs.len() != 1 || vars[v].persistable {
        return None;
    }
    let (ext, leaves) = external_inputs(g, ops, member_outputs);
    // A chain of constants alone has no operand to give the reduction its shape.
    if ext.is_empty()
        || ext.iter().any(|&u| vars[u].shape != vars[v].shape)
        || !(host.fits)(g.len() + leaves, ext.len())
    {
        return None;
    }
    let mut members = g.to_vec();
    members.push(r);
    (!overwritten_between(&members, ops)).then_some((r, host.fused))
}

/// The product (its index, output and host facts: a `matmul` or `conv2d`) a chain `g` can
/// take as its epilogue's producer: the output is read by the chain only, once, is not
/// persistable, and every other input of the chain broadcasts into it whatever the batch
/// size (each dimension 1 or a known size equal to the output's); the chain fits an
/// epilogue and nothing between the producer and the chain's root writes what they read.
fn epilogue_product(
    g: &[usize],
    ops: &[OpDesc],
    vars: &[VarDesc],
    readers: &[usize],
    producer: &HashMap<VarId, usize>,
    member_outputs: &HashSet<VarId>,
) -> Option<(usize, VarId, EpilogueHost)> {
    let (ext, leaves) = external_inputs(g, ops, member_outputs);
    let (j, product, host) = ext.iter().find_map(|&v| {
        let j = *producer.get(&v)?;
        let op = &ops[j];
        let host = op.facts().epilogue?;
        ((host.inputs.0..=host.inputs.1).contains(&op.inputs.len())
            && op.outputs == [v]
            && readers[v] == 1
            && !vars[v].persistable
            && vars[v].dtype == vars[op.inputs[0]].dtype)
            .then_some((j, v, host))
    })?;
    let out = &vars[product].shape;
    let fits_into = |s: &[i64]| {
        s.len() <= out.len() && s.iter().rev().zip(out.iter().rev()).all(|(&d, &o)| d == 1 || (d == o && o >= 0))
    };
    let others = ext.iter().filter(|&&v| v != product);
    if !others.clone().all(|&v| fits_into(&vars[v].shape)) || !(host.fits)(g.len() + leaves, ext.len() - 1, out.len()) {
        return None;
    }
    let mut members = vec![j];
    members.extend(g);
    (!overwritten_between(&members, ops)).then_some((j, product, host))
}

/// True when an op between a chain's first op and its root writes a value the chain reads
/// from outside (an optimizer's output in place of its input, an in-place update): the
/// fused op, at the root's place, would read the new value.
fn overwritten_between(members: &[usize], ops: &[OpDesc]) -> bool {
    let outs: HashSet<VarId> = members.iter().flat_map(|&m| ops[m].outputs.clone()).collect();
    let ext: HashSet<VarId> =
        members.iter().flat_map(|&m| ops[m].inputs.clone()).filter(|v| !outs.contains(v)).collect();
    let (first, root) = (members[0], members[members.len() - 1]);
    (first..root).filter(|k| !members.contains(k)).any(|k| {
        let inplace = ops[k].registered().map(|o| o.inplace(ops[k].inputs.len())).unwrap_or_default();
        ops[k].outputs.iter().any(|v| ext.contains(v))
            || inplace.iter().filter_map(|&j| ops[k].inputs.get(j)).any(|v| ext.contains(v))
    })
}

/// True when chain `members` gives its root's shape: always without views and broadcasts
/// (`s.*`), which elementwise ops' broadcasting keeps; with them, when the program's shapes
/// of the values the chain reads broadcast to its root's.
fn shapes_agree(members: &[usize], ops: &[OpDesc], vars: &[VarDesc], tokens: &[Option<String>]) -> bool {
    if !members.iter().any(|&m| tokens[m].as_deref().is_some_and(|t| t.starts_with("s."))) {
        return true;
    }
    let outs: HashSet<VarId> = members.iter().flat_map(|&m| ops[m].outputs.clone()).collect();
    let (ext, _) = external_inputs(members, ops, &outs);
    let root = members[members.len() - 1];
    static_broadcast(ext.iter().map(|&v| vars[v].shape.as_slice()))
        .is_some_and(|s| ops[root].outputs.first().is_some_and(|&o| vars[o].shape == s))
}

fn within_limits(members: &[usize], ops: &[OpDesc]) -> bool {
    let outs: HashSet<VarId> = members.iter().flat_map(|&m| ops[m].outputs.clone()).collect();
    let ins: HashSet<VarId> =
        members.iter().flat_map(|&m| ops[m].inputs.clone()).filter(|v| !outs.contains(v)).collect();
    let leaves: usize = members.iter().map(|&m| ops[m].inputs.iter().filter(|v| !outs.contains(v)).count()).sum();
    ins.len() <= MAX_INPUTS && members.len() + leaves <= MAX_NODES
}

/// The chain rooted at op `i` in postfix, numbering external inputs as they appear.
fn postfix(
    i: usize,
    ops: &[OpDesc],
    tokens: &[Option<String>],
    member_outputs: &HashSet<VarId>,
    producer: &HashMap<VarId, usize>,
    inputs: &mut Vec<VarId>,
) -> String {
    let mut parts = Vec::new();
    for &v in &ops[i].inputs {
        if member_outputs.contains(&v) {
            parts.push(postfix(producer[&v], ops, tokens, member_outputs, producer, inputs));
        } else {
            let j = inputs.iter().position(|&x| x == v).unwrap_or_else(|| {
                inputs.push(v);
                inputs.len() - 1
            });
            parts.push(format!("x{j}"));
        }
    }
    parts.push(tokens[i].clone().unwrap_or_default());
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::Kinds;

    #[test]
    fn fusion_setting_narrows_the_kinds() {
        let k = |chains, epilogues, prologues, commute| Kinds { chains, epilogues, prologues, commute, merge: false };
        let all = Kinds { merge: true, ..k(true, true, true, true) };
        assert_eq!(Kinds::from_setting(true, None), all);
        assert_eq!(Kinds::from_setting(false, None), k(true, false, false, true));
        assert_eq!(Kinds::from_setting(true, Some("1")), all);
        assert_eq!(Kinds::from_setting(true, Some("merge")), Kinds { merge: true, ..k(false, false, false, false) });
        assert_eq!(Kinds::from_setting(false, Some("merge")), k(false, false, false, false));
        assert_eq!(Kinds::from_setting(true, Some("chains, prologues")), k(true, false, true, false));
        assert_eq!(Kinds::from_setting(true, Some("epilogues")), k(false, true, false, false));
        assert_eq!(Kinds::from_setting(false, Some("commute")), k(false, false, false, true));
        assert_eq!(Kinds::from_setting(true, Some("commute,chains")), k(true, false, false, true));
        // The CPU never fuses products, whatever is asked.
        assert_eq!(Kinds::from_setting(false, Some("epilogues,chains")), k(true, false, false, false));
    }
}
