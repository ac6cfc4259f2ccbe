//! Merged updates: one rule's update of several parameters in one kernel dispatch, as
//! Paddle's `merged_momentum` / `merged_adam` and PyTorch's foreach Adam: inputs
//! `[param, grad, states...]` for each parameter, then the optional schedule; the attributes
//! are the single op's, for every parameter. The eager optimizers use them on a GPU, and a
//! GPU program's fusion pass turns adjacent single updates into them. On a GPU the
//! parameters run in as few dispatches as the device's storage buffers allow (at most 16
//! each), in order: the one place that knows the device's limit. A tensor updated in place
//! that shares memory with another input is an error on both places (each parameter updates
//! once); gradients may share memory.
//!
//! A merged kernel (`shaders/lib/merged_update.wgsl` included by the rule's shader) runs
//! 1-D: its variant `key` updates `key + 1` members, binding their own tensors in member
//! order, the schedule once, and taking parameter words `[groups · WORKGROUP, settings...,
//! (first workgroup, elements) of each member]`. Each member starts on a workgroup of its
//! own, so that no workgroup's invocations branch apart (a software adapter runs every
//! branch a SIMD group takes).

use super::single::{UpdateOp, check_member};
use super::{UpdateAttrs, UpdateRule, cpu};
use crate::backend::cpu::CpuData;
use crate::backend::gpu::{Bind, GpuContext, Variant, WORKGROUP};
use crate::ops::registry::Facts;
use crate::ops::registry::op::{CpuCall, GpuCall, Op, OpHeader};
use crate::tensor::TensorMeta;
use crate::{Error, Result};

/// Most parameters one merged update dispatch takes (the kernel's variants).
const MERGED_MAX: usize = 16;

/// The merged update of rule `R`, named `name`, of the single op `single`.
pub(crate) struct MergedUpdateOp<R: 'static> {
    name: &'static str,
    single: &'static UpdateOp<R>,
}

impl<R: UpdateRule> MergedUpdateOp<R> {
    pub(crate) const fn new(name: &'static str, single: &'static UpdateOp<R>) -> Self {
        MergedUpdateOp { name, single }
    }

    /// Tensors each parameter takes: itself, its gradient and its states.
    fn per() -> usize {
        2 + R::STATES.len()
    }

    /// Parameters a call with `inputs` inputs updates.
    pub(crate) fn members(inputs: usize) -> usize {
        inputs / Self::per()
    }

    /// One dispatch updating the parameters `group` of call `k` (their bindings by `member`).
    fn dispatch<'a>(
        &self,
        k: &'a GpuCall<'_>,
        a: &UpdateAttrs<R>,
        group: &[usize],
        member: &dyn Fn(usize) -> Vec<Bind<'a>>,
    ) -> Result<()> {
        let per = Self::per();
        let scheduled = k.ins.len() % per == 1;
        let mut binds: Vec<Bind<'a>> = group.iter().flat_map(|&m| member(m)).collect();
        binds.push(if scheduled { Bind::read(k.x(k.ins.len() - 1)) } else { Bind::unused(k.ctx) });
        let (ranges, groups) = member_words(group.iter().map(|&m| k.ins[m * per].numel() as u32))
            .ok_or_else(|| Error::invalid(self.name, "more than 2^32 invocations in one dispatch"))?;
        let mut params = vec![(groups * WORKGROUP as u64) as u32];
        params.extend(a.words(scheduled.then(|| k.ins[k.ins.len() - 1].numel())));
        params.extend(ranges);
        let grid = crate::backend::gpu::grid(k.ctx, groups)?;
        k.ctx.dispatch(self.single.kernel(), group.len() as u32 - 1, "main", &binds, &params, grid)
    }
}

impl<R: UpdateRule> OpHeader for MergedUpdateOp<R> {
    type Attrs = UpdateAttrs<R>;
    type Plan = ();

    fn name(&self) -> &'static str {
        self.name
    }
}

