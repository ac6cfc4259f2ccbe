//! Kernel timing for `dygraph::profiler`. While a profiler is on, every dispatch (eager or
//! replayed from a plan) runs in a compute pass of its own whose start and end the device
//! timestamps (wgpu's `TIMESTAMP_QUERY`, one query pair per dispatch). Each submitted batch
//! resolves its pairs into a buffer and reads them back before the next batch is recorded,
//! and the durations add up per kernel: shader file, entry point and variant key.
//!
//! A pass per dispatch and a readback per batch slow the step down; the kernels' own times
//! are what the profiler reports, not the step's.

use std::collections::HashMap;

use super::MAX_PENDING;
use crate::{Error, Result};

/// Timestamps per batch: a pair per dispatch (a batch holds at most `MAX_PENDING`).
const QUERIES: u32 = 2 * MAX_PENDING;

/// Which kernel a dispatch ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelLabel {
    pub file: &'static str,
    pub entry: &'static str,
    pub key: u32,
}

/// Calls and device nanoseconds of one kernel.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KernelTotal {
    pub calls: u64,
    pub nanos: f64,
}

/// The state of an active profiler on one device.
pub(crate) struct Profiling {
    queries: wgpu::QuerySet,
    resolved: wgpu::Buffer,
    readback: wgpu::Buffer,
    /// The kernels of the batch being recorded, dispatch `i` timed by queries `2i`, `2i + 1`.
    batch: Vec<KernelLabel>,
    period_ns: f64,
    /// Totals by kernel, in the order kernels first ran.
    pub totals: Vec<(KernelLabel, KernelTotal)>,
    at: HashMap<KernelLabel, usize>,
}

impl Profiling {
    /// Timestamp queries on `device` (of the adapter named `adapter`); an error when the
    /// adapter cannot time passes.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, adapter: &str) -> Result<Profiling> {
        if cfg!(target_arch = "wasm32") {
            return Err(Error::Gpu {
                op: "profiler",
                msg: "kernel timing reads timestamps back synchronously, which the browser cannot".into(),
            });
        }
        if !device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Err(Error::Gpu {
                op: "profiler",
                msg: format!("{adapter} has no timestamp queries to time kernels with"),
            });
        }
        let bytes = 8 * QUERIES as u64;
        let buffer = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Ok(Profiling {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("dygraph-profiler"),
                ty: wgpu::QueryType::Timestamp,
                count: QUERIES,
            }),
            resolved: buffer(
                "dygraph-profiler-resolve",
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer("dygraph-profiler-readback", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            batch: Vec::new(),
            period_ns: queue.get_timestamp_period() as f64,
            totals: Vec::new(),
            at: HashMap::new(),
        })
    }

    /// Opens the timed compute pass of the next dispatch, which runs `label`. A batch holds
    /// at most `MAX_PENDING` dispatches (the recorder submits it then), so its pairs fit.
    pub fn begin(&mut self, encoder: &mut wgpu::CommandEncoder, label: KernelLabel) -> wgpu::ComputePass<'static> {
        let i = self.batch.len() as u32;
        self.batch.push(label);
        encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &self.queries,
                    beginning_of_pass_write_index: Some(2 * i),
                    end_of_pass_write_index: Some(2 * i + 1),
                }),
            })
            .forget_lifetime()
    }

    /// Records resolving the batch's timestamps into the readback buffer (before `finish`);
    /// false when the batch timed nothing.
    pub fn resolve(&self, encoder: &mut wgpu::CommandEncoder) -> bool {
        if self.batch.is_empty() {
            return false;
        }
        let n = 2 * self.batch.len() as u32;
        encoder.resolve_query_set(&self.queries, 0..n, &self.resolved, 0);
        encoder.copy_buffer_to_buffer(&self.resolved, 0, &self.readback, 0, 8 * n as u64);
        true
    }

    /// Forgets the batch's timestamps (its submission failed).
    pub fn drop_batch(&mut self) {
        self.batch.clear();
    }

    /// After the batch was submitted: waits for it, reads its timestamps and adds each
    /// dispatch's duration to its kernel.
    pub fn collect(&mut self, device: &wgpu::Device) -> Result<()> {
        // Taken first, so a failed readback leaves the next batch's query pairs from 0.
        let batch = std::mem::take(&mut self.batch);
        let n = 2 * batch.len() as u64;
        let (tx, rx) = std::sync::mpsc::channel();
        self.readback.map_async(wgpu::MapMode::Read, ..8 * n, move |r| {
            let _ = tx.send(r);
        });
        // `Profiling::new` refuses the browser, where the device cannot be waited on.
        #[cfg(not(target_arch = "wasm32"))]
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu { op: "profiler", msg: e.to_string() })?;
        #[cfg(target_arch = "wasm32")]
        let _ = device;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Error::Gpu { op: "profiler", msg: e.to_string() }),
            Err(_) => return Err(Error::DeviceLost("the profiler's readback was dropped".into())),
        }
        let ticks: Vec<u64> = {
            let view = self
                .readback
                .get_mapped_range(..8 * n)
                .map_err(|e| Error::Gpu { op: "profiler", msg: e.to_string() })?;
            bytemuck::pod_collect_to_vec(&view[..])
        };
        self.readback.unmap();
        for (label, pair) in batch.into_iter().zip(ticks.chunks_exact(2)) {
            let i = *self.at.entry(label).or_insert_with(|| {
                self.totals.push((label, KernelTotal::default()));
                self.totals.len() - 1
            });
            let t = &mut self.totals[i].1;
            t.calls += 1;
            t.nanos += pair[1].saturating_sub(pair[0]) as f64 * self.period_ns;
        }
        Ok(())
    }
}
