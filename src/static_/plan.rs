//! Execution plans: how the Executor runs a program on a GPU place after its first run.
//!
//! The first run for a feed signature (feed shapes and dtypes, fetch list, whether the
//! program is fused) is interpreted op by op as usual, under a capture of the device
//! (see `backend/gpu/capture.rs`): every command is logged and every buffer comes from a
//! pool owned by the plan, so the pool's reuse during that run becomes the plan's buffer
//! assignment by liveness. Later runs bind the caller's feed buffers, encode the prepared
//! commands (pipelines, bind groups and parameters built once) into the pending batch, and
//! write the fetched values into new buffers: no op's host code runs.
//!
//! Ops that draw random numbers (dropout) stay live: they run through the registry each
//! time, with their outputs copied into the plan's buffers. (What else changes from run to
//! run, such as the optimizer's learning rate and β powers, is a persistable tensor the
//! run hooks write, which the taped commands read.) Persistable values are updated in place: the run copies each new value into
//! the buffer the scope held before the run, so the scope's tensors keep their memory.
//! A program that reads data back while it runs (or has control flow) is interpreted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::executor::{Compiled, Run};
use super::program::VarId;
use crate::backend::gpu::{GpuContext, PrivatePool, Tape};
use crate::tensor::Storage;
use crate::{DType, Error, Result, Tensor};

/// Dispatches binding a feed or fetched value, at most, for a run to bind the caller's
/// buffer in their bind groups (rebuilt each run) rather than copying the value.
const MAX_REBOUND: usize = 4;

/// Plans kept per executor before the cache is dropped and refilled.
const MAX_PLANS: usize = 16;

/// What a plan is specialised for.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct PlanKey {
    uid: u64,
    version: u64,
    feeds: Vec<(VarId, Vec<usize>, DType)>,
    fetch: Vec<VarId>,
    /// The fused program ran.
    fused: bool,
    /// `FLAGS_check_nan_inf`'s level when the plan was taped (level 1 tapes the checks), so a
    /// change of the flag tapes a new plan.
    nan_level: u8,
}

/// A cached plan, or why the program runs interpreted.
pub(super) enum PlanSlot {
    Ready(Arc<Mutex<ReplayPlan>>),
    Interpreted(String),
}

/// Figures of the plan an executor ran last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanInfo {
    /// Kernel dispatches replayed per run (those of live ops not counted).
    pub dispatches: usize,
    /// Ops that run live each time (run-hook attributes, random draws).
    pub live_ops: usize,
    /// Ops of the program.
    pub ops: usize,
    /// Bytes of device buffers the plan owns (intermediates and feeds).
    pub buffer_bytes: u64,
    /// Dispatches writing their output over an input that dies there (elementwise ops in place).
    pub in_place: usize,
    /// Optimizer updates that run inside another update's op (the fusion pass turns adjacent
    /// updates of the same settings into one merged op, one dispatch as far as the device's
    /// bindings allow).
    pub merged: usize,
}

/// A live op: its index in block 0, its inputs, and the plan's buffers its outputs go to.
type LiveStep = (usize, Vec<Tensor>, Vec<Tensor>);

/// A segment as the capture logs it.
enum SegmentLog {
    Cmds(Vec<crate::backend::gpu::Cmd>),
    Live { step: usize, inputs: Vec<Tensor>, targets: Vec<Tensor> },
}

/// How a run passes a feed to the prepared commands.
enum Feed {
    /// The dispatches reading it bind the caller's buffer in place of buffer `buffer`.
    Bound { id: VarId, buffer: u64, place: crate::Place },
    /// Copied into the plan's tensor (a live op reads it).
    Copied { id: VarId, pinned: Tensor },
}

enum Segment {
    Tape(Tape),
    Live { step: usize, inputs: Vec<Tensor>, targets: Vec<Tensor> },
}

/// One program's prepared run on one GPU.
pub(super) struct ReplayPlan {
    ctx: Arc<GpuContext>,
    pool: Arc<Mutex<PrivatePool>>,
    feeds: Vec<Feed>,
    /// Persistable values by name: the tensors the scope holds, updated in place.
    persist: Vec<(String, Tensor)>,
    segments: Vec<Segment>,
    fetch: Vec<Tensor>,
    /// Fetches a run writes straight into a new buffer (the others are copied out).
    fetch_rebind: Vec<bool>,
    pub info: PlanInfo,
}

impl Drop for ReplayPlan {
    fn drop(&mut self) {
        // Every tensor of the plan gives its buffer back to the private pool first.
        self.segments.clear();
        self.feeds.clear();
        self.fetch.clear();
        self.persist.clear();
        crate::backend::gpu::lock(&self.pool).release(&self.ctx.pool);
    }
}

