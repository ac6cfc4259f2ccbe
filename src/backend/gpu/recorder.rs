//! The one choke point for GPU work. Kernels are recorded into a pending command encoder
//! (inside one open compute pass); their parameters and small uploads go into a host-side
//! arena that is written to the device just before the batch is submitted. A batch is
//! submitted on readback, on `sync()`, when the arena fills, or after `MAX_PENDING`
//! dispatches (a replayed plan's tape is not split: see `capture.rs`). Small uploads and
//! copies run as a word-copy kernel, not a copy command, so the batch stays one compute
//! pass (every pass costs wgpu and the driver command buffers).
//!
//! Ordering: every write into a pooled buffer is a command in the encoder, so a buffer
//! freed and reused inside one batch is safe. The only queue-level write is the arena
//! (and large uploads, which flush first), and queue writes are ordered after every
//! earlier submission.

use std::collections::HashMap;
use std::sync::Arc;

use super::context::{Access, GpuBuffer, GpuContext, Pipeline, lock};
use super::profile::{KernelLabel, Profiling};
use super::shader::{COPY_WORDS, Kernel};
use super::{MAX_PENDING, WORKGROUP};
use crate::{Error, Result};

/// Bytes of parameters and small uploads per batch.
const ARENA_BYTES: u64 = 1 << 21;
/// Uploads up to this size travel through the arena; larger ones flush and write directly.
/// Copies up to this size run as a kernel.
const SMALL_UPLOAD: usize = 1 << 18;
/// The window of the arena a dispatch's params binding covers (at a dynamic offset): the
/// longest params vector any kernel takes, with room to spare (128 words).
pub(crate) const PARAMS_WINDOW: usize = 512;
/// The params window in 32-bit words.
pub(crate) const PARAMS_WORDS: usize = PARAMS_WINDOW / 4;
/// Readbacks up to this many bytes go through the device's one reusable staging buffer.
const SMALL_READBACK: u64 = 4096;
/// Bind groups kept for reuse before the cache is dropped and refilled.
const MAX_BIND_GROUPS: usize = 4096;
/// The id of the index-error flag buffer in bind-group keys (see `next_buffer_id`).
pub(crate) const FLAG_BUFFER_ID: u64 = 1;
/// The id of the buffer bound in place of an absent optional input.
const UNUSED_BUFFER_ID: u64 = 2;
/// The id of the recorder's parameter and upload arena when bound as a kernel's input.
const ARENA_BUFFER_ID: u64 = 3;

pub(crate) struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    arena: Vec<u8>,
    arena_buf: wgpu::Buffer,
    align: usize,
    pub(super) pending: u32,
    /// Bind groups by (pipeline, bound buffers): a training step binds the same pooled
    /// buffers to the same pipelines every iteration, so most dispatches reuse one.
    bind_groups: HashMap<(usize, Vec<u64>), wgpu::BindGroup>,
    /// Batches submitted so far.
    pub submits: u64,
    /// The kernel timing of an active profiler (`profile.rs`).
    pub(super) profiling: Option<Profiling>,
}

/// A buffer bound to one kernel dispatch.
pub(crate) struct Bind<'a> {
    pub buffer: &'a wgpu::Buffer,
    pub id: u64,
    pub access: Access,
}

impl Bind<'_> {
    pub fn read(buffer: &GpuBuffer) -> Bind<'_> {
        Bind { buffer: buffer.raw(), id: buffer.id, access: Access::Read }
    }
    pub fn write(buffer: &GpuBuffer) -> Bind<'_> {
        Bind { buffer: buffer.raw(), id: buffer.id, access: Access::ReadWrite }
    }
    /// The binding for an absent optional input (a kernel that reads it only behind a flag
    /// saying it is there): a buffer of its own, so no tensor is bound twice.
    pub fn unused(ctx: &GpuContext) -> Bind<'_> {
        Bind { buffer: &ctx.unused, id: UNUSED_BUFFER_ID, access: Access::Read }
    }
    /// The device's index-error flag, bound read-write.
    pub fn flag(buffer: &wgpu::Buffer) -> Bind<'_> {
        Bind { buffer, id: FLAG_BUFFER_ID, access: Access::ReadWrite }
    }
}

impl Recorder {
    /// Drops the cached bind groups (their buffers are being destroyed).
    pub fn forget_bind_groups(&mut self) {
        self.bind_groups.clear();
    }

