//! The per-device context: the device ([`Device`]) and the runtime's facets — buffer pool,
//! pipeline cache, recorder, capture log, error flag, profiler (inside the recorder),
//! staging — composed on top of them, each a leaf of its own file. The context's methods
//! are the runtime's API for ops: allocate, dispatch, write, copy, read back, sync. It
//! derefs to its [`Device`], so `ctx.limits` and `ctx.is_software()` read the device.

use std::sync::{Arc, Mutex};

use super::WORKGROUP;
use super::buffer::{GpuBuffer, next_buffer_id};
use super::capture::{CaptureLog, Cmd, CopyCmd};
use super::device::Device;
use super::error_flag::ErrorFlag;
use super::lock;
use super::pipeline::{Access, Pipeline, PipelineCache};
use super::pool::{BufferPool, size_class};
use super::profile::{KernelLabel, KernelTotal, Profiling};
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
use super::readback::PendingRead;
use super::readback::Staging;
use super::recorder::{Bind, Grid, PARAMS_WINDOW, Recorder, SMALL_UPLOAD, grid};
use super::shader::SUBGROUP_FORM;
use super::shader::{COPY_WORDS, Kernel};
use crate::{DType, Error, Result};

/// One opened GPU device and its facets.
pub(crate) struct GpuContext {
    pub(crate) dev: Device,
    pub(crate) recorder: Mutex<Recorder>,
    /// Shared with every buffer, which returns to it when dropped.
    pub(crate) pool: Arc<Mutex<BufferPool>>,
    pub(crate) error_flag: Mutex<ErrorFlag>,
    pub(super) pipelines: PipelineCache,
    /// The open plan capture, if any (see `capture.rs`).
    pub(crate) capture: CaptureLog,
    staging: Staging,
}

impl std::ops::Deref for GpuContext {
    type Target = Device;

    fn deref(&self) -> &Device {
        &self.dev
    }
}

impl GpuContext {
    /// Opens `adapter` as `gpu:index` and composes its facets.
    pub(super) async fn open(index: usize, adapter: &wgpu::Adapter) -> Result<GpuContext> {
        let dev = Device::open(index, adapter).await?;
        Ok(GpuContext {
            recorder: Mutex::new(Recorder::new(&dev.device, &dev.limits)),
            pool: Arc::default(),
            error_flag: Mutex::new(ErrorFlag::new(&dev.device)),
            pipelines: PipelineCache::default(),
            capture: CaptureLog::default(),
            staging: Staging::default(),
            dev,
        })
    }

    /// A storage buffer of at least `bytes` bytes, from the pool when one is free.
    pub fn alloc(&self, op: &'static str, bytes: u64) -> Result<GpuBuffer> {
        let need = bytes.div_ceil(4).saturating_mul(4);
        let limit = self.max_binding();
        if need > limit {
            return Err(Error::DeviceLimit {
                op,
                what: format!("a tensor of {bytes} bytes"),
                requested: bytes,
                limit_name: "max_storage_buffer_binding_size",
                limit,
            });
        }
        let class = size_class(need).min(limit.max(need));
        let home = self.capture.pool();
        if let Some(home) = &home {
            let mut h = lock(home);
            if let Some((_, buffer)) = h.take(class) {
                let id = next_buffer_id();
                h.adopt(id, class, need, false);
                return Ok(GpuBuffer::new(self.index, buffer, class, id, self.pool.clone(), Some(home.clone())));
            }
        }
        let pooled = lock(&self.pool).take(class);
        if let Some((id, buffer)) = pooled {
            home.iter().for_each(|h| lock(h).adopt(id, class, need, true));
            return Ok(GpuBuffer::new(self.index, buffer, class, id, self.pool.clone(), home));
        }
        if let Some(msg) = self.dev.lost() {
            return Err(Error::DeviceLost(msg));
        }
        self.within_memory_limit(op, class)?;
        let buffer = self.create_buffer(op, class)?;
        lock(&self.pool).note_created(class);
        let id = next_buffer_id();
        home.iter().for_each(|h| lock(h).adopt(id, class, need, true));
        Ok(GpuBuffer::new(self.index, buffer, class, id, self.pool.clone(), home))
    }

