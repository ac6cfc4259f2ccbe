//! Every op and the tensor surface: the registry sweep (each op against a float64 reference,
//! the GPU against the CPU, gradchecks), and what a per-op spec cannot express (composed ops,
//! autograd, errors, printing, indexing, the GPU products' kernel choices).

#[path = "../common/mod.rs"]
mod common;

mod amp;
mod autograd;
mod batch_norm;
mod bfloat16;
mod conv;
mod conv3d;
mod creation;
mod display;
mod dropout;
mod einsum;
mod errors;
mod floors;
mod index;
mod indexing;
mod inplace;
mod losses;
mod matmul;
mod random;
mod registry;
mod select_ops;
mod shaders;
mod sweep;
mod tensor_ops;
mod validation;