impl ReplayPlan {
    /// Copies of the fetched values (the plan's own buffers are overwritten by the next run).
    pub fn fetch_copies(&self) -> Result<Vec<Tensor>> {
        self.fetch.iter().map(|t| t.clone_data()).collect()
    }
}

impl PlanKey {
    pub fn new(
        c: &Compiled,
        uid: u64,
        env: &[Option<Tensor>],
        feed_ids: &[VarId],
        fetch: &[VarId],
        fused: bool,
    ) -> PlanKey {
        let feeds =
            feed_ids.iter().filter_map(|&id| env[id].as_ref().map(|t| (id, t.shape().to_vec(), t.dtype()))).collect();
        PlanKey {
            uid,
            version: c.version,
            feeds,
            fetch: fetch.to_vec(),
            fused,
            nan_level: crate::flags::nan_inf_level(),
        }
    }
}

fn gpu_ok(t: &Tensor) -> bool {
    matches!(t.storage(), Storage::Gpu(_))
}

fn buffer_id(t: &Tensor) -> Option<u64> {
    match t.storage() {
        Storage::Gpu(b) => Some(b.id),
        _ => None,
    }
}

/// What a capturing run gives.
pub(super) enum PlanOutcome {
    /// The run's results are the plan's fetches.
    Plan(ReplayPlan),
    /// The run completed, but the program cannot be replayed, for this reason.
    Interpreted(String),
    /// Another thread is capturing on this device: nothing ran.
    Busy,
}