    /// `Ok` when `bytes` more stay within `set_memory_limit`'s cap, emptying the pool first
    /// when that makes room.
    pub(crate) fn within_memory_limit(&self, op: &'static str, bytes: u64) -> Result<()> {
        let (limit, held) = {
            let p = lock(&self.pool);
            (p.limit, p.stats.allocated + p.stats.pooled)
        };
        let Some(limit) = limit else { return Ok(()) };
        if held.saturating_add(bytes) <= limit {
            return Ok(());
        }
        // Recorded work may still use pooled buffers: submit it before they are destroyed.
        {
            let mut rec = lock(&self.recorder);
            rec.flush(&self.dev)?;
            rec.forget_bind_groups();
        }
        let mut pool = lock(&self.pool);
        pool.clear();
        let in_use = pool.stats.allocated;
        if in_use.saturating_add(bytes) > limit {
            return Err(Error::DeviceLimit {
                op,
                what: format!("a buffer of {bytes} bytes beside the {in_use} bytes in use"),
                requested: in_use.saturating_add(bytes),
                limit_name: "memory limit (set_memory_limit)",
                limit,
            });
        }
        Ok(())
    }

    fn create_buffer(&self, op: &'static str, size: u64) -> Result<wgpu::Buffer> {
        let desc = wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let buffer = self.device.create_buffer(&desc);
            if let Some(e) = pollster::block_on(scope.pop()) {
                // Give the pool's memory back and retry once before failing. Recorded work may
                // still use pooled buffers: submit it before they are destroyed.
                {
                    let mut rec = lock(&self.recorder);
                    rec.flush(&self.dev)?;
                    rec.forget_bind_groups();
                }
                lock(&self.pool).clear();
                let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let buffer = self.device.create_buffer(&desc);
                if pollster::block_on(scope.pop()).is_some() {
                    return Err(Error::Gpu { op, msg: format!("out of GPU memory allocating {size} bytes: {e}") });
                }
                return Ok(buffer);
            }
            Ok(buffer)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = op;
            Ok(self.device.create_buffer(&desc))
        }
    }

    /// The compiled pipeline of `kernel`'s variant `key` at `entry`, binding `access` buffers
    /// followed by the read-only params buffer.
    pub fn pipeline(&self, kernel: &Kernel, key: u32, entry: &'static str, access: &[Access]) -> Result<Arc<Pipeline>> {
        self.pipeline_in_place(kernel, key, entry, access, None)
    }

    /// `pipeline`, or with `in_place` = (output, input) the kernel's in-place form (see
    /// `in_place.rs`): binding `output` is left out and its values go to binding `input`.
    pub fn pipeline_in_place(
        &self,
        kernel: &Kernel,
        key: u32,
        entry: &'static str,
        access: &[Access],
        in_place: Option<(usize, usize)>,
    ) -> Result<Arc<Pipeline>> {
        self.pipelines.get(&self.device, kernel, key, entry, access, in_place)
    }

    /// Submits everything recorded so far, waits for the device to finish it (natively, as
    /// `paddle.device.synchronize`), and surfaces GPU errors and an out-of-range index a
    /// kernel met (in the browser, where nothing may block, the next async readback reports
    /// them).
    pub fn sync(&self) -> Result<()> {
        // When a checking kernel ran, reading its flag back submits the pending work in the
        // same batch and waits for it: one submission per sync either way.
        #[cfg(not(target_arch = "wasm32"))]
        pollster::block_on(self.check_indices("sync"))?;
        lock(&self.recorder).flush(&self.dev)?;
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu { op: "sync", msg: e.to_string() })?;
        self.check("sync")
    }

    /// True when kernels with a subgroup form run it: natively, where the device has
    /// `SUBGROUP` and `FLAGS_use_subgroups` is on (browsers would need `enable subgroups;`,
    /// which naga 30 rejects).
    pub fn uses_subgroups(&self) -> bool {
        cfg!(not(target_arch = "wasm32")) && self.dev.subgroup_sizes().is_some() && crate::flags::subgroups_enabled()
    }

    /// Records one dispatch of `kernel`'s variant `key` at `entry` over `size` (workgroups,
    /// or invocations of a 1-D kernel, `WORKGROUP` per group). `binds` are bound in order at
    /// bindings 0.., then `params` (as `array<u32>`).
    pub fn dispatch(
        &self,
        kernel: &'static Kernel,
        key: u32,
        entry: &'static str,
        binds: &[Bind<'_>],
        params: &[u32],
        size: impl Into<Grid>,
    ) -> Result<()> {
        self.dispatch_inner(kernel, key, entry, binds, params, size.into(), true)
    }

    /// `dispatch`, logged for a capture unless the caller logs the command as something else.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_inner(
        &self,
        kernel: &'static Kernel,
        key: u32,
        entry: &'static str,
        binds: &[Bind<'_>],
        params: &[u32],
        size: Grid,
        logged: bool,
    ) -> Result<()> {
        let groups = match size {
            Grid::Groups(g) => g,
            Grid::Threads(0) => return Ok(()),
            Grid::Threads(n) => grid(&self.dev, n.div_ceil(WORKGROUP as u64))?,
        };
        let key = if kernel.has_subgroup_form() && self.uses_subgroups() { key | SUBGROUP_FORM } else { key };
        let access: Vec<Access> = binds.iter().map(|b| b.access).collect();
        let pipeline = self.pipeline(kernel, key, entry, &access)?;
        let bytes: &[u8] = if params.is_empty() { &[0; 4] } else { bytemuck::cast_slice(params) };
        if bytes.len() > PARAMS_WINDOW {
            return Err(Error::Gpu {
                op: "dispatch",
                msg: format!(
                    "{}: {} bytes of parameters, more than the {PARAMS_WINDOW}-byte window",
                    kernel.file,
                    bytes.len()
                ),
            });
        }
        if logged {
            self.capture.log(|| Cmd::Dispatch {
                kernel,
                key,
                entry,
                pipeline: pipeline.clone(),
                binds: binds.iter().map(|b| (b.id, b.buffer.clone(), b.access == Access::ReadWrite)).collect(),
                params: bytes.to_vec(),
                groups,
            });
        }
        let label = KernelLabel { file: kernel.file, entry, key };
        lock(&self.recorder).dispatch(&self.dev, label, &pipeline, binds, bytes, groups)
    }

    /// A new buffer holding `bytes`.
    pub fn upload(&self, op: &'static str, bytes: &[u8]) -> Result<GpuBuffer> {
        let buf = self.alloc(op, bytes.len() as u64)?;
        self.write(&buf, bytes)?;
        Ok(buf)
    }

    /// Records writing `bytes` at the start of `buf` (ordered with the recorded kernels).
    pub fn write(&self, buf: &GpuBuffer, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let padded = bytes.len().next_multiple_of(4);
        self.capture.log(|| {
            let mut v = bytes.to_vec();
            v.resize(padded, 0);
            Cmd::Write { dst: (buf.id, buf.raw().clone()), bytes: v }
        });
        if bytes.len() <= SMALL_UPLOAD {
            let copy = self.pipeline(&COPY_WORDS, 0, "main", &[Access::Read, Access::ReadWrite])?;
            lock(&self.recorder).write_small(&self.dev, &copy, buf, bytes)
        } else {
            lock(&self.recorder).write_large(&self.dev, buf, bytes)
        }
    }

    /// Records a buffer-to-buffer copy of `bytes` (a multiple of 4).
    pub fn copy(&self, src: &GpuBuffer, src_offset: u64, dst: &GpuBuffer, dst_offset: u64, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.capture.log(|| {
            Cmd::Copy(CopyCmd {
                src: (src.id, src.raw().clone()),
                src_offset,
                dst: (dst.id, dst.raw().clone()),
                dst_offset,
                bytes,
            })
        });
        // A small copy runs as a dispatch, keeping the compute pass open; a large one is
        // worth the copy command (a software adapter's memcpy beats a kernel's word copy).
        // A copy that is unaligned or out of range goes to the copy command too, whose
        // validation reports it.
        let words = [bytes / 4, src_offset / 4, dst_offset / 4];
        let fits = |b: &GpuBuffer, at: u64| at.checked_add(bytes).is_some_and(|end| end <= b.raw().size());
        let aligned = (bytes | src_offset | dst_offset).is_multiple_of(4);
        if src.raw() != dst.raw()
            && bytes <= SMALL_UPLOAD as u64
            && aligned
            && fits(src, src_offset)
            && fits(dst, dst_offset)
            && words.iter().all(|&w| w <= u32::MAX as u64)
        {
            let params = words.map(|w| w as u32);
            let binds = [Bind::read(src), Bind::write(dst)];
            return self.dispatch_inner(&COPY_WORDS, 0, "main", &binds, &params, Grid::Threads(words[0]), false);
        }
        lock(&self.recorder).copy_command(&self.dev, src.raw(), src_offset, dst.raw(), dst_offset, bytes);
        Ok(())
    }

    /// Reads the first `bytes` bytes of `src` back to the host. Submits pending work, and
    /// reports an out-of-range index a kernel recorded since the last check.
    pub async fn read(&self, src: &GpuBuffer, bytes: u64) -> Result<Vec<u8>> {
        if bytes == 0 {
            self.check_indices("readback").await?;
            return Ok(Vec::new());
        }
        let mut out = self.read_raw("readback", &[(src.raw(), bytes)]).await?;
        Ok(out.swap_remove(0))
    }

    /// A host-mappable buffer of `bytes` for `start_read` (kept and reused by its owner).
    #[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
    pub fn staging_buffer(&self, bytes: u64) -> wgpu::Buffer {
        super::readback::staging_buffer(&self.dev, bytes)
    }

    /// Starts reading `srcs` (buffer, bytes) back into `staging`, packed in order: records
    /// the copies, submits, and asks for the mapping without waiting. `poll_read` says when
    /// the bytes are on the host. Used where the host has other work meanwhile (a
    /// data-parallel bucket's gradients while backward goes on).
    #[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
    pub fn start_read(&self, srcs: &[(&GpuBuffer, u64)], staging: wgpu::Buffer) -> Result<PendingRead> {
        self.capture.taint("an op read data back to the host");
        let raw: Vec<(&wgpu::Buffer, u64)> = srcs.iter().map(|&(b, n)| (b.raw(), n)).collect();
        super::readback::start_read(&self.dev, &self.recorder, &raw, staging)
    }

    /// Drives `pending` on: with `wait`, until it is mapped.
    #[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
    pub fn poll_read(&self, pending: &PendingRead, wait: bool) -> Result<bool> {
        pending.poll(&self.dev, wait)
    }

    /// Submits pending work and reports an out-of-range index recorded since the last check.
    /// Errors name `op` (the caller: a readback, `sync`).
    pub async fn check_indices(&self, op: &'static str) -> Result<()> {
        self.read_raw(op, &[]).await.map(|_| ())
    }

    /// Reads the first bytes of each buffer (and the index-error flag, when a checking kernel
    /// ran since it was last read) with one submission and one mapping.
    async fn read_raw(&self, op: &'static str, srcs: &[(&wgpu::Buffer, u64)]) -> Result<Vec<Vec<u8>>> {
        if !srcs.is_empty() {
            self.capture.taint("an op read data back to the host");
        }
        let flag = self.take_index_flag();
        let mut parts: Vec<(&wgpu::Buffer, u64)> = srcs.to_vec();
        if let Some(f) = &flag {
            parts.push((f, super::error_flag::FLAG_BYTES));
        }
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        let read = self.staging.read_parts(&self.dev, &self.recorder, op, &parts, flag.as_ref()).await;
        let mut out = match read {
            Ok(out) => out,
            Err(e) => {
                // The flag's words were not read: a later readback reads them again (an error
                // still there is reported then, not lost; a cleared flag reads as none).
                if flag.is_some() {
                    self.arm_index_flag();
                }
                return Err(e);
            }
        };
        if flag.is_some() {
            let words = out.pop().unwrap_or_default();
            self.index_error(&words)?;
        }
        Ok(out)
    }
}

