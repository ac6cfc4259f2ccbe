//! A reduction with an elementwise prologue: `sum`/`mean`/`prod`/`max`/`min` of a chain of
//! table ops (`mean(square(x − y))`, `sum(g · mask)`), the chain computed as the reduction
//! reads each element, so its result is never written out. The Executor's fusion pass makes
//! these ops from a reduction whose input only a fusable chain produces and reads, when
//! every input of the chain has the chain's shape (the cheap case: each element's inputs sit
//! at its own index). When a run's inputs broadcast after all (a batch of 1 against one of
//! n), the op computes the chain into a temporary first; the CPU always does.

use super::reduce::{PROLOGUES, ReduceAttrs, ReduceOp, ReducePlan, reduce_entry};
use crate::backend::cpu::CpuData;
use crate::ops::epilogue::{EPILOGUE_EXTRAS, EPILOGUE_NODES, Epilogue};
use crate::ops::fused::Chain;
use crate::ops::registry::op::{CpuCall, GpuCall, Op};
use crate::ops::registry::registry_entry;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

const OP: &str = "reduce_prologue";

/// The reduction (`reduce`: sum, mean, prod, max or min; its axes and keepdim) and the
/// prologue chain (`fused_elementwise`'s postfix program over the op's inputs).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct ReducePrologueAttrs {
    pub reduce: String,
    pub axis: Vec<isize>,
    pub keepdim: bool,
    pub program: String,
}

/// True when a chain of `nodes` nodes reading `inputs` tensors fits a prologue.
pub(crate) fn fits(nodes: usize, inputs: usize) -> bool {
    nodes <= crate::ops::epilogue::EPILOGUE_NODES && inputs <= crate::ops::epilogue::EPILOGUE_EXTRAS + 1
}

registry_entry!(
    /// A reduction of an elementwise chain over its inputs, as one kernel where the inputs
    /// share a shape (made by the Executor's fusion pass).
    REDUCE_PROLOGUE: ReducePrologueOp = "reduce_prologue", ReducePrologueAttrs, ProloguePlan
);

/// The reduction, its plan, the chain, the chain's shape and each input's strides into it,
/// and whether every input has that shape.
pub(crate) struct ProloguePlan {
    reduce: &'static ReduceOp,
    plan: ReducePlan,
    chain: Chain,
    chain_meta: TensorMeta,
    strides: Vec<Vec<isize>>,
    same_shape: bool,
}

impl Op for ReducePrologueOp {
    fn infer(&self, xs: &[&TensorMeta], a: &ReducePrologueAttrs) -> Result<(Vec<TensorMeta>, ProloguePlan)> {
        let reduce = reduce_entry(&a.reduce).ok_or_else(|| {
            Error::invalid(OP, format!("{:?} is not a reduction (sum, mean, prod, max, min)", a.reduce))
        })?;
        let chain = Chain::parse(OP, &a.program)?;
        if chain.nodes.len() > EPILOGUE_NODES || chain.inputs > EPILOGUE_EXTRAS + 1 {
            return Err(Error::invalid(
                OP,
                format!("a prologue holds at most {EPILOGUE_NODES} nodes and {} inputs", EPILOGUE_EXTRAS + 1),
            ));
        }
        let (chain_meta, strides) = chain.operands(OP, &a.program, xs)?;
        let same_shape = xs.iter().all(|m| m.dims() == chain_meta.dims());
        let ra = ReduceAttrs { axis: a.axis.clone(), keepdim: a.keepdim };
        let (outs, plan) = reduce.infer(&[&chain_meta], &ra)?;
        Ok((outs, ProloguePlan { reduce, plan, chain, chain_meta, strides, same_shape }))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &ReducePrologueAttrs, p: &ProloguePlan) -> Result<Vec<CpuData>> {
        let inputs: Vec<&CpuData> = (0..p.chain.inputs).map(|j| k.x(j)).collect();
        let values = p.chain.eval_cpu(&inputs, p.chain_meta.dims(), &p.strides)?;
        Ok(vec![p.reduce.run_cpu(&values, &p.plan)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &ReducePrologueAttrs, p: &ProloguePlan) -> Result<()> {
        if k.ins[0].dtype != DType::Float32 {
            return Err(Error::unsupported(OP, k.ins[0].dtype, "on the GPU (float32 only)"));
        }
        if !p.same_shape {
            let n = p.chain_meta.numel();
            let values = k.ctx.alloc(OP, crate::backend::cpu::gpu_bytes(DType::Float32, n))?;
            let inputs: Vec<_> = (0..p.chain.inputs).map(|j| k.x(j)).collect();
            p.chain.run_gpu(k.ctx, &inputs, &values, p.chain_meta.dims(), &p.strides)?;
            return p.reduce.run_gpu(k.ctx, &values, &p.chain_meta, &p.plan, k.y(0), Epilogue::default());
        }
        let pro = Epilogue {
            number: PROLOGUES.intern(&p.chain),
            extras: (1..p.chain.inputs).map(|j| k.x(j)).collect(),
            params: p.chain.node_words(),
        };
        p.reduce.run_gpu(k.ctx, k.x(0), &p.chain_meta, &p.plan, k.y(0), pro)
    }
}

/// The expanded WGSL of the float32 sum kernel a `reduce_prologue` op with this `program`
/// attribute runs (for validation and tools).
pub fn reduce_prologue_source(program: &str) -> Result<String> {
    let number = PROLOGUES.intern(&Chain::parse(OP, program)?);
    super::reduce::REDUCE.source(DType::Float32.code() + 64 * number)
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&REDUCE_PROLOGUE], kernels: &[] };
