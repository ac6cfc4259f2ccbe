//! The `Op` trait: what one registry entry states (name, attributes, meta inference, CPU
//! kernel, GPU kernel, backward rule), and the views of the data its kernels and backward
//! rule receive.

use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

use super::attrs::{AttrMap, Attrs};
use super::facts::Facts;
use crate::backend::cpu::CpuData;
use crate::backend::gpu::{GpuBuffer, GpuContext};
use crate::tensor::{TensorMeta, WeakTensor};
use crate::{Error, Result, Tensor};

/// How an op treats float16 inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Half {
    /// The generic entry casts float16 inputs to float32, runs the op and casts the float16
    /// outputs back (float16 is a storage type; arithmetic runs in f32).
    ViaF32,
    /// The kernels handle float16 themselves (casts, fills, raw copies).
    Native,
    /// The GPU kernels take float16 as WGSL `f16` elements where the device has
    /// `SHADER_F16` (and `FLAGS_native_float16` is on); elsewhere, on the CPU and for
    /// bfloat16, as `ViaF32`.
    GpuFloat16,
}

/// What an entry is called and what it carries; written by [`registry_entry!`] or
/// [`op_header!`] in one line.
pub(crate) trait OpHeader {
    /// The typed attributes.
    type Attrs: Attrs;
    /// What meta inference works out for the kernels (geometry, strides): computed once per
    /// call (and once per shape signature by a program executor).
    type Plan: Send + Sync + 'static;

    /// The op's name (Paddle's where one exists).
    fn name(&self) -> &'static str;
}

/// One registry entry. The public function of an op builds its attribute struct and calls
/// [`apply`](super::apply::apply); everything else (input count, place and dtype checks,
/// the float16 wrapper, meta and eager modes, allocation, autograd) is generic.
pub(crate) trait Op: OpHeader + Send + Sync + 'static {
    /// Output shapes, dtypes and places, and every validation (typed errors naming the op).
    fn infer(&self, x: &[&TensorMeta], a: &Self::Attrs) -> Result<(Vec<TensorMeta>, Self::Plan)>;

    /// The CPU kernel: one `CpuData` per output, of the inferred dtype and size.
    fn cpu(&self, k: &mut CpuCall<'_>, a: &Self::Attrs, p: &Self::Plan) -> Result<Vec<CpuData>>;

    /// The GPU kernel: records dispatches writing the preallocated outputs.
    fn gpu(&self, k: &GpuCall<'_>, a: &Self::Attrs, p: &Self::Plan) -> Result<()>;

    /// True when the op has a backward rule.
    fn differentiable(&self) -> bool {
        false
    }

    /// Gradients of the inputs (`None` where not needed or not defined), written in tensor
    /// ops so they run on the tensors' place and can be differentiated again.
    fn backward(&self, g: &GradCall<'_>, a: &Self::Attrs, p: &Self::Plan) -> Result<Vec<Option<Tensor>>> {
        let _ = (g, a, p);
        Err(Error::Autograd(format!("{} has no backward rule", self.name())))
    }

    /// What passes need to know about the op (fusion, evaluation rewrites, merging...).
    fn facts(&self) -> Facts {
        Facts::NONE
    }

    /// The float16 policy.
    fn half(&self) -> Half {
        Half::ViaF32
    }

    /// Inputs the kernels update in place (optimizer states, running statistics), for a call
    /// with `inputs` inputs (a merged update's depend on how many parameters it takes).
    fn inplace(&self, inputs: usize) -> Vec<usize> {
        let _ = inputs;
        Vec::new()
    }

    /// True when output 0 shares input 0's memory (reshape-like ops): no kernel runs.
    fn view(&self) -> bool {
        false
    }

    /// True when the kernels read input `i`'s values (not only its shape): what the
    /// in-place version check inside backward rules looks at.
    fn reads_data(&self, i: usize) -> bool {
        let _ = i;
        !self.view()
    }

    /// Trailing outputs that are not differentiable (masks, saved statistics, indices):
    /// the backward rule keeps them alive and sees gradients only for the others.
    fn aux_outputs(&self) -> usize {
        0
    }

    /// True when inputs may live on different places (moving between places).
    fn mixed_places(&self) -> bool {
        false
    }

    /// The attributes as a flat map.
    fn attr_map(&self, a: &Self::Attrs) -> AttrMap {
        a.to_map()
    }

    /// Parses a flat map into the typed attributes.
    fn parse_attrs(&self, m: &AttrMap) -> Result<Self::Attrs> {
        Self::Attrs::from_map(self.name(), m)
    }

    /// Runs the op eagerly outside the CPU/GPU kernel pair (moving data between places):
    /// `None` uses the kernels.
    fn custom(
        &self,
        x: &[&Tensor],
        a: &Self::Attrs,
        p: &Self::Plan,
        outs: &[TensorMeta],
    ) -> Option<Result<Vec<Tensor>>> {
        let _ = (x, a, p, outs);
        None
    }
}

/// The `N` input metas of an op that takes exactly `N` tensors (the typed error otherwise):
/// `let [x, y] = inputs(OP, xs)?;`.
pub(crate) fn inputs<'a, const N: usize>(op: &'static str, xs: &[&'a TensorMeta]) -> Result<[&'a TensorMeta; N]> {
    xs.try_into().map_err(|_| {
        let count = match N {
            0 => "no tensors".to_string(),
            1 => "one tensor".to_string(),
            n => format!("{n} tensors"),
        };
        Error::invalid(op, format!("takes {count}, got {}", xs.len()))
    })
}

/// A CPU input: read-locked, or write-locked for in-place ops.
pub(crate) enum CpuArg<'a> {
    Read(RwLockReadGuard<'a, CpuData>),
    Write(RwLockWriteGuard<'a, CpuData>),
}

/// What a CPU kernel sees: the inputs' data and metas, and the output metas.
pub(crate) struct CpuCall<'a> {
    pub(super) args: Vec<CpuArg<'a>>,
    pub ins: &'a [TensorMeta],
    pub outs: &'a [TensorMeta],
}

impl CpuCall<'_> {
    /// Input `i`'s data.
    pub fn x(&self, i: usize) -> &CpuData {
        match &self.args[i] {
            CpuArg::Read(g) => g,
            CpuArg::Write(g) => g,
        }
    }

    /// Input `i`'s data, mutably (declared in `Op::inplace`).
    pub fn x_mut(&mut self, i: usize) -> &mut CpuData {
        match &mut self.args[i] {
            CpuArg::Write(g) => g,
            CpuArg::Read(_) => panic!("input {i} is not declared in-place"),
        }
    }

    /// Every input's data; in-place inputs mutably, the others shared.
    pub fn split(&mut self) -> Vec<std::result::Result<&mut CpuData, &CpuData>> {
        self.args
            .iter_mut()
            .map(|a| match a {
                CpuArg::Write(g) => Ok(&mut **g),
                CpuArg::Read(g) => Err(&**g),
            })
            .collect()
    }
}

