//! DataParallel's gradient reducer: parameters grouped into buckets (reverse registration
//! order, so the first bucket holds the gradients backward produces first), each bucket
//! all-reduced with a non-blocking `MPI_Iallreduce` as soon as all of its gradients are in,
//! while backward goes on.
//!
//! How it hooks into autograd: every parameter carries a post-accumulate hook
//! (`Tensor::register_post_accumulate_grad_hook`), which the engine runs once the
//! parameter's gradient for the pass is complete. The first hook of a pass queues the
//! `finalize` callback (`autograd::queue_callback`), which the engine runs after the last
//! gradient is delivered: it waits for the buckets still in flight and writes the averaged
//! gradients back. Buckets start in the same order on every rank (MPI requires collectives
//! in one order), so a bucket ready early waits for its predecessors. GPU gradients go to
//! the host through one mappable staging buffer per bucket, read asynchronously; each poll
//! of the hooks drives those reads and tests the requests in flight.

use std::ffi::c_int;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::raw::AsRaw;

use super::bucket::{Bucket, FLAG_LEN, Flat, Phase, averaged, plan_buckets, test_request};
use super::env::State;
use crate::autograd::PostAccumulateHook;
use crate::{DType, Place, Result, Tensor};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Communication figures of a `DataParallel` model, summed over its synchronised steps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommStats {
    /// Backward passes whose gradients were all-reduced.
    pub steps: u64,
    /// Bytes of each bucket, in launch order.
    pub bucket_bytes: Vec<usize>,
    /// Gradient bytes this rank all-reduces per step (the sum of `bucket_bytes`).
    pub bytes_per_step: usize,
    /// Seconds from the first gradient that was ready to the end of backward, summed: the
    /// window communication can hide in.
    pub backward_s: f64,
    /// Seconds from each bucket's launch to its completion, summed.
    pub comm_s: f64,
    /// The part of `comm_s` that ran while backward was still computing.
    pub overlapped_s: f64,
    /// Seconds the end of backward waited for communication (including GPU readbacks not
    /// yet finished), summed.
    pub exposed_s: f64,
}

impl CommStats {
    /// The fraction of the all-reduce time hidden behind backward.
    pub fn overlap_fraction(&self) -> f64 {
        if self.comm_s > 0.0 { self.overlapped_s / self.comm_s } else { 0.0 }
    }
}

struct Inner {
    buckets: Vec<Bucket>,
    /// `(bucket, index)` of each parameter, keyed by tensor identity.
    slots: std::collections::HashMap<usize, (usize, usize)>,
    find_unused: bool,
    no_sync: bool,
    /// The backward pass being reduced (its first hook ran and queued `finalize`), if any.
    active: Option<u64>,
    next_launch: usize,
    first_hook: Option<Instant>,
    /// Set when a pass failed after this rank had started communicating: its all-reduces can
    /// no longer be matched with the other ranks', so every later pass is an error.
    broken: Option<String>,
    /// Every all-reduce of the pass being finished has completed (a later failure leaves
    /// the ranks in step).
    comm_done: bool,
    stats: CommStats,
}

impl Inner {
    /// Parameters whose hook has not run in this pass (with their names).
    fn missing(&self) -> Vec<String> {
        self.buckets
            .iter()
            .flat_map(|b| b.ready.iter().zip(&b.names).filter(|(r, _)| !**r).map(|(_, n)| n.clone()))
            .collect()
    }
}

/// A duplicate of the world communicator for one reducer: its all-reduces are matched
/// among themselves, whatever other reducers and collectives do meanwhile.
struct OwnComm(mpi::topology::SimpleCommunicator);

// SAFETY: used only under the process group's mutex (`State::quick` / `blocking`).
unsafe impl Send for OwnComm {}
// SAFETY: as above; the handle is only read.
unsafe impl Sync for OwnComm {}

/// The reducer of one `DataParallel` model.
pub(crate) struct Reducer {
    inner: Mutex<Inner>,
    hooks: Mutex<Vec<(Tensor, PostAccumulateHook)>>,
    comm: Option<OwnComm>,
    state: &'static State,
}

