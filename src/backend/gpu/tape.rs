//! A plan's prepared commands ([`Tape`]): `prepare` turns a capture's log into one data
//! buffer holding every parameter window and upload, the intermediates packed into arenas
//! by live range (an elementwise output over an input that dies at its dispatch, see
//! `in_place.rs`), bind groups built once. `replay` encodes a tape into the recorder's
//! pending encoder, so a run is one submission. Above the context: a tape is made from the
//! device's facets, and the context knows nothing of tapes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::MAX_PENDING;
use super::capture::{Cmd, CopyCmd};
use super::context::GpuContext;
use super::device::Device;
use super::lock;
use super::pipeline::{Access, Pipeline};
use super::pool::PrivatePool;
use super::profile::KernelLabel;
use super::recorder::{FLAG_BUFFER_ID, PARAMS_WINDOW};
use super::shader::Kernel;
use crate::{Error, Result};

/// A prepared command list.
pub(crate) struct Tape {
    cmds: Vec<Prepared>,
    uses_index_flag: bool,
    /// Kernel dispatches in the tape.
    pub dispatches: usize,
    /// Those writing their output in place (over an input that dies there).
    pub in_place: usize,
    /// Keeps the parameter and upload buffer, and the arena, alive with the bind groups
    /// that use them.
    data: Option<wgpu::Buffer>,
    _arenas: Vec<wgpu::Buffer>,
}

/// A buffer as a bind group binds it: (id, buffer, offset, size).
type Bound = (u64, wgpu::Buffer, u64, Option<u64>);

/// A plan's intermediates packed into arenas.
struct Packed {
    buffers: Vec<wgpu::Buffer>,
    /// Each packed buffer's (arena, offset, size).
    at: HashMap<u64, (usize, u64, u64)>,
    /// Each output written in place, with the input it is written over.
    over: HashMap<u64, u64>,
}

enum Prepared {
    /// `rebind` keeps the bindings of a dispatch that binds a buffer a run may replace.
    Dispatch {
        pipeline: Arc<Pipeline>,
        bind_group: wgpu::BindGroup,
        offset: u32,
        groups: [u32; 3],
        rebind: Option<Vec<Bound>>,
        /// The bind group made for the last run's replacements (by binding slot), reused
        /// while a run makes the same ones (a loop feeding pooled buffers, a fetch whose last
        /// value was dropped).
        rebound: Mutex<Option<(Vec<Option<wgpu::Buffer>>, wgpu::BindGroup)>>,
        label: KernelLabel,
    },
    Copy(CopyCmd),
}

