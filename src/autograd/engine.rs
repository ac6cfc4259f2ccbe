//! The backward engine: collect the nodes reachable from the roots, count each node's
//! consumers, then run nodes whose consumers are all done (Kahn's algorithm). Ready nodes
//! are taken newest first, so the order is deterministic; no recursion, each node runs
//! once, and gradients arriving along several paths are summed before a node runs. For
//! `grad()` the graph is pruned to the nodes that lead to the requested inputs, and every
//! backward rule is told which of its input gradients are needed.

use std::cell::{Cell, RefCell};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::{BackwardCtx, Edge, Node, set_grad_enabled};
use crate::{Error, Result, Tensor};

type NodeId = *const Node;

fn id(node: &Arc<Node>) -> NodeId {
    Arc::as_ptr(node)
}

fn accumulate(slot: &mut Option<Tensor>, g: Tensor) -> Result<()> {
    *slot = Some(match slot.take() {
        Some(old) => old.add(&g)?,
        None => g,
    });
    Ok(())
}

type Callback = Box<dyn FnOnce() -> Result<()>>;

thread_local! {
    /// How many backward passes this thread is inside (a backward rule may run another).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Callbacks to run when the outermost backward pass ends.
    static CALLBACKS: RefCell<Vec<Callback>> = const { RefCell::new(Vec::new()) };
    /// The number of the outermost backward pass running on this thread.
    static PASS: Cell<u64> = const { Cell::new(0) };
}

/// Numbers every outermost backward pass, process-wide.
static PASSES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The number of the backward pass running on this thread (unique in the process), so a
/// hook can tell a new pass from one that failed before its callbacks ran.
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) fn current_pass() -> u64 {
    PASS.with(Cell::get)
}

/// Queues `f` to run once the backward pass running on this thread has delivered every
/// gradient (PyTorch's `queue_callback`; data parallelism waits for its all-reduces here).
/// Callbacks run in the order queued, all of them; the first error becomes backward's. Outside a
/// backward pass this is an error.
pub fn queue_callback(f: impl FnOnce() -> Result<()> + 'static) -> Result<()> {
    if DEPTH.with(Cell::get) == 0 {
        return Err(Error::Autograd("queue_callback: no backward pass is running on this thread".into()));
    }
    CALLBACKS.with(|c| c.borrow_mut().push(Box::new(f)));
    Ok(())
}

/// Marks this thread as inside a backward pass; the outermost one, when it ends, runs the
/// queued callbacks (or drops them if the pass failed).
struct PassScope;

