//! Control flow that works in both modes (Paddle's `paddle.static.nn.cond` and
//! `while_loop`): on eager tensors the closures simply run as Rust control flow; on static
//! variables they build sub-blocks of the program, and the Executor runs the chosen branch
//! or loops. Gradients flow through both: `cond`'s backward is another `cond` whose branches
//! are the branches' generated backward passes; `while_loop`'s is a `while_grad` op that
//! replays the recorded iterations in reverse through the body's generated backward block.

use std::cell::RefCell;
use std::collections::HashSet;

use super::executor::Run;
use super::program::{OpDesc, OpRole, Program, VarDesc, VarId, VarKind};
use super::{var_dims, var_tensor};
use crate::{DType, Error, Result, Tensor};

/// What a branch or loop body returns: one tensor, a vector, or a pair.
pub trait Outputs: Sized {
    /// The tensors, in order.
    fn into_tensors(self) -> Vec<Tensor>;
    /// Rebuilds the value from tensors of the same count.
    fn from_tensors(v: Vec<Tensor>) -> Result<Self>;
}

impl Outputs for Tensor {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self]
    }
    fn from_tensors(mut v: Vec<Tensor>) -> Result<Self> {
        (v.len() == 1).then(|| v.remove(0)).ok_or_else(|| Error::invalid("cond", "expected one output"))
    }
}

impl Outputs for Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self
    }
    fn from_tensors(v: Vec<Tensor>) -> Result<Self> {
        Ok(v)
    }
}

impl Outputs for (Tensor, Tensor) {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self.0, self.1]
    }
    fn from_tensors(v: Vec<Tensor>) -> Result<Self> {
        match <[Tensor; 2]>::try_from(v) {
            Ok([a, b]) => Ok((a, b)),
            Err(_) => Err(Error::invalid("cond", "expected two outputs")),
        }
    }
}

/// The control-flow ops a program holds beside registry ops: the Executor runs their
/// sub-blocks itself. The one place their names are spelt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Control {
    /// `cond(pred)`: runs sub-block 0 or 1.
    Cond,
    /// `while`: runs the condition block, then the body, while the condition holds.
    While,
    /// A `while` loop's gradient, from the iterations' values the loop kept.
    WhileGrad,
}

impl Control {
    const ALL: [Control; 3] = [Control::Cond, Control::While, Control::WhileGrad];

    /// The op type of a program's op.
    pub(super) fn name(self) -> &'static str {
        match self {
            Control::Cond => "cond",
            Control::While => "while",
            Control::WhileGrad => "while_grad",
        }
    }

    /// The control-flow op of type `op_type`, if it is one.
    pub(super) fn of(op_type: &str) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.name() == op_type)
    }
}

thread_local! {
    /// Static variables read while building each open sub-block (innermost last).
    static CAPTURES: RefCell<Vec<Vec<Tensor>>> = const { RefCell::new(Vec::new()) };
}

/// Notes the static inputs of an op being appended (and, while a trace captures, its eager
/// inputs: a layer's parameters), for the sub-blocks being built.
pub(super) fn note_inputs(inputs: &[&Tensor]) {
    let capturing = super::trace::active();
    CAPTURES.with(|c| {
        if let Some(frame) = c.borrow_mut().last_mut() {
            for t in inputs {
                if (t.is_static_var() || capturing) && !frame.iter().any(|f| f.same_tensor(t)) {
                    frame.push((*t).clone());
                }
            }
        }
    });
}

/// Builds one sub-block of `program` with `f`; returns the block, its results and the static
/// variables it read.
fn build_block<T: Outputs>(
    program: &Program,
    f: impl FnOnce() -> Result<T>,
) -> Result<(usize, Vec<Tensor>, Vec<Tensor>)> {
    let (idx, parent) = program.open_block();
    CAPTURES.with(|c| c.borrow_mut().push(Vec::new()));
    let out = f();
    let reads = CAPTURES.with(|c| c.borrow_mut().pop()).unwrap_or_default();
    program.set_current_block(parent);
    let results = out?.into_tensors();
    for (i, r) in results.iter().enumerate() {
        match r.var_ref() {
            Some(v) if v.program.same_program(program) => {}
            _ => {
                return Err(Error::invalid(
                    "cond",
                    format!("result {i} of a branch is not a variable of the program being built"),
                ));
            }
        }
    }
    Ok((idx, results, reads))
}

