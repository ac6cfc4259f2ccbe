//! The autograd graph as the tensors hold it: each tensor's gradient state ([`GradMeta`]),
//! the recorded [`Node`]s and their edges, recording a node, grad mode, and the versions a
//! backward rule's saved tensors must still have. The engine that runs the graph backward
//! is `crate::autograd`'s; this floor only records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::grad_mode::is_grad_enabled;
use crate::{DType, Place, Result, Shape, Tensor};

/// A gradient hook: sees the gradient, may return a replacement.
pub(crate) type Hook = Arc<dyn Fn(&Tensor) -> Option<Tensor> + Send + Sync>;

/// A hook run on a leaf once its gradient for one backward pass is complete (all of the
/// pass's contributions accumulated into `.grad`).
pub(crate) type PostAccumulateHook = Arc<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

/// A backward rule: gradients of the outputs in, gradients of the inputs out.
pub(crate) type BackwardFn = dyn Fn(&BackwardCtx<'_>) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// Per-tensor autograd state.
pub(crate) struct GradMeta {
    /// Paddle's `stop_gradient`: true means "no gradient flows into this tensor".
    pub stop_gradient: bool,
    /// Accumulated gradient (leaves, and non-leaves that `retain_grads()`).
    pub grad: Option<Tensor>,
    /// The node that produced this tensor (None for leaves).
    pub grad_fn: Option<Edge>,
    /// Hooks of a leaf, run before accumulation.
    pub hooks: Vec<Hook>,
    /// Hooks of a leaf, run once per backward pass after its gradient is complete.
    pub post_accumulate_hooks: Vec<PostAccumulateHook>,
    /// Optional user-facing name.
    pub name: Option<String>,
    /// Learning-rate multiplier optimizers apply to this parameter (Paddle's
    /// `ParamAttr(learning_rate=...)`).
    pub lr_mult: f64,
    /// The dtype a layer's `state_dict` gives this parameter or buffer in (Paddle's
    /// `amp.decorate(save_dtype=...)`); `None` keeps its own.
    pub save_dtype: Option<DType>,
    /// After in-place ops: each op's output, which this tensor stood for in the graph in
    /// turn (kept alive here because an op's node holds its outputs weakly, and its
    /// backward rule may read them).
    pub inplace_results: Vec<Tensor>,
}

impl Default for GradMeta {
    fn default() -> Self {
        GradMeta {
            stop_gradient: true,
            grad: None,
            grad_fn: None,
            hooks: Vec::new(),
            post_accumulate_hooks: Vec::new(),
            name: None,
            lr_mult: 1.0,
            save_dtype: None,
            inplace_results: Vec::new(),
        }
    }
}

/// Output `slot` of `node`.
#[derive(Clone)]
pub(crate) struct Edge {
    pub node: Arc<Node>,
    pub slot: usize,
}

pub(crate) struct OutputInfo {
    pub shape: Shape,
    pub dtype: DType,
    pub place: Place,
}

/// One recorded op in the graph.
pub(crate) struct Node {
    pub name: &'static str,
    /// Creation order; inputs always have a smaller `seq` than the nodes consuming them.
    pub seq: u64,
    /// The op's inputs that require a gradient (None where one does not).
    pub inputs: Vec<Option<Tensor>>,
    /// Where each input's gradient goes: its producer as it was when this op ran (an
    /// in-place op later gives the tensor a new producer; this op's gradient still belongs
    /// to the old one). None for leaves and inputs without a gradient.
    pub input_edges: Vec<Option<Edge>>,
    pub outputs: Vec<OutputInfo>,
    /// Freed after use unless the graph is retained.
    pub backward: Mutex<Option<Box<BackwardFn>>>,
    /// Hooks on each output (registered through a non-leaf tensor).
    pub hooks: Mutex<Vec<Vec<Hook>>>,
}

/// What a backward rule sees.
pub(crate) struct BackwardCtx<'a> {
    /// Gradient of each output (zeros where an output was unused).
    pub grads: &'a [Tensor],
    /// Which inputs need a gradient; a rule may skip computing the others.
    pub needs: &'a [bool],
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl Tensor {
    /// True when gradients flow into this tensor.
    pub(crate) fn requires_grad(&self) -> bool {
        !self.grad_meta().stop_gradient
    }

    pub(crate) fn grad_fn(&self) -> Option<Edge> {
        self.grad_meta().grad_fn.clone()
    }
}

/// Records `outputs` as produced by `name` from `inputs` with the given backward rule, when
/// grad mode is on and some input requires a gradient. Returns whether it recorded.
pub(crate) fn record(
    name: &'static str,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    backward: impl Fn(&BackwardCtx<'_>) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> bool {
    if !is_grad_enabled() {
        return false;
    }
    let needs: Vec<bool> = inputs.iter().map(|t| t.requires_grad()).collect();
    if !needs.iter().any(|&n| n) {
        return false;
    }
    let node = Arc::new(Node {
        name,
        seq: SEQ.fetch_add(1, Ordering::Relaxed),
        inputs: inputs.iter().zip(&needs).map(|(t, &n)| n.then(|| (*t).clone())).collect(),
        input_edges: inputs.iter().zip(&needs).map(|(t, &n)| if n { t.grad_fn() } else { None }).collect(),
        outputs: outputs
            .iter()
            .map(|o| OutputInfo { shape: o.shape_ref().clone(), dtype: o.dtype(), place: o.place() })
            .collect(),
        backward: Mutex::new(Some(Box::new(backward))),
        hooks: Mutex::new(vec![Vec::new(); outputs.len()]),
    });
    for (slot, o) in outputs.iter().enumerate() {
        let mut m = o.grad_meta();
        m.grad_fn = Some(Edge { node: node.clone(), slot });
        m.stop_gradient = false;
    }
    true
}

/// The versions of the tensors one backward rule may read, as they were when its op ran.
struct SavedVersions {
    node: &'static str,
    /// `(version counter identity, version)`.
    entries: Vec<(usize, u64)>,
}

thread_local! {
    static SAVED: std::cell::RefCell<Vec<SavedVersions>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The version of each of `tensors` now, to check when `node`'s backward rule runs.
pub(crate) fn versions_of(tensors: &[&Tensor]) -> Vec<(usize, u64)> {
    tensors.iter().map(|t| (t.version_id(), t.inplace_version())).collect()
}

/// Runs `node`'s backward rule `f` with `entries` as the versions its saved tensors must
/// still have when the rule reads them.
pub(crate) fn with_saved_versions<R>(node: &'static str, entries: Vec<(usize, u64)>, f: impl FnOnce() -> R) -> R {
    SAVED.with(|s| s.borrow_mut().push(SavedVersions { node, entries }));
    let out = f();
    SAVED.with(|s| s.borrow_mut().pop());
    out
}

/// The node whose backward rule this thread is running, if any.
pub(crate) fn current_backward_node() -> Option<&'static str> {
    SAVED.with(|s| s.borrow().last().map(|v| v.node))
}

/// Inside a backward rule: an error when an op is about to read (`reads(i)`) an input whose
/// memory was written in place since the forward op saved it (PyTorch's "modified by an
/// inplace operation"), instead of computing a wrong gradient from the new values.
pub(crate) fn check_saved_versions(op: &'static str, inputs: &[&Tensor], reads: impl Fn(usize) -> bool) -> Result<()> {
    SAVED.with(|s| {
        let s = s.borrow();
        let Some(saved) = s.last() else { return Ok(()) };
        for (i, t) in inputs.iter().enumerate() {
            if !reads(i) {
                continue;
            }
            let id = t.version_id();
            if let Some(&(_, was)) = saved.entries.iter().find(|(v, _)| *v == id) {
                let now = t.inplace_version();
                if now != was {
                    return Err(crate::Error::Autograd(format!(
                        "the gradient of {} needs a tensor of shape {:?} that was modified by an in-place \
                         operation after {} used it (version {was} then, {now} now; {op} would read the new \
                         values); compute the modified value out of place, or modify a copy (`clone_data`)",
                        saved.node,
                        t.shape(),
                        saved.node
                    )));
                }
            }
        }
        Ok(())
    })
}
