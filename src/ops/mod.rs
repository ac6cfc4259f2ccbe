//! Every op, declared once as a registry entry: meta inference, the CPU kernel, the WGSL
//! kernel and the backward rule side by side (see [`registry`]). The public functions are
//! thin calls into the one generic entry point.

pub(crate) mod elementwise;
pub(crate) mod epilogue;
pub(crate) mod fused;
pub(crate) mod wgsl;

/// `opt!()` is `None`, `opt!(x)` is `Some(x)`: optional table fields in op macros.
macro_rules! opt {
    () => {
        None
    };
    ($($t:tt)+) => {
        Some($($t)+)
    };
}
pub(crate) use opt;
pub(crate) mod amp;
pub(crate) mod combine;
pub(crate) mod copy;
pub(crate) mod count;
pub(crate) mod creation;
pub(crate) mod einsum;
pub(crate) mod index;
pub(crate) mod indexing;
mod inplace;
pub(crate) mod linalg;
pub(crate) mod logic;
pub(crate) mod matmul;
pub(crate) mod nn;
pub(crate) mod overload;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod reduce_prologue;
pub mod registry;
pub(crate) mod sample;
pub(crate) mod scan;
pub(crate) mod scatter;

pub use registry::{
    AttrField, AttrMap, AttrValue, Attrs, Commute, EpilogueHost, EvalOp, EvalRewrite, EvalVar, Facts, Fusion,
    PrologueHost, RegisteredOp, Update, find_op, registry, run_op,
};
pub(crate) mod shape;
pub(crate) mod sort;
pub(crate) mod split_k;
#[cfg(test)]
pub(crate) mod toy;
pub(crate) mod tri;
pub(crate) mod update;
