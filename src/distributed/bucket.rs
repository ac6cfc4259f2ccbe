//! A gradient bucket of `DataParallel`: its host buffers, its GPU staging buffer, and the
//! steps of one all-reduce (fill or read back, launch, test), plus the bucket plan.

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::raw::AsRaw;

use super::env::State;
use crate::backend::cpu::CpuData;
use crate::backend::gpu::{GpuContext, PendingRead};
use crate::tensor::Storage;
use crate::{DType, Place, Result, Tensor};

/// An MPI request handle. Requests are started, tested and waited under the process
/// group's mutex only.
pub(super) struct Request(mpi::ffi::MPI_Request);

// SAFETY: see `Request`.
unsafe impl Send for Request {}

pub(super) enum Phase {
    /// Waiting for gradients.
    Waiting,
    /// GPU gradients on their way to the host.
    Reading(PendingRead, Arc<GpuContext>),
    /// The host buffer holds this rank's gradients; waiting for its turn to launch.
    Filled,
    /// The all-reduce is in flight.
    InFlight(Request),
    /// `recv` holds the sum over ranks.
    Reduced,
}

pub(super) enum Flat {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Default for Flat {
    fn default() -> Self {
        Flat::F32(Vec::new())
    }
}

impl Flat {
    pub(super) fn zeros(dtype: DType, n: usize) -> Flat {
        if dtype == DType::Float64 { Flat::F64(vec![0.0; n]) } else { Flat::F32(vec![0.0; n]) }
    }

    pub(super) fn raw(&self) -> (*const c_void, mpi::ffi::MPI_Datatype) {
        match self {
            Flat::F32(v) => (v.as_ptr().cast(), f32::equivalent_datatype().as_raw()),
            Flat::F64(v) => (v.as_ptr().cast(), f64::equivalent_datatype().as_raw()),
        }
    }

    pub(super) fn raw_mut(&mut self) -> *mut c_void {
        match self {
            Flat::F32(v) => v.as_mut_ptr().cast(),
            Flat::F64(v) => v.as_mut_ptr().cast(),
        }
    }

    pub(super) fn set(&mut self, at: usize, v: f64) {
        match self {
            Flat::F32(x) => x[at] = v as f32,
            Flat::F64(x) => x[at] = v,
        }
    }

    pub(super) fn get(&self, at: usize) -> f64 {
        match self {
            Flat::F32(x) => f64::from(x[at]),
            Flat::F64(x) => x[at],
        }
    }

    pub(super) fn zero(&mut self, at: usize, n: usize) {
        match self {
            Flat::F32(v) => v[at..at + n].fill(0.0),
            Flat::F64(v) => v[at..at + n].fill(0.0),
        }
    }

    pub(super) fn fill_from(&mut self, at: usize, data: &CpuData) -> bool {
        match (self, data) {
            (Flat::F32(v), CpuData::F32(d)) => v[at..at + d.len()].copy_from_slice(d),
            (Flat::F64(v), CpuData::F64(d)) => v[at..at + d.len()].copy_from_slice(d),
            _ => return false,
        }
        true
    }

    pub(super) fn fill_from_bytes(&mut self, at: usize, bytes: &[u8]) {
        if let Flat::F32(v) = self {
            for (dst, src) in v[at..].iter_mut().zip(bytes.chunks_exact(4)) {
                *dst = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
            }
        }
    }
}

pub(super) struct Bucket {
    pub(super) params: Vec<Tensor>,
    pub(super) names: Vec<String>,
    pub(super) offsets: Vec<usize>,
    pub(super) numel: usize,
    pub(super) dtype: DType,
    pub(super) place: Place,
    pub(super) ready: Vec<bool>,
    pub(super) pending: usize,
    /// The host buffers: the gradients, then (in the last bucket only) one more element,
    /// this rank's count of parameters that got no gradient, so that every rank learns
    /// whether any rank missed one without an extra collective.
    pub(super) send: Flat,
    pub(super) recv: Flat,
    pub(super) has_flag: bool,
    pub(super) staging: Option<wgpu::Buffer>,
    /// `(offset, numel)` of the gradients the GPU readback in flight copies, in order.
    pub(super) gpu_parts: Vec<(usize, usize)>,
    pub(super) phase: Phase,
    pub(super) launched: Option<Instant>,
    pub(super) completed: Option<Instant>,
}

impl Bucket {
    pub(super) fn bytes(&self) -> usize {
        self.numel * self.dtype.size_of()
    }

