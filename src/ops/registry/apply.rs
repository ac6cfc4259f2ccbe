//! The one generic entry point every op runs through:
//!
//! ```text
//! apply(op, inputs, attrs): check places → infer meta (every validation) → by the inputs:
//!     static → append an op to the inputs' Program (or the current one), return its variables
//!     meta  → tensors with shape/dtype/place only, no kernel
//!     eager → (float16 through float32) → the kernel of the place → (CPU shadow rerun and
//!             comparison) → record the autograd node
//! ```

use std::sync::Arc;

use super::op::{CpuArg, CpuCall, GpuCall, GradCall, Half, Op, Saved};
use crate::autograd::{is_grad_enabled, no_grad, record};
use crate::backend::Storage;
use crate::backend::cpu::{CpuData, gpu_bytes};
use crate::backend::gpu::{self, GpuBuffer, GpuContext};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Place, Result, Tensor};

/// Runs `op` on `inputs` with `attrs`: every output.
pub(crate) fn apply<O: Op>(op: &'static O, inputs: &[&Tensor], attrs: O::Attrs) -> Result<Vec<Tensor>> {
    crate::backend::cpu::heap::keep_freed_blocks();
    let name = op.name();
    if !super::is_registered(op as *const O as usize, name) {
        return Err(Error::invalid(
            name,
            "this op is not in the registry (declare it with `registry_entry!` or as `pub(crate) static NAME: SomeOp = ...` so build.rs lists it)",
        ));
    }
    // While `jit::to_static` traces, every op is recorded, even one that reads only eager
    // tensors (a parameter transposed, batch norm's running statistics): run now, it would
    // freeze their values into the program as constants.
    let building = inputs.iter().any(|t| t.is_static_var())
        || (inputs.is_empty() && crate::static_::in_static_mode())
        || (!inputs.is_empty() && crate::static_::capture::active());
    if !building
        && !op.mixed_places()
        && let Some((first, rest)) = inputs.split_first()
    {
        for t in rest {
            if t.place() != first.place() {
                return Err(Error::PlaceMismatch { op: name, lhs: first.place(), rhs: t.place() });
            }
        }
    }
    let metas: Vec<TensorMeta> = inputs.iter().map(|t| t.to_meta()).collect();
    let refs: Vec<&TensorMeta> = metas.iter().collect();
    let (outs, plan) = infer(op, &refs, &attrs)?;
    if building {
        let records = op.differentiable() && is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
        let values = crate::static_::append(name, inputs, op.attr_map(&attrs), &outs, records)?;
        if records {
            record_node(op, inputs, &values, attrs, plan);
        }
        return Ok(values);
    }
    if inputs.iter().any(|t| t.is_meta()) {
        return Ok(outs.iter().map(Tensor::from_meta).collect());
    }
    crate::autograd::check_saved_versions(name, inputs, |i| op.reads_data(i))?;
    let mut shadow = None;
    let values = if let Some(r) = op.custom(inputs, &attrs, &plan, &outs) {
        r?
    } else if op.view() {
        vec![inputs[0].with_shape(outs[0].shape.clone())]
    } else {
        shadow = crate::shadow::prepare(op, inputs, &attrs, &outs)?;
        if op.half() == Half::ViaF32 && metas.iter().any(|m| m.dtype == DType::Float16) {
            through_f32(op, inputs, &attrs, &outs)?
        } else {
            run_kernels(op, inputs, &metas, &attrs, &plan, &outs)?
        }
    };
    let inplace = op.inplace(inputs.len());
    for &i in &inplace {
        inputs[i].bump_version();
    }
    if let Some(shadow) = shadow {
        shadow.check(op, inputs, &values)?;
    }
    if crate::flags::nan_inf_checking() {
        crate::flags::check_outputs(name, inputs, &inplace, &values)?;
    }
    if op.differentiable() && is_grad_enabled() && inputs.iter().any(|t| t.requires_grad()) {
        record_node(op, inputs, &values, attrs, plan);
    }
    Ok(values)
}