/// The blocks nested in `root` (itself included).
fn nested(program: &Program, root: usize) -> HashSet<usize> {
    let d = program.data();
    let mut set: HashSet<usize> = HashSet::from([root]);
    let mut grew = true;
    while grew {
        grew = false;
        for b in &d.blocks {
            if let Some(p) = b.parent
                && set.contains(&p)
                && set.insert(b.idx)
            {
                grew = true;
            }
        }
    }
    set
}

/// Of `reads` (and `results`), the variables declared outside `blocks` (and the captured
/// eager tensors of a trace, which stand for variables of block 0), deduplicated.
fn outer(program: &Program, blocks: &HashSet<usize>, tensors: impl IntoIterator<Item = Tensor>) -> Vec<Tensor> {
    let d = program.data();
    let mut seen = HashSet::new();
    let mut v = Vec::new();
    for t in tensors {
        let id = match t.var_ref() {
            Some(r) if !blocks.contains(&d.vars[r.id].block) => Some(r.id),
            Some(_) => None,
            None => super::trace::id_of(&t),
        };
        if let Some(id) = id
            && seen.insert(id)
        {
            v.push(t.clone());
        }
    }
    v
}

/// The variable ids of static variables and of a trace's captured eager tensors.
fn ids(ts: &[Tensor]) -> Vec<VarId> {
    ts.iter().filter_map(|t| t.var_ref().map(|v| v.id).or_else(|| super::trace::id_of(t))).collect()
}

/// Declares the outputs of a control-flow op (`{base}.tmp_i`) like `like`.
fn output_vars(program: &Program, base: &str, like: &[Tensor], stop_gradient: bool) -> Result<Vec<Tensor>> {
    let block = program.data().current_block;
    like.iter()
        .enumerate()
        .map(|(i, t)| {
            let id = program.add_var(VarDesc {
                name: format!("{base}.tmp_{i}"),
                shape: var_dims(t.shape()),
                dtype: t.dtype(),
                persistable: false,
                stop_gradient,
                kind: VarKind::Plain,
                block,
            })?;
            Ok(var_tensor(program, id, t.shape(), t.dtype()))
        })
        .collect()
}

fn check_pred(op: &'static str, pred: &Tensor) -> Result<()> {
    if pred.dtype() != DType::Bool || pred.numel() != 1 {
        return Err(Error::invalid(
            op,
            format!("the condition must be a bool tensor of one element, got {} {:?}", pred.dtype(), pred.shape()),
        ));
    }
    Ok(())
}

/// `true_fn()` if `pred` else `false_fn()` (Paddle's `static.nn.cond`). On an eager
/// condition it reads the value and runs one closure; on a static one it builds both
/// branches as sub-blocks and appends a `cond` op, whose outputs must agree in count,
/// dtype and shape.
pub fn cond<T: Outputs>(
    pred: &Tensor,
    true_fn: impl FnOnce() -> Result<T>,
    false_fn: impl FnOnce() -> Result<T>,
) -> Result<T> {
    const OP: &str = "cond";
    check_pred(OP, pred)?;
    let Some(v) = pred.var_ref() else {
        return if pred.item::<bool>()? { true_fn() } else { false_fn() };
    };
    let program = v.program.clone();
    let (tb, t_res, t_reads) = build_block(&program, true_fn)?;
    let (fb, f_res, f_reads) = build_block(&program, false_fn)?;
    if t_res.len() != f_res.len() {
        return Err(Error::invalid(OP, format!("the branches return {} and {} values", t_res.len(), f_res.len())));
    }
    for (i, (a, b)) in t_res.iter().zip(&f_res).enumerate() {
        if a.dtype() != b.dtype() || a.shape() != b.shape() {
            return Err(Error::invalid(
                OP,
                format!(
                    "output {i} is {} {:?} in the true branch but {} {:?} in the false branch",
                    a.dtype(),
                    var_dims(a.shape()),
                    b.dtype(),
                    var_dims(b.shape())
                ),
            ));
        }
    }
    program.set_block_io(tb, Vec::new(), ids(&t_res));
    program.set_block_io(fb, Vec::new(), ids(&f_res));
    let mut inside = nested(&program, tb);
    inside.extend(nested(&program, fb));
    let captured =
        outer(&program, &inside, t_reads.into_iter().chain(f_reads).chain(t_res.clone()).chain(f_res.clone()));
    let mut inputs = vec![pred.clone()];
    inputs.extend(captured.iter().cloned());
    let refs: Vec<&Tensor> = inputs.iter().collect();
    note_inputs(&refs);
    let records = crate::is_grad_enabled() && captured.iter().any(|t| t.requires_grad());
    let base = program.unique_name(OP);
    let outs = output_vars(&program, &base, &t_res, !records)?;
    program.append_op(OpDesc {
        op_type: Control::Cond.name().into(),
        inputs: ids(&inputs),
        outputs: ids(&outs),
        attrs: Default::default(),
        sub_blocks: vec![tb, fb],
        role: OpRole::Forward,
    });
    let float_outs: Vec<&Tensor> = outs.iter().filter(|t| t.dtype().is_float()).collect();
    if records && float_outs.len() == outs.len() {
        let (pred, captured_c) = (pred.clone(), captured.clone());
        crate::autograd::record(OP, &refs, &float_outs, move |ctx| {
            cond_backward(&pred, &captured_c, &t_res, &f_res, ctx.grads, &ctx.needs[1..])
        });
    }
    T::from_tensors(outs)
}

