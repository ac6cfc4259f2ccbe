//! Out-of-range indices found on the GPU. A kernel that reads indices (gather-like ops,
//! one_hot) binds the device's error flag; the first invocation that meets an index outside
//! `[0, n)` records its op's code, the index and `n` there. The next readback or `sync()`
//! reads the flag back with its own data and returns the `InvalidArgument` error the CPU
//! gives for the same call (the op named, the index and the size), then clears it. As with
//! any asynchronous device error, that readback may be another thread's: the flag is per
//! device, not per caller.
//!
//! Flag layout (u32 words): `[count, op code, index lo, index hi, n]`; `count` is an atomic
//! counter, so exactly one invocation writes the details.

use super::context::{GpuContext, lock};
use crate::{Error, Result};

/// Bytes of the flag buffer.
pub(crate) const FLAG_BYTES: u64 = 20;

/// The device's flag and the ops whose kernels bound it (their codes are positions + 1).
pub(crate) struct IndexFlag {
    buffer: wgpu::Buffer,
    ops: Vec<&'static str>,
    /// A checking kernel was recorded since the flag was last read.
    armed: bool,
}

impl IndexFlag {
    pub fn new(device: &wgpu::Device) -> IndexFlag {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dygraph-index-errors"),
            size: FLAG_BYTES,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        IndexFlag { buffer, ops: Vec::new(), armed: false }
    }
}

impl GpuContext {
    /// The flag buffer for a kernel of `op` that checks its indices, and `op`'s code.
    pub fn index_flag(&self, op: &'static str) -> (u32, wgpu::Buffer) {
        let mut f = lock(&self.index_flag);
        let code = match f.ops.iter().position(|&o| o == op) {
            Some(i) => i + 1,
            None => {
                f.ops.push(op);
                f.ops.len()
            }
        };
        f.armed = true;
        (code as u32, f.buffer.clone())
    }

    /// Notes that a checking kernel was recorded (a replayed plan's).
    pub(super) fn arm_index_flag(&self) {
        lock(&self.index_flag).armed = true;
    }

    /// The flag buffer when a checking kernel ran since it was last read (and disarms it).
    pub(super) fn take_index_flag(&self) -> Option<wgpu::Buffer> {
        let mut f = lock(&self.index_flag);
        std::mem::replace(&mut f.armed, false).then(|| f.buffer.clone())
    }

    /// The error recorded in the flag's `words`, if any.
    pub(super) fn index_error(&self, words: &[u8]) -> Result<()> {
        let w: Vec<u32> = words.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if w.len() < 5 || w[0] == 0 {
            return Ok(());
        }
        let op = (w[1] as usize).checked_sub(1).and_then(|i| lock(&self.index_flag).ops.get(i).copied());
        let op = op.unwrap_or("index op");
        let value = (w[2] as u64 | (w[3] as u64) << 32) as i64;
        let n = w[4];
        Err(Error::invalid(op, format!("index {value} is out of range (size {n}, valid 0..{n}); found on the GPU")))
    }
}
