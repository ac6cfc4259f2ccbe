//! Reverse-mode automatic differentiation.
//!
//! Every op whose inputs require gradients records a `Node` holding its differentiable
//! inputs and a backward closure written in ordinary tensor ops (so it runs on the
//! tensors' place and can itself be differentiated when `create_graph` is set): the graph
//! and its recording live with the tensors (`crate::tensor::graph`), the dispatcher's
//! record mode calls them. The engine (`engine.rs`) runs the nodes in dependency order with
//! Kahn's algorithm.

mod engine;
mod pylayer;
mod tensor_api;

#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) use engine::current_pass;
pub use engine::{grad, queue_callback};
pub use pylayer::{PyLayer, PyLayerContext};
pub use tensor_api::GradOptions;

pub(crate) use crate::tensor::grad_mode::set_grad_enabled;
pub use crate::tensor::grad_mode::{NoGradGuard, enable_grad, is_grad_enabled, no_grad, no_grad_guard};
pub(crate) use crate::tensor::graph::{BackwardCtx, Edge, Hook, Node, PostAccumulateHook, record};