    pub fn new(device: &wgpu::Device, limits: &wgpu::Limits) -> Self {
        let arena_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dygraph-arena"),
            size: ARENA_BYTES,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Recorder {
            encoder: None,
            pass: None,
            arena: Vec::new(),
            arena_buf,
            align: (limits.min_storage_buffer_offset_alignment as usize).max(4),
            pending: 0,
            bind_groups: HashMap::new(),
            submits: 0,
            profiling: None,
        }
    }

    fn encoder(&mut self, ctx: &GpuContext) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| ctx.device.create_command_encoder(&Default::default()))
    }

    /// Reserves `len` bytes of arena at `align`, flushing first if the arena is full.
    fn reserve(&mut self, ctx: &GpuContext, len: usize, align: usize) -> Result<usize> {
        let start = self.arena.len().next_multiple_of(align);
        if (start + len) as u64 > ARENA_BYTES || self.pending >= MAX_PENDING {
            self.flush(ctx)?;
            return Ok(0);
        }
        Ok(start)
    }

    /// The open compute pass (opened on the pending encoder when there is none).
    pub(super) fn pass(&mut self, ctx: &GpuContext) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            let pass = self.encoder(ctx).begin_compute_pass(&Default::default()).forget_lifetime();
            self.pass = Some(pass);
        }
        self.pass.as_mut().expect("compute pass opened above")
    }

    /// The compute pass the next dispatch, of `label`'s kernel, goes into: the open one, or
    /// while a profiler is on a new pass whose start and end are timestamped.
    pub(super) fn dispatch_pass(&mut self, ctx: &GpuContext, label: KernelLabel) -> &mut wgpu::ComputePass<'static> {
        if let Some(p) = self.profiling.as_mut() {
            self.pass = None;
            let encoder = self.encoder.get_or_insert_with(|| ctx.device.create_command_encoder(&Default::default()));
            self.pass = Some(p.begin(encoder, label));
        }
        self.pass(ctx)
    }

    /// The bind group of `binds` then the params window for `pipeline`, cached: a training
    /// step binds the same pooled buffers to the same pipelines every iteration.
    fn bind_group(&mut self, ctx: &GpuContext, pipeline: &Arc<Pipeline>, binds: &[Bind<'_>]) -> wgpu::BindGroup {
        let cache_key = (Arc::as_ptr(pipeline) as usize, binds.iter().map(|b| b.id).collect::<Vec<u64>>());
        if let Some(g) = self.bind_groups.get(&cache_key) {
            return g.clone();
        }
        let mut entries: Vec<wgpu::BindGroupEntry> = binds
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.buffer.as_entire_binding() })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: binds.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.arena_buf,
                offset: 0,
                size: wgpu::BufferSize::new(PARAMS_WINDOW as u64),
            }),
        });
        let g = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.layout,
            entries: &entries,
        });
        if self.bind_groups.len() >= MAX_BIND_GROUPS {
            self.bind_groups.clear();
        }
        self.bind_groups.insert(cache_key, g.clone());
        g
    }

    /// Records one dispatch into the open compute pass, its params at `offset` of the arena.
    fn record(
        &mut self,
        ctx: &GpuContext,
        label: KernelLabel,
        pipeline: &Pipeline,
        bind_group: &wgpu::BindGroup,
        offset: usize,
        groups: [u32; 3],
    ) {
        let pass = self.dispatch_pass(ctx, label);
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, bind_group, &[offset as u32]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        self.pending += 1;
        ctx.dispatches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Records a buffer-to-buffer copy (closing the compute pass).
    pub(super) fn copy_raw(
        &mut self,
        ctx: &GpuContext,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        bytes: u64,
    ) {
        self.pass = None;
        self.encoder(ctx).copy_buffer_to_buffer(src, src_offset, dst, dst_offset, bytes);
    }

    /// Submits the pending batch.
    pub fn flush(&mut self, ctx: &GpuContext) -> Result<()> {
        self.pass = None;
        let mut timed = false;
        if let Some(mut enc) = self.encoder.take() {
            timed = self.profiling.as_ref().is_some_and(|p| p.resolve(&mut enc));
            if !self.arena.is_empty() {
                self.arena.resize(self.arena.len().next_multiple_of(4), 0);
                ctx.queue.write_buffer(&self.arena_buf, 0, &self.arena);
            }
            ctx.queue.submit([enc.finish()]);
            self.submits += 1;
        }
        self.arena.clear();
        self.pending = 0;
        let checked = ctx.check("submit");
        if timed && let Some(p) = self.profiling.as_mut() {
            // A batch that failed validation has no timestamps to read; a readback that
            // failed leaves the profiler unusable, so timing stops there.
            let collected = if checked.is_ok() {
                p.collect(&ctx.device)
            } else {
                p.drop_batch();
                Ok(())
            };
            if let Err(e) = collected {
                self.profiling = None;
                return Err(e);
            }
        }
        checked
    }
}

