//! `conv2d` with an elementwise epilogue: the convolution kernel applies a chain of table
//! ops (activation, scale, residual add) to each output before storing it. The Executor's
//! fusion pass makes these ops from a `conv2d` whose only reader is a fusable chain
//! (`static_/fusion.rs`); the chain is the `fused_elementwise` postfix program with `x0`
//! standing for the convolution's output (bias included) and `x1..` for extra inputs
//! broadcast to its shape. On the CPU the convolution and the chain run one after the
//! other, exactly as unfused.

use super::super::window::{Padding, Pair};
use super::cpu::ConvGeom;
use super::{CONV2D_OP, Conv2dOptions, forward_cpu, forward_gpu};
use crate::backend::cpu::CpuData;
use crate::ops::epilogue::{EPILOGUE_EXTRAS, EPILOGUE_NODES, Epilogue, EpilogueTable, epilogue_strides};
use crate::ops::fused::Chain;
use crate::ops::registry::op::{CpuCall, GpuCall, Op};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::shape::contiguous_strides;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

const OP: &str = "conv2d_epilogue";

/// The epilogues `conv2d.wgsl` has run (extra inputs bind after `dst`).
pub(crate) static EPILOGUES: EpilogueTable = EpilogueTable::new(4);

/// `conv2d`'s keyword arguments and the epilogue chain.
#[derive(Clone, Debug, PartialEq, Eq, dygraph_derive::Attrs)]
pub(crate) struct Conv2dEpilogueAttrs {
    pub stride: Pair,
    pub padding: Padding,
    pub dilation: Pair,
    pub groups: usize,
    pub data_format: String,
    pub program: String,
}

registry_entry!(
    /// `conv2d(x, w, bias?)` followed by an elementwise chain, as one kernel: inputs
    /// `[x, weight, bias?, extra...]`, the bias present when there is one input more than
    /// the chain's extras need (made by the Executor's fusion pass).
    CONV2D_EPILOGUE: Conv2dEpilogueOp = "conv2d_epilogue", Conv2dEpilogueAttrs, EpiloguePlan
);

/// The convolution's geometry, whether it has a bias, the chain, the output shape and each
/// extra input's strides into it.
pub(crate) struct EpiloguePlan {
    geom: ConvGeom,
    bias: bool,
    chain: Chain,
    shape: Vec<usize>,
    strides: Vec<Vec<isize>>,
}

impl Op for Conv2dEpilogueOp {
    fn facts(&self) -> Facts {
        Facts { amp: AmpList::White, ..Facts::NONE }
    }
    fn infer(&self, xs: &[&TensorMeta], a: &Conv2dEpilogueAttrs) -> Result<(Vec<TensorMeta>, EpiloguePlan)> {
        let chain = Chain::parse(OP, &a.program)?;
        let extras = chain.inputs - 1;
        if xs.len() != 2 + extras && xs.len() != 3 + extras {
            return Err(Error::invalid(
                OP,
                format!(
                    "program {:?} takes x, weight, an optional bias and {extras} inputs, got {} tensors",
                    a.program,
                    xs.len()
                ),
            ));
        }
        let bias = xs.len() == 3 + extras;
        let conv = if bias { 3 } else { 2 };
        let o = Conv2dOptions {
            stride: a.stride,
            padding: a.padding,
            dilation: a.dilation,
            groups: a.groups,
            data_format: a.data_format.clone(),
        };
        let (outs, geom) = CONV2D_OP.infer(&xs[..conv], &o)?;
        let out = outs.into_iter().next().ok_or_else(|| Error::invalid(OP, "conv2d returned no output"))?;
        if !matches!(out.dtype, DType::Float32 | DType::Float64) {
            return Err(Error::unsupported(OP, out.dtype, "(float32 and float64)"));
        }
        if chain.nodes.len() > EPILOGUE_NODES || extras > EPILOGUE_EXTRAS {
            return Err(Error::invalid(
                OP,
                format!("an epilogue holds at most {EPILOGUE_NODES} nodes and {EPILOGUE_EXTRAS} extra inputs"),
            ));
        }
        let strides = epilogue_strides(OP, &out, &xs[conv..])?;
        let shape = out.dims().to_vec();
        Ok((vec![out], EpiloguePlan { geom, bias, chain, shape, strides }))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &Conv2dEpilogueAttrs, p: &EpiloguePlan) -> Result<Vec<CpuData>> {
        let conv = if p.bias { 3 } else { 2 };
        let y = forward_cpu(k.x(0), k.x(1), p.bias.then(|| k.x(2)), &p.geom)?;
        let mut inputs = vec![&y];
        inputs.extend((conv..k.ins.len()).map(|j| k.x(j)));
        let mut strides = vec![contiguous_strides(&p.shape).into_iter().map(|v| v as isize).collect()];
        strides.extend(p.strides.iter().cloned());
        Ok(vec![p.chain.eval_cpu(&inputs, &p.shape, &strides)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &Conv2dEpilogueAttrs, p: &EpiloguePlan) -> Result<()> {
        if k.ins[0].dtype != DType::Float32 {
            return Err(Error::unsupported(OP, k.ins[0].dtype, "on the GPU (float32 only)"));
        }
        let conv = if p.bias { 3 } else { 2 };
        let epi = Epilogue {
            number: EPILOGUES.intern(&p.chain),
            extras: (conv..k.ins.len()).map(|j| k.x(j)).collect(),
            params: p.chain.epilogue_params(&p.shape, &p.strides)?,
        };
        forward_gpu(k.ctx, k.x(0), k.x(1), p.bias.then(|| k.x(2)), &p.geom, k.y(0), epi)
    }
}

/// The expanded WGSL of the forward kernel (tiled, one row block) a `conv2d_epilogue` op
/// with this `program` attribute runs (for validation and tools).
pub fn conv2d_epilogue_source(program: &str) -> Result<String> {
    let number = EPILOGUES.intern(&Chain::parse(OP, program)?);
    super::CONV2D.source(1 + super::EPILOGUE_STEP * number)
}