impl Reducer {
    /// Buckets `params` (with their names) and hooks every one of them.
    pub fn new(
        state: &'static State,
        params: Vec<(String, Tensor)>,
        cap: usize,
        first_cap: usize,
        find_unused: bool,
    ) -> Result<Arc<Reducer>> {
        for (name, p) in &params {
            if !matches!(p.dtype(), DType::Float32 | DType::Float64) {
                return Err(state.error(
                    "DataParallel",
                    format!("parameter {name} is {}; gradients are all-reduced in float32 or float64", p.dtype()),
                ));
            }
        }
        let comm = state.blocking("DataParallel: duplicating the communicator", |w| {
            use mpi::topology::Communicator;
            w.duplicate()
        });
        let sizes: Vec<(usize, DType, Place)> =
            params.iter().map(|(_, p)| (p.numel() * p.dtype().size_of(), p.dtype(), p.place())).collect();
        let plan = plan_buckets(&sizes, cap, first_cap);
        let mut slots = std::collections::HashMap::new();
        let mut buckets = Vec::with_capacity(plan.len());
        for (bi, members) in plan.iter().enumerate() {
            let mut offsets = Vec::new();
            let mut numel = 0;
            for (k, &pi) in members.iter().enumerate() {
                offsets.push(numel);
                numel += params[pi].1.numel();
                slots.insert(params[pi].1.identity(), (bi, k));
            }
            let first = &params[members[0]].1;
            let has_flag = bi + 1 == plan.len();
            let len = numel + FLAG_LEN * usize::from(has_flag);
            buckets.push(Bucket {
                params: members.iter().map(|&i| params[i].1.clone()).collect(),
                names: members.iter().map(|&i| params[i].0.clone()).collect(),
                offsets,
                numel,
                dtype: first.dtype(),
                place: first.place(),
                ready: vec![false; members.len()],
                pending: members.len(),
                send: Flat::zeros(first.dtype(), len),
                recv: Flat::zeros(first.dtype(), len),
                has_flag,
                staging: None,
                gpu_parts: Vec::new(),
                phase: Phase::Waiting,
                launched: None,
                completed: None,
            });
        }
        let bucket_bytes: Vec<usize> = buckets.iter().map(Bucket::bytes).collect();
        let stats = CommStats { bytes_per_step: bucket_bytes.iter().sum(), bucket_bytes, ..CommStats::default() };
        let reducer = Arc::new(Reducer {
            inner: Mutex::new(Inner {
                buckets,
                slots,
                find_unused,
                no_sync: false,
                active: None,
                next_launch: 0,
                first_hook: None,
                broken: None,
                comm_done: false,
                stats,
            }),
            hooks: Mutex::new(Vec::new()),
            comm: Some(OwnComm(comm)),
            state,
        });
        let weak = Arc::downgrade(&reducer);
        for (_, p) in &params {
            let w: Weak<Reducer> = weak.clone();
            let hook: PostAccumulateHook = Arc::new(move |t: &Tensor| match w.upgrade() {
                Some(r) => r.on_grad_ready(t),
                None => Ok(()),
            });
            p.add_post_accumulate_hook(hook.clone())?;
            lock(&reducer.hooks).push((p.clone(), hook));
        }
        Ok(reducer)
    }

    fn raw_comm(&self) -> mpi::ffi::MPI_Comm {
        self.comm.as_ref().expect("present until drop").0.as_raw()
    }

    pub fn set_no_sync(&self, on: bool) -> bool {
        std::mem::replace(&mut lock(&self.inner).no_sync, on)
    }

    pub fn stats(&self) -> CommStats {
        lock(&self.inner).stats.clone()
    }