/// How many workgroups a dispatch runs: a 3-D count, or the invocations of a 1-D kernel.
#[derive(Clone, Copy, Debug)]
pub enum Grid {
    /// Workgroups along x, y and z.
    Groups([u32; 3]),
    /// Invocations of a 1-D kernel, `WORKGROUP` per group (none: nothing is recorded).
    Threads(u64),
}

impl From<[u32; 3]> for Grid {
    fn from(g: [u32; 3]) -> Self {
        Grid::Groups(g)
    }
}

impl From<u64> for Grid {
    fn from(n: u64) -> Self {
        Grid::Threads(n)
    }
}

/// Splits `groups` workgroups over x and y so neither exceeds the per-dimension limit;
/// 1-D kernels recover the linear index as `gid.x + gid.y * nwg.x * WORKGROUP`.
pub(crate) fn grid(ctx: &GpuContext, groups: u64) -> Result<[u32; 3]> {
    let max = ctx.limits.max_compute_workgroups_per_dimension.max(1) as u64;
    if groups <= max {
        return Ok([groups.max(1) as u32, 1, 1]);
    }
    let y = groups.div_ceil(max);
    if y > max {
        return Err(Error::DeviceLimit {
            op: "dispatch",
            what: format!("{groups} workgroups"),
            requested: groups,
            limit_name: "max_compute_workgroups_per_dimension²",
            limit: max * max,
        });
    }
    Ok([max as u32, y as u32, 1])
}