/// The gradient of a `cond`: another `cond` on the same condition whose branches run the
/// generated backward pass of the corresponding forward branch.
fn cond_backward(
    pred: &Tensor,
    captured: &[Tensor],
    t_res: &[Tensor],
    f_res: &[Tensor],
    grads: &[Tensor],
    needs: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    let targets: Vec<Tensor> = captured.iter().zip(needs).filter(|(_, n)| **n).map(|(t, _)| t.clone()).collect();
    let branch = |results: &[Tensor]| -> Result<Vec<Tensor>> {
        let (outs, gs): (Vec<Tensor>, Vec<Tensor>) =
            results.iter().zip(grads).filter(|(r, _)| r.requires_grad()).map(|(r, g)| (r.clone(), g.clone())).unzip();
        let found = if outs.is_empty() {
            vec![None; targets.len()]
        } else {
            crate::autograd::grad(&outs, &targets, Some(&gs), true, false, true)?
        };
        found.into_iter().zip(&targets).map(|(g, t)| g.map_or_else(|| crate::zeros_like(t), Ok)).collect()
    };
    let out: Vec<Tensor> = cond(pred, || branch(t_res), || branch(f_res))?;
    let mut out = out.into_iter();
    let mut result = vec![None];
    for &n in needs {
        result.push(if n { out.next() } else { None });
    }
    Ok(result)
}

/// A branch of [`case`] or [`switch_case`].
pub type Branch<'a, T> = Box<dyn FnOnce() -> Result<T> + 'a>;

/// The branch of the first true condition, else `default` (Paddle's `static.nn.case`):
/// nested [`cond`]s, so it works on eager and static conditions alike.
pub fn case<'a, T: Outputs>(pred_fn_pairs: Vec<(Tensor, Branch<'a, T>)>, default: Branch<'a, T>) -> Result<T> {
    let mut pairs = pred_fn_pairs.into_iter();
    match pairs.next() {
        None => default(),
        Some((pred, f)) => {
            let rest: Vec<(Tensor, Branch<'a, T>)> = pairs.collect();
            cond(&pred, f, move || case(rest, default))
        }
    }
}

/// The branch whose index equals `branch_index` (a one-element integer tensor), else
/// `default` (Paddle's `static.nn.switch_case`).
pub fn switch_case<'a, T: Outputs>(
    branch_index: &Tensor,
    branch_fns: Vec<(i64, Branch<'a, T>)>,
    default: Branch<'a, T>,
) -> Result<T> {
    if !branch_index.dtype().is_int() || branch_index.numel() != 1 {
        return Err(Error::invalid(
            "switch_case",
            format!("branch_index must be one integer, got {} {:?}", branch_index.dtype(), branch_index.shape()),
        ));
    }
    let pairs = branch_fns
        .into_iter()
        .map(|(k, f)| Ok((branch_index.equal_scalar(k)?.reshape([1])?, f)))
        .collect::<Result<Vec<_>>>()?;
    case(pairs, default)
}

