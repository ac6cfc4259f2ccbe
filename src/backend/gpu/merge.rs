//! Merged dispatches for execution plans: adjacent dispatches of one kernel over different
//! tensors become one (multi-tensor optimizer updates, as Paddle's `merged_adam` and
//! PyTorch's foreach/fused Adam do), where the kernel declares how.
//!
//! A mergeable kernel runs 1-D over `n` elements, binds its own tensors first and shared
//! buffers after them, and takes parameter words `[n, settings..., 0, n]`. Its variant `key`
//! updates `key + 1` members: their own tensors in member order, the shared buffers once,
//! and `[groups · WORKGROUP, settings..., (first workgroup, elements) of each member]`, each
//! member starting on a workgroup of its own, so that no workgroup's invocations branch apart
//! (a software adapter runs every branch a SIMD group takes). Members merge when they are
//! adjacent in the tape with the same settings and shared buffers, no member binds a buffer
//! another one binds, and the merged bindings fit the device's storage-buffer limit.

use std::collections::HashSet;

use super::WORKGROUP;
use super::capture::Cmd;
use super::context::{Access, GpuContext};
use super::recorder::grid;
use super::shader::Kernel;
use crate::Result;

/// How a kernel's dispatches merge.
pub(crate) struct MergeRule {
    pub kernel: &'static Kernel,
    /// Bindings each member binds for itself, first in its binding list.
    pub own: usize,
    /// Parameter words after the element count that must agree (the settings); a single
    /// member's words end with `0, n` after them.
    pub settings: usize,
    /// Most members one dispatch takes: the kernel's variant keys are `0..max`.
    pub max: usize,
}

/// The kernels whose dispatches merge.
static RULES: [&MergeRule; 3] = {
    use crate::optimizer::update::{ADAM_MERGE, MOMENTUM_MERGE, SGD_MERGE};
    [&SGD_MERGE, &MOMENTUM_MERGE, &ADAM_MERGE]
};

/// The kernel files whose variants merge, each with the bindings a member adds: variant
/// `key` binds `own · key` storage buffers more than variant 0, and runs only where the
/// device's `max_storage_buffers_per_shader_stage` allows (for the shader-validation tests).
pub fn merged_kernel_files() -> Vec<(&'static str, usize)> {
    RULES.iter().map(|r| (r.kernel.file, r.own)).collect()
}

/// `cmds` with each run of mergeable adjacent dispatches replaced by merged ones.
pub(crate) fn merge_dispatches(ctx: &GpuContext, cmds: Vec<Cmd>) -> Vec<Cmd> {
    let mut out: Vec<Cmd> = Vec::with_capacity(cmds.len());
    let mut run: Vec<Cmd> = Vec::new();
    let mut rule: Option<&MergeRule> = None;
    for cmd in cmds {
        if let Some(r) = rule {
            if run.len() < member_limit(ctx, r, &run[0]) && joins(r, &run, &cmd) {
                run.push(cmd);
                continue;
            }
            out.extend(merged(ctx, r, std::mem::take(&mut run)));
            rule = None;
        }
        match RULES.iter().find(|r| is_single(r, &cmd)) {
            Some(&r) => {
                rule = Some(r);
                run.push(cmd);
            }
            None => out.push(cmd),
        }
    }
    if let Some(r) = rule {
        out.extend(merged(ctx, r, run));
    }
    out
}

/// True when `cmd` is a single-member dispatch of `r`'s kernel.
fn is_single(r: &MergeRule, cmd: &Cmd) -> bool {
    match cmd {
        Cmd::Dispatch { kernel, key: 0, entry: "main", binds, params, .. } => {
            std::ptr::eq(*kernel, r.kernel) && binds.len() >= r.own && params.len() == 4 * (r.settings + 3)
        }
        _ => false,
    }
}

/// Members one merged dispatch of `r` may take on this device: its storage bindings (the
/// members' own, the shared ones and the parameters) within the per-stage limit.
fn member_limit(ctx: &GpuContext, r: &MergeRule, first: &Cmd) -> usize {
    let Cmd::Dispatch { binds, .. } = first else { return 1 };
    capacity(ctx, r.own, binds.len() - r.own, r.max)
}

/// Members one merged dispatch may take on this device: `own` storage bindings each, then
/// `shared` more and the parameter words, within the per-stage limit; at most `max`.
pub(crate) fn capacity(ctx: &GpuContext, own: usize, shared: usize, max: usize) -> usize {
    let limit = ctx.limits.max_storage_buffers_per_shader_stage as usize;
    (limit.saturating_sub(shared + 1) / own).clamp(1, max)
}

