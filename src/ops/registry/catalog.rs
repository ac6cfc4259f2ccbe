//! The op registry's list of families. Each family declares its entries beside its ops (a
//! `static OPS` in its module, or its table of rows) and its GPU kernels (`static
//! KERNELS`), and these lists name each family once, so the compiler sees every registered
//! op and kernel. An op left out of its family's list fails on its first call (`apply`
//! refuses an op it does not find here), a kernel on its first dispatch.

use super::RegisteredOp;
use crate::backend::gpu::Kernel;

/// Every family's entries, in a fixed order.
static FAMILIES: &[&[&dyn RegisteredOp]] = &[
    crate::ops::elementwise::cast::OPS,
    crate::ops::elementwise::ternary::OPS,
    crate::ops::fused::OPS,
    crate::ops::index::OPS,
    crate::ops::matmul::OPS,
    crate::ops::matmul::epilogue::OPS,
    crate::ops::nn::conv::OPS,
    crate::ops::nn::conv::epilogue::OPS,
    crate::ops::nn::cross_entropy::OPS,
    crate::ops::nn::dropout::OPS,
    crate::ops::nn::norm::batch_norm::OPS,
    crate::ops::nn::norm::layer_norm::OPS,
    crate::ops::nn::pool::OPS,
    crate::ops::nn::softmax::OPS,
    crate::ops::reduce::OPS,
    crate::ops::reduce_prologue::OPS,
    crate::ops::scan::OPS,
    crate::ops::scatter::OPS,
    crate::ops::shape::OPS,
    crate::ops::sort::OPS,
    crate::ops::tri::OPS,
    crate::ops::update::adadelta::OPS,
    crate::ops::update::adagrad::OPS,
    crate::ops::update::adam::OPS,
    crate::ops::update::adamax::OPS,
    crate::ops::update::lamb::OPS,
    crate::ops::update::momentum::OPS,
    crate::ops::update::rmsprop::OPS,
    crate::ops::update::sgd::OPS,
    crate::ops::random::OPS,
    crate::ops::creation::OPS,
];

/// Every family's GPU kernels.
static KERNEL_FAMILIES: &[&[&Kernel]] = &[
    super::dispatch::check::KERNELS,
    crate::ops::copy::KERNELS,
    crate::ops::creation::KERNELS,
    crate::ops::elementwise::binary::KERNELS,
    crate::ops::elementwise::cast::KERNELS,
    crate::ops::elementwise::ternary::KERNELS,
    crate::ops::elementwise::unary::KERNELS,
    crate::ops::fused::KERNELS,
    crate::ops::index::KERNELS,
    crate::ops::matmul::KERNELS,
    crate::ops::nn::conv::KERNELS,
    crate::ops::nn::cross_entropy::KERNELS,
    crate::ops::nn::norm::batch_norm::KERNELS,
    crate::ops::nn::norm::layer_norm::KERNELS,
    crate::ops::nn::pool::KERNELS,
    crate::ops::nn::softmax::KERNELS,
    crate::ops::reduce::KERNELS,
    crate::ops::scan::KERNELS,
    crate::ops::scatter::KERNELS,
    crate::ops::sort::KERNELS,
    crate::ops::tri::KERNELS,
    crate::ops::update::adadelta::KERNELS,
    crate::ops::update::adagrad::KERNELS,
    crate::ops::update::adam::KERNELS,
    crate::ops::update::adamax::KERNELS,
    crate::ops::update::lamb::KERNELS,
    crate::ops::update::momentum::KERNELS,
    crate::ops::update::rmsprop::KERNELS,
    crate::ops::update::sgd::KERNELS,
    crate::random::KERNELS,
];

/// Every registered op: the table rows of the elementwise families, then the families.
/// Registers the families' kernels with the GPU runtime on the way.
pub(super) fn registered_ops() -> Vec<&'static dyn RegisteredOp> {
    crate::backend::gpu::register_kernels(KERNEL_FAMILIES);
    let mut ops: Vec<&'static dyn RegisteredOp> = Vec::new();
    ops.extend(crate::ops::elementwise::binary::BINARY_OPS.iter().map(|o| *o as &'static dyn RegisteredOp));
    ops.extend(crate::ops::elementwise::unary::UNARY_OPS.iter().map(|o| *o as &'static dyn RegisteredOp));
    for family in FAMILIES {
        ops.extend_from_slice(family);
    }
    #[cfg(test)]
    ops.extend_from_slice(crate::ops::toy::OPS);
    ops
}