/// Runs `body_fn` while `cond_fn` holds (Paddle's `static.nn.while_loop`), starting from
/// `loop_vars`; returns the final values. On eager tensors it is a Rust loop; on static
/// variables it builds a condition block and a body block and appends a `while` op. The
/// body must keep each value's dtype and shape.
pub fn while_loop(
    cond_fn: impl Fn(&[Tensor]) -> Result<Tensor>,
    body_fn: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>,
    loop_vars: &[Tensor],
) -> Result<Vec<Tensor>> {
    const OP: &str = "while_loop";
    let Some(program) = loop_vars.iter().find_map(|t| t.var_ref().map(|v| v.program.clone())) else {
        let mut vars = loop_vars.to_vec();
        loop {
            let c = cond_fn(&vars)?;
            check_pred(OP, &c)?;
            if !c.item::<bool>()? {
                return Ok(vars);
            }
            let next = body_fn(&vars)?;
            check_carried(&vars, &next)?;
            vars = next;
        }
    };
    if let Some(i) = loop_vars.iter().position(|t| !t.is_static_var()) {
        return Err(Error::invalid(
            OP,
            format!("loop_vars[{i}] is an eager tensor but the others are static variables"),
        ));
    }
    let base = program.unique_name("while");
    // The loop-carried variables the blocks read; the op binds them before each pass. Float
    // ones take part in autograd, so the body's ops record the nodes its gradient replays.
    let carried = output_vars(&program, &format!("{base}.carried"), loop_vars, true)?;
    if crate::is_grad_enabled() {
        carried.iter().filter(|t| t.dtype().is_float()).for_each(|t| {
            t.set_stop_gradient(false);
        });
    }
    let (cb, c_res, c_reads) = build_block(&program, || cond_fn(&carried))?;
    if let [c] = c_res.as_slice() {
        check_pred(OP, c)?;
    }
    let (bb, b_res, b_reads) = build_block(&program, || body_fn(&carried))?;
    check_carried(loop_vars, &b_res)?;
    program.set_block_io(cb, ids(&carried), ids(&c_res));
    program.set_block_io(bb, ids(&carried), ids(&b_res));
    let mut inside = nested(&program, cb);
    inside.extend(nested(&program, bb));
    let carried_ids: HashSet<VarId> = ids(&carried).into_iter().collect();
    let captured: Vec<Tensor> = outer(&program, &inside, c_reads.into_iter().chain(b_reads).chain(b_res.clone()))
        .into_iter()
        .filter(|t| t.var_ref().is_none_or(|v| !carried_ids.contains(&v.id)))
        .collect();
    let mut inputs = loop_vars.to_vec();
    inputs.extend(captured.iter().cloned());
    let refs: Vec<&Tensor> = inputs.iter().collect();
    note_inputs(&refs);
    let records = crate::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
    let outs = output_vars(&program, &base, loop_vars, !records)?;
    program.append_op(OpDesc {
        op_type: Control::While.name().into(),
        inputs: ids(&inputs),
        outputs: ids(&outs),
        attrs: Default::default(),
        sub_blocks: vec![cb, bb],
        role: OpRole::Forward,
    });
    let float_outs: Vec<&Tensor> = outs.iter().filter(|t| t.dtype().is_float()).collect();
    if records && !float_outs.is_empty() {
        let key = ids(&outs)[0];
        let loop_c = LoopGrad { program: program.clone(), key, body: bb, base, carried, results: b_res, captured };
        crate::autograd::record(OP, &refs, &float_outs, move |ctx| loop_c.backward(ctx.grads, ctx.needs));
    }
    Ok(outs)
}

/// What a `while` op's gradient needs: the body block and its variables.
struct LoopGrad {
    program: Program,
    /// The forward op's first output: names its tape of carried values.
    key: VarId,
    body: usize,
    base: String,
    carried: Vec<Tensor>,
    results: Vec<Tensor>,
    captured: Vec<Tensor>,
}