/// The words a merged dispatch ends with, `(first workgroup, elements)` per member of
/// `counts` elements, and the workgroups of all; None past 2³² invocations.
pub(crate) fn member_words(counts: impl IntoIterator<Item = u32>) -> Option<(Vec<u32>, u64)> {
    let mut words = Vec::new();
    let mut groups = 0u64;
    for n in counts {
        words.extend([groups as u32, n]);
        groups += (n as u64).div_ceil(WORKGROUP as u64);
    }
    (groups * WORKGROUP as u64 <= u32::MAX as u64).then_some((words, groups))
}

/// True when `cmd` may join `run`: a single dispatch of the same kernel with the same settings
/// and shared buffers, binding no buffer a member binds.
fn joins(r: &MergeRule, run: &[Cmd], cmd: &Cmd) -> bool {
    let (Cmd::Dispatch { binds: first, params: first_params, .. }, Cmd::Dispatch { binds, params, .. }) =
        (&run[0], cmd)
    else {
        return false;
    };
    if !is_single(r, cmd) {
        return false;
    }
    // The merged dispatch's invocations must count in a u32, as one dispatch's do.
    let count = |c: &Cmd| match c {
        Cmd::Dispatch { params, .. } => elements(params),
        _ => 0,
    };
    if member_words(run.iter().chain([cmd]).map(count)).is_none()
        || binds.len() != first.len()
        || params[4..4 * (r.settings + 1)] != first_params[4..4 * (r.settings + 1)]
    {
        return false;
    }
    let shared = |b: &[(u64, wgpu::Buffer, bool)]| b[r.own..].iter().map(|(id, _, w)| (*id, *w)).collect::<Vec<_>>();
    if shared(binds) != shared(first) {
        return false;
    }
    let taken: HashSet<u64> = run
        .iter()
        .filter_map(|c| match c {
            Cmd::Dispatch { binds, .. } => Some(binds[..r.own].iter().map(|b| b.0)),
            _ => None,
        })
        .flatten()
        .collect();
    binds[..r.own].iter().all(|b| !taken.contains(&b.0))
        && first[r.own..].iter().all(|b| !binds[..r.own].iter().any(|o| o.0 == b.0))
}

/// The element count a single dispatch's parameter words start with.
fn elements(params: &[u8]) -> u32 {
    u32::from_le_bytes([params[0], params[1], params[2], params[3]])
}

/// One dispatch doing the work of `run`, or `run` as it is when it holds one member or the
/// merged pipeline cannot be made (the members then run as they were recorded).
fn merged(ctx: &GpuContext, r: &MergeRule, run: Vec<Cmd>) -> Vec<Cmd> {
    if run.len() == 1 {
        return run;
    }
    match merge_run(ctx, r, &run) {
        Ok(cmd) => vec![cmd],
        Err(_) => run,
    }
}

fn merge_run(ctx: &GpuContext, r: &MergeRule, run: &[Cmd]) -> Result<Cmd> {
    let mut binds = Vec::new();
    let mut counts = Vec::with_capacity(run.len());
    let mut head: &[u8] = &[];
    let mut shared: &[(u64, wgpu::Buffer, bool)] = &[];
    let (mut kernel, mut entry) = (r.kernel, "main");
    for cmd in run {
        let Cmd::Dispatch { kernel: k, entry: e, binds: b, params, .. } = cmd else { continue };
        counts.push(elements(params));
        binds.extend_from_slice(&b[..r.own]);
        shared = &b[r.own..];
        head = &params[4..4 * (r.settings + 1)];
        (kernel, entry) = (*k, *e);
    }
    binds.extend_from_slice(shared);
    let too_many = || crate::Error::Gpu { op: "Executor plan", msg: format!("{}: too many invocations", kernel.file) };
    let (words, groups) = member_words(counts.iter().copied()).ok_or_else(too_many)?;
    let mut params = ((groups * WORKGROUP as u64) as u32).to_le_bytes().to_vec();
    params.extend_from_slice(head);
    params.extend(words.iter().flat_map(|w| w.to_le_bytes()));
    let access: Vec<Access> = binds.iter().map(|b| if b.2 { Access::ReadWrite } else { Access::Read }).collect();
    let key = counts.len() as u32 - 1;
    let pipeline = ctx.pipeline(kernel, key, entry, &access)?;
    let groups = grid(ctx, groups)?;
    Ok(Cmd::Dispatch { kernel, key, entry, pipeline, binds, params, groups })
}
