//! The op registry's list of families. Each family declares its entries and its GPU
//! kernels beside its ops, in one `static FAMILY` ([`Family`]; the elementwise tables add
//! their rows), and this list names each family once, so the compiler sees every
//! registered op and kernel. An op left out of its family fails on its first call (`apply`
//! refuses an op it does not find here), a kernel on its first dispatch.

use super::RegisteredOp;
use crate::backend::gpu::Kernel;

/// One family's registrations: its ops and the GPU kernels they dispatch.
pub(crate) struct Family {
    /// Its registry entries (the elementwise tables' rows come from the tables).
    pub ops: &'static [&'static dyn RegisteredOp],
    /// Its GPU kernels (the shader tests instantiate every variant of each).
    pub kernels: &'static [&'static Kernel],
}

/// Every family, in a fixed order.
static FAMILIES: &[&Family] = &[
    &crate::ops::elementwise::binary::FAMILY,
    &crate::ops::elementwise::unary::FAMILY,
    &crate::ops::elementwise::cast::FAMILY,
    &crate::ops::elementwise::ternary::FAMILY,
    &crate::ops::fused::FAMILY,
    &crate::ops::index::FAMILY,
    &crate::ops::matmul::FAMILY,
    &crate::ops::nn::conv::FAMILY,
    &crate::ops::nn::cross_entropy::FAMILY,
    &crate::ops::nn::dropout::FAMILY,
    &crate::ops::nn::norm::batch_norm::FAMILY,
    &crate::ops::nn::norm::layer_norm::FAMILY,
    &crate::ops::nn::pool::FAMILY,
    &crate::ops::nn::softmax::FAMILY,
    &crate::ops::reduce::FAMILY,
    &crate::ops::reduce_prologue::FAMILY,
    &crate::ops::scan::FAMILY,
    &crate::ops::scatter::FAMILY,
    &crate::ops::shape::FAMILY,
    &crate::ops::sort::FAMILY,
    &crate::ops::tri::FAMILY,
    &crate::ops::amp::FAMILY,
    &crate::ops::update::adadelta::FAMILY,
    &crate::ops::update::adagrad::FAMILY,
    &crate::ops::update::adam::FAMILY,
    &crate::ops::update::adamax::FAMILY,
    &crate::ops::update::lamb::FAMILY,
    &crate::ops::update::momentum::FAMILY,
    &crate::ops::update::rmsprop::FAMILY,
    &crate::ops::update::sgd::FAMILY,
    &crate::ops::random::FAMILY,
    &crate::ops::creation::FAMILY,
    &crate::ops::copy::FAMILY,
    &super::dispatch::check::FAMILY,
];

/// Every registered op: the table rows of the elementwise families, then the families.
/// Registers the families' kernels with the GPU runtime on the way.
pub(super) fn registered_ops() -> Vec<&'static dyn RegisteredOp> {
    let kernels: Vec<&'static [&'static Kernel]> = FAMILIES.iter().map(|f| f.kernels).collect();
    crate::backend::gpu::register_kernels(&kernels);
    let mut ops: Vec<&'static dyn RegisteredOp> = Vec::new();
    ops.extend(crate::ops::elementwise::binary::BINARY_OPS.iter().map(|o| *o as &'static dyn RegisteredOp));
    ops.extend(crate::ops::elementwise::unary::UNARY_OPS.iter().map(|o| *o as &'static dyn RegisteredOp));
    for family in FAMILIES {
        ops.extend_from_slice(family.ops);
    }
    #[cfg(test)]
    ops.extend_from_slice(crate::ops::toy::FAMILY.ops);
    ops
}