/// The first run of a plan: interprets block 0 while capturing.
pub(super) fn capture(
    run: &Run<'_>,
    ctx: &Arc<GpuContext>,
    env: &mut [Option<Tensor>],
    feed_ids: &[VarId],
    fetch: &[VarId],
) -> Result<PlanOutcome> {
    let pool = Arc::new(Mutex::new(PrivatePool::default()));
    if !ctx.capture.begin(pool.clone()) {
        return Ok(PlanOutcome::Busy);
    }
    /// Ends the capture on every way out, and unless a plan keeps the private pool (an op
    /// failed, or the run is interpreted), releases it: what the capture allocated goes back
    /// to the shared pool and the memory counters.
    struct Close<'a> {
        ctx: &'a GpuContext,
        pool: &'a Mutex<PrivatePool>,
        ended: bool,
        kept: bool,
    }
    impl Drop for Close<'_> {
        fn drop(&mut self) {
            if !self.ended {
                let _ = self.ctx.capture.end();
            }
            if !self.kept {
                crate::backend::gpu::lock(self.pool).release(&self.ctx.pool);
            }
        }
    }
    let mut close = Close { ctx, pool: &pool, ended: false, kept: false };
    let c = run.compiled();
    let mut feeds = Vec::new();
    for &id in feed_ids {
        if let Some(t) = &env[id] {
            let pinned = t.clone_data()?;
            env[id] = Some(pinned.clone());
            feeds.push((id, pinned));
        }
    }
    // The scope's values before the run: updated values are copied into them at the end.
    let mut persist: Vec<(VarId, String, Option<Tensor>)> = Vec::new();
    for step in &c.blocks[0] {
        for &v in step.desc.inputs.iter().chain(&step.desc.outputs) {
            let d = &c.vars[v];
            if d.persistable && !persist.iter().any(|(p, ..)| *p == v) {
                persist.push((v, d.name.clone(), run.scope().var(&d.name)));
            }
        }
    }
    let mut segments = Vec::new();
    let mut pending = Vec::new();
    let mut why: Option<String> = None;
    ctx.capture.logging(true);
    for i in 0..c.blocks[0].len() {
        let offset = crate::random::get_seed_offset();
        let inputs = run.inputs(0, i, env)?;
        let outs = run.call(0, i, &inputs)?;
        let cmds = ctx.capture.take();
        let live = crate::random::get_seed_offset() != offset;
        if why.is_none() && !outs.iter().all(gpu_ok) {
            why = Some(format!("op {} returns a value off the GPU", c.blocks[0][i].desc.op_type));
        }
        if live {
            if !pending.is_empty() {
                segments.push(SegmentLog::Cmds(std::mem::take(&mut pending)));
            }
            segments.push(SegmentLog::Live { step: i, inputs, targets: outs.clone() });
        } else {
            pending.extend(cmds);
            drop(inputs);
        }
        for (&id, t) in c.blocks[0][i].desc.outputs.iter().zip(outs) {
            env[id] = Some(t);
        }
        run.free_after(0, i, env);
    }
    let mut keep = Vec::new();
    for (id, name, before) in &persist {
        let Some(now) = env[*id].take() else {
            if let Some(b) = before {
                keep.push((name.clone(), b.clone()));
            }
            continue;
        };
        match before {
            Some(b) if b.shape() == now.shape() && b.dtype() == now.dtype() && gpu_ok(b) => {
                b.assign_(&now)?;
                run.scope().set_var(name, b.clone());
                env[*id] = Some(b.clone());
                keep.push((name.clone(), b.clone()));
            }
            _ => {
                run.scope().set_var(name, now.clone());
                env[*id] = Some(now);
                why.get_or_insert_with(|| format!("persistable {name} had no value of its shape before the run"));
            }
        }
    }
    pending.extend(ctx.capture.take());
    segments.push(SegmentLog::Cmds(pending));
    let fetched: Vec<Tensor> = fetch.iter().map(|&id| run.value(id, env)).collect::<Result<_>>()?;
    close.ended = true;
    let ended = ctx.capture.end();
    if let Some(w) = why.or(ended.err()) {
        return Ok(PlanOutcome::Interpreted(w));
    }
    let mut raw: Vec<Vec<crate::backend::gpu::Cmd>> = Vec::new();
    let mut shape: Vec<Option<LiveStep>> = Vec::new();
    for s in segments {
        match s {
            SegmentLog::Cmds(cmds) => {
                raw.push(cmds);
                shape.push(None);
            }
            SegmentLog::Live { step, inputs, targets } => shape.push(Some((step, inputs, targets))),
        }
    }
    // What the plan's tensors keep stays in its own buffer; the rest is packed.
    env.iter_mut().for_each(|e| *e = None);
    let mut own: HashSet<u64> = HashSet::new();
    let kept = feeds
        .iter()
        .map(|(_, t)| t)
        .chain(&fetched)
        .chain(shape.iter().flatten().flat_map(|(_, i, t)| i.iter().chain(t)));
    own.extend(kept.filter_map(buffer_id));
    // Feeds and fetched values bind the caller's buffers in later runs instead of being
    // copied, unless a live op holds them (it reads its tensors, not the tape's bindings) or
    // the buffer is not the plan's own (a persistable's).
    let held: HashSet<u64> =
        shape.iter().flatten().flat_map(|(_, i, t)| i.iter().chain(t)).filter_map(buffer_id).collect();
    let feed_ids: HashSet<u64> = feeds.iter().filter_map(|(_, t)| buffer_id(t)).collect();
    // Each rebound dispatch costs a bind group per run: a value many dispatches bind is
    // cheaper to copy once.
    let mut binders: HashMap<u64, usize> = HashMap::new();
    for cmd in raw.iter().flatten() {
        if let crate::backend::gpu::Cmd::Dispatch { binds, .. } = cmd {
            for b in binds {
                *binders.entry(b.0).or_default() += 1;
            }
        }
    }
    let swappable = |t: &Tensor| {
        buffer_id(t).filter(|id| {
            !held.contains(id)
                && binders.get(id).copied().unwrap_or(0) <= MAX_REBOUND
                && crate::backend::gpu::lock(&pool).owns(*id)
        })
    };
    // A fetched feed is copied out of the plan's buffer, so that buffer must receive it.
    let fetched_ids: HashSet<u64> = fetched.iter().filter_map(buffer_id).collect();
    let feed_rebind: Vec<bool> =
        feeds.iter().map(|(_, t)| swappable(t).is_some_and(|id| !fetched_ids.contains(&id))).collect();
    let mut fetch_rebind: Vec<bool> = Vec::new();
    for (i, t) in fetched.iter().enumerate() {
        let id = swappable(t).filter(|id| !feed_ids.contains(id));
        // The same value fetched twice is substituted once.
        let dup = fetched[..i].iter().any(|u| buffer_id(u) == buffer_id(t));
        fetch_rebind.push(id.is_some() && !dup);
    }
    let rebind: HashSet<u64> = feeds
        .iter()
        .map(|(_, t)| t)
        .zip(&feed_rebind)
        .chain(fetched.iter().zip(&fetch_rebind))
        .filter(|(_, r)| **r)
        .filter_map(|(t, _)| buffer_id(t))
        .collect();
    let mut tapes = Tape::prepare(ctx, raw, &pool, &own, &rebind)?.into_iter();
    let segments: Vec<Segment> = shape
        .into_iter()
        .map(|s| match s {
            None => Segment::Tape(tapes.next().expect("one tape per logged segment")),
            Some((step, inputs, targets)) => Segment::Live { step, inputs, targets },
        })
        .collect();
    let dispatches = segments.iter().map(|s| if let Segment::Tape(t) = s { t.dispatches } else { 0 }).sum();
    let live_ops = segments.iter().filter(|s| matches!(s, Segment::Live { .. })).count();
    let buffer_bytes = crate::backend::gpu::lock(&pool).bytes();
    let in_place = segments.iter().map(|s| if let Segment::Tape(t) = s { t.in_place } else { 0 }).sum();
    let merged = c.blocks[0].iter().map(|s| super::merge::merged_away(&s.desc)).sum();
    let info = PlanInfo { dispatches, live_ops, ops: c.blocks[0].len(), buffer_bytes, in_place, merged };
    // A bound feed's own buffer is never used again.
    let feeds = feeds
        .into_iter()
        .zip(feed_rebind)
        .map(|((id, pinned), bound)| match buffer_id(&pinned) {
            Some(buffer) if bound => {
                crate::backend::gpu::lock(&pool).evict(buffer);
                Feed::Bound { id, buffer, place: pinned.place() }
            }
            _ => Feed::Copied { id, pinned },
        })
        .collect();
    let info = PlanInfo { buffer_bytes: crate::backend::gpu::lock(&pool).bytes(), ..info };
    close.kept = true;
    drop(close);
    Ok(PlanOutcome::Plan(ReplayPlan {
        ctx: ctx.clone(),
        pool,
        feeds,
        persist: keep,
        segments,
        fetch: fetched,
        fetch_rebind,
        info,
    }))
}

