//! The backward engine: collect the nodes reachable from the roots, count each node's
//! consumers, then run nodes whose consumers are all done (Kahn's algorithm). Ready nodes
//! are taken newest first, so the order is deterministic; no recursion, each node runs
//! once, and gradients arriving along several paths are summed before a node runs.

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

/// Where the caller wants gradients delivered.
pub(crate) enum Sink<'a> {
    /// Accumulate into the `.grad` of every leaf reached (`backward()`).
    Leaves,
    /// Return the gradients of these tensors, touching no `.grad` (`grad()`).
    Targets(&'a [Tensor]),
}

/// Runs backward from `roots` (tensor, gradient) pairs.
pub(crate) fn run(
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

    // 1. Reachable nodes and, for each, how many input edges point at it.
    let mut nodes: HashMap<NodeId, Arc<Node>> = HashMap::new();
    let mut deps: HashMap<NodeId, usize> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (t, _) in roots {
        if let Some(e) = t.grad_fn()
            && nodes.insert(id(&e.node), e.node.clone()).is_none()
        {
            stack.push(e.node);
        }
    }
    while let Some(n) = stack.pop() {
        for inp in n.inputs.iter().flatten() {
            if let Some(e) = inp.grad_fn() {
                *deps.entry(id(&e.node)).or_insert(0) += 1;
                if nodes.insert(id(&e.node), e.node.clone()).is_none() {
                    stack.push(e.node);
                }
            }
        }
    }

    // 2. Seed the roots' gradients.
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
            None => deliver_leaf(t, g.clone(), &mut captured)?,
        }
    }

    // 3. Kahn's algorithm, newest node first among the ready ones.
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    let mut by_seq: HashMap<u64, NodeId> = HashMap::new();
    for (nid, n) in &nodes {
        by_seq.insert(n.seq, *nid);
        if deps.get(nid).copied().unwrap_or(0) == 0 {
            ready.push((n.seq, 0));
        }
    }
    while let Some((seq, _)) = ready.pop() {
        let nid = by_seq[&seq];
        let node = nodes[&nid].clone();
        let slots = buffers.remove(&nid).unwrap_or_else(|| vec![None; node.outputs.len()]);
        let mut grads = Vec::with_capacity(slots.len());
        for (slot, g) in slots.into_iter().enumerate() {
            let info = &node.outputs[slot];
            let mut g = match g {
                Some(g) => g,
                None => crate::zeros_on(&info.shape, info.dtype, info.place)?,
            };
            let hooks = node.hooks.lock().unwrap_or_else(|e| e.into_inner())[slot].clone();
            for h in hooks {
                if let Some(r) = h(&g) {
                    g = r;
                }
            }
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
        let needs: Vec<bool> = node.inputs.iter().map(|i| i.is_some()).collect();
        let input_grads = {
            let mut f = node.backward.lock().unwrap_or_else(|e| e.into_inner());
            let rule = f.as_ref().ok_or_else(|| {
                Error::Autograd(format!(
                    "trying to run backward through the graph of {} a second time (or after its \
                     buffers were freed); pass retain_graph=true to the first backward",
                    node.name
                ))
            })?;
            let out = rule(&BackwardCtx { grads: &grads, needs: &needs })?;
            if !retain_graph {
                *f = None;
            }
            out
        };
        drop(grads);
        for (i, inp) in node.inputs.iter().enumerate() {
            let Some(inp) = inp else { continue };
            let g = input_grads.get(i).cloned().flatten();
            if let Some(g) = &g
                && g.shape() != inp.shape()
            {
                return Err(Error::Autograd(format!(
                    "backward of {} produced a gradient of shape {:?} for input {i} of shape {:?}",
                    node.name,
                    g.shape(),
                    inp.shape()
                )));
            }
            match inp.grad_fn() {
                Some(e) => {
                    let pid = id(&e.node);
                    if let Some(g) = g {
                        let buf = buffers.entry(pid).or_insert_with(|| vec![None; e.node.outputs.len()]);
                        accumulate(&mut buf[e.slot], g)?;
                    }
                    let d = deps.get_mut(&pid).expect("every reachable producer was counted");
                    *d -= 1;
                    if *d == 0 {
                        ready.push((e.node.seq, 0));
                    }
                }
                None => {
                    if let Some(g) = g {
                        deliver_leaf(inp, g, &mut captured)?;
                    }
                }
            }
        }
    }
    Ok(captured)
}

fn accumulate_into_leaf(t: &Tensor, mut g: Tensor) -> Result<()> {
    let hooks = t.meta().hooks.clone();
    for h in hooks {
        if let Some(r) = h(&g) {
            g = r;
        }
    }
    let old = t.meta().grad.take();
    let new = match old {
        Some(o) => o.add(&g)?,
        None => g,
    };
    t.meta().grad = Some(new);
    Ok(())
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