impl GpuContext {
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
            Grid::Threads(n) => grid(self, n.div_ceil(WORKGROUP as u64))?,
        };
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
            self.log(|| super::capture::Cmd::Dispatch {
                kernel,
                key,
                entry,
                pipeline: pipeline.clone(),
                binds: binds.iter().map(|b| (b.id, b.buffer.clone(), b.access == Access::ReadWrite)).collect(),
                params: bytes.to_vec(),
                groups,
            });
        }
        let mut rec = lock(&self.recorder);
        let align = rec.align;
        let offset = rec.reserve(self, PARAMS_WINDOW, align)?;
        rec.arena.resize(offset, 0);
        rec.arena.extend_from_slice(bytes);
        let bind_group = rec.bind_group(self, &pipeline, binds);
        rec.record(self, KernelLabel { file: kernel.file, entry, key }, &pipeline, &bind_group, offset, groups);
        Ok(())
    }

    /// A new buffer holding `bytes`.
    pub fn upload(self: &Arc<Self>, op: &'static str, bytes: &[u8]) -> Result<GpuBuffer> {
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
        self.log(|| {
            let mut v = bytes.to_vec();
            v.resize(padded, 0);
            super::capture::Cmd::Write { dst: (buf.id, buf.raw().clone()), bytes: v }
        });
        if bytes.len() <= SMALL_UPLOAD {
            let pipeline = self.pipeline(&COPY_WORDS, 0, "main", &[Access::Read, Access::ReadWrite])?;
            let mut rec = lock(&self.recorder);
            let align = rec.align;
            // One reservation for the parameters and the words, so that no flush can fall
            // between them.
            let offset = rec.reserve(self, PARAMS_WINDOW + padded, align)?;
            let words = (padded / 4) as u32;
            let params = [words, ((offset + PARAMS_WINDOW) / 4) as u32, 0];
            rec.arena.resize(offset, 0);
            rec.arena.extend_from_slice(bytemuck::cast_slice(&params));
            rec.arena.resize(offset + PARAMS_WINDOW, 0);
            rec.arena.extend_from_slice(bytes);
            rec.arena.resize(offset + PARAMS_WINDOW + padded, 0);
            let arena = rec.arena_buf.clone();
            let binds = [Bind { buffer: &arena, id: ARENA_BUFFER_ID, access: Access::Read }, Bind::write(buf)];
            let group = rec.bind_group(self, &pipeline, &binds);
            let groups = grid(self, (words as u64).div_ceil(WORKGROUP as u64))?;
            let label = KernelLabel { file: COPY_WORDS.file, entry: "main", key: 0 };
            rec.record(self, label, &pipeline, &group, offset, groups);
        } else {
            // The pool may hand out a buffer still read by pending commands: submit them
            // first so this queue write is ordered after them.
            let mut rec = lock(&self.recorder);
            rec.flush(self)?;
            if padded == bytes.len() {
                self.queue.write_buffer(buf.raw(), 0, bytes);
            } else {
                let mut v = bytes.to_vec();
                v.resize(padded, 0);
                self.queue.write_buffer(buf.raw(), 0, &v);
            }
        }
        Ok(())
    }

    /// Records a buffer-to-buffer copy of `bytes` (a multiple of 4).
    pub fn copy(&self, src: &GpuBuffer, src_offset: u64, dst: &GpuBuffer, dst_offset: u64, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.log(|| {
            super::capture::Cmd::Copy(super::capture::CopyCmd {
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
        let mut rec = lock(&self.recorder);
        rec.copy_raw(self, src.raw(), src_offset, dst.raw(), dst_offset, bytes);
        rec.pending += 1;
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
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dygraph-staging"),
            size: bytes.div_ceil(4) * 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Starts reading `srcs` (buffer, bytes) back into `staging`, packed in order: records
    /// the copies, submits, and asks for the mapping without waiting. `PendingRead::poll`
    /// says when the bytes are on the host. Used where the host has other work meanwhile
    /// (a data-parallel bucket's gradients while backward goes on).
    #[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
    pub fn start_read(&self, srcs: &[(&GpuBuffer, u64)], staging: wgpu::Buffer) -> Result<PendingRead> {
        self.taint_capture("an op read data back to the host");
        let mut at = 0u64;
        {
            let mut rec = lock(&self.recorder);
            rec.pass = None;
            let enc = rec.encoder(self);
            for &(buf, bytes) in srcs {
                let padded = bytes.div_ceil(4) * 4;
                enc.copy_buffer_to_buffer(buf.raw(), 0, &staging, at, padded);
                at += padded;
            }
            rec.flush(self)?;
        }
        let done: Arc<std::sync::Mutex<Option<std::result::Result<(), String>>>> =
            Arc::new(std::sync::Mutex::new(None));
        let flag = done.clone();
        staging.map_async(wgpu::MapMode::Read, ..at.max(4), move |r| {
            *lock(&flag) = Some(r.map_err(|e| e.to_string()));
        });
        Ok(PendingRead { staging, bytes: at, done })
    }

    /// Drives `pending` on: with `wait`, until it is mapped.
    #[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
    pub fn poll_read(&self, pending: &PendingRead, wait: bool) -> Result<bool> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let how = if wait { wgpu::PollType::wait_indefinitely() } else { wgpu::PollType::Poll };
            self.device.poll(how).map_err(|e| Error::Gpu { op: "readback", msg: e.to_string() })?;
        }
        let _ = wait;
        match lock(&pending.done).as_ref() {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(e)) => Err(Error::Gpu { op: "readback", msg: e.clone() }),
        }
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
            self.taint_capture("an op read data back to the host");
        }
        let flag = self.take_index_flag();
        let mut parts: Vec<(&wgpu::Buffer, u64)> = srcs.to_vec();
        if let Some(f) = &flag {
            parts.push((f, super::error_flag::FLAG_BYTES));
        }
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        let read = self.read_parts(op, &parts, flag.as_ref()).await;
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

    /// Copies the first bytes of each of `parts` into one staging buffer (clearing `flag`, the
    /// last part when present, in the same submission), maps it and returns each part's bytes.
    async fn read_parts(
        &self,
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
        let reused = if size <= SMALL_READBACK { lock(&self.small_staging).take() } else { None };
        let staging = reused.unwrap_or_else(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dygraph-readback"),
                size: if size <= SMALL_READBACK { SMALL_READBACK } else { size },
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        {
            let mut rec = lock(&self.recorder);
            rec.pass = None;
            let enc = rec.encoder(self);
            for (&(buf, bytes), &o) in parts.iter().zip(&offsets) {
                enc.copy_buffer_to_buffer(buf, 0, &staging, o, bytes.div_ceil(4) * 4);
            }
            if let Some(f) = flag {
                enc.clear_buffer(f, 0, None);
            }
            rec.flush(self)?;
        }
        let (tx, rx) = futures_intrusive::channel::shared::oneshot_channel();
        staging.map_async(wgpu::MapMode::Read, ..size, move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Gpu { op, msg: e.to_string() })?;
        let mapped = rx.receive().await;
        self.check(op)?;
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
            *lock(&self.small_staging) = Some(staging);
        }
        Ok(out)
    }
}

/// A readback started by `GpuContext::start_read`.
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) struct PendingRead {
    staging: wgpu::Buffer,
    bytes: u64,
    done: Arc<std::sync::Mutex<Option<std::result::Result<(), String>>>>,
}

#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
impl PendingRead {
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