/// A later run: feeds in, the prepared commands, fetches out.
pub(super) fn replay(plan: &ReplayPlan, run: &Run<'_>, env: &[Option<Tensor>]) -> Result<Option<Vec<Tensor>>> {
    let scope = run.scope();
    for (name, p) in &plan.persist {
        match scope.var(name) {
            Some(s) if s.same_tensor(p) => {}
            Some(s) if s.shape() == p.shape() && s.dtype() == p.dtype() => {
                p.assign_(&s.to(p.place())?)?;
                scope.set_var(name, p.clone());
            }
            // Replaced by a value of another shape: the plan is stale.
            _ => return Ok(None),
        }
    }
    let mut subst: HashMap<u64, wgpu::Buffer> = HashMap::new();
    let mut hold: Vec<Tensor> = Vec::new();
    let given = |id: VarId| env[id].as_ref().ok_or_else(|| Error::invalid("Executor.run", "a planned feed is missing"));
    for feed in &plan.feeds {
        match feed {
            Feed::Bound { id, buffer, place } => {
                let t = given(*id)?;
                let t = if t.place() == *place { t.clone() } else { t.to(*place)? };
                let Storage::Gpu(b) = t.storage() else {
                    return Err(Error::invalid("Executor.run", "a feed moved to the GPU has no device buffer"));
                };
                subst.insert(*buffer, b.raw().clone());
                hold.push(t.clone());
            }
            Feed::Copied { id, pinned } => {
                let t = given(*id)?;
                pinned.assign_(&if t.place() == pinned.place() { t.clone() } else { t.to(pinned.place())? })?;
            }
        }
    }
    let mut outs: Vec<Option<Tensor>> = Vec::new();
    for (t, &rebind) in plan.fetch.iter().zip(&plan.fetch_rebind) {
        match (rebind, buffer_id(t)) {
            (true, Some(id)) => {
                let bytes = crate::backend::cpu::gpu_bytes(t.dtype(), t.numel());
                let b = plan.ctx.alloc("Executor.run", bytes)?;
                subst.insert(id, b.raw().clone());
                outs.push(Some(Tensor::from_gpu(b, t.shape().to_vec(), t.dtype())));
            }
            _ => outs.push(None),
        }
    }
    for s in &plan.segments {
        match s {
            Segment::Tape(t) => t.replay(&plan.ctx, &subst)?,
            Segment::Live { step, inputs, targets } => {
                let outs = run.call(0, *step, inputs)?;
                for (t, o) in targets.iter().zip(&outs) {
                    t.assign_(o)?;
                }
            }
        }
    }
    drop(hold);
    plan.fetch.iter().zip(outs).map(|(t, o)| o.map_or_else(|| t.clone_data(), Ok)).collect::<Result<Vec<_>>>().map(Some)
}

/// A cache slot for `key`, with the cache bounded.
pub(super) fn remember(cache: &mut HashMap<PlanKey, PlanSlot>, key: PlanKey, slot: PlanSlot) {
    if cache.len() >= MAX_PLANS {
        cache.clear();
    }
    cache.insert(key, slot);
}
