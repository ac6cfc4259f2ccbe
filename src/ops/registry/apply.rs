//! The one generic entry point every op runs through, and the kernel at the bottom of the
//! dispatcher's walk:
//!
//! ```text
//! apply(op, inputs, attrs): registered? → the modes (dispatch/) → the kernel:
//!     places checked → meta inference (every validation) → in-place versions checked →
//!     view | custom | float16 through float32 | the kernel of the place
//! ```

use std::sync::Arc;

use super::dispatch::{self, BackwardRule, Call};
use super::op::{CpuArg, CpuCall, GpuCall, GradCall, Half, Op, Saved};
use super::{AttrMap, RegisteredOp};
use crate::backend::cpu::{CpuData, gpu_bytes};
use crate::backend::gpu::{self, GpuBuffer, GpuContext};
use crate::tensor::Storage;
use crate::tensor::TensorMeta;
use crate::tensor::grad_mode::no_grad;
use crate::{DType, Error, Place, Result, Tensor};

/// Runs `op` on `inputs` with `attrs`: every output.
pub(crate) fn apply<O: Op>(op: &'static O, inputs: &[&Tensor], attrs: O::Attrs) -> Result<Vec<Tensor>> {
    crate::backend::cpu::heap::keep_freed_blocks();
    if !super::is_registered(op as *const O as usize, op.name()) {
        return Err(Error::invalid(
            op.name(),
            "this op is not in the registry (list it in its family's `static FAMILY`, and the family in ops/registry/catalog.rs)",
        ));
    }
    dispatch::run(&mut TypedCall { op, inputs, attrs, metas: None, inferred: None })
}

/// One call of `O`, as the dispatcher's modes see it.
struct TypedCall<'a, O: Op> {
    op: &'static O,
    inputs: &'a [&'a Tensor],
    attrs: O::Attrs,
    /// The inputs' metas, taken once.
    metas: Option<Vec<TensorMeta>>,
    /// Meta inference's outputs and plan (the plan until a backward rule takes it).
    inferred: Option<(Vec<TensorMeta>, Option<O::Plan>)>,
}

impl<O: Op> TypedCall<'_, O> {
    fn metas(&mut self) -> &[TensorMeta] {
        let inputs = self.inputs;
        self.metas.get_or_insert_with(|| inputs.iter().map(|t| t.to_meta()).collect())
    }

    fn infer(&mut self) -> Result<()> {
        if self.inferred.as_ref().is_none_or(|(_, plan)| plan.is_none()) {
            let metas = self.metas().to_vec();
            let refs: Vec<&TensorMeta> = metas.iter().collect();
            let (outs, plan) = infer(self.op, &refs, &self.attrs)?;
            self.inferred = Some((outs, Some(plan)));
        }
        Ok(())
    }
}

