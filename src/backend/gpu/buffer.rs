//! A pooled GPU storage buffer: the handle tensors hold. It knows its device by index and
//! the pools it returns to when dropped (the device's shared pool, or the private pool of
//! the plan whose capture allocated it), so it needs nothing above the pools.

use std::sync::{Arc, Mutex};

use super::lock;
use super::pool::{BufferPool, PrivatePool};

/// A pooled GPU storage buffer; returns to its pool when dropped.
pub(crate) struct GpuBuffer {
    /// The device it lives on (`gpu:device`).
    pub device: usize,
    buffer: Option<wgpu::Buffer>,
    class: u64,
    /// Identifies the device buffer for the bind-group cache (kept through the pool).
    pub id: u64,
    /// The device's shared pool.
    pool: Arc<Mutex<BufferPool>>,
    /// The plan's private pool this buffer returns to (allocated during a plan capture).
    home: Option<Arc<Mutex<PrivatePool>>>,
}

/// Ids of device buffers; those below 16 name the recorder's own (the index-error flag, the
/// stand-in for an absent input, the parameter and upload arena).
pub(super) fn next_buffer_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(16);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl GpuBuffer {
    /// Wraps `buffer` of size class `class` under `id`.
    pub(super) fn new(
        device: usize,
        buffer: wgpu::Buffer,
        class: u64,
        id: u64,
        pool: Arc<Mutex<BufferPool>>,
        home: Option<Arc<Mutex<PrivatePool>>>,
    ) -> GpuBuffer {
        GpuBuffer { device, buffer: Some(buffer), class, id, pool, home }
    }

    pub fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("GpuBuffer used after drop")
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            match &self.home {
                Some(home) => {
                    let back = lock(home).give_back(self.class, self.id, b);
                    if let Some(b) = back {
                        lock(&self.pool).give_back(self.class, self.id, b);
                    }
                }
                None => lock(&self.pool).give_back(self.class, self.id, b),
            }
        }
    }
}
