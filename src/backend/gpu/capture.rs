//! Command capture for execution plans (CUDA-graph style, within what wgpu allows: a
//! command buffer cannot be resubmitted, so a plan re-encodes a prepared list).
//!
//! While a capture is open, the capturing thread's dispatches, copies and uploads are
//! logged (pipeline, bound buffers, parameter words, workgroups) as they are recorded, and
//! every buffer that thread allocates comes from, and returns to, a pool private to the
//! plan. Nothing outside the plan can then be handed a buffer its commands write, and the
//! reuse the pool made during the captured run is the plan's liveness-based assignment.
//! The log is a leaf: `tape.rs` turns it into what a plan replays.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use super::lock;
use super::pipeline::Pipeline;
use super::pool::PrivatePool;
use super::shader::Kernel;

/// One logged command.
/// Buffers go by (id, buffer); a dispatch's also say whether the kernel may write them.
pub(crate) enum Cmd {
    Dispatch {
        kernel: &'static Kernel,
        key: u32,
        entry: &'static str,
        pipeline: Arc<Pipeline>,
        binds: Vec<(u64, wgpu::Buffer, bool)>,
        params: Vec<u8>,
        groups: [u32; 3],
    },
    Copy(CopyCmd),
    /// An upload into the start of `dst` (a multiple of 4 bytes).
    Write {
        dst: (u64, wgpu::Buffer),
        bytes: Vec<u8>,
    },
}

/// A buffer-to-buffer copy; buffers go by (id, buffer).
pub(crate) struct CopyCmd {
    pub src: (u64, wgpu::Buffer),
    pub src_offset: u64,
    pub dst: (u64, wgpu::Buffer),
    pub dst_offset: u64,
    pub bytes: u64,
}

/// The open capture of one device (at most one at a time).
struct CaptureState {
    thread: ThreadId,
    pool: Arc<Mutex<PrivatePool>>,
    logging: bool,
    cmds: Vec<Cmd>,
    /// Why the captured run cannot be replayed (it read data back to the host).
    tainted: Option<String>,
}

/// A device's capture log: the open capture, if any, and a flag read without locking.
#[derive(Default)]
pub(crate) struct CaptureLog {
    state: Mutex<Option<CaptureState>>,
    capturing: AtomicBool,
}

impl CaptureLog {
    /// Opens a capture on this thread, allocating from `pool`; false when another one is open.
    pub fn begin(&self, pool: Arc<Mutex<PrivatePool>>) -> bool {
        let mut c = lock(&self.state);
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
    pub fn logging(&self, on: bool) {
        if let Some(c) = lock(&self.state).as_mut() {
            c.logging = on;
        }
    }

    /// The commands logged since the last call.
    pub fn take(&self) -> Vec<Cmd> {
        lock(&self.state).as_mut().map(|c| std::mem::take(&mut c.cmds)).unwrap_or_default()
    }

    /// Closes the capture; `Err` names why it cannot be replayed.
    pub fn end(&self) -> std::result::Result<(), String> {
        self.capturing.store(false, Ordering::Release);
        match lock(&self.state).take() {
            Some(CaptureState { tainted: Some(why), .. }) => Err(why),
            _ => Ok(()),
        }
    }

    /// The private pool to allocate from, when the calling thread is capturing.
    pub(super) fn pool(&self) -> Option<Arc<Mutex<PrivatePool>>> {
        if !self.capturing.load(Ordering::Acquire) {
            return None;
        }
        let c = lock(&self.state);
        c.as_ref().filter(|c| c.thread == std::thread::current().id()).map(|c| c.pool.clone())
    }

    /// Logs a command when the calling thread is capturing with logging on.
    pub(super) fn log(&self, cmd: impl FnOnce() -> Cmd) {
        if !self.capturing.load(Ordering::Acquire) {
            return;
        }
        let mut c = lock(&self.state);
        if let Some(c) = c.as_mut().filter(|c| c.logging && c.thread == std::thread::current().id()) {
            c.cmds.push(cmd());
        }
    }

    /// Marks the capture unreplayable when the capturing thread reads data back.
    pub(super) fn taint(&self, why: &str) {
        if !self.capturing.load(Ordering::Acquire) {
            return;
        }
        let mut c = lock(&self.state);
        if let Some(c) = c.as_mut().filter(|c| c.logging && c.thread == std::thread::current().id()) {
            c.tainted.get_or_insert_with(|| why.to_string());
        }
    }
}
