//! Size-bucketed pool of GPU storage buffers with user-readable counters.
//!
//! Buffers are rounded up to a size class (at most 1/8 larger than asked for), and a buffer
//! whose last tensor dropped goes back to its class's free list instead of being destroyed.
//! Reuse inside one pending batch is safe: every kernel and copy that touches pooled
//! buffers is recorded in order into the same command encoder (see `recorder.rs`).

use std::collections::HashMap;

/// Memory counters of one GPU device, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live tensors (size classes, so a little more than the tensors' sizes).
    pub allocated: u64,
    /// Highest `allocated` seen since the device opened or the last `reset_peak`.
    pub peak_allocated: u64,
    /// Bytes sitting in the pool, ready for reuse.
    pub pooled: u64,
    /// Buffers created on the device so far (a low number means the pool is doing its job).
    pub buffers_created: u64,
    /// Allocations served from the pool.
    pub pool_hits: u64,
    /// Compute pipelines compiled and cached on the device (flat once a workload has run).
    pub pipelines: u64,
}

#[derive(Default)]
pub(crate) struct BufferPool {
    free: HashMap<u64, Vec<(u64, wgpu::Buffer)>>,
    pub stats: MemoryStats,
    /// The cap `set_memory_limit` put on allocated plus pooled bytes.
    pub limit: Option<u64>,
}

/// Rounds a request up to its size class: powers of two up to 4 KiB, then sixteenths of
/// the next power of two (eighths of the power of two below the request, so a class is at
/// most 1/8 larger than the request).
pub(crate) fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(256);
    let p = b.next_power_of_two();
    if p <= 4096 {
        return p;
    }
    let step = p / 16;
    b.div_ceil(step) * step
}

impl BufferPool {
    /// A pooled buffer of exactly `class` bytes (with its id), if one is free.
    pub fn take(&mut self, class: u64) -> Option<(u64, wgpu::Buffer)> {
        let buf = self.free.get_mut(&class)?.pop()?;
        self.stats.pooled -= class;
        self.stats.pool_hits += 1;
        self.note_allocated(class);
        Some(buf)
    }

    /// Counts device memory held outside the pool (a plan's arena) as allocated.
    pub fn note_external(&mut self, bytes: u64) {
        self.stats.buffers_created += 1;
        self.note_allocated(bytes);
    }

    pub fn forget_external(&mut self, bytes: u64) {
        self.stats.allocated -= bytes;
    }

    pub fn note_created(&mut self, class: u64) {
        self.stats.buffers_created += 1;
        self.note_allocated(class);
    }

    fn note_allocated(&mut self, class: u64) {
        self.stats.allocated += class;
        self.stats.peak_allocated = self.stats.peak_allocated.max(self.stats.allocated);
    }

    pub fn give_back(&mut self, class: u64, id: u64, buffer: wgpu::Buffer) {
        self.stats.allocated -= class;
        self.stats.pooled += class;
        self.free.entry(class).or_default().push((id, buffer));
    }

    /// Destroys every pooled buffer (PyTorch's `empty_cache`).
    pub fn clear(&mut self) {
        for (_, bufs) in self.free.drain() {
            for (_, b) in bufs {
                b.destroy();
            }
        }
        self.stats.pooled = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_at_most_an_eighth() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(300), 512);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 4608);
        for b in [5000u64, 70_000, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let c = size_class(b);
            assert!(c >= b && c - b <= b / 8 + 1, "{b} -> {c}");
        }
    }
}