impl LoopGrad {
    /// Appends a `while_grad` op: for each recorded iteration, last to first, it restores the
    /// carried values, reruns the body, and runs a gradient block generated from the body's
    /// recorded nodes, which maps the gradient of the next carried values to those of the
    /// current ones and of the captured variables (summed over iterations).
    fn backward(&self, grads: &[Tensor], needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        let p = &self.program;
        let n = self.carried.len();
        let slots: Vec<usize> = (0..n).filter(|&i| self.carried[i].dtype().is_float()).collect();
        let caps: Vec<usize> =
            (0..self.captured.len()).filter(|&j| needs.get(n + j).copied().unwrap_or(false)).collect();
        p.set_op_attr_of_output(self.key, "keep_tape", crate::ops::AttrValue::Bool(true));
        let like: Vec<Tensor> = slots.iter().map(|&i| self.carried[i].clone()).collect();
        let (gb, parent) = p.open_block();
        let built = (|| -> Result<(Vec<Tensor>, Vec<Tensor>)> {
            let dnext = output_vars(p, &format!("{}.dnext", self.base), &like, true)?;
            let mut targets = like.clone();
            targets.extend(caps.iter().map(|&j| self.captured[j].clone()));
            let (outs, seeds): (Vec<Tensor>, Vec<Tensor>) = slots
                .iter()
                .zip(&dnext)
                .filter(|(i, _)| self.results[**i].requires_grad())
                .map(|(&i, d)| (self.results[i].clone(), d.clone()))
                .unzip();
            let found = if outs.is_empty() {
                vec![None; targets.len()]
            } else {
                crate::autograd::grad(&outs, &targets, Some(&seeds), true, false, true)?
            };
            let results: Result<Vec<Tensor>> =
                found.into_iter().zip(&targets).map(|(g, t)| g.map_or_else(|| crate::zeros_like(t), Ok)).collect();
            Ok((dnext, results?))
        })();
        p.set_current_block(parent);
        let (dnext, results) = built?;
        p.set_block_io(gb, ids(&dnext), ids(&results));
        let mut inputs: Vec<Tensor> = grads.to_vec();
        inputs.extend(caps.iter().map(|&j| self.captured[j].clone()));
        let refs: Vec<&Tensor> = inputs.iter().collect();
        note_inputs(&refs);
        let mut out_like = like.clone();
        out_like.extend(caps.iter().map(|&j| self.captured[j].clone()));
        let outs = output_vars(p, &format!("{}.grad", self.base), &out_like, true)?;
        p.append_op(OpDesc {
            op_type: Control::WhileGrad.name().into(),
            inputs: ids(&inputs),
            outputs: ids(&outs),
            attrs: crate::ops::AttrMap::new().with("forward", p.var_name(self.key)).with("slots", slots.len() as i64),
            sub_blocks: vec![self.body, gb],
            role: OpRole::Forward,
        });
        let mut res = vec![None; needs.len()];
        for (k, &i) in slots.iter().enumerate() {
            if needs.get(i).copied().unwrap_or(false) {
                res[i] = Some(outs[k].clone());
            }
        }
        for (k, &j) in caps.iter().enumerate() {
            res[n + j] = Some(outs[slots.len() + k].clone());
        }
        Ok(res)
    }
}

/// A control-flow op's inputs and outputs fit its blocks (a program read from a file may
/// not): a typed error rather than an index out of range.
fn check_shape_of(r: &Run<'_>, op: &OpDesc) -> Result<()> {
    let bad = |what: &str| Err(Error::invalid("Executor.run", format!("malformed {} op: {what}", op.op_type)));
    let [first, second] = op.sub_blocks[..] else { return bad("it needs two blocks") };
    match Control::of(&op.op_type) {
        Some(Control::Cond) => {
            if op.inputs.is_empty() {
                return bad("no condition");
            }
            let n = r.results(first).len();
            if r.results(second).len() != n || op.outputs.len() != n {
                return bad("its branches and outputs differ in count");
            }
        }
        Some(Control::While) => {
            let carried = r.params(first).len();
            if carried == 0
                || op.inputs.len() < carried
                || op.outputs.len() != carried
                || r.results(first).len() != 1
                || r.params(second).len() != carried
                || r.results(second).len() != carried
            {
                return bad("its loop variables do not fit its blocks");
            }
        }
        _ => {
            let slots = match op.attrs.get("slots") {
                Some(crate::ops::AttrValue::Int(v)) => usize::try_from(*v).unwrap_or(usize::MAX),
                _ => return bad("no slots attribute"),
            };
            let caps = op.inputs.len().checked_sub(slots);
            let (gp, gr) = (r.params(second).len(), r.results(second).len());
            if caps.is_none_or(|c| op.outputs.len() != slots + c || gr != slots + c) || gp != slots {
                return bad("its gradients do not fit its blocks");
            }
        }
    }
    Ok(())
}

fn check_carried(before: &[Tensor], after: &[Tensor]) -> Result<()> {
    if before.len() != after.len() {
        return Err(Error::invalid(
            "while_loop",
            format!("the body returns {} values for {} loop variables", after.len(), before.len()),
        ));
    }
    for (i, (a, b)) in before.iter().zip(after).enumerate() {
        if a.dtype() != b.dtype() || a.shape() != b.shape() {
            return Err(Error::invalid(
                "while_loop",
                format!(
                    "loop variable {i} is {} {:?} but the body returns {} {:?}",
                    a.dtype(),
                    var_dims(a.shape()),
                    b.dtype(),
                    var_dims(b.shape())
                ),
            ));
        }
    }
    Ok(())
}