    fn on_grad_ready(self: &Arc<Self>, t: &Tensor) -> Result<()> {
        let s = self.state;
        let mut inner = lock(&self.inner);
        if inner.no_sync {
            return Ok(());
        }
        if let Some(why) = &inner.broken {
            return Err(s.error("DataParallel", why.clone()));
        }
        if s.finalized() {
            return Err(s.error("DataParallel", "MPI was finalised (every ParallelEnv was dropped)".into()));
        }
        let Some(&(b, k)) = inner.slots.get(&t.identity()) else { return Ok(()) };
        let pass = crate::autograd::current_pass();
        if inner.active != Some(pass) {
            let started = inner.next_launch > 0 || inner.buckets.iter().any(|b| matches!(b.phase, Phase::Reading(..)));
            if inner.active.is_some() && started {
                // An earlier pass failed after this rank had started all-reduces; how many
                // each rank started depends on timing, so they can no longer be matched.
                let why = "a backward pass failed after its gradient all-reduces had started, so this rank's \
                           all-reduces no longer match the other ranks'; restart the job (ParallelEnv::abort)"
                    .to_string();
                inner.broken = Some(why.clone());
                return Err(s.error("DataParallel", why));
            }
            inner.active = Some(pass);
            inner.next_launch = 0;
            inner.first_hook = Some(Instant::now());
            for bucket in &mut inner.buckets {
                bucket.ready.iter_mut().for_each(|r| *r = false);
                bucket.pending = bucket.params.len();
                bucket.phase = Phase::Waiting;
                bucket.launched = None;
                bucket.completed = None;
            }
            let weak = Arc::downgrade(self);
            crate::autograd::queue_callback(move || match weak.upgrade() {
                Some(r) => r.finalize(),
                None => Ok(()),
            })?;
        }
        let result = self.mark_ready(&mut inner, b, k);
        if let Err(e) = &result {
            inner.broken = Some(format!("a gradient hook failed during communication: {e}"));
        }
        result
    }

    fn mark_ready(&self, inner: &mut Inner, b: usize, k: usize) -> Result<()> {
        let bucket = &mut inner.buckets[b];
        if bucket.ready[k] {
            return Err(self.state.error(
                "DataParallel",
                format!(
                    "the gradient of {} was completed twice in one backward pass (a backward run inside a \
                     backward rule?); DataParallel cannot average a partial gradient",
                    bucket.names[k]
                ),
            ));
        }
        bucket.ready[k] = true;
        bucket.pending -= 1;
        if bucket.pending == 0 {
            bucket.start_fill(self.state)?;
        }
        self.progress(inner, false)
    }

    /// Drives readbacks, launches the buckets whose turn has come, and tests the requests
    /// in flight.
    fn progress(&self, inner: &mut Inner, wait: bool) -> Result<()> {
        let s = self.state;
        let comm = self.raw_comm();
        let n = inner.buckets.len();
        for b in 0..n {
            let turn = b == inner.next_launch;
            inner.buckets[b].drive_read(wait && turn)?;
            if turn && matches!(inner.buckets[b].phase, Phase::Filled) {
                // Only the last bucket carries the count, and it is launched after every other
                // bucket, so by then the count is final.
                let missing = if inner.find_unused { 0 } else { inner.missing().len() };
                inner.buckets[b].launch(s, comm, missing);
                inner.next_launch += 1;
            }
            inner.buckets[b].drive_request(s, false);
        }
        Ok(())
    }

    /// The end of backward: fills and launches what is left (parameters without a gradient
    /// contribute their held gradient or zeros), waits for every bucket, then writes the
    /// averaged gradients, or fails on every rank alike when some rank missed a parameter
    /// and `find_unused_parameters` is off.
    fn finalize(&self) -> Result<()> {
        let mut inner = lock(&self.inner);
        if inner.active.take().is_none() {
            return Ok(());
        }
        inner.comm_done = false;
        let result = self.finish_pass(&mut inner);
        if let Err(e) = &result
            && !inner.comm_done
        {
            inner.broken = Some(format!("the end of a backward pass failed during communication: {e}"));
        }
        result
    }