    /// Copies this rank's gradients into the host buffer (zeros for parameters without
    /// one), or starts the GPU readback that will.
    pub(super) fn start_fill(&mut self, s: &State) -> Result<()> {
        let mut gpu: Vec<(Arc<crate::backend::gpu::GpuBuffer>, u64)> = Vec::new();
        self.gpu_parts.clear();
        for i in 0..self.params.len() {
            let (at, n) = (self.offsets[i], self.params[i].numel());
            // A parameter whose hook did not run this pass still sends the gradient it holds
            // (accumulated under `no_sync`), as PyTorch's reducer does; zeros when it has none.
            let Some(g) = self.params[i].grad().filter(|_| n > 0) else {
                self.send.zero(at, n);
                continue;
            };
            if g.dtype() != self.dtype || g.numel() != n || g.place() != self.place {
                return Err(s.error(
                    "DataParallel",
                    format!(
                        "the gradient of {} is {:?} {} on {}, the parameter {:?} {} on {}",
                        self.names[i],
                        g.shape(),
                        g.dtype(),
                        g.place(),
                        self.params[i].shape(),
                        self.dtype,
                        self.place
                    ),
                ));
            }
            match g.storage() {
                Storage::Cpu(d) => {
                    self.send.fill_from(at, &d.read().unwrap_or_else(|e| e.into_inner()));
                }
                Storage::Gpu(b) => {
                    gpu.push((b.clone(), (n * 4) as u64));
                    self.gpu_parts.push((at, n));
                }
                _ => return Err(s.error("DataParallel", format!("the gradient of {} has no data", self.names[i]))),
            }
        }
        if gpu.is_empty() {
            self.phase = Phase::Filled;
            return Ok(());
        }
        let ctx = crate::backend::gpu::context(gpu[0].0.device)?;
        let staging = match self.staging.take() {
            Some(b) => b,
            None => ctx.staging_buffer(self.bytes().max(4) as u64),
        };
        let srcs: Vec<(&crate::backend::gpu::GpuBuffer, u64)> = gpu.iter().map(|(b, n)| (&**b, *n)).collect();
        let pending = ctx.start_read(&srcs, staging)?;
        self.phase = Phase::Reading(pending, ctx);
        Ok(())
    }

    /// Moves a finished GPU read into the host buffer. `wait` blocks until it is done.
    pub(super) fn drive_read(&mut self, wait: bool) -> Result<()> {
        let Phase::Reading(pending, ctx) = &self.phase else { return Ok(()) };
        if !ctx.poll_read(pending, wait)? {
            return Ok(());
        }
        let Phase::Reading(pending, _) = std::mem::replace(&mut self.phase, Phase::Filled) else {
            return Ok(());
        };
        let (send, parts) = (&mut self.send, &self.gpu_parts);
        let staging = pending.finish(|bytes| {
            let mut from = 0;
            for &(at, n) in parts {
                send.fill_from_bytes(at, &bytes[from..from + n * 4]);
                from += (n * 4).div_ceil(4) * 4;
            }
        })?;
        self.staging = Some(staging);
        Ok(())
    }