/// Runs a control-flow op in an executor run.
pub(super) fn run(r: &Run<'_>, op: &OpDesc, env: &mut Vec<Option<Tensor>>) -> Result<()> {
    check_shape_of(r, op)?;
    match Control::of(&op.op_type) {
        Some(Control::Cond) => {
            let pred = r.value(op.inputs[0], env)?;
            let taken = if pred.item::<bool>()? { op.sub_blocks[0] } else { op.sub_blocks[1] };
            r.block(taken, env)?;
            let results = r.results(taken);
            for (&out, &res) in op.outputs.iter().zip(&results) {
                env[out] = Some(r.value(res, env)?);
            }
            Ok(())
        }
        Some(Control::While) => {
            let (cb, bb) = (op.sub_blocks[0], op.sub_blocks[1]);
            let carried = r.params(cb);
            for (i, &c) in carried.iter().enumerate() {
                env[c] = Some(r.value(op.inputs[i], env)?);
            }
            // A loop whose gradient is part of the program keeps each iteration's carried
            // values for `while_grad`.
            let tape = matches!(op.attrs.get("keep_tape"), Some(crate::ops::AttrValue::Bool(true)));
            let mut kept = Vec::new();
            loop {
                r.block(cb, env)?;
                let c = r.results(cb)[0];
                if !r.value(c, env)?.item::<bool>()? {
                    break;
                }
                if tape {
                    kept.push(carried.iter().map(|&c| r.value(c, env)).collect::<Result<Vec<_>>>()?);
                }
                r.block(bb, env)?;
                let next: Vec<Tensor> = r.results(bb).iter().map(|&v| r.value(v, env)).collect::<Result<_>>()?;
                for (&c, t) in carried.iter().zip(next) {
                    env[c] = Some(t);
                }
            }
            for (&out, &c) in op.outputs.iter().zip(&carried) {
                env[out] = Some(r.value(c, env)?);
            }
            if tape {
                r.tapes.borrow_mut().insert(op.outputs[0], kept);
            }
            Ok(())
        }
        Some(Control::WhileGrad) => {
            let int = |name: &str| match op.attrs.get(name) {
                Some(crate::ops::AttrValue::Int(v)) => Ok(*v as usize),
                _ => Err(Error::invalid("Executor.run", format!("while_grad without its {name} attribute"))),
            };
            let slots = int("slots")?;
            let key = match op.attrs.get("forward") {
                Some(crate::ops::AttrValue::Str(name)) => r.id_of(name),
                _ => None,
            }
            .ok_or_else(|| Error::invalid("Executor.run", "while_grad without its forward loop"))?;
            let (body, gb) = (op.sub_blocks[0], op.sub_blocks[1]);
            let tape = r.tapes.borrow().get(&key).cloned().ok_or_else(|| {
                Error::invalid("Executor.run", "while_grad ran before its while loop recorded its iterations")
            })?;
            let carried = r.params(body);
            let (dnext, results) = (r.params(gb), r.results(gb));
            let mut g: Vec<Tensor> = op.inputs[..slots].iter().map(|&v| r.value(v, env)).collect::<Result<_>>()?;
            let caps: Vec<Tensor> = op.inputs[slots..].iter().map(|&v| r.value(v, env)).collect::<Result<_>>()?;
            let mut gcap: Vec<Option<Tensor>> = vec![None; caps.len()];
            for snap in tape.iter().rev() {
                for (&c, t) in carried.iter().zip(snap) {
                    env[c] = Some(t.clone());
                }
                r.block(body, env)?;
                for (&d, t) in dnext.iter().zip(&g) {
                    env[d] = Some(t.clone());
                }
                r.block(gb, env)?;
                let vals: Vec<Tensor> = results.iter().map(|&v| r.value(v, env)).collect::<Result<_>>()?;
                g = vals[..slots].to_vec();
                for (acc, v) in gcap.iter_mut().zip(&vals[slots..]) {
                    *acc = Some(match acc.take() {
                        Some(a) => a.add(v)?,
                        None => v.clone(),
                    });
                }
            }
            for (&out, t) in op.outputs.iter().zip(g) {
                env[out] = Some(t);
            }
            for ((&out, acc), c) in op.outputs[slots..].iter().zip(gcap).zip(&caps) {
                env[out] = Some(match acc {
                    Some(t) => t,
                    None => crate::zeros_like(c)?,
                });
            }
            Ok(())
        }
        None => Err(Error::invalid("Executor.run", format!("unknown control-flow op {:?}", op.op_type))),
    }
}
