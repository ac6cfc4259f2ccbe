//! Command capture for execution plans (CUDA-graph style, within what wgpu allows: a
//! command buffer cannot be resubmitted, so a plan re-encodes a prepared list).
//!
//! While a capture is open, the capturing thread's dispatches, copies and uploads are
//! logged (pipeline, bound buffers, parameter words, workgroups) as they are recorded, and
//! every buffer that thread allocates comes from, and returns to, a pool private to the
//! plan. Nothing outside the plan can then be handed a buffer its commands write, and the
//! reuse the pool made during the captured run is the plan's liveness-based assignment.
//! `prepare` turns the log into a [`Tape`]: one data buffer holding every parameter window
//! and upload, bind groups built once. `replay` encodes a tape into the recorder's pending
//! encoder, so a run is one submission.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use super::context::{GpuContext, Pipeline, lock};
use super::recorder::{FLAG_BUFFER_ID, MAX_PENDING, PARAMS_WINDOW};
use crate::{Error, Result};

/// One logged command.
pub(crate) enum Cmd {
    Dispatch { pipeline: Arc<Pipeline>, binds: Vec<(u64, wgpu::Buffer)>, params: Vec<u8>, groups: [u32; 3] },
    Copy { src: wgpu::Buffer, src_offset: u64, dst: wgpu::Buffer, dst_offset: u64, bytes: u64 },
    /// An upload into the start of `dst` (a multiple of 4 bytes).
    Write { dst: wgpu::Buffer, bytes: Vec<u8> },
}

/// Buffers owned by one plan: what its capture allocated, free or held by its tensors.
#[derive(Default)]
pub(crate) struct PrivatePool {
    free: HashMap<u64, Vec<(u64, wgpu::Buffer)>>,
    /// Size-class bytes of every buffer the plan owns.
    pub bytes: u64,
    /// The plan is gone: buffers coming back go to the device's shared pool.
    released: bool,
}

impl PrivatePool {
    pub fn take(&mut self, class: u64) -> Option<(u64, wgpu::Buffer)> {
        self.free.get_mut(&class)?.pop()
    }

    /// Keeps a buffer for the plan; hands it back (the caller gives it to the shared pool) once the
    /// plan is released.
    pub fn give_back(&mut self, class: u64, id: u64, buffer: wgpu::Buffer) -> Option<wgpu::Buffer> {
        if self.released {
            self.bytes -= class;
            return Some(buffer);
        }
        self.free.entry(class).or_default().push((id, buffer));
        None
    }

    /// Hands the free buffers to the device's shared pool, and every buffer that comes back
    /// later (the plan is going away).
    pub fn release(&mut self, ctx: &GpuContext) {
        self.released = true;
        let mut pool = lock(&ctx.pool);
        for (class, bufs) in self.free.drain() {
            for (id, b) in bufs {
                pool.give_back(class, id, b);
                self.bytes -= class;
            }
        }
    }
}

/// The open capture of one device (at most one at a time).
pub(crate) struct CaptureState {
    thread: ThreadId,
    pub pool: Arc<Mutex<PrivatePool>>,
    logging: bool,
    cmds: Vec<Cmd>,
    /// Why the captured run cannot be replayed (it read data back to the host).
    tainted: Option<String>,
}

/// A prepared command list.
pub(crate) struct Tape {
    cmds: Vec<Prepared>,
    uses_index_flag: bool,
    /// Kernel dispatches in the tape.
    pub dispatches: usize,
    /// Keeps the parameter and upload buffer alive with the bind groups that use it.
    _data: Option<wgpu::Buffer>,
}

enum Prepared {
    Dispatch { pipeline: Arc<Pipeline>, bind_group: wgpu::BindGroup, offset: u32, groups: [u32; 3] },
    Copy { src: wgpu::Buffer, src_offset: u64, dst: wgpu::Buffer, dst_offset: u64, bytes: u64 },
}

impl GpuContext {
    /// Opens a capture on this thread, allocating from `pool`; false when another one is open.
    pub fn begin_capture(&self, pool: Arc<Mutex<PrivatePool>>) -> bool {
        let mut c = lock(&self.capture);
        if c.is_some() {
            return false;
        }
        *c = Some(CaptureState {
            thread: std::thread::current().id(),
            pool,
            logging: false,
            cmds: Vec::new(),
            tainted: None,
        });
        self.capturing.store(true, Ordering::Release);
        true
    }

    /// Starts or stops logging the capturing thread's commands (allocation stays private).
    pub fn capture_logging(&self, on: bool) {
        if let Some(c) = lock(&self.capture).as_mut() {
            c.logging = on;
        }
    }

    /// The commands logged since the last call.
    pub fn take_captured(&self) -> Vec<Cmd> {
        lock(&self.capture).as_mut().map(|c| std::mem::take(&mut c.cmds)).unwrap_or_default()
    }

    /// Closes the capture; `Err` names why it cannot be replayed.
    pub fn end_capture(&self) -> std::result::Result<(), String> {
        self.capturing.store(false, Ordering::Release);
        match lock(&self.capture).take() {
            Some(CaptureState { tainted: Some(why), .. }) => Err(why),
            _ => Ok(()),
        }
    }

    /// The private pool to allocate from, when the calling thread is capturing.
    pub(super) fn capture_pool(&self) -> Option<Arc<Mutex<PrivatePool>>> {
        if !self.capturing.load(Ordering::Acquire) {
            return None;
        }
        let c = lock(&self.capture);
        c.as_ref().filter(|c| c.thread == std::thread::current().id()).map(|c| c.pool.clone())
    }

