//! User-defined ops with a hand-written backward (Paddle's `PyLayer`).
//!
//! ```
//! use dygraph::{self as paddle, Tensor};
//! use dygraph::autograd::{PyLayer, PyLayerContext};
//!
//! struct CusTanh;
//! impl PyLayer for CusTanh {
//!     fn forward(ctx: &mut PyLayerContext, inputs: &[Tensor]) -> paddle::Result<Vec<Tensor>> {
//!         let y = inputs[0].tanh()?;
//!         ctx.save_for_backward(&[&y]);
//!         Ok(vec![y])
//!     }
//!     fn backward(ctx: &PyLayerContext, grads: &[Tensor]) -> paddle::Result<Vec<Option<Tensor>>> {
//!         let y = &ctx.saved_tensor()[0];
//!         Ok(vec![Some(grads[0].mul(&y.square()?.rsub_scalar(1.0)?)?)])
//!     }
//! }
//! # fn main() -> paddle::Result<()> {
//! let x = paddle::to_tensor_on(&[0.5f32, -1.0], paddle::Place::Cpu)?;
//! x.set_stop_gradient(false);
//! let y = CusTanh::apply(&[x.clone()])?.remove(0);
//! y.sum(&[], false)?.backward()?;
//! # Ok(()) }
//! ```

use std::sync::Mutex;

use super::{BackwardCtx, record};
use crate::{Error, Result, Tensor};

/// What `forward` leaves for `backward`: saved tensors and arbitrary values.
#[derive(Default)]
pub struct PyLayerContext {
    saved: Vec<Tensor>,
    values: Vec<f64>,
    needs: Vec<bool>,
}

impl PyLayerContext {
    /// Keeps tensors for `backward` (Paddle's `ctx.save_for_backward`). They are saved
    /// detached from the graph.
    pub fn save_for_backward(&mut self, tensors: &[&Tensor]) {
        self.saved = tensors.iter().map(|t| t.detach()).collect();
    }

    /// The tensors saved by `forward` (Paddle's `ctx.saved_tensor()`).
    pub fn saved_tensor(&self) -> &[Tensor] {
        &self.saved
    }

    /// Keeps plain numbers for `backward`.
    pub fn save_values(&mut self, values: &[f64]) {
        self.values = values.to_vec();
    }

    /// The numbers saved by `save_values`.
    pub fn saved_values(&self) -> &[f64] {
        &self.values
    }

    /// In `backward`: whether input `i` needs a gradient.
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }
}

/// A custom op: implement `forward` and `backward`, call `MyOp::apply(&inputs)`. It works on
/// every place and inside larger graphs; `forward` runs without recording, and the recorded
/// node calls `backward` with the gradients of the outputs.
pub trait PyLayer: 'static {
    /// Computes the outputs from `inputs`, saving what `backward` needs in `ctx`.
    fn forward(ctx: &mut PyLayerContext, inputs: &[Tensor]) -> Result<Vec<Tensor>>;

    /// Gradients of the inputs (one entry per input, `None` for no gradient) from the
    /// gradients of the outputs.
    fn backward(ctx: &PyLayerContext, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>>;

    /// Runs the op and records it for autograd.
    fn apply(inputs: &[Tensor]) -> Result<Vec<Tensor>>
    where
        Self: Sized,
    {
        let mut ctx = PyLayerContext::default();
        let outputs = crate::no_grad(|| Self::forward(&mut ctx, inputs))?;
        // Fresh handles, so the outputs carry only this op's node.
        let outputs: Vec<Tensor> = outputs.iter().map(|t| t.detach()).collect();
        let n_inputs = inputs.len();
        let ctx = Mutex::new(ctx);
        let input_refs: Vec<&Tensor> = inputs.iter().collect();
        let float_outputs: Vec<&Tensor> = outputs.iter().filter(|t| t.dtype().is_float()).collect();
        if float_outputs.len() != outputs.len() {
            return Ok(outputs);
        }
        record("PyLayer", &input_refs, &float_outputs, move |c: &BackwardCtx<'_>| {
            let mut ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
            ctx.needs = c.needs.to_vec();
            let grads = Self::backward(&ctx, c.grads)?;
            if grads.len() != n_inputs {
                return Err(Error::Autograd(format!(
                    "PyLayer backward returned {} gradients for {n_inputs} inputs",
                    grads.len()
                )));
            }
            Ok(grads)
        });
        Ok(outputs)
    }
}
