//! Merged update dispatches: one dispatch updates several parameters (multi-tensor optimizer
//! updates, as Paddle's `merged_adam` and PyTorch's foreach/fused Adam do; the ops are in
//! `optimizer/update.rs`).
//!
//! A merged kernel runs 1-D: its variant `key` updates `key + 1` members, binding their own
//! tensors in member order, the shared buffers once, and taking parameter words
//! `[groups · WORKGROUP, settings..., (first workgroup, elements) of each member]`. Each
//! member starts on a workgroup of its own, so that no workgroup's invocations branch apart
//! (a software adapter runs every branch a SIMD group takes).

use super::WORKGROUP;
use super::context::GpuContext;

/// Members one merged dispatch may take on this device: `own` storage bindings each, then
/// `shared` more and the parameter words, within the per-stage limit; at most `max`.
pub(crate) fn capacity(ctx: &GpuContext, own: usize, shared: usize, max: usize) -> usize {
    let limit = ctx.limits.max_storage_buffers_per_shader_stage as usize;
    (limit.saturating_sub(shared + 1) / own).clamp(1, max)
}

/// The words a merged dispatch ends with, `(first workgroup, elements)` per member of
/// `counts` elements, and the workgroups of all; None past 2³² invocations.
pub(crate) fn member_words(counts: impl IntoIterator<Item = u32>) -> Option<(Vec<u32>, u64)> {
    let mut words = Vec::new();
    let mut groups = 0u64;
    for n in counts {
        words.extend([groups as u32, n]);
        groups += (n as u64).div_ceil(WORKGROUP as u64);
    }
    (groups * WORKGROUP as u64 <= u32::MAX as u64).then_some((words, groups))
}
