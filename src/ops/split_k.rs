//! Split-K for small products on hardware GPUs. A product with few output tiles runs few
//! workgroups, each stepping through the whole reduction one staged tile at a time, every
//! tile waiting on memory, while most of the GPU's cores idle: on an H100 the MNIST
//! convolutions ran 64–144 workgroups of 32–78 tiles each, and the FC layer's 64×800·800×10
//! product one workgroup of 50 tiles (109 µs). Splitting K gives each workgroup a slice of
//! the reduction, written to its own partial output; the kernel's `finish` entry then sums
//! the slices in a fixed order (deterministic, no atomics) and stores as the unsplit kernel
//! would, epilogue included.

use std::sync::Arc;

use crate::Result;
use crate::backend::gpu::{GpuBuffer, GpuContext};

/// About eight 256-invocation workgroups on each of an H100's 132 multiprocessors.
pub(crate) const SPLIT_TARGET: usize = 1024;
/// The least reduction depth a slice keeps: four 16-deep tiles.
pub(crate) const MIN_SPLIT_DEPTH: usize = 64;
/// The most slices (`finish` sums an output's slices in one invocation). 256 lets the MNIST
/// conv1 filter gradient (one 32×64 tile, K = 36,864) run 256 workgroups of 9 tiles.
pub(crate) const MAX_SPLITS: usize = 256;
/// Partial outputs are held to 64 MiB.
const MAX_PARTIAL_FLOATS: usize = 1 << 24;

/// Workgroups a split product aims for: `DYGRAPH_SPLIT_K=<workgroups>` (read once, `0` for
/// no split), else `SPLIT_TARGET` on a hardware GPU and none on a software adapter, whose
/// few CPU cores gain nothing from more workgroups. (The software adapters' own matmul
/// entries split by their own rule, to give each core a workgroup: `ops/matmul/mod.rs`.)
pub(crate) fn target(ctx: &GpuContext) -> usize {
    static FORCED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let forced = FORCED.get_or_init(|| std::env::var("DYGRAPH_SPLIT_K").ok().and_then(|v| v.trim().parse().ok()));
    forced.unwrap_or(if ctx.is_software() { 0 } else { SPLIT_TARGET })
}

/// Slices for a product that runs `workgroups` unsplit, with a reduction `k` deep and
/// `outputs` values: enough to reach the target, each at least `MIN_SPLIT_DEPTH` deep, at
/// least `floor`, at most `MAX_SPLITS` and within the partial outputs' memory.
pub(crate) fn slices(ctx: &GpuContext, workgroups: usize, k: usize, outputs: usize, floor: usize) -> usize {
    let want = match target(ctx) {
        0 => 1,
        t => t.div_ceil(workgroups.max(1)).min(k / MIN_SPLIT_DEPTH).min(MAX_SPLITS),
    };
    want.max(floor).min(MAX_PARTIAL_FLOATS / outputs.max(1)).max(1)
}

/// A product's reduction as split for dispatch: `slices` of `k_chunk` each (the last may be
/// shorter), and the buffer their partial outputs go to when there is more than one.
pub(crate) struct Split {
    pub slices: usize,
    pub k_chunk: usize,
    pub partial: Option<GpuBuffer>,
}

impl Split {
    /// `wanted` slices of a reduction `k` deep, each slice a whole number of the kernel's
    /// `tile_depth`-deep stages (so there may be fewer), over `outputs` values.
    pub fn new(
        ctx: &Arc<GpuContext>,
        op: &'static str,
        wanted: usize,
        k: usize,
        tile_depth: usize,
        outputs: usize,
    ) -> Result<Split> {
        let k_chunk = k.div_ceil(wanted.max(1)).div_ceil(tile_depth) * tile_depth;
        let slices = k.div_ceil(k_chunk.max(1)).max(1);
        let partial = if slices > 1 { Some(ctx.alloc(op, 4 * (outputs * slices) as u64)?) } else { None };
        Ok(Split { slices, k_chunk, partial })
    }

    /// Where the main entry writes: the partial outputs, or `out` when unsplit.
    pub fn target<'a>(&'a self, out: &'a GpuBuffer) -> &'a GpuBuffer {
        self.partial.as_ref().unwrap_or(out)
    }
}