impl Tape {
    /// Prepares logged segments for replay: every parameter window and upload goes into
    /// one buffer written once; the intermediates (the plan's buffers no tensor of the plan
    /// keeps) are packed into one arena by their live ranges; bind groups are created once
    /// (shared where a segment binds the same buffers to the same pipeline).
    /// `keep` are buffers the plan's tensors hold (not packed); `rebind` those a replay may
    /// replace by another buffer (see [`GpuContext::replay`]).
    pub fn prepare(
        ctx: &GpuContext,
        segments: Vec<Vec<Cmd>>,
        pool: &Mutex<PrivatePool>,
        keep: &HashSet<u64>,
        rebind: &HashSet<u64>,
    ) -> Result<Vec<Tape>> {
        let align = (ctx.limits.min_storage_buffer_offset_alignment as usize).max(4);
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
                Cmd::Copy(_) => at.push(0),
            }
        }
        if data.len() as u64 > ctx.limits.max_buffer_size {
            return Err(Error::Gpu {
                op: "Executor plan",
                msg: format!("{} bytes of kernel parameters and constants exceed max_buffer_size", data.len()),
            });
        }
        let buffer = (!data.is_empty()).then(|| {
            let b = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("dygraph-plan-data"),
                size: data.len().next_multiple_of(4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            data.resize(data.len().next_multiple_of(4), 0);
            ctx.queue.write_buffer(&b, 0, &data);
            b
        });
        let arena = Tape::pack(ctx, &segments, pool, keep)?;
        let place = |id: u64, b: &wgpu::Buffer| -> Bound {
            match arena.as_ref().and_then(|p| p.at.get(&id).map(|&(c, o, size)| (&p.buffers[c], o, size))) {
                Some((a, o, size)) => (id, a.clone(), o, Some(size)),
                None => (id, b.clone(), 0, None),
            }
        };
        let mut groups_cache: HashMap<(usize, Vec<u64>), wgpu::BindGroup> = HashMap::new();
        let mut offsets = at.into_iter();
        let mut tapes = Vec::with_capacity(segments.len());
        for seg in segments {
            let mut tape = Tape {
                cmds: Vec::with_capacity(seg.len()),
                uses_index_flag: false,
                dispatches: 0,
                in_place: 0,
                data: buffer.clone(),
                _arenas: arena.as_ref().map(|p| p.buffers.clone()).unwrap_or_default(),
            };
            for cmd in seg {
                let o = offsets.next().unwrap_or(0);
                tape.cmds.push(match cmd {
                    Cmd::Dispatch { kernel, key, entry, pipeline, binds, groups, .. } => {
                        tape.dispatches += 1;
                        let label = KernelLabel { file: kernel.file, entry, key };
                        // WebGPU lets a dispatch bind one buffer several times only when every
                        // binding of it is writable: a dispatch binds the arena through the
                        // kernel's pipeline with those bindings read-write.
                        let in_arena = |id: u64| arena.as_ref().is_some_and(|p| p.at.contains_key(&id));
                        let pipeline = if binds.iter().any(|b| in_arena(b.0)) {
                            let access: Vec<Access> = binds
                                .iter()
                                .map(|b| if b.2 || in_arena(b.0) { Access::ReadWrite } else { Access::Read })
                                .collect();
                            // An output packed over an input (see `in_place_hosts`).
                            let in_place = binds.iter().enumerate().find_map(|(o, y)| {
                                let x = *arena.as_ref()?.over.get(&y.0).filter(|_| y.2)?;
                                binds.iter().position(|b| b.0 == x && !b.2).map(|i| (o, i))
                            });
                            tape.in_place += in_place.is_some() as usize;
                            ctx.pipeline_in_place(kernel, key, entry, &access, in_place)?
                        } else {
                            pipeline
                        };
                        tape.uses_index_flag |= binds.iter().any(|b| b.0 == FLAG_BUFFER_ID);
                        let data = buffer.as_ref().expect("a dispatch put its parameters into the data buffer");
                        let key = (Arc::as_ptr(&pipeline) as usize, binds.iter().map(|b| b.0).collect());
                        let bound: Vec<Bound> = binds.iter().map(|b| place(b.0, &b.1)).collect();
                        let bind_group =
                            groups_cache.entry(key).or_insert_with(|| bind_group(ctx, &pipeline, &bound, data)).clone();
                        let rebind = bound.iter().any(|b| rebind.contains(&b.0)).then_some(bound);
                        let rebound = Mutex::new(None);
                        Prepared::Dispatch { pipeline, bind_group, offset: o as u32, groups, rebind, rebound, label }
                    }
                    Cmd::Copy(c) => {
                        let (si, s, so, _) = place(c.src.0, &c.src.1);
                        let (di, d, dof, _) = place(c.dst.0, &c.dst.1);
                        Prepared::Copy(CopyCmd {
                            src: (si, s),
                            src_offset: so + c.src_offset,
                            dst: (di, d),
                            dst_offset: dof + c.dst_offset,
                            bytes: c.bytes,
                        })
                    }
                    Cmd::Write { dst, bytes } => {
                        let (di, d, dof, _) = place(dst.0, &dst.1);
                        Prepared::Copy(CopyCmd {
                            src: (0, buffer.clone().expect("an upload put its bytes into the data buffer")),
                            src_offset: o as u64,
                            dst: (di, d),
                            dst_offset: dof,
                            bytes: bytes.len() as u64,
                        })
                    }
                });
            }
            tapes.push(tape);
        }
        ctx.check("Executor plan")?;
        Ok(tapes)
    }

    /// Packs the plan's intermediates into arenas: each buffer's live range is its first to
    /// last command. A dispatch may not bind one buffer both writable and otherwise (nor
    /// copy within one buffer), so buffers used together that way go to different arenas
    /// (greedy colouring, usually two or three); within an arena, buffers are placed largest
    /// first at the lowest offset free for their whole range. An elementwise output written
    /// in place shares its host's place (see `in_place_hosts`), which then lives to the last
    /// use of the chain's last output. Returns the arenas and each packed buffer's place, or
    /// None when packing saves nothing or exceeds a limit.
    fn pack(
        ctx: &GpuContext,
        segments: &[Vec<Cmd>],
        pool: &Mutex<PrivatePool>,
        keep: &HashSet<u64>,
    ) -> Result<Option<Packed>> {
        let owned = lock(pool).owned.clone();
        // A buffer a dispatch binds twice (`x * x`, a kernel's unused optional input) would
        // be bound writable twice over the same range in the arena, which WebGPU forbids: it
        // stays out.
        let mut solo: HashSet<u64> = HashSet::new();
        for cmd in segments.iter().flatten() {
            if let Cmd::Dispatch { binds, .. } = cmd {
                for (i, b) in binds.iter().enumerate() {
                    if binds[..i].iter().any(|a| a.0 == b.0) {
                        solo.insert(b.0);
                    }
                }
            }
        }
        let packable = |id: u64| owned.contains_key(&id) && !keep.contains(&id) && !solo.contains(&id);
        // (first use, last use, first use writes)
        let mut range: HashMap<u64, (usize, usize, bool)> = HashMap::new();
        let mut apart: HashMap<u64, HashSet<u64>> = HashMap::new();
        for (k, cmd) in segments.iter().flatten().enumerate() {
            let used: Vec<(u64, bool)> = match cmd {
                Cmd::Dispatch { binds, .. } => binds.iter().map(|b| (b.0, b.2)).collect(),
                Cmd::Copy(c) => vec![(c.src.0, false), (c.dst.0, true)],
                Cmd::Write { dst, .. } => vec![(dst.0, true)],
            };
            for &(id, writes) in &used {
                if packable(id) {
                    range.entry(id).and_modify(|r| r.1 = k).or_insert((k, k, writes));
                }
            }
            // A copy may not read and write one buffer; dispatches bind packed buffers through
            // pipelines whose storage bindings are all writable (see `prepare`), which may
            // share a buffer at disjoint ranges.
            if !matches!(cmd, Cmd::Copy(_)) {
                continue;
            }
            for &(a, _) in &used {
                for &(b, _) in &used {
                    if a != b && packable(a) && packable(b) {
                        apart.entry(a).or_default().insert(b);
                    }
                }
            }
        }
        let buffers = range.values().filter(|r| r.2).count();
        let separate: u64 = range.iter().filter(|(_, r)| r.2).map(|(id, _)| owned[id].max(4)).sum();
        // An output written in place takes its host's place: the host lives on to its last use.
        let over = in_place_hosts(segments, &range, &owned)?;
        let hosts: HashMap<u64, u64> = over.iter().map(|(&y, &(_, h))| (y, h)).collect();
        let host = |id: u64| hosts.get(&id).copied().unwrap_or(id);
        for (y, h) in &hosts {
            let last = range[y].1;
            range.entry(*h).and_modify(|r| r.1 = r.1.max(last));
        }
        let apart: HashMap<u64, HashSet<u64>> = apart.into_iter().fold(HashMap::new(), |mut m, (a, bs)| {
            m.entry(host(a)).or_default().extend(bs.into_iter().map(host));
            m
        });
        let mut items: Vec<(u64, u64, usize, usize)> = range
            .iter()
            .filter(|(id, r)| r.2 && !hosts.contains_key(id))
            .map(|(&id, r)| (id, owned[&id].max(4), r.0, r.1))
            .collect();
        if buffers < 2 {
            return Ok(None);
        }
        items.sort_by_key(|&(id, size, first, _)| (std::cmp::Reverse(size), first, id));
        let align = (ctx.limits.min_storage_buffer_offset_alignment as u64).max(4);
        let mut placed: Vec<Vec<(u64, u64, usize, usize)>> = Vec::new();
        let mut totals: Vec<u64> = Vec::new();
        let mut at: HashMap<u64, (usize, u64, u64)> = HashMap::new();
        for &(id, size, first, last) in &items {
            let banned: HashSet<usize> =
                apart.get(&id).into_iter().flatten().filter_map(|n| at.get(n).map(|p| p.0)).collect();
            // The lowest free offset in each allowed arena; take the one that grows least.
            let mut best: Option<(u64, u64, usize)> = None;
            for c in (0..placed.len()).filter(|c| !banned.contains(c)) {
                let mut busy: Vec<(u64, u64)> =
                    placed[c].iter().filter(|p| !(p.3 < first || last < p.2)).map(|p| (p.0, p.0 + p.1)).collect();
                busy.sort_unstable();
                let mut o = 0u64;
                for (s, e) in busy {
                    if o + size <= s {
                        break;
                    }
                    o = o.max(e.next_multiple_of(align));
                }
                let grow = (o + size).saturating_sub(totals[c]);
                if best.is_none_or(|b| (grow, o) < (b.0, b.1)) {
                    best = Some((grow, o, c));
                }
            }
            let (c, o) = match best {
                Some((_, o, c)) => (c, o),
                _ => {
                    placed.push(Vec::new());
                    totals.push(0);
                    (placed.len() - 1, 0)
                }
            };
            placed[c].push((o, size, first, last));
            at.insert(id, (c, o, size));
            totals[c] = totals[c].max(o + size);
        }
        for (y, h) in &hosts {
            let spot = at[h];
            at.insert(*y, spot);
        }
        let total: u64 = totals.iter().sum();
        if total >= separate
            || totals.iter().any(|&t| t > ctx.limits.max_buffer_size)
            || ctx.within_memory_limit("plan", total).is_err()
        {
            return Ok(None);
        }
        let buffers = totals
            .iter()
            .map(|&size| {
                ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("dygraph-plan-arena"),
                    size,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
            .collect();
        lock(&ctx.pool).note_external(total);
        let mut p = lock(pool);
        p.arena += total;
        p.evicted.extend(at.keys().copied());
        let evicted = p.evicted.clone();
        p.give_free_away(&ctx.pool, |id| evicted.contains(&id));
        let over = over.into_iter().map(|(y, (x, _))| (y, x)).collect();
        Ok(Some(Packed { buffers, at, over }))
    }

    /// Encodes `tape` into the pending batch (submitted with the next readback or sync),
    /// with the buffers `subst` names (by id, among those prepared as rebindable) replaced:
    /// a run's feeds and fetches bind the caller's buffers instead of being copied.
    pub fn replay(&self, ctx: &GpuContext, subst: &HashMap<u64, wgpu::Buffer>) -> Result<()> {
        if self.uses_index_flag {
            lock(&ctx.error_flag).arm();
        }
        let mut rec = lock(&ctx.recorder);
        // Work already pending past the eager bound goes first; then the tape is encoded
        // whole, one submission however long: its parameters are in the tape's own buffer,
        // not the recorder's arena. Only the profiler's query set, a pair per dispatch,
        // bounds a batch inside a tape.
        if rec.pending >= MAX_PENDING {
            rec.flush(ctx)?;
        }
        for cmd in &self.cmds {
            if rec.pending >= MAX_PENDING && rec.profiling.is_some() {
                rec.flush(ctx)?;
            }
            match cmd {
                Prepared::Dispatch { pipeline, bind_group: group, offset, groups, rebind, rebound, label } => {
                    let fresh = match rebind {
                        Some(bound) if bound.iter().any(|b| subst.contains_key(&b.0)) => {
                            let replaced: Vec<Option<wgpu::Buffer>> =
                                bound.iter().map(|b| subst.get(&b.0).cloned()).collect();
                            let mut last = lock(rebound);
                            match last.as_ref() {
                                Some((was, group)) if *was == replaced => Some(group.clone()),
                                _ => {
                                    let bound: Vec<Bound> = bound
                                        .iter()
                                        .zip(&replaced)
                                        .map(|(b, r)| match r {
                                            Some(s) => (b.0, s.clone(), 0, None),
                                            None => b.clone(),
                                        })
                                        .collect();
                                    let data =
                                        self.data.as_ref().expect("a dispatch put its parameters into the data buffer");
                                    let group = bind_group(ctx, pipeline, &bound, data);
                                    *last = Some((replaced, group.clone()));
                                    Some(group)
                                }
                            }
                        }
                        _ => None,
                    };
                    let pass = rec.dispatch_pass(ctx, *label);
                    pass.set_pipeline(&pipeline.pipeline);
                    pass.set_bind_group(0, fresh.as_ref().unwrap_or(group), &[*offset]);
                    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                    rec.pending += 1;
                }
                Prepared::Copy(c) => {
                    let s = subst.get(&c.src.0).unwrap_or(&c.src.1);
                    let d = subst.get(&c.dst.0).unwrap_or(&c.dst.1);
                    rec.copy_command(ctx, s, c.src_offset, d, c.dst_offset, c.bytes);
                }
            }
        }
        ctx.dispatches.fetch_add(self.dispatches as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// The bind group of a tape's dispatch: `binds` at their places, then its parameter window.
fn bind_group(dev: &Device, pipeline: &Pipeline, binds: &[Bound], params: &wgpu::Buffer) -> wgpu::BindGroup {
    let at: Vec<(&wgpu::Buffer, u64, Option<u64>)> = binds.iter().map(|(_, b, o, size)| (b, *o, *size)).collect();
    pipeline.bind_group(&dev.device, &at, params, PARAMS_WINDOW as u64)
}

/// The outputs a plan writes in place, each with the input it is written over and its host:
/// the buffer whose place it takes (the first of a chain). An output qualifies when its
/// kernel has an in-place form (see `in_place.rs`), its first use is that dispatch, and an
/// input the form may take, of its byte size (so of its length: tensors fill their
/// buffers), is used last there. `range` holds each packable buffer's (first use, last use,
/// first use writes).
fn in_place_hosts(
    segments: &[Vec<Cmd>],
    range: &HashMap<u64, (usize, usize, bool)>,
    owned: &HashMap<u64, u64>,
) -> Result<HashMap<u64, (u64, u64)>> {
    let mut forms: HashMap<(usize, u32), (Option<usize>, Vec<usize>)> = HashMap::new();
    let mut hosts: HashMap<u64, (u64, u64)> = HashMap::new();
    for (k, cmd) in segments.iter().flatten().enumerate() {
        let Cmd::Dispatch { kernel, key, binds, .. } = cmd else { continue };
        let form = match forms.entry((*kernel as *const Kernel as usize, *key)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let source = kernel.source(*key)?;
                e.insert((super::in_place::output_binding(&source), super::in_place::input_bindings(&source)))
            }
        };
        let Some(y) = form.0.and_then(|o| binds.get(o)).filter(|y| y.2) else { continue };
        if range.get(&y.0).is_none_or(|r| r.0 != k || !r.2) {
            continue;
        }
        let dies_here = |x: u64| x != y.0 && range.get(&x).is_some_and(|r| r.1 == k && r.2) && owned[&x] == owned[&y.0];
        if let Some(x) = form.1.iter().filter_map(|&i| binds.get(i)).map(|x| x.0).find(|&x| dies_here(x)) {
            let host = hosts.get(&x).map_or(x, |h| h.1);
            hosts.insert(y.0, (x, host));
        }
    }
    Ok(hosts)
}
