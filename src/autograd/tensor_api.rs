//! The user-facing autograd methods of `Tensor` (Paddle names).

use std::sync::Arc;

use super::engine::{Sink, run};
use crate::tensor::NdArray;
use crate::{Element, Error, Result, Tensor};

/// Options of `Tensor::backward_with`.
#[derive(Clone, Default)]
pub struct GradOptions {
    /// Gradient of the tensor itself; defaults to ones for a one-element tensor.
    pub grad_tensor: Option<Tensor>,
    /// Keep the graph so backward can run through it again.
    pub retain_graph: bool,
}

pub(crate) fn root_pairs(
    op: &'static str,
    outputs: &[Tensor],
    grad_outputs: Option<&[Tensor]>,
) -> Result<Vec<(Tensor, Tensor)>> {
    if let Some(g) = grad_outputs
        && g.len() != outputs.len()
    {
        return Err(Error::Autograd(format!("{op}: {} grad_outputs for {} outputs", g.len(), outputs.len())));
    }
    let mut roots = Vec::with_capacity(outputs.len());
    for (i, out) in outputs.iter().enumerate() {
        if !out.requires_grad() {
            return Err(Error::Autograd(format!(
                "{op}: output {i} (shape {:?}) has stop_gradient=True: nothing to differentiate",
                out.shape()
            )));
        }
        let g = match grad_outputs.map(|g| &g[i]) {
            Some(g) => {
                if g.shape() != out.shape() {
                    return Err(Error::Autograd(format!(
                        "{op}: grad_outputs[{i}] has shape {:?} but output {i} has shape {:?}",
                        g.shape(),
                        out.shape()
                    )));
                }
                out.same_place(op, g)?;
                out.same_dtype(op, g)?;
                g.clone()
            }
            None => {
                if out.numel() != 1 {
                    return Err(Error::Autograd(format!(
                        "{op}: output {i} has shape {:?}; a gradient tensor is required for a \
                         non-scalar output",
                        out.shape()
                    )));
                }
                crate::ones_on(out.shape(), out.dtype(), out.place())?
            }
        };
        roots.push((out.clone(), g));
    }
    Ok(roots)
}

impl Tensor {
    /// Computes gradients of this one-element tensor with respect to every leaf that
    /// requires them, accumulating into their `.grad()`. Frees the graph.
    pub fn backward(&self) -> Result<()> {
        self.backward_with(GradOptions::default())
    }

    /// `backward` with an explicit gradient tensor and/or a retained graph.
    pub fn backward_with(&self, options: GradOptions) -> Result<()> {
        let gt = options.grad_tensor.map(|g| vec![g]);
        let roots = root_pairs("backward", std::slice::from_ref(self), gt.as_deref())?;
        run(&roots, Sink::Leaves, options.retain_graph, false)?;
        Ok(())
    }