/// The device's error flag (`error_flag.rs`): codes for the kernels that bind it, and the
/// error its words hold at a readback.
impl GpuContext {
    /// The flag buffer for a kernel of `op` that checks its indices, and `op`'s code.
    pub fn index_flag(&self, op: &'static str) -> (u32, wgpu::Buffer) {
        lock(&self.error_flag).index_code(op)
    }

    /// The flag buffer and code for the deferred NaN/Inf check of what `op` wrote (`what`:
    /// "output 0", ...) of `shape` and `dtype`: reported by the next readback.
    pub(crate) fn non_finite_flag(&self, op: String, what: &str, shape: &[usize], dtype: DType) -> (u32, wgpu::Buffer) {
        lock(&self.error_flag).non_finite_code(op, what, shape, dtype)
    }

    /// Notes that a checking kernel was recorded (a replayed plan's).
    fn arm_index_flag(&self) {
        lock(&self.error_flag).arm();
    }

    /// The flag buffer when a checking kernel ran since it was last read (and disarms it).
    fn take_index_flag(&self) -> Option<wgpu::Buffer> {
        lock(&self.error_flag).take()
    }

    /// The error recorded in the flag's `words`, if any.
    fn index_error(&self, words: &[u8]) -> Result<()> {
        lock(&self.error_flag).error(words)
    }
}

/// Kernel timing (`profile.rs`), for `dygraph::profiler`.
impl GpuContext {
    /// Turns kernel timing on, after finishing the work recorded so far (so none of it is
    /// counted); an error when a profiler is already on for this device.
    pub(crate) fn start_profiling(&self) -> Result<()> {
        self.sync()?;
        let mut rec = lock(&self.recorder);
        if rec.profiling.is_some() {
            return Err(Error::invalid("profiler", format!("a profiler is already on for gpu:{}", self.index)));
        }
        rec.profiling =
            Some(Profiling::new(&self.device, &self.queue, &format!("{} ({:?})", self.info.name, self.info.backend))?);
        Ok(())
    }

    /// Finishes the recorded work and turns kernel timing off: each kernel's calls and
    /// device time, in the order the kernels first ran.
    pub(crate) fn stop_profiling(&self) -> Result<Vec<(KernelLabel, KernelTotal)>> {
        let flushed = self.sync();
        let taken = lock(&self.recorder).profiling.take();
        flushed?;
        Ok(taken.map(|p| p.totals).unwrap_or_default())
    }
}