impl<O: Op> Call for TypedCall<'_, O> {
    fn op(&self) -> &'static dyn RegisteredOp {
        self.op
    }

    fn inputs(&self) -> &[&Tensor] {
        self.inputs
    }

    fn attr_map(&self) -> AttrMap {
        self.op.attr_map(&self.attrs)
    }

    fn outs(&mut self) -> Result<&[TensorMeta]> {
        if self.inferred.is_none() {
            self.infer()?;
        }
        Ok(self.inferred.as_ref().map_or(&[][..], |(outs, _)| outs.as_slice()))
    }

    fn check_places(&self) -> Result<()> {
        if !self.op.mixed_places()
            && let Some((first, rest)) = self.inputs.split_first()
        {
            for t in rest {
                if t.place() != first.place() {
                    return Err(Error::PlaceMismatch { op: self.op.name(), lhs: first.place(), rhs: t.place() });
                }
            }
        }
        Ok(())
    }

    fn kernel(&mut self) -> Result<Vec<Tensor>> {
        self.check_places()?;
        self.infer()?;
        let (op, inputs) = (self.op, self.inputs);
        crate::tensor::graph::check_saved_versions(op.name(), inputs, |i| op.reads_data(i))?;
        let metas = self.metas().to_vec();
        let Some((outs, Some(plan))) = &self.inferred else {
            return Err(Error::invalid(op.name(), "meta inference gave no plan"));
        };
        let values = if let Some(r) = op.custom(inputs, &self.attrs, plan, outs) {
            r?
        } else if op.view() {
            vec![inputs[0].with_shape(outs[0].shape.clone())]
        } else if through_float32(op.half(), &metas) {
            through_f32(op, inputs, &self.attrs, outs)?
        } else {
            run_kernels(op, inputs, &metas, &self.attrs, plan, outs)?
        };
        for i in op.inplace(inputs.len()) {
            inputs[i].bump_version();
        }
        Ok(values)
    }

    fn backward_rule(&mut self, outputs: &[Tensor]) -> Option<BackwardRule> {
        if !self.op.differentiable() {
            return None;
        }
        self.infer().ok()?;
        let plan = self.inferred.as_mut()?.1.take()?;
        let (op, attrs) = (self.op, self.attrs.clone());
        let n_diff = outputs.len().saturating_sub(op.aux_outputs());
        let saved_inputs: Vec<Tensor> = self.inputs.iter().map(|t| (*t).clone()).collect();
        let versions =
            crate::tensor::graph::versions_of(&self.inputs.iter().copied().chain(outputs).collect::<Vec<_>>());
        let saved_outputs: Vec<Saved> = outputs
            .iter()
            .enumerate()
            .map(|(i, t)| if i < n_diff { Saved::Weak(t.downgrade()) } else { Saved::Strong(t.clone()) })
            .collect();
        Some(Box::new(move |grads: &[Tensor], needs: &[bool]| {
            let call = GradCall { inputs: &saved_inputs, outputs: &saved_outputs, grads, needs };
            crate::tensor::graph::with_saved_versions(op.name(), versions.clone(), || op.backward(&call, &attrs, &plan))
        }))
    }

    fn rerun(&self, inputs: &[&Tensor], place: Place) -> Result<Vec<Tensor>> {
        let mut m = self.op.attr_map(&self.attrs);
        if m.get("place").is_some() {
            m = m.with("place", place);
        }
        apply(self.op, inputs, self.op.parse_attrs(&m)?)
    }
}

/// Whether a call with inputs `metas` runs on float32 copies of its 16-bit float inputs.
fn through_float32(half: Half, metas: &[TensorMeta]) -> bool {
    if !metas.iter().any(|m| m.dtype.is_half()) {
        return false;
    }
    match half {
        Half::Native => false,
        Half::ViaF32 => true,
        Half::GpuFloat16 => {
            let native = metas.iter().all(|m| m.dtype != DType::BFloat16)
                && match metas[0].place {
                    Place::Gpu(index) => {
                        crate::flags::native_float16_enabled() && gpu::context(index).is_ok_and(|c| c.has_shader_f16())
                    }
                    Place::Cpu => false,
                };
            !native
        }
    }
}

/// `op`'s meta inference and the checks every output gets: an element or byte count past
/// the address space is an error here, not an allocation panic in a kernel (the GPU's own
/// limits are checked at allocation), and a GPU output needs a dtype the GPU has.
pub(super) fn infer<O: Op>(op: &O, inputs: &[&TensorMeta], attrs: &O::Attrs) -> Result<(Vec<TensorMeta>, O::Plan)> {
    let (outs, plan) = op.infer(inputs, attrs)?;
    for o in &outs {
        crate::tensor::check_size(op.name(), o.dims(), o.dtype)?;
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
/// (the casts are not NaN-checked on their own, the op's outputs are; their CPU time is the
/// op's).
fn through_f32<O: Op>(
    op: &'static O,
    inputs: &[&Tensor],
    attrs: &O::Attrs,
    outs: &[TensorMeta],
) -> Result<Vec<Tensor>> {
    no_grad(|| {
        super::dispatch::profile::suspended(|| {
            super::dispatch::check::without_checks(|| {
                let up: Vec<Tensor> = inputs
                    .iter()
                    .map(|t| if t.dtype().is_half() { t.cast(DType::Float32) } else { Ok((*t).clone()) })
                    .collect::<Result<_>>()?;
                let metas: Vec<TensorMeta> = up.iter().map(|t| t.to_meta()).collect();
                let refs: Vec<&TensorMeta> = metas.iter().collect();
                let (outs32, plan) = op.infer(&refs, attrs)?;
                let up_refs: Vec<&Tensor> = up.iter().collect();
                let ys = run_kernels(op, &up_refs, &metas, attrs, &plan, &outs32)?;
                ys.into_iter()
                    .zip(outs)
                    .map(|(y, m)| if y.dtype() != m.dtype { y.cast(m.dtype) } else { Ok(y) })
                    .collect()
            })
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
            let data = op.cpu(&mut call, attrs, plan)?;
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
            let ctx: Arc<GpuContext> = gpu::context(index)?;
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
