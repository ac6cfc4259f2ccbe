//! Size-bucketed pool of GPU storage buffers with user-readable counters.
//!
//! Buffers are rounded up to a size class (at most 1/8 larger than asked for), and a buffer
//! whose last tensor dropped goes back to its class's free list instead of being destroyed.
//! Reuse inside one pending batch is safe: every kernel and copy that touches pooled
//! buffers is recorded in order into the same command encoder (see `recorder.rs`). A plan's
//! capture allocates from a pool of its own ([`PrivatePool`]), which hands its buffers to
//! the shared one when the plan goes.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::lock;

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

/// Buffers owned by one plan: what its capture allocated, free or held by its tensors.
#[derive(Default)]
pub(crate) struct PrivatePool {
    free: HashMap<u64, Vec<(u64, wgpu::Buffer)>>,
    /// Every allocation the capture made, by id, with the bytes it asked for (the buffer
    /// behind it is a size class, up to 1/8 larger). A buffer the capture frees and hands
    /// out again gets a new id, so each id is one tensor's lifetime and the packing sees
    /// lifetimes, not the pool's reuse.
    pub(super) owned: HashMap<u64, u64>,
    /// Size-class bytes of the distinct buffers the plan holds.
    buffers: u64,
    /// Buffers whose commands now use the arena: they go to the shared pool when free.
    pub(super) evicted: HashSet<u64>,
    /// Bytes of the arena the packed intermediates live in (0 without one).
    pub(super) arena: u64,
    /// The plan is gone: buffers coming back go to the device's shared pool.
    released: bool,
}

impl PrivatePool {
    /// Bytes of device memory the plan holds: its own buffers and its arena.
    pub fn bytes(&self) -> u64 {
        self.buffers + self.arena
    }

    /// Gives buffer `id` to the shared pool when it comes back (the plan no longer uses it).
    pub fn evict(&mut self, id: u64) {
        self.evicted.insert(id);
    }

    pub fn owns(&self, id: u64) -> bool {
        self.owned.contains_key(&id)
    }

    /// Records allocation `id` of `need` bytes (a new buffer of `class` bytes for the plan
    /// when `fresh`, else one of its free buffers handed out again under a new id).
    pub fn adopt(&mut self, id: u64, class: u64, need: u64, fresh: bool) {
        self.owned.insert(id, need);
        if fresh {
            self.buffers += class;
        }
    }

    pub fn take(&mut self, class: u64) -> Option<(u64, wgpu::Buffer)> {
        self.free.get_mut(&class)?.pop()
    }

    /// Keeps a buffer for the plan; hands it back (the caller gives it to the shared pool) once the
    /// plan is released.
    pub fn give_back(&mut self, class: u64, id: u64, buffer: wgpu::Buffer) -> Option<wgpu::Buffer> {
        if self.released || self.evicted.contains(&id) {
            self.owned.remove(&id);
            self.buffers -= class;
            return Some(buffer);
        }
        self.free.entry(class).or_default().push((id, buffer));
        None
    }

    /// Hands the free buffers to the device's shared pool, and every buffer that comes back
    /// later (the plan is going away).
    pub fn release(&mut self, shared: &Mutex<BufferPool>) {
        self.released = true;
        self.give_free_away(shared, |_| true);
        lock(shared).forget_external(std::mem::take(&mut self.arena));
    }

    /// Moves the free buffers `which` picks to the shared pool.
    pub(super) fn give_free_away(&mut self, shared: &Mutex<BufferPool>, which: impl Fn(u64) -> bool) {
        let mut pool = lock(shared);
        for (&class, bufs) in self.free.iter_mut() {
            for (id, b) in bufs.extract_if(.., |(id, _)| which(*id)) {
                pool.give_back(class, id, b);
                self.owned.remove(&id);
                self.buffers -= class;
            }
        }
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