impl PassScope {
    fn enter() -> PassScope {
        if DEPTH.with(Cell::get) == 0 {
            PASS.with(|p| p.set(PASSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        }
        DEPTH.with(|d| d.set(d.get() + 1));
        PassScope
    }

    fn finish(self, result: Result<Vec<Option<Tensor>>>) -> Result<Vec<Option<Tensor>>> {
        let outermost = DEPTH.with(Cell::get) == 1;
        drop(self);
        if !outermost {
            return result;
        }
        let callbacks = CALLBACKS.with(|c| std::mem::take(&mut *c.borrow_mut()));
        let out = result?;
        // Every callback runs (each may own state that must be finished, such as another
        // model's all-reduces); the first error is backward's.
        let mut first_error = None;
        for f in callbacks {
            if let Err(e) = f() {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

impl Drop for PassScope {
    fn drop(&mut self) {
        let left = DEPTH.with(|d| {
            d.set(d.get() - 1);
            d.get()
        });
        if left == 0 && std::thread::panicking() {
            CALLBACKS.with(|c| c.borrow_mut().clear());
        }
    }
}

/// Leaves with post-accumulate hooks, and how many deliveries each still waits for in this
/// pass (one per consumer edge that leads to it, one per root it is).
struct LeafCompletion {
    pending: HashMap<usize, (Tensor, usize, bool)>,
}

impl LeafCompletion {
    fn key(t: &Tensor) -> usize {
        t.identity()
    }

    fn expect(&mut self, t: &Tensor) {
        if t.grad_meta().post_accumulate_hooks.is_empty() {
            return;
        }
        self.pending.entry(Self::key(t)).or_insert_with(|| (t.clone(), 0, false)).1 += 1;
    }

    /// One expected delivery reached `t` (`got`: with a gradient); runs its hooks when it was
    /// the last.
    fn delivered(&mut self, t: &Tensor, got: bool) -> Result<()> {
        let key = Self::key(t);
        let Some(entry) = self.pending.get_mut(&key) else { return Ok(()) };
        entry.1 -= 1;
        entry.2 |= got;
        if entry.1 > 0 {
            return Ok(());
        }
        let (t, _, any) = self.pending.remove(&key).expect("entry present");
        if any {
            let hooks = t.grad_meta().post_accumulate_hooks.clone();
            for h in hooks {
                h(&t)?;
            }
        }
        Ok(())
    }
}

/// Where the caller wants gradients delivered.
pub(crate) enum Sink<'a> {
    /// Accumulate into the `.grad` of every leaf reached (`backward()`).
    Leaves,
    /// Return the gradients of these tensors, touching no `.grad` (`grad()`).
    Targets(&'a [Tensor]),
}

/// Replaces `g` by each hook's result in turn, checking that a hook keeps the gradient's
/// shape, dtype and place.
fn run_hooks(what: &str, hooks: &[super::Hook], mut g: Tensor) -> Result<Tensor> {
    for h in hooks {
        if let Some(r) = h(&g) {
            if r.shape() != g.shape() || r.dtype() != g.dtype() || r.place() != g.place() {
                return Err(Error::Autograd(format!(
                    "a gradient hook on {what} returned a gradient of shape {:?}, {} on {} for a gradient of shape \
                     {:?}, {} on {}",
                    r.shape(),
                    r.dtype(),
                    r.place(),
                    g.shape(),
                    g.dtype(),
                    g.place()
                )));
            }
            g = r;
        }
    }
    Ok(g)
}

/// Runs backward from `roots` (tensor, gradient) pairs. With `Sink::Targets` only the nodes
/// on a path to a target run, and each computes only the input gradients that lead to one.
pub(crate) fn run(
    roots: &[(Tensor, Tensor)],
    sink: Sink<'_>,
    retain_graph: bool,
    create_graph: bool,
) -> Result<Vec<Option<Tensor>>> {
    let scope = PassScope::enter();
    // Backward rules run in the dtypes their forward ran in, not autocast's.
    let result =
        crate::ops::registry::dispatch::autocast::suspended(|| run_pass(roots, sink, retain_graph, create_graph));
    scope.finish(result)
}

fn run_pass(
    roots: &[(Tensor, Tensor)],
    sink: Sink<'_>,
    retain_graph: bool,
    create_graph: bool,
) -> Result<Vec<Option<Tensor>>> {
    let _mode = set_grad_enabled(create_graph);
    let targets: &[Tensor] = match sink {
        Sink::Targets(t) => t,
        Sink::Leaves => &[],
    };
    let target_edges: Vec<Option<Edge>> = targets.iter().map(|t| t.grad_fn()).collect();
    let mut captured: Vec<Option<Tensor>> = vec![None; targets.len()];
    let accumulate_leaves = matches!(sink, Sink::Leaves);

    // 1. Reachable nodes.
    let mut nodes: HashMap<NodeId, Arc<Node>> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (t, _) in roots {
        if let Some(e) = t.grad_fn()
            && nodes.insert(id(&e.node), e.node.clone()).is_none()
        {
            stack.push(e.node);
        }
    }
    while let Some(n) = stack.pop() {
        for e in n.input_edges.iter().flatten() {
            if nodes.insert(id(&e.node), e.node.clone()).is_none() {
                stack.push(e.node.clone());
            }
        }
    }

    // 2. Which inputs of each node lead to a wanted gradient (producers first, by seq), and
    //    which nodes are relevant: their rule runs, or a target's gradient is read at them.
    let mut order: Vec<&Arc<Node>> = nodes.values().collect();
    order.sort_by_key(|n| n.seq);
    let is_capture = |n: &Arc<Node>| target_edges.iter().flatten().any(|e| Arc::ptr_eq(&e.node, n));
    let mut leads: HashMap<NodeId, Vec<bool>> = HashMap::new();
    let mut relevant: HashMap<NodeId, bool> = HashMap::new();
    for n in &order {
        let l: Vec<bool> = n
            .inputs
            .iter()
            .zip(&n.input_edges)
            .map(|(inp, edge)| match inp {
                None => false,
                Some(_) if accumulate_leaves => true,
                Some(t) => match edge {
                    None => targets.iter().any(|target| target.same_tensor(t)),
                    Some(e) => {
                        let pid = id(&e.node);
                        target_edges.iter().flatten().any(|te| Arc::ptr_eq(&te.node, &e.node) && te.slot == e.slot)
                            || leads.get(&pid).is_some_and(|v| v.iter().any(|&b| b))
                    }
                },
            })
            .collect();
        relevant.insert(id(n), accumulate_leaves || l.iter().any(|&b| b) || is_capture(n));
        leads.insert(id(n), l);
    }

    // 3. Each relevant node's count of relevant consumers still to run.
    let mut deps: HashMap<NodeId, usize> = HashMap::new();
    for n in &order {
        if !relevant[&id(n)] {
            continue;
        }
        for (edge, &l) in n.input_edges.iter().zip(&leads[&id(n)]) {
            if let (Some(e), true) = (edge, l) {
                *deps.entry(id(&e.node)).or_insert(0) += 1;
            }
        }
    }

    // Leaves whose post-accumulate hooks run once all their contributions are in.
    let mut leaves = LeafCompletion { pending: HashMap::new() };
    if accumulate_leaves {
        for n in &order {
            for ((inp, edge), &l) in n.inputs.iter().zip(&n.input_edges).zip(&leads[&id(n)]) {
                if let (Some(t), None, true) = (inp, edge, l) {
                    leaves.expect(t);
                }
            }
        }
        for (t, _) in roots {
            if t.grad_fn().is_none() {
                leaves.expect(t);
            }
        }
    }

    // 4. Seed the roots' gradients.
    let mut buffers: HashMap<NodeId, Vec<Option<Tensor>>> = HashMap::new();
    let deliver_leaf = |t: &Tensor, g: Tensor, captured: &mut Vec<Option<Tensor>>| -> Result<()> {
        let mut hit = false;
        for (i, target) in targets.iter().enumerate() {
            if target.same_tensor(t) {
                accumulate(&mut captured[i], g.clone())?;
                hit = true;
            }
        }
        if !hit && accumulate_leaves && t.requires_grad() {
            accumulate_into_leaf(t, g)?;
        }
        Ok(())
    };
    for (t, g) in roots {
        match t.grad_fn() {
            Some(e) => {
                let buf = buffers.entry(id(&e.node)).or_insert_with(|| vec![None; e.node.outputs.len()]);
                accumulate(&mut buf[e.slot], g.clone())?;
            }
            None => {
                deliver_leaf(t, g.clone(), &mut captured)?;
                leaves.delivered(t, true)?;
            }
        }
    }

    // 5. Kahn's algorithm over the relevant nodes, newest first among the ready ones.
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    let mut by_seq: HashMap<u64, NodeId> = HashMap::new();
    for (nid, n) in &nodes {
        by_seq.insert(n.seq, *nid);
        if relevant[nid] && deps.get(nid).copied().unwrap_or(0) == 0 {
            ready.push((n.seq, 0));
        }
    }
    while let Some((seq, _)) = ready.pop() {
        let nid = by_seq[&seq];
        let node = nodes[&nid].clone();
        let slots = buffers.remove(&nid).unwrap_or_else(|| vec![None; node.outputs.len()]);
        let unreached = slots.iter().all(Option::is_none)
            && node.hooks.lock().unwrap_or_else(|e| e.into_inner()).iter().all(Vec::is_empty)
            && !target_edges.iter().flatten().any(|te| Arc::ptr_eq(&te.node, &node));
        if unreached {
            // No gradient reached any output (one read for its shape only): every input
            // gradient would be zero, so the rule does not run (no zeros are built, which in
            // a static program could not be sized before it runs); the producers are told.
            release_inputs(&node, &leads[&nid], &mut deps, &mut ready);
            for (inp, (e, &l)) in node.inputs.iter().zip(node.input_edges.iter().zip(&leads[&nid])) {
                if let (Some(t), None, true) = (inp, e, l) {
                    leaves.delivered(t, false)?;
                }
            }
            continue;
        }
        let mut grads = Vec::with_capacity(slots.len());
        for (slot, g) in slots.into_iter().enumerate() {
            let info = &node.outputs[slot];
            let g = match g {
                Some(g) => g,
                None => crate::zeros_on(&info.shape, info.dtype, info.place)?,
            };
            let hooks = node.hooks.lock().unwrap_or_else(|e| e.into_inner())[slot].clone();
            let g = run_hooks(&format!("output {slot} of {}", node.name), &hooks, g)?;
            for (i, te) in target_edges.iter().enumerate() {
                if let Some(te) = te
                    && Arc::ptr_eq(&te.node, &node)
                    && te.slot == slot
                {
                    accumulate(&mut captured[i], g.clone())?;
                }
            }
            grads.push(g);
        }
        let needs = &leads[&nid];
        if !needs.iter().any(|&b| b) {
            continue;
        }
        let input_grads = {
            let mut f = node.backward.lock().unwrap_or_else(|e| e.into_inner());
            let rule = f.as_ref().ok_or_else(|| {
                Error::Autograd(format!(
                    "trying to run backward through the graph of {} a second time (or after its \
                     buffers were freed); pass retain_graph=true to the first backward",
                    node.name
                ))
            })?;
            let out = rule(&BackwardCtx { grads: &grads, needs })?;
            if !retain_graph {
                *f = None;
            }
            out
        };
        drop(grads);
        for (i, inp) in node.inputs.iter().enumerate() {
            let Some(inp) = inp else { continue };
            if !needs[i] {
                continue;
            }
            let g = input_grads.get(i).cloned().flatten();
            // A generated gradient (a static variable) has no place yet; a captured eager
            // input of a traced program has one.
            if let Some(g) = &g
                && (g.shape() != inp.shape() || (g.place() != inp.place() && !g.is_static_var()))
            {
                return Err(Error::Autograd(format!(
                    "backward of {} produced a gradient of shape {:?} on {} for input {i} of shape {:?} on {}",
                    node.name,
                    g.shape(),
                    g.place(),
                    inp.shape(),
                    inp.place()
                )));
            }
            match &node.input_edges[i] {
                Some(e) => {
                    let pid = id(&e.node);
                    if let Some(g) = g {
                        let buf = buffers.entry(pid).or_insert_with(|| vec![None; e.node.outputs.len()]);
                        accumulate(&mut buf[e.slot], g)?;
                    }
                    if let Some(d) = deps.get_mut(&pid) {
                        *d -= 1;
                        if *d == 0 {
                            ready.push((e.node.seq, 0));
                        }
                    }
                }
                None => {
                    let got = g.is_some();
                    if let Some(g) = g {
                        deliver_leaf(inp, g, &mut captured)?;
                    }
                    leaves.delivered(inp, got)?;
                }
            }
        }
    }
    Ok(captured)
}

fn accumulate_into_leaf(t: &Tensor, g: Tensor) -> Result<()> {
    let hooks = t.grad_meta().hooks.clone();
    let g = run_hooks(&format!("a leaf of shape {:?}", t.shape()), &hooks, g)?;
    let old = t.grad_meta().grad.take();
    let new = match old {
        Some(o) => o.add(&g)?,
        None => g,
    };
    t.grad_meta().grad = Some(new);
    Ok(())
}

/// Marks `node`'s inputs as delivered without a gradient: each producer has one consumer
/// fewer to wait for.
fn release_inputs(
    node: &Node,
    needs: &[bool],
    deps: &mut HashMap<NodeId, usize>,
    ready: &mut BinaryHeap<(u64, usize)>,
) {
    for (e, _) in node.input_edges.iter().zip(needs).filter(|(_, n)| **n) {
        let Some(e) = e else { continue };
        if let Some(d) = deps.get_mut(&id(&e.node)) {
            *d -= 1;
            if *d == 0 {
                ready.push((e.node.seq, 0));
            }
        }
    }
}

/// Gradients of `outputs` with respect to `inputs` (`paddle.grad`), without touching any
/// `.grad`. `grad_outputs[i]` defaults to ones for scalar outputs. With `create_graph`
/// the returned gradients are themselves differentiable (higher-order gradients).
/// An input not reached from the outputs is an error unless `allow_unused`.
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    grad_outputs: Option<&[Tensor]>,
    retain_graph: bool,
    create_graph: bool,
    allow_unused: bool,
) -> Result<Vec<Option<Tensor>>> {
    let roots = super::tensor_api::root_pairs("grad", outputs, grad_outputs)?;
    for (i, t) in inputs.iter().enumerate() {
        if !t.requires_grad() {
            return Err(Error::Autograd(format!(
                "grad: input {i} (shape {:?}) has stop_gradient=True, so no gradient flows into it",
                t.shape()
            )));
        }
    }
    let out = run(&roots, Sink::Targets(inputs), retain_graph || create_graph, create_graph)?;
    if !allow_unused && let Some(i) = out.iter().position(|g| g.is_none()) {
        return Err(Error::Autograd(format!(
            "grad: input {i} (shape {:?}) is not reachable from the outputs; pass allow_unused=true \
             to get None for it",
            inputs[i].shape()
        )));
    }
    Ok(out)
}
