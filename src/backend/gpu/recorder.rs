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

use super::buffer::GpuBuffer;
use super::device::Device;
use super::pipeline::{Access, Pipeline};
use super::profile::{KernelLabel, Profiling};
use super::shader::COPY_WORDS;
use super::{MAX_PENDING, WORKGROUP};
use crate::{Error, Result};

/// Bytes of parameters and small uploads per batch.
const ARENA_BYTES: u64 = 1 << 21;
/// Uploads up to this size travel through the arena; larger ones flush and write directly.
/// Copies up to this size run as a kernel.
pub(super) const SMALL_UPLOAD: usize = 1 << 18;
/// The window of the arena a dispatch's params binding covers (at a dynamic offset): the
/// longest params vector any kernel takes, with room to spare (128 words).
pub(crate) const PARAMS_WINDOW: usize = 512;
/// The params window in 32-bit words.
pub(crate) const PARAMS_WORDS: usize = PARAMS_WINDOW / 4;
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
    pub fn unused(dev: &Device) -> Bind<'_> {
        Bind { buffer: &dev.unused, id: UNUSED_BUFFER_ID, access: Access::Read }
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

    fn encoder(&mut self, dev: &Device) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| dev.device.create_command_encoder(&Default::default()))
    }

    /// Reserves `len` bytes of arena at `align`, flushing first if the arena is full.
    fn reserve(&mut self, dev: &Device, len: usize, align: usize) -> Result<usize> {
        let start = self.arena.len().next_multiple_of(align);
        if (start + len) as u64 > ARENA_BYTES || self.pending >= MAX_PENDING {
            self.flush(dev)?;
            return Ok(0);
        }
        Ok(start)
    }

    /// The open compute pass (opened on the pending encoder when there is none).
    pub(super) fn pass(&mut self, dev: &Device) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            let pass = self.encoder(dev).begin_compute_pass(&Default::default()).forget_lifetime();
            self.pass = Some(pass);
        }
        self.pass.as_mut().expect("compute pass opened above")
    }

    /// The compute pass the next dispatch, of `label`'s kernel, goes into: the open one, or
    /// while a profiler is on a new pass whose start and end are timestamped.
    pub(super) fn dispatch_pass(&mut self, dev: &Device, label: KernelLabel) -> &mut wgpu::ComputePass<'static> {
        if let Some(p) = self.profiling.as_mut() {
            self.pass = None;
            let encoder = self.encoder.get_or_insert_with(|| dev.device.create_command_encoder(&Default::default()));
            self.pass = Some(p.begin(encoder, label));
        }
        self.pass(dev)
    }

    /// The bind group of `binds` then the params window for `pipeline`, cached: a training
    /// step binds the same pooled buffers to the same pipelines every iteration.
    fn bind_group(&mut self, dev: &Device, pipeline: &Arc<Pipeline>, binds: &[Bind<'_>]) -> wgpu::BindGroup {
        let cache_key = (Arc::as_ptr(pipeline) as usize, binds.iter().map(|b| b.id).collect::<Vec<u64>>());
        if let Some(g) = self.bind_groups.get(&cache_key) {
            return g.clone();
        }
        let whole: Vec<(&wgpu::Buffer, u64, Option<u64>)> = binds.iter().map(|b| (b.buffer, 0, None)).collect();
        let g = pipeline.bind_group(&dev.device, &whole, &self.arena_buf, PARAMS_WINDOW as u64);
        if self.bind_groups.len() >= MAX_BIND_GROUPS {
            self.bind_groups.clear();
        }
        self.bind_groups.insert(cache_key, g.clone());
        g
    }

    /// Records one dispatch into the open compute pass, its params at `offset` of the arena.
    fn record(
        &mut self,
        dev: &Device,
        label: KernelLabel,
        pipeline: &Pipeline,
        bind_group: &wgpu::BindGroup,
        offset: usize,
        groups: [u32; 3],
    ) {
        let pass = self.dispatch_pass(dev, label);
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, bind_group, &[offset as u32]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        self.pending += 1;
        dev.dispatches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Records one dispatch of `pipeline` (`label`'s kernel) over `groups` workgroups,
    /// binding `binds` then a window of the arena holding `params`.
    pub(super) fn dispatch(
        &mut self,
        dev: &Device,
        label: KernelLabel,
        pipeline: &Arc<Pipeline>,
        binds: &[Bind<'_>],
        params: &[u8],
        groups: [u32; 3],
    ) -> Result<()> {
        let align = self.align;
        let offset = self.reserve(dev, PARAMS_WINDOW, align)?;
        self.arena.resize(offset, 0);
        self.arena.extend_from_slice(params);
        let bind_group = self.bind_group(dev, pipeline, binds);
        self.record(dev, label, pipeline, &bind_group, offset, groups);
        Ok(())
    }

    /// Records writing `bytes` (at most `SMALL_UPLOAD`) at the start of `buf`: the bytes go
    /// into the arena and `copy` (the word-copy kernel's pipeline) moves them, keeping the
    /// compute pass open.
    pub(super) fn write_small(
        &mut self,
        dev: &Device,
        copy: &Arc<Pipeline>,
        buf: &GpuBuffer,
        bytes: &[u8],
    ) -> Result<()> {
        let padded = bytes.len().next_multiple_of(4);
        let align = self.align;
        // One reservation for the parameters and the words, so that no flush can fall
        // between them.
        let offset = self.reserve(dev, PARAMS_WINDOW + padded, align)?;
        let words = (padded / 4) as u32;
        let params = [words, ((offset + PARAMS_WINDOW) / 4) as u32, 0];
        self.arena.resize(offset, 0);
        self.arena.extend_from_slice(bytemuck::cast_slice(&params));
        self.arena.resize(offset + PARAMS_WINDOW, 0);
        self.arena.extend_from_slice(bytes);
        self.arena.resize(offset + PARAMS_WINDOW + padded, 0);
        let arena = self.arena_buf.clone();
        let binds = [Bind { buffer: &arena, id: ARENA_BUFFER_ID, access: Access::Read }, Bind::write(buf)];
        let group = self.bind_group(dev, copy, &binds);
        let groups = grid(dev, (words as u64).div_ceil(WORKGROUP as u64))?;
        let label = KernelLabel { file: COPY_WORDS.file, entry: "main", key: 0 };
        self.record(dev, label, copy, &group, offset, groups);
        Ok(())
    }

    /// Writes `bytes` at the start of `buf` with a queue write, after submitting what is
    /// pending: the pool may hand out a buffer still read by pending commands, and a queue
    /// write is ordered after every earlier submission.
    pub(super) fn write_large(&mut self, dev: &Device, buf: &GpuBuffer, bytes: &[u8]) -> Result<()> {
        self.flush(dev)?;
        let padded = bytes.len().next_multiple_of(4);
        if padded == bytes.len() {
            dev.queue.write_buffer(buf.raw(), 0, bytes);
        } else {
            let mut v = bytes.to_vec();
            v.resize(padded, 0);
            dev.queue.write_buffer(buf.raw(), 0, &v);
        }
        Ok(())
    }

    /// Records a copy command (closing the compute pass), counted as pending work.
    pub(super) fn copy_command(
        &mut self,
        dev: &Device,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        bytes: u64,
    ) {
        self.pass = None;
        self.encoder(dev).copy_buffer_to_buffer(src, src_offset, dst, dst_offset, bytes);
        self.pending += 1;
    }

    /// The pending encoder with the compute pass closed, for readback copies.
    pub(super) fn copy_encoder(&mut self, dev: &Device) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        self.encoder(dev)
    }

    /// Submits the pending batch.
    pub fn flush(&mut self, dev: &Device) -> Result<()> {
        self.pass = None;
        let mut timed = false;
        if let Some(mut enc) = self.encoder.take() {
            timed = self.profiling.as_ref().is_some_and(|p| p.resolve(&mut enc));
            if !self.arena.is_empty() {
                self.arena.resize(self.arena.len().next_multiple_of(4), 0);
                dev.queue.write_buffer(&self.arena_buf, 0, &self.arena);
            }
            dev.queue.submit([enc.finish()]);
            self.submits += 1;
        }
        self.arena.clear();
        self.pending = 0;
        let checked = dev.check("submit");
        if timed && let Some(p) = self.profiling.as_mut() {
            // A batch that failed validation has no timestamps to read; a readback that
            // failed leaves the profiler unusable, so timing stops there.
            let collected = if checked.is_ok() {
                p.collect(&dev.device)
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
pub(crate) fn grid(dev: &Device, groups: u64) -> Result<[u32; 3]> {
    let max = dev.limits.max_compute_workgroups_per_dimension.max(1) as u64;
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
