//! Reading device buffers back to the host: one submission and one mapping per readback,
//! small ones through a staging buffer kept for reuse (a training loop's per-step loss read
//! creates and destroys no buffer), and, for data-parallel training, a readback started now
//! and finished later. A leaf over the device and the recorder; the context adds the
//! capture's taint and the error flag.

use std::sync::Mutex;

use super::device::Device;
use super::lock;
use super::recorder::Recorder;
use crate::{Error, Result};

/// Readbacks up to this many bytes go through the device's one reusable staging buffer.
const SMALL_READBACK: u64 = 4096;

/// A host-mappable buffer for small readbacks (a loss, the index-error flag), taken by one
/// readback at a time and put back unmapped.
#[derive(Default)]
pub(super) struct Staging(Mutex<Option<wgpu::Buffer>>);

impl Staging {
    /// Copies the first bytes of each of `parts` into one staging buffer (clearing `flag`,
    /// the last part when present, in the same submission), maps it and returns each part's
    /// bytes.
    pub async fn read_parts(
        &self,
        dev: &Device,
        recorder: &Mutex<Recorder>,
        op: &'static str,
        parts: &[(&wgpu::Buffer, u64)],
        flag: Option<&wgpu::Buffer>,
    ) -> Result<Vec<Vec<u8>>> {
        let offsets: Vec<u64> = parts
            .iter()
            .scan(0u64, |at, &(_, b)| {
                let o = *at;
                *at += b.div_ceil(4) * 4;
                Some(o)
            })
            .collect();
        let size: u64 = parts.iter().map(|&(_, b)| b.div_ceil(4) * 4).sum();
        let reused = if size <= SMALL_READBACK { lock(&self.0).take() } else { None };
        let staging = reused.unwrap_or_else(|| {
            dev.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dygraph-readback"),
                size: if size <= SMALL_READBACK { SMALL_READBACK } else { size },
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        {
            let mut rec = lock(recorder);
            let enc = rec.copy_encoder(dev);
            for (&(buf, bytes), &o) in parts.iter().zip(&offsets) {
                enc.copy_buffer_to_buffer(buf, 0, &staging, o, bytes.div_ceil(4) * 4);
            }
            if let Some(f) = flag {
                enc.clear_buffer(f, 0, None);
            }
            rec.flush(dev)?;
        }
        let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
        staging.map_async(wgpu::MapMode::Read, ..size, move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        dev.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Gpu { op, msg: e.to_string() })?;
        let mapped = rx.receive().await;
        dev.check(op)?;
        match mapped {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                return Err(Error::Gpu { op, msg: e.to_string() });
            }
            None => return Err(Error::DeviceLost("readback callback dropped".into())),
        }
        let out: Vec<Vec<u8>> = {
            let view = staging.get_mapped_range(..size).map_err(|e| Error::Gpu { op, msg: e.to_string() })?;
            parts.iter().zip(&offsets).map(|(&(_, b), &o)| view[o as usize..(o + b) as usize].to_vec()).collect()
        };
        staging.unmap();
        if staging.size() == SMALL_READBACK {
            *lock(&self.0) = Some(staging);
        }
        Ok(out)
    }
}

/// A host-mappable buffer of `bytes` for `start_read` (kept and reused by its owner).
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(super) fn staging_buffer(dev: &Device, bytes: u64) -> wgpu::Buffer {
    dev.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("dygraph-staging"),
        size: bytes.div_ceil(4) * 4,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// Starts reading `srcs` (buffer, bytes) back into `staging`, packed in order: records the
/// copies, submits, and asks for the mapping without waiting.
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(super) fn start_read(
    dev: &Device,
    recorder: &Mutex<Recorder>,
    srcs: &[(&wgpu::Buffer, u64)],
    staging: wgpu::Buffer,
) -> Result<PendingRead> {
    let mut at = 0u64;
    {
        let mut rec = lock(recorder);
        let enc = rec.copy_encoder(dev);
        for &(buf, bytes) in srcs {
            let padded = bytes.div_ceil(4) * 4;
            enc.copy_buffer_to_buffer(buf, 0, &staging, at, padded);
            at += padded;
        }
        rec.flush(dev)?;
    }
    let done: std::sync::Arc<Mutex<Option<std::result::Result<(), String>>>> = Default::default();
    let flag = done.clone();
    staging.map_async(wgpu::MapMode::Read, ..at.max(4), move |r| {
        *lock(&flag) = Some(r.map_err(|e| e.to_string()));
    });
    Ok(PendingRead { staging, bytes: at, done })
}

/// A readback started by `GpuContext::start_read`.
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) struct PendingRead {
    staging: wgpu::Buffer,
    bytes: u64,
    done: std::sync::Arc<Mutex<Option<std::result::Result<(), String>>>>,
}

#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
impl PendingRead {
    /// Drives the device on: with `wait`, until this readback is mapped. True once it is.
    pub(super) fn poll(&self, dev: &Device, wait: bool) -> Result<bool> {
        let how = if wait { wgpu::PollType::wait_indefinitely() } else { wgpu::PollType::Poll };
        dev.device.poll(how).map_err(|e| Error::Gpu { op: "readback", msg: e.to_string() })?;
        match lock(&self.done).as_ref() {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(e)) => Err(Error::Gpu { op: "readback", msg: e.clone() }),
        }
    }

    /// Once `poll_read` said it is mapped: hands the bytes to `f`, unmaps, and returns the
    /// staging buffer for reuse.
    pub fn finish(self, f: impl FnOnce(&[u8])) -> Result<wgpu::Buffer> {
        {
            let view = self
                .staging
                .get_mapped_range(..self.bytes.max(4))
                .map_err(|e| Error::Gpu { op: "readback", msg: e.to_string() })?;
            f(&view[..self.bytes as usize]);
        }
        self.staging.unmap();
        Ok(self.staging)
    }
}