    /// Starts the all-reduce on `comm`; the last bucket carries `missing`.
    pub(super) fn launch(&mut self, s: &State, comm: mpi::ffi::MPI_Comm, missing: usize) {
        if self.has_flag {
            self.send.set(self.numel, missing as f64);
        }
        let (send, datatype) = self.send.raw();
        let recv = self.recv.raw_mut();
        let count = (self.numel + FLAG_LEN * usize::from(self.has_flag)) as c_int;
        let mut request: mpi::ffi::MPI_Request = unsafe { mpi::ffi::RSMPI_REQUEST_NULL };
        s.quick(|_| {
            // SAFETY: `send` and `recv` belong to this bucket, which is neither touched nor
            // dropped until the request completes (`Reducer::wait_all`, and `Drop`).
            unsafe {
                mpi::ffi::MPI_Iallreduce(
                    send,
                    recv,
                    count,
                    datatype,
                    SystemOperation::sum().as_raw(),
                    comm,
                    &mut request,
                );
            }
        });
        self.launched = Some(Instant::now());
        self.phase = Phase::InFlight(Request(request));
    }

    /// Tests (or with `wait`, waits for) the request in flight. A wait is a loop of tests
    /// that releases the process group's lock between them, so that another thread's MPI
    /// calls (which a peer rank may be waiting for) are not shut out.
    pub(super) fn drive_request(&mut self, s: &State, wait: bool) {
        let Phase::InFlight(req) = &mut self.phase else { return };
        let done = test_request(s, &mut req.0, wait);
        if done {
            self.completed = Some(Instant::now());
            self.phase = Phase::Reduced;
        }
    }
}

/// `MPI_Test`s `request` (under the process group's lock) once, or with `wait` until it
/// completes; true when it has.
pub(super) fn test_request(s: &State, request: &mut mpi::ffi::MPI_Request, wait: bool) -> bool {
    loop {
        let done = s.quick(|_| {
            let mut flag: c_int = 0;
            // SAFETY: a live request started by `MPI_Iallreduce`.
            unsafe {
                mpi::ffi::MPI_Test(request, &mut flag, mpi::ffi::RSMPI_STATUS_IGNORE);
            }
            flag != 0
        });
        if done || !wait {
            return done;
        }
        std::thread::yield_now();
    }
}

/// Buckets of at most `cap` bytes (`first_cap` for the first), filled in reverse order of
/// `params`, a new bucket wherever the dtype or place changes. A parameter larger than the
/// cap gets a bucket of its own.
pub(crate) fn plan_buckets(params: &[(usize, DType, Place)], cap: usize, first_cap: usize) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0usize;
    for i in (0..params.len()).rev() {
        let (b, dtype, place) = params[i];
        let limit = if buckets.len() == 1 { first_cap } else { cap };
        let fits = buckets.last().is_some_and(|last| {
            let (_, d0, p0) = params[last[0]];
            d0 == dtype && p0 == place && bytes + b <= limit
        });
        if fits {
            buckets.last_mut().expect("checked").push(i);
            bytes += b;
        } else {
            buckets.push(vec![i]);
            bytes = b;
        }
    }
    buckets
}

/// Elements the last bucket carries after the gradients (see `Bucket::send`).
pub(super) const FLAG_LEN: usize = 1;

/// `recv[at..at + n] / world` as a new gradient of `p`'s shape on `place`.
pub(super) fn averaged(recv: &Flat, at: usize, n: usize, world: usize, p: &Tensor, place: Place) -> Result<Tensor> {
    let shape = p.shape_ref().clone();
    match recv {
        Flat::F64(v) => {
            let data: Vec<f64> = v[at..at + n].iter().map(|x| x / world as f64).collect();
            Ok(Tensor::from_cpu(CpuData::F64(data), shape))
        }
        Flat::F32(v) => {
            let data: Vec<f32> = v[at..at + n].iter().map(|x| x / world as f32).collect();
            match place {
                Place::Cpu => Ok(Tensor::from_cpu(CpuData::F32(data), shape)),
                Place::Gpu(i) => {
                    let ctx = crate::backend::gpu::context(i)?;
                    let buf = ctx.upload("DataParallel", bytemuck::cast_slice(&data))?;
                    Ok(Tensor::from_gpu(buf, shape, DType::Float32))
                }
            }
        }
    }
}