impl<R: UpdateRule> Op for MergedUpdateOp<R> {
    fn infer(&self, xs: &[&TensorMeta], a: &UpdateAttrs<R>) -> Result<(Vec<TensorMeta>, ())> {
        let (op, per) = (self.name, Self::per());
        let members = Self::members(xs.len());
        if members == 0 || xs.len() % per > 1 {
            return Err(Error::invalid(
                op,
                format!(
                    "takes parameters, each with its gradient and {} states, and an optional \
                     schedule, got {} tensors",
                    R::STATES.len(),
                    xs.len()
                ),
            ));
        }
        let schedule = (xs.len() % per == 1).then(|| xs[xs.len() - 1]);
        for m in 0..members {
            let mut member: Vec<&TensorMeta> = xs[m * per..(m + 1) * per].to_vec();
            member.extend(schedule);
            check_member::<R>(op, &member, a)?;
        }
        Ok((Vec::new(), ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &UpdateAttrs<R>, _: &()) -> Result<Vec<CpuData>> {
        cpu::update(self.name, k, a)
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &UpdateAttrs<R>, _: &()) -> Result<()> {
        let per = Self::per();
        // Each member's bindings: the parameter and states writable, the gradient read.
        let member = |m: usize| -> Vec<Bind<'_>> {
            let base = m * per;
            let mut b = vec![Bind::write(k.x(base)), Bind::read(k.x(base + 1))];
            b.extend((base + 2..base + per).map(|i| Bind::write(k.x(i))));
            b
        };
        let members = Self::members(k.ins.len());
        // As on the CPU: a tensor updated in place shares memory with no other input (WebGPU
        // also forbids a buffer bound twice in one dispatch when either binding is writable);
        // inputs only read may repeat (two gradients that are views of one buffer).
        let writable: Vec<bool> = (0..k.ins.len()).map(|i| i < members * per && i % per != 1).collect();
        for i in (0..k.ins.len()).filter(|&i| writable[i]) {
            if let Some(j) = (0..k.ins.len()).find(|&j| j != i && k.x(j).id == k.x(i).id) {
                return Err(Error::invalid(
                    self.name,
                    format!("input {i} is updated in place and shares memory with input {j}"),
                ));
            }
        }
        // Dispatches of as many members as the device binds and 2³² invocations allow.
        let capacity = capacity(k.ctx, per, 1, MERGED_MAX);
        let elements = |m: usize| k.ins[m * per].numel() as u32;
        let mut group: Vec<usize> = Vec::new();
        for m in 0..members {
            let fits = member_words(group.iter().chain([&m]).map(|&g| elements(g))).is_some();
            if !group.is_empty() && (group.len() == capacity || !fits) {
                self.dispatch(k, a, &std::mem::take(&mut group), &member)?;
            }
            group.push(m);
        }
        self.dispatch(k, a, &group, &member)
    }

    fn facts(&self) -> Facts {
        Facts { merged_update: Some(Self::per()), ..Facts::NONE }
    }

    fn inplace(&self, inputs: usize) -> Vec<usize> {
        let per = Self::per();
        (0..Self::members(inputs)).flat_map(|m| std::iter::once(m * per).chain(m * per + 2..(m + 1) * per)).collect()
    }
}

/// Members one merged dispatch may take on this device: `own` storage bindings each, then
/// `shared` more and the parameter words, within the per-stage limit; at most `max`.
fn capacity(ctx: &GpuContext, own: usize, shared: usize, max: usize) -> usize {
    let limit = ctx.limits.max_storage_buffers_per_shader_stage as usize;
    (limit.saturating_sub(shared + 1) / own).clamp(1, max)
}

/// The words a merged dispatch ends with, `(first workgroup, elements)` per member of
/// `counts` elements, and the workgroups of all; None past 2³² invocations.
fn member_words(counts: impl IntoIterator<Item = u32>) -> Option<(Vec<u32>, u64)> {
    let mut words = Vec::new();
    let mut groups = 0u64;
    for n in counts {
        words.extend([groups as u32, n]);
        groups += (n as u64).div_ceil(WORKGROUP as u64);
    }
    (groups * WORKGROUP as u64 <= u32::MAX as u64).then_some((words, groups))
}

/// The variant keys of a merged kernel: one per member count.
pub(super) fn keys() -> Vec<u32> {
    (0..MERGED_MAX as u32).collect()
}

/// Variant `key` of rule `R`'s merged kernel: `key + 1` parameters, each binding its
/// parameter, gradient and states, loaded into and stored from one vector by a switch case
/// each around one call of the kernel's `update`; the members' ranges start at parameter
/// word `words + 4` (the element count, lr, wd, the rule's `words` settings and
/// `scheduled` come first).
pub(super) fn variant<R: UpdateRule, const WORDS: usize>(key: u32) -> Variant {
    let k = key as usize + 1;
    let tensors: Vec<&str> = ["param", "grad"].into_iter().chain(R::STATES.iter().copied()).collect();
    let n = tensors.len();
    let lanes = ["x", "y", "z", "w"];
    let (mut decls, mut loads, mut stores) = (String::new(), String::new(), String::new());
    for t in 0..k {
        for (j, name) in tensors.iter().enumerate() {
            let access = if j == 1 { "read" } else { "read_write" };
            decls += &format!("@group(0) @binding({}) var<storage, {access}> {name}_{t}: array<f32>;\n", n * t + j);
        }
        let values: Vec<String> = tensors.iter().map(|name| format!("{name}_{t}[e]")).collect();
        let zeros = vec!["0.0"; 4 - n].join(", ");
        let sep = if zeros.is_empty() { "" } else { ", " };
        loads += &format!("        case {t}u: {{ x = vec4<f32>({}{sep}{zeros}); }}\n", values.join(", "));
        let written: Vec<String> =
            (0..n).filter(|&j| j != 1).map(|j| format!("{}_{t}[e] = r.{};", tensors[j], lanes[j])).collect();
        stores += &format!("        case {t}u: {{ {} }}\n", written.join(" "));
    }
    vec![
        ("K", k.to_string()),
        ("AT", (WORDS + 4).to_string()),
        ("TENSORS", decls),
        ("LOADS", loads),
        ("STORES", stores),
        ("SCHEDULE", (n * k).to_string()),
        ("PARAMS", (n * k + 1).to_string()),
    ]
}

/// The merged update kernels' files, each with the bindings a parameter adds: variant `key`
/// binds `own · key` storage buffers more than variant 0, and runs only where the device's
/// `max_storage_buffers_per_shader_stage` allows (for the shader-validation tests).
pub fn merged_kernel_files() -> Vec<(&'static str, usize)> {
    use super::{AdamKind, MomentumKind, SgdKind};
    fn own<R: UpdateRule>() -> (&'static str, usize) {
        (R::ops().single.kernel().file, 2 + R::STATES.len())
    }
    vec![own::<SgdKind>(), own::<MomentumKind>(), own::<AdamKind>()]
}