    /// The accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.grad_meta().grad.clone()
    }

    /// The gradient as a host array (Paddle 1.x `gradient()`); `None` before backward.
    pub fn gradient<T: Element>(&self) -> Result<Option<NdArray<T>>> {
        match self.grad() {
            Some(g) => Ok(Some(g.numpy::<T>()?)),
            None => Ok(None),
        }
    }

    /// Drops the accumulated gradient (`clear_gradient` / `clear_grad`).
    pub fn clear_gradient(&self) {
        self.grad_meta().grad = None;
    }

    /// Paddle's `stop_gradient`: true when no gradient flows into this tensor.
    pub fn stop_gradient(&self) -> bool {
        self.grad_meta().stop_gradient
    }

    /// Sets `stop_gradient`; `false` makes a leaf collect gradients.
    pub fn set_stop_gradient(&self, stop: bool) -> &Self {
        self.grad_meta().stop_gradient = stop;
        self
    }

    /// True for tensors not produced by a recorded op.
    pub fn is_leaf(&self) -> bool {
        self.grad_meta().grad_fn.is_none()
    }

    /// A tensor sharing this one's memory, cut from the graph (`stop_gradient=True`).
    pub fn detach(&self) -> Tensor {
        self.with_shape(self.shape_ref().clone())
    }

    /// Registers `hook`, called with this tensor's gradient when it is computed; returning
    /// `Some(g)` replaces the gradient.
    pub fn register_hook(&self, hook: impl Fn(&Tensor) -> Option<Tensor> + Send + Sync + 'static) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::Autograd(format!(
                "register_hook: tensor of shape {:?} has stop_gradient=True",
                self.shape()
            )));
        }
        let hook: super::Hook = Arc::new(hook);
        match self.grad_fn() {
            Some(e) => e.node.hooks.lock().unwrap_or_else(|p| p.into_inner())[e.slot].push(hook),
            None => self.grad_meta().hooks.push(hook),
        }
        Ok(())
    }

    /// Registers `hook` on a leaf, called once per backward pass after every contribution of
    /// the pass has been accumulated into `.grad` (PyTorch's
    /// `register_post_accumulate_grad_hook`; data parallelism starts a bucket's all-reduce
    /// from it). An error from the hook becomes backward's error.
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        self.add_post_accumulate_hook(Arc::new(hook))
    }

    pub(crate) fn add_post_accumulate_hook(&self, hook: super::PostAccumulateHook) -> Result<()> {
        if !self.requires_grad() || !self.is_leaf() {
            return Err(Error::Autograd(format!(
                "register_post_accumulate_grad_hook: the tensor of shape {:?} is not a leaf that requires a \
                 gradient",
                self.shape()
            )));
        }
        self.grad_meta().post_accumulate_hooks.push(hook);
        Ok(())
    }

    /// Removes a hook added by `add_post_accumulate_hook` (compared by identity).
    #[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
    pub(crate) fn remove_post_accumulate_hook(&self, hook: &super::PostAccumulateHook) {
        self.grad_meta().post_accumulate_hooks.retain(|h| !Arc::ptr_eq(h, hook));
    }

    /// Makes a non-leaf tensor keep its gradient after backward (leaves always do).
    pub fn retain_grads(&self) -> Result<()> {
        if self.is_leaf() {
            return Ok(());
        }
        let weak = self.downgrade();
        self.register_hook(move |g| {
            if let Ok(t) = weak.upgrade() {
                let old = t.grad_meta().grad.take();
                let new = match old {
                    Some(o) => o.add(g).unwrap_or_else(|_| g.clone()),
                    None => g.detach(),
                };
                t.grad_meta().grad = Some(new);
            }
            None
        })
    }

    /// The tensor's name, if set; a static variable's name in its program.
    pub fn name(&self) -> Option<String> {
        if let Some(v) = self.var_ref() {
            return Some(v.program.var_name(v.id));
        }
        self.grad_meta().name.clone()
    }

    /// The learning-rate multiplier optimizers apply to this parameter (default 1).
    pub fn learning_rate_multiplier(&self) -> f64 {
        self.grad_meta().lr_mult
    }

    /// Sets the learning-rate multiplier (Paddle's `ParamAttr(learning_rate=...)`).
    pub fn set_learning_rate_multiplier(&self, mult: f64) {
        self.grad_meta().lr_mult = mult;
    }

    /// The dtype a layer's `state_dict` gives this parameter or buffer in, where one was set
    /// (`amp::decorate(..).save_dtype(..)`).
    pub fn save_dtype(&self) -> Option<crate::DType> {
        self.grad_meta().save_dtype
    }

    /// Sets the dtype `state_dict` gives this float parameter or buffer in (`None`: its own).
    pub fn set_save_dtype(&self, dtype: Option<crate::DType>) {
        self.grad_meta().save_dtype = dtype;
    }

    /// Names the tensor (parameters get their dotted path).
    pub fn set_name(&self, name: impl Into<String>) {
        self.grad_meta().name = Some(name.into());
    }
}