/// What a GPU kernel sees: the device, the inputs' buffers, the preallocated outputs and
/// every meta.
pub(crate) struct GpuCall<'a> {
    pub ctx: &'a Arc<GpuContext>,
    pub(super) inputs: Vec<&'a Arc<GpuBuffer>>,
    pub(super) outputs: Vec<GpuBuffer>,
    pub ins: &'a [TensorMeta],
    pub outs: &'a [TensorMeta],
}

impl GpuCall<'_> {
    /// Input `i`'s buffer.
    pub fn x(&self, i: usize) -> &GpuBuffer {
        self.inputs[i]
    }

    /// Output `i`'s buffer.
    pub fn y(&self, i: usize) -> &GpuBuffer {
        &self.outputs[i]
    }
}

/// What a backward rule sees: the inputs, the outputs, the gradients of the differentiable
/// outputs and which inputs need a gradient.
pub(crate) struct GradCall<'a> {
    pub(super) inputs: &'a [Tensor],
    pub(super) outputs: &'a [Saved],
    pub grads: &'a [Tensor],
    pub needs: &'a [bool],
}

/// An output kept for backward: weakly for differentiable outputs (which point at the node
/// themselves), strongly for auxiliary ones.
pub(crate) enum Saved {
    Weak(WeakTensor),
    Strong(Tensor),
}

impl GradCall<'_> {
    /// Input `i`.
    pub fn x(&self, i: usize) -> &Tensor {
        &self.inputs[i]
    }

    /// Output `i`.
    pub fn y(&self, i: usize) -> Result<Tensor> {
        match &self.outputs[i] {
            Saved::Weak(w) => w.upgrade(),
            Saved::Strong(t) => Ok(t.clone()),
        }
    }

    /// How many inputs the op was called with.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The gradient of output 0.
    pub fn g(&self) -> &Tensor {
        &self.grads[0]
    }

    /// True when input `i` needs a gradient.
    pub fn needs(&self, i: usize) -> bool {
        self.needs.get(i).copied().unwrap_or(false)
    }

    /// `Some(f())` when input `i` needs a gradient, else `None`.
    pub fn grad_if(&self, i: usize, f: impl FnOnce() -> Result<Tensor>) -> Result<Option<Tensor>> {
        if self.needs(i) { f().map(Some) } else { Ok(None) }
    }
}