    /// Logs a command when the calling thread is capturing with logging on.
    pub(super) fn log(&self, cmd: impl FnOnce() -> Cmd) {
        if !self.capturing.load(Ordering::Acquire) {
            return;
        }
        let mut c = lock(&self.capture);
        if let Some(c) = c.as_mut().filter(|c| c.logging && c.thread == std::thread::current().id()) {
            c.cmds.push(cmd());
        }
    }

    /// Marks the capture unreplayable when the capturing thread reads data back.
    pub(super) fn taint_capture(&self, why: &str) {
        if !self.capturing.load(Ordering::Acquire) {
            return;
        }
        let mut c = lock(&self.capture);
        if let Some(c) = c.as_mut().filter(|c| c.logging && c.thread == std::thread::current().id()) {
            c.tainted.get_or_insert_with(|| why.to_string());
        }
    }

    /// Prepares logged segments for replay: every parameter window and upload goes into
    /// one buffer written once; bind groups are created once (shared where a segment binds
    /// the same buffers to the same pipeline).
    pub fn prepare(&self, segments: Vec<Vec<Cmd>>) -> Result<Vec<Tape>> {
        let align = (self.limits.min_storage_buffer_offset_alignment as usize).max(4);
        let mut data: Vec<u8> = Vec::new();
        let mut at = Vec::new();
        for cmd in segments.iter().flatten() {
            match cmd {
                Cmd::Dispatch { params, .. } => {
                    let o = data.len().next_multiple_of(align);
                    data.resize(o + PARAMS_WINDOW, 0);
                    data[o..o + params.len()].copy_from_slice(params);
                    at.push(o);
                }
                Cmd::Write { bytes, .. } => {
                    let o = data.len().next_multiple_of(4);
                    data.resize(o, 0);
                    data.extend_from_slice(bytes);
                    at.push(o);
                }
                Cmd::Copy { .. } => at.push(0),
            }
        }
        if data.len() as u64 > self.limits.max_buffer_size {
            return Err(Error::Gpu {
                op: "Executor plan",
                msg: format!("{} bytes of kernel parameters and constants exceed max_buffer_size", data.len()),
            });
        }
        let buffer = (!data.is_empty()).then(|| {
            let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dygraph-plan-data"),
                size: data.len().next_multiple_of(4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            data.resize(data.len().next_multiple_of(4), 0);
            self.queue.write_buffer(&b, 0, &data);
            b
        });
        let mut groups_cache: HashMap<(usize, Vec<u64>), wgpu::BindGroup> = HashMap::new();
        let mut offsets = at.into_iter();
        let mut tapes = Vec::with_capacity(segments.len());
        for seg in segments {
            let mut tape = Tape { cmds: Vec::with_capacity(seg.len()), uses_index_flag: false, dispatches: 0, _data: buffer.clone() };
            for cmd in seg {
                let o = offsets.next().unwrap_or(0);
                tape.cmds.push(match cmd {
                    Cmd::Dispatch { pipeline, binds, groups, .. } => {
                        tape.dispatches += 1;
                        tape.uses_index_flag |= binds.iter().any(|(id, _)| *id == FLAG_BUFFER_ID);
                        let data = buffer.as_ref().expect("a dispatch put its parameters into the data buffer");
                        let key = (Arc::as_ptr(&pipeline) as usize, binds.iter().map(|(id, _)| *id).collect());
                        let bind_group = groups_cache
                            .entry(key)
                            .or_insert_with(|| self.bind_group(&pipeline, &binds, data))
                            .clone();
                        Prepared::Dispatch { pipeline, bind_group, offset: o as u32, groups }
                    }
                    Cmd::Copy { src, src_offset, dst, dst_offset, bytes } => {
                        Prepared::Copy { src, src_offset, dst, dst_offset, bytes }
                    }
                    Cmd::Write { dst, bytes } => Prepared::Copy {
                        src: buffer.clone().expect("an upload put its bytes into the data buffer"),
                        src_offset: o as u64,
                        dst,
                        dst_offset: 0,
                        bytes: bytes.len() as u64,
                    },
                });
            }
            tapes.push(tape);
        }
        self.check("Executor plan")?;
        Ok(tapes)
    }

    fn bind_group(&self, pipeline: &Pipeline, binds: &[(u64, wgpu::Buffer)], params: &wgpu::Buffer) -> wgpu::BindGroup {
        let mut entries: Vec<wgpu::BindGroupEntry> = binds
            .iter()
            .enumerate()
            .map(|(i, (_, b))| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: binds.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: params,
                offset: 0,
                size: wgpu::BufferSize::new(PARAMS_WINDOW as u64),
            }),
        });
        self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &pipeline.layout, entries: &entries })
    }

    /// Encodes `tape` into the pending batch (submitted with the next readback or sync).
    pub fn replay(&self, tape: &Tape) -> Result<()> {
        if tape.uses_index_flag {
            self.arm_index_flag();
        }
        let mut rec = lock(&self.recorder);
        for cmd in &tape.cmds {
            if rec.pending >= MAX_PENDING {
                rec.flush(self)?;
            }
            match cmd {
                Prepared::Dispatch { pipeline, bind_group, offset, groups } => {
                    let pass = rec.pass(self);
                    pass.set_pipeline(&pipeline.pipeline);
                    pass.set_bind_group(0, bind_group, &[*offset]);
                    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                }
                Prepared::Copy { src, src_offset, dst, dst_offset, bytes } => {
                    rec.copy_raw(self, src, *src_offset, dst, *dst_offset, *bytes);
                }
            }
            rec.pending += 1;
        }
        Ok(())
    }
}