/// `op`'s meta inference and the checks every output gets: an element or byte count past
/// the address space is an error here, not an allocation panic in a kernel (the GPU's own
/// limits are checked at allocation), and a GPU output needs a dtype the GPU has.
pub(super) fn infer<O: Op>(op: &O, inputs: &[&TensorMeta], attrs: &O::Attrs) -> Result<(Vec<TensorMeta>, O::Plan)> {
    let (outs, plan) = op.infer(inputs, attrs)?;
    for o in &outs {
        crate::tensor::create::check_size(op.name(), o.dims(), o.dtype)?;
        if o.place.is_gpu() {
            crate::ops::wgsl::check_gpu_dtype(op.name(), o.dtype, o.place)?;
        }
    }
    Ok((outs, plan))
}

/// `apply` for single-output ops.
pub(crate) fn apply1<O: Op>(op: &'static O, inputs: &[&Tensor], attrs: O::Attrs) -> Result<Tensor> {
    let mut v = apply(op, inputs, attrs)?;
    if v.is_empty() {
        return Err(Error::invalid(op.name(), "the op has no outputs"));
    }
    Ok(v.swap_remove(0))
}

/// Runs `op` on float32 copies of its float16 inputs and casts the float16 outputs back
/// (the casts are not NaN-checked on their own: the op's outputs are).
fn through_f32<O: Op>(
    op: &'static O,
    inputs: &[&Tensor],
    attrs: &O::Attrs,
    outs: &[TensorMeta],
) -> Result<Vec<Tensor>> {
    no_grad(|| {
        crate::flags::without_checks(|| {
            let up: Vec<Tensor> = inputs
                .iter()
                .map(|t| if t.dtype() == DType::Float16 { t.cast(DType::Float32) } else { Ok((*t).clone()) })
                .collect::<Result<_>>()?;
            let metas: Vec<TensorMeta> = up.iter().map(|t| t.to_meta()).collect();
            let refs: Vec<&TensorMeta> = metas.iter().collect();
            let (outs32, plan) = op.infer(&refs, attrs)?;
            let up_refs: Vec<&Tensor> = up.iter().collect();
            let ys = run_kernels(op, &up_refs, &metas, attrs, &plan, &outs32)?;
            ys.into_iter().zip(outs).map(|(y, m)| if y.dtype() != m.dtype { y.cast(m.dtype) } else { Ok(y) }).collect()
        })
    })
}

/// The kernel of the inputs' place (the outputs' place for ops without inputs).
fn run_kernels<O: Op>(
    op: &'static O,
    inputs: &[&Tensor],
    metas: &[TensorMeta],
    attrs: &O::Attrs,
    plan: &O::Plan,
    outs: &[TensorMeta],
) -> Result<Vec<Tensor>> {
    let place = inputs.first().map(|t| t.place()).or_else(|| outs.first().map(|o| o.place)).unwrap_or(Place::Cpu);
    let skip = !outs.is_empty() && outs.iter().all(|o| o.numel() == 0);
    match place {
        Place::Cpu => {
            if skip {
                return Ok(outs
                    .iter()
                    .map(|o| Tensor::from_cpu(CpuData::zeros(o.dtype, 0), o.shape.clone()))
                    .collect());
            }
            let inplace = op.inplace(inputs.len());
            check_inplace_aliasing(op.name(), inputs, &inplace)?;
            let args = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| match t.storage() {
                    Storage::Cpu(d) if inplace.contains(&i) => {
                        Ok(CpuArg::Write(d.write().unwrap_or_else(|e| e.into_inner())))
                    }
                    Storage::Cpu(d) => Ok(CpuArg::Read(d.read().unwrap_or_else(|e| e.into_inner()))),
                    _ => Err(Error::PlaceMismatch { op: op.name(), lhs: Place::Cpu, rhs: t.place() }),
                })
                .collect::<Result<_>>()?;
            let mut call = CpuCall { args, ins: metas, outs };
            let data = crate::profiler::time_cpu(op.name(), || op.cpu(&mut call, attrs, plan))?;
            drop(call);
            check_outputs(op.name(), &data, outs)?;
            Ok(data.into_iter().zip(outs).map(|(d, o)| Tensor::from_cpu(d, o.shape.clone())).collect())
        }
        Place::Gpu(index) => {
            let buffers: Vec<&Arc<GpuBuffer>> = inputs
                .iter()
                .map(|t| match t.storage() {
                    Storage::Gpu(b) => Ok(b),
                    _ => Err(Error::PlaceMismatch { op: op.name(), lhs: place, rhs: t.place() }),
                })
                .collect::<Result<_>>()?;
            let ctx: Arc<GpuContext> = match buffers.first() {
                Some(b) => b.ctx.clone(),
                None => gpu::context(index)?,
            };
            let outputs: Vec<GpuBuffer> =
                outs.iter().map(|o| ctx.alloc(op.name(), gpu_bytes(o.dtype, o.numel()))).collect::<Result<_>>()?;
            let call = GpuCall { ctx: &ctx, inputs: buffers, outputs, ins: metas, outs };
            if !skip {
                op.gpu(&call, attrs, plan)?;
            }
            Ok(call.outputs.into_iter().zip(outs).map(|(b, o)| Tensor::from_gpu(b, o.shape.clone(), o.dtype)).collect())
        }
    }
}

