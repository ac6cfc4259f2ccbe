//! `matmul` with an elementwise epilogue: the product's kernel applies a chain of table ops
//! (bias add, activation, scale) to each value before storing it, so the product is never
//! written out and read back. The Executor's fusion pass makes these ops from a `matmul`
//! whose only reader is a fusable chain (`static_/fusion.rs`); the chain is the
//! `fused_elementwise` postfix program with `x0` standing for the product and `x1..` for
//! extra inputs broadcast to the product's shape. On the CPU the product and the chain run
//! one after the other, exactly as unfused.

use super::{MATMUL_OP, MatmulAttrs, MatmulPlan, product_cpu, product_gpu};
use crate::backend::cpu::CpuData;
use crate::backend::gpu::Variant;
use crate::ops::epilogue::{EPILOGUE_EXTRAS, EPILOGUE_NODES, EPILOGUE_RANK, Epilogue, EpilogueTable, epilogue_strides};
use crate::ops::fused::Chain;
use crate::ops::registry::op::{CpuCall, GpuCall, Op};
use crate::ops::registry::registry_entry;
use crate::ops::registry::{AmpList, Facts};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

const OP: &str = "matmul_epilogue";

/// `matmul`'s attributes and the epilogue chain.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct MatmulEpilogueAttrs {
    pub transpose_x: bool,
    pub transpose_y: bool,
    pub program: String,
}

registry_entry!(
    /// `matmul(x, y)` followed by an elementwise chain, as one kernel: inputs `[x, y,
    /// extra...]` (made by the Executor's fusion pass).
    MATMUL_EPILOGUE: MatmulEpilogueOp = "matmul_epilogue", MatmulEpilogueAttrs, EpiloguePlan
);

/// The product's plan, the chain, the output shape and each extra input's strides into it.
pub(crate) struct EpiloguePlan {
    product: MatmulPlan,
    chain: Chain,
    shape: Vec<usize>,
    strides: Vec<Vec<isize>>,
}

/// The epilogues `matmul.wgsl` has run (extra inputs bind after `a`, `b` and `c`).
pub(crate) static EPILOGUES: EpilogueTable = EpilogueTable::new(3);

pub(crate) fn keys() -> Vec<u32> {
    EPILOGUES.numbers()
}

pub(crate) fn variant(key: u32) -> Variant {
    EPILOGUES.variant(key)
}

/// True when a chain fits an epilogue: its nodes, extra inputs and output rank.
pub(crate) fn fits(nodes: usize, extras: usize, rank: usize) -> bool {
    nodes <= EPILOGUE_NODES && extras <= EPILOGUE_EXTRAS && rank <= EPILOGUE_RANK
}

impl Op for MatmulEpilogueOp {
    fn facts(&self) -> Facts {
        // Paddle's `fused_gemm_epilogue`, on float16's white list.
        Facts { amp: AmpList::WhiteFloat16, ..Facts::NONE }
    }
    fn infer(&self, xs: &[&TensorMeta], a: &MatmulEpilogueAttrs) -> Result<(Vec<TensorMeta>, EpiloguePlan)> {
        if xs.len() < 2 {
            return Err(Error::invalid(OP, format!("takes x, y and the epilogue's inputs, got {} tensors", xs.len())));
        }
        let m = MatmulAttrs { transpose_x: a.transpose_x, transpose_y: a.transpose_y };
        let (outs, product) = MATMUL_OP.infer(&xs[..2], &m)?;
        let out = outs.into_iter().next().ok_or_else(|| Error::invalid(OP, "matmul returned no output"))?;
        if !matches!(out.dtype, DType::Float32 | DType::Float64) {
            return Err(Error::unsupported(OP, out.dtype, "(float32 and float64)"));
        }
        let chain = Chain::parse(OP, &a.program)?;
        let extras = &xs[2..];
        if chain.inputs != extras.len() + 1 {
            return Err(Error::invalid(
                OP,
                format!(
                    "program {:?} takes {} inputs besides the product, got {}",
                    a.program,
                    chain.inputs - 1,
                    extras.len()
                ),
            ));
        }
        if !fits(chain.nodes.len(), extras.len(), out.rank()) {
            return Err(Error::invalid(
                OP,
                format!(
                    "an epilogue holds at most {EPILOGUE_NODES} nodes and {EPILOGUE_EXTRAS} extra inputs on outputs of rank {EPILOGUE_RANK} at most"
                ),
            ));
        }
        let strides = epilogue_strides(OP, &out, extras)?;
        let shape = out.dims().to_vec();
        Ok((vec![out], EpiloguePlan { product, chain, shape, strides }))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &MatmulEpilogueAttrs, p: &EpiloguePlan) -> Result<Vec<CpuData>> {
        let product = product_cpu(k.x(0), k.x(1), &p.product)?;
        let mut inputs = vec![&product];
        inputs.extend((2..k.ins.len()).map(|j| k.x(j)));
        let contiguous = crate::shape::contiguous_strides(&p.shape).into_iter().map(|v| v as isize).collect();
        let mut strides = vec![contiguous];
        strides.extend(p.strides.iter().cloned());
        Ok(vec![p.chain.eval_cpu(&inputs, &p.shape, &strides)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &MatmulEpilogueAttrs, p: &EpiloguePlan) -> Result<()> {
        if k.ins[0].dtype != DType::Float32 {
            return Err(Error::unsupported(OP, k.ins[0].dtype, "on the GPU (float32 only)"));
        }
        let epi = Epilogue {
            number: EPILOGUES.intern(&p.chain),
            extras: (2..k.ins.len()).map(|j| k.x(j)).collect(),
            params: p.chain.epilogue_params(&p.shape, &p.strides)?,
        };
        product_gpu(k.ctx, [k.x(0), k.x(1)], k.y(0), k.ins[0].dtype, &p.product, epi)
    }
}

/// The expanded WGSL of the kernel a `matmul_epilogue` op with this `program` attribute
/// runs (for validation and tools).
pub fn matmul_epilogue_source(program: &str) -> Result<String> {
    super::MATMUL.source(EPILOGUES.intern(&Chain::parse(OP, program)?))
}