    fn finish_pass(&self, inner: &mut Inner) -> Result<()> {
        let s = self.state;
        let backward_end = Instant::now();
        let missing = inner.missing();
        let find_unused = inner.find_unused;
        {
            let _watch = s.watch("DataParallel: waiting for the gradient all-reduce");
            for b in 0..inner.buckets.len() {
                if matches!(inner.buckets[b].phase, Phase::Waiting) {
                    inner.buckets[b].start_fill(s)?;
                }
            }
            while inner.next_launch < inner.buckets.len() {
                let before = inner.next_launch;
                self.progress(inner, true)?;
                if inner.next_launch == before {
                    return Err(s.error("DataParallel", "a bucket could not be launched".into()));
                }
            }
            for bucket in &mut inner.buckets {
                bucket.drive_request(s, true);
            }
        }
        let done = Instant::now();
        let last = inner.buckets.last().expect("at least one bucket");
        let total_missing = last.recv.get(last.numel).round() as u64;
        inner.comm_done = true;
        if !find_unused {
            let total = total_missing;
            if total > 0 {
                return Err(s.error(
                    "DataParallel",
                    format!(
                        "{MISSING} ({total} over all ranks; on this rank: {}); pass find_unused_parameters=true if \
                         some parameters are not used in every step",
                        if missing.is_empty() {
                            "none".to_string()
                        } else {
                            missing.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
                        }
                    ),
                ));
            }
        }
        // Parameters no rank used (and none held a gradient for) keep no gradient.
        let used_anywhere: Option<Vec<i32>> = if find_unused {
            let local: Vec<i32> = inner
                .buckets
                .iter()
                .flat_map(|b| b.ready.iter().zip(&b.params).map(|(&r, p)| i32::from(r || p.grad().is_some())))
                .collect();
            let mut global = vec![0i32; local.len()];
            let _watch = s.watch("DataParallel: exchanging which parameters were used");
            let mut request: mpi::ffi::MPI_Request = unsafe { mpi::ffi::RSMPI_REQUEST_NULL };
            let comm = self.raw_comm();
            s.quick(|_| {
                // SAFETY: both buffers outlive the wait below.
                unsafe {
                    mpi::ffi::MPI_Iallreduce(
                        local.as_ptr().cast(),
                        global.as_mut_ptr().cast(),
                        local.len() as c_int,
                        i32::equivalent_datatype().as_raw(),
                        SystemOperation::max().as_raw(),
                        comm,
                        &mut request,
                    );
                }
            });
            test_request(s, &mut request, true);
            Some(global)
        } else {
            None
        };
        let world = s.size;
        let mut flat_index = 0;
        for bucket in &inner.buckets {
            for (k, p) in bucket.params.iter().enumerate() {
                let used = used_anywhere.as_ref().is_none_or(|u| u[flat_index] != 0);
                flat_index += 1;
                if !used {
                    continue;
                }
                let (at, n) = (bucket.offsets[k], p.numel());
                let grad = averaged(&bucket.recv, at, n, world, p, bucket.place)?;
                p.grad_meta().grad = Some(grad);
            }
        }
        let mut comm_s = 0.0;
        let mut overlapped_s = 0.0;
        for bucket in &inner.buckets {
            if let (Some(l), Some(c)) = (bucket.launched, bucket.completed) {
                comm_s += c.duration_since(l).as_secs_f64();
                overlapped_s += backward_end.saturating_duration_since(l).min(c.duration_since(l)).as_secs_f64();
            }
        }
        let window = inner.first_hook.map_or(0.0, |t| backward_end.duration_since(t).as_secs_f64());
        let st = &mut inner.stats;
        st.steps += 1;
        st.backward_s += window;
        st.comm_s += comm_s;
        st.overlapped_s += overlapped_s;
        st.exposed_s += done.duration_since(backward_end).as_secs_f64();
        Ok(())
    }
}

/// How the error for parameters without a gradient begins (the one error after which the
/// ranks are still in step).
const MISSING: &str = "parameters received no gradient in this backward pass";

impl Drop for Reducer {
    fn drop(&mut self) {
        let s = self.state;
        for (p, hook) in lock(&self.hooks).drain(..) {
            p.remove_post_accumulate_hook(&hook);
        }
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        if s.finalized() {
            // No MPI call may follow MPI_Finalize; requests died with it.
            std::mem::forget(self.comm.take());
            for bucket in &mut inner.buckets {
                if let Phase::InFlight(_) = bucket.phase {
                    std::mem::forget(std::mem::take(&mut bucket.send));
                    std::mem::forget(std::mem::take(&mut bucket.recv));
                }
            }
            return;
        }
        // A request still in flight reads and writes the bucket's buffers.
        let _watch = s.watch("DataParallel: dropping the model with gradient all-reduces in flight");
        for bucket in &mut inner.buckets {
            bucket.drive_request(s, true);
        }
        if let Some(comm) = self.comm.take() {
            s.quick(|_| drop(comm));
        }
    }
}

impl std::fmt::Debug for Reducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("Reducer").field("buckets", &inner.buckets.len()).finish()
    }
}