/// An in-place input must not share memory with another input (its write lock would wait
/// on the other's read lock forever).
fn check_inplace_aliasing(op: &'static str, inputs: &[&Tensor], inplace: &[usize]) -> Result<()> {
    for &i in inplace {
        for (j, t) in inputs.iter().enumerate() {
            if j != i && t.storage().same_memory(inputs[i].storage()) {
                return Err(Error::invalid(
                    op,
                    format!("input {i} is updated in place and shares memory with input {j}"),
                ));
            }
        }
    }
    Ok(())
}

/// A kernel's outputs must match its meta inference (a mismatch is a bug in the op).
fn check_outputs(op: &'static str, data: &[CpuData], outs: &[TensorMeta]) -> Result<()> {
    if data.len() != outs.len() {
        return Err(Error::invalid(op, format!("the CPU kernel returned {} outputs for {}", data.len(), outs.len())));
    }
    for (i, (d, o)) in data.iter().zip(outs).enumerate() {
        if d.dtype() != o.dtype || d.len() != o.numel() {
            return Err(Error::invalid(
                op,
                format!(
                    "the CPU kernel's output {i} is {} × {} but meta inference says {} × {:?}",
                    d.dtype(),
                    d.len(),
                    o.dtype,
                    o.shape
                ),
            ));
        }
    }
    Ok(())
}

/// Records the autograd node of one call.
fn record_node<O: Op>(op: &'static O, inputs: &[&Tensor], outputs: &[Tensor], attrs: O::Attrs, plan: O::Plan) {
    let n_diff = outputs.len().saturating_sub(op.aux_outputs());
    let diff: Vec<&Tensor> = outputs[..n_diff].iter().filter(|t| t.dtype().is_float()).collect();
    if diff.len() != n_diff || n_diff == 0 {
        // An op whose differentiable outputs are not all float (a bool comparison) records
        // nothing: no gradient flows through integers.
        return;
    }
    let saved_inputs: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
    let versions = crate::autograd::versions_of(&inputs.iter().copied().chain(outputs).collect::<Vec<_>>());
    let saved_outputs: Vec<Saved> = outputs
        .iter()
        .enumerate()
        .map(|(i, t)| if i < n_diff { Saved::Weak(t.downgrade()) } else { Saved::Strong(t.clone()) })
        .collect();
    record(op.name(), inputs, &diff, move |c| {
        let call = GradCall { inputs: &saved_inputs, outputs: &saved_outputs, grads: c.grads, needs: c.needs };
        crate::autograd::with_saved_versions(op.name(), versions.clone(), || op.backward(&call, &attrs, &plan))
    });
}
