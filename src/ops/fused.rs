//! Fused elementwise chains: one kernel for a small DAG of unary and binary table ops over
//! inputs broadcast to one output shape. The Executor's fusion pass makes these ops (see
//! `static_/fusion.rs`); the chain travels as the postfix attribute `program`, whose tokens
//! are `x{j}` (push input j), `c.{value}` (push a constant: a scalar `full` / `ones` /
//! `zeros` the chain absorbed), `u.{name}:{p0}:{p1}` (a unary row with its two scalar
//! parameters), `b.{name}` (a binary row), `s.view` (a reshape that adds or drops leading
//! 1s: the value itself) and `s.expand` (`expand_as`: the first operand's value, the second
//! giving the shape only). The WGSL kernel is composed from the rows'
//! WGSL expressions (one function per node) and interned, so the pipeline cache and the
//! shader-validation test see it like any other variant; the CPU kernel composes the rows'
//! float closures, rounding to the storage dtype after every node as the unfused ops do.

use std::sync::{Arc, Mutex};

use crate::backend::cpu::CpuData;
use crate::backend::cpu::elementwise::PAR_MIN;
use crate::backend::cpu::par_chunks_new;
use crate::backend::gpu::{Bind, GpuBuffer, GpuContext, Kernel};
use crate::ops::elementwise::binary::BinaryDef;
use crate::ops::elementwise::unary::UnaryDef;
use crate::ops::elementwise::{BINARY_OPS, UNARY_OPS};
use crate::ops::registry::op::{CpuCall, GpuCall, Op};
use crate::ops::registry::registry_entry;
use crate::shape::{broadcast_shapes, broadcast_strides, collapse, strided_params};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result};

const OP: &str = "fused_elementwise";
/// Inputs one fused kernel binds (with the output and the parameters: 8 storage buffers,
/// WebGPU's default per-stage limit).
pub(crate) const MAX_INPUTS: usize = 6;
/// Nodes one chain may hold.
pub(crate) const MAX_NODES: usize = 24;

/// The fused op's attribute: the chain in postfix.
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct FusedAttrs {
    pub program: String,
}

registry_entry!(
    /// A chain of elementwise table ops run as one kernel (made by the Executor's fusion
    /// pass; see the module docs for the `program` attribute).
    FUSED: FusedOp = "fused_elementwise", FusedAttrs, FusedPlan
);

#[derive(Clone, Copy)]
pub(crate) enum Node {
    Input(usize),
    /// A constant, rounded to the chain's dtype (float32 on the GPU, where it travels as a
    /// parameter word).
    Const(f64),
    Unary(&'static UnaryDef, [f64; 2], usize),
    Binary(&'static BinaryDef, usize, usize),
    /// Node a's value: a view or a broadcast changes the shape only, which the chain's
    /// operands give.
    Same(usize),
}

/// A parsed chain over `inputs` operands.
pub(crate) struct Chain {
    pub nodes: Vec<Node>,
    pub inputs: usize,
    /// The postfix text it was parsed from (what kernel caches look it up by).
    pub program: String,
}

/// The row a fusable unary op runs on: float, not returning bool, with a WGSL expression.
pub(crate) fn fusable_unary(name: &str) -> Option<&'static UnaryDef> {
    UNARY_OPS.iter().copied().find(|d| d.name == name && d.float.is_some() && !d.out_bool)
}

/// The row a fusable binary op runs on: float, not logical, not returning bool.
pub(crate) fn fusable_binary(name: &str) -> Option<&'static BinaryDef> {
    BINARY_OPS.iter().copied().find(|d| d.name == name && d.float.is_some() && !d.out_bool)
}

impl Chain {
    /// Parses `program`, the postfix chain of op `op` (whose name the errors carry).
    pub fn parse(op: &'static str, program: &str) -> Result<Chain> {
        let bad = |msg: String| Error::invalid(op, msg);
        let mut nodes = Vec::new();
        let mut stack: Vec<usize> = Vec::new();
        let mut inputs = 0;
        for tok in program.split_whitespace() {
            let node = if let Some(j) = tok.strip_prefix('x') {
                let j: usize = j
                    .parse()
                    .ok()
                    .filter(|&j| j < MAX_INPUTS)
                    .ok_or_else(|| bad(format!("bad input token {tok:?} (inputs x0 to x{})", MAX_INPUTS - 1)))?;
                inputs = inputs.max(j + 1);
                Node::Input(j)
            } else if let Some(v) = tok.strip_prefix("c.") {
                Node::Const(v.parse().map_err(|_| bad(format!("bad constant in {tok:?}")))?)
            } else if let Some(rest) = tok.strip_prefix("u.") {
                let mut parts = rest.split(':');
                let name = parts.next().unwrap_or_default();
                let def = fusable_unary(name).ok_or_else(|| bad(format!("{name:?} is not a fusable unary op")))?;
                let mut p = [0.0; 2];
                for v in p.iter_mut() {
                    if let Some(s) = parts.next() {
                        *v = s.parse().map_err(|_| bad(format!("bad parameter in {tok:?}")))?;
                    }
                }
                let a = stack.pop().ok_or_else(|| bad(format!("{tok:?} has no operand")))?;
                Node::Unary(def, p, a)
            } else if tok == "s.view" {
                Node::Same(stack.pop().ok_or_else(|| bad(format!("{tok:?} has no operand")))?)
            } else if tok == "s.expand" {
                stack.pop().ok_or_else(|| bad(format!("{tok:?} has no operands")))?;
                Node::Same(stack.pop().ok_or_else(|| bad(format!("{tok:?} has one operand")))?)
            } else if let Some(name) = tok.strip_prefix("b.") {
                let def = fusable_binary(name).ok_or_else(|| bad(format!("{name:?} is not a fusable binary op")))?;
                let b = stack.pop().ok_or_else(|| bad(format!("{tok:?} has no operands")))?;
                let a = stack.pop().ok_or_else(|| bad(format!("{tok:?} has one operand")))?;
                Node::Binary(def, a, b)
            } else {
                return Err(bad(format!("unknown token {tok:?}")));
            };
            stack.push(nodes.len());
            nodes.push(node);
        }
        if stack.len() != 1 || nodes.len() > MAX_NODES || inputs > MAX_INPUTS {
            return Err(bad(format!(
                "program {program:?} must leave one value, with at most {MAX_NODES} nodes and {MAX_INPUTS} inputs"
            )));
        }
        if stack[0] != nodes.len() - 1 {
            return Err(bad(format!("program {program:?} must end with its result")));
        }
        Ok(Chain { nodes, inputs, program: program.to_string() })
    }

    /// The kernel body (bindings, one function per node, entry points), which depends on
    /// the ops and the wiring only: parameters and shapes travel in the params buffer.
    fn wgsl(&self) -> String {
        let k = self.inputs;
        let mut s = String::new();
        for j in 0..k {
            s += &format!("@group(0) @binding({j}) var<storage, read> x{j}: array<f32>;\n");
        }
        s += &format!("@group(0) @binding({k}) var<storage, read_write> dst: array<f32>;\n");
        s += &format!("@group(0) @binding({}) var<storage, read> params: array<u32>;\n\n", k + 1);
        // params: [n, nd, shape[nd], strides of each input[nd], then two f32 words per node]
        let (fns, eval) = self.wgsl_nodes("n", |j| format!("x{j}[o{j}]"), |w| format!("params[pb + {w}u]"));
        s += &fns;
        let last = self.nodes.len() - 1;
        let decl: String = (0..k).map(|j| format!("    var o{j} = 0u;\n")).collect();
        let step: String =
            (0..k).map(|j| format!("        o{j} = o{j} + c * params[2u + {}u * nd + d];\n", j + 1)).collect();
        let flat: String = (0..k).map(|j| format!("    let o{j} = i * params[{}u];\n", 3 + j)).collect();
        s += &format!(
            "@compute @workgroup_size({wg})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * {wg}u;
    if (i >= params[0]) {{
        return;
    }}
    let nd = params[1];
    let pb = 2u + {k1}u * nd;
    var rem = i;
{decl}    for (var kk = nd; kk > 0u; kk = kk - 1u) {{
        let d = kk - 1u;
        let size = params[2u + d];
        let c = rem % size;
        rem = rem / size;
{step}    }}
{eval}    dst[i] = v{last};
}}

@compute @workgroup_size({wg})
fn flat(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * {wg}u;
    if (i >= params[0]) {{
        return;
    }}
    let pb = {pbf}u;
{flat}{eval}    dst[i] = v{last};
}}
",
            k1 = k + 1,
            pbf = 3 + k,
            wg = crate::backend::gpu::WORKGROUP,
        );
        s
    }
}

impl Chain {
    /// The nodes' parameter words: two f32 per node (a prologue's, at `epilogue::EPILOGUE_BASE`).
    pub(crate) fn node_words(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .flat_map(|node| {
                let q = match node {
                    Node::Unary(_, q, _) => *q,
                    Node::Const(c) => [*c, 0.0],
                    _ => [0.0; 2],
                };
                [(q[0] as f32).to_bits(), (q[1] as f32).to_bits()]
            })
            .collect()
    }

    /// The chain's node functions (`{prefix}{i}`, the rows' WGSL expressions) and the
    /// statements computing `v0..`, where `input(j)` reads input `j` and `word(w)` is the
    /// chain's parameter word `w`.
    pub(crate) fn wgsl_nodes(
        &self,
        prefix: &str,
        input: impl Fn(usize) -> String,
        word: impl Fn(usize) -> String,
    ) -> (String, String) {
        let (mut fns, mut eval) = (String::new(), String::new());
        for (i, n) in self.nodes.iter().enumerate() {
            match n {
                Node::Unary(d, _, a) => {
                    fns += &format!(
                        "fn {prefix}{i}(x: f32, p0: f32, p1: f32) -> f32 {{\n    return {};\n}}\n\n",
                        d.gpu.f32
                    );
                    let (p0, p1) = (word(2 * i), word(2 * i + 1));
                    eval += &format!("    let v{i} = {prefix}{i}(v{a}, bitcast<f32>({p0}), bitcast<f32>({p1}));\n");
                }
                Node::Binary(d, a, b) => {
                    fns += &format!("fn {prefix}{i}(a: f32, b: f32) -> f32 {{\n    return {};\n}}\n\n", d.gpu.f32);
                    eval += &format!("    let v{i} = {prefix}{i}(v{a}, v{b});\n");
                }
                Node::Input(j) => eval += &format!("    let v{i} = {};\n", input(*j)),
                Node::Same(a) => eval += &format!("    let v{i} = v{a};\n"),
                Node::Const(_) => eval += &format!("    let v{i} = bitcast<f32>({});\n", word(2 * i)),
            }
        }
        (fns, eval)
    }

    /// The chain on the CPU over `inputs` broadcast to `shape` by `strides`, rounding to the
    /// dtype after every node as the unfused ops do.
    pub(crate) fn eval_cpu(&self, inputs: &[&CpuData], shape: &[usize], strides: &[Vec<isize>]) -> Result<CpuData> {
        let n: usize = shape.iter().product();
        let f32s = matches!(inputs.first(), Some(CpuData::F32(_)));
        let read: Vec<Box<dyn Fn(usize) -> f64 + Sync + '_>> = inputs
            .iter()
            .map(|x| -> Result<Box<dyn Fn(usize) -> f64 + Sync + '_>> {
                Ok(match x {
                    CpuData::F32(v) => Box::new(move |i| v[i] as f64),
                    CpuData::F64(v) => Box::new(move |i| v[i]),
                    other => return Err(Error::unsupported(OP, other.dtype(), "(float32 and float64 only)")),
                })
            })
            .collect::<Result<_>>()?;
        let round = |v: f64| if f32s { v as f32 as f64 } else { v };
        let eval = |offs: &[usize], vals: &mut [f64]| -> f64 {
            for (i, node) in self.nodes.iter().enumerate() {
                vals[i] = match *node {
                    Node::Input(j) => read[j](offs[j]),
                    Node::Const(c) => round(c),
                    Node::Same(a) => vals[a],
                    Node::Unary(d, q, a) => {
                        round((d.float.expect("fusable rows have float closures"))(vals[a], q[0], q[1]))
                    }
                    Node::Binary(d, a, b) => {
                        round((d.float.expect("fusable rows have float closures"))(vals[a], vals[b]))
                    }
                };
            }
            vals[self.nodes.len() - 1]
        };
        let (shape, strides) = collapse(shape, strides);
        if n == 0 {
            return Ok(if f32s { CpuData::F32(Vec::new()) } else { CpuData::F64(Vec::new()) });
        }
        let out = par_chunks_new(n, 0f64, PAR_MIN / 4, |start, chunk| {
            let nd = shape.len();
            let mut coord = vec![0usize; nd];
            let mut rem = start;
            for d in (0..nd).rev() {
                coord[d] = rem % shape[d];
                rem /= shape[d];
            }
            let mut offs: Vec<usize> = strides
                .iter()
                .map(|s| coord.iter().zip(s).map(|(&c, &st)| c as isize * st).sum::<isize>() as usize)
                .collect();
            let mut vals = vec![0f64; self.nodes.len()];
            for o in chunk.iter_mut() {
                *o = eval(&offs, &mut vals);
                for d in (0..nd).rev() {
                    coord[d] += 1;
                    for (off, s) in offs.iter_mut().zip(&strides) {
                        *off = (*off as isize + s[d]) as usize;
                    }
                    if coord[d] < shape[d] {
                        break;
                    }
                    for (off, s) in offs.iter_mut().zip(&strides) {
                        *off = (*off as isize - s[d] * shape[d] as isize) as usize;
                    }
                    coord[d] = 0;
                }
            }
        });
        Ok(if f32s { CpuData::F32(out.into_iter().map(|v| v as f32).collect()) } else { CpuData::F64(out) })
    }
}

/// Interned kernel bodies: a variant key is a position here.
static BODIES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The variant key of `chain`'s kernel, looked up by its program text so that a dispatch
/// does not generate the WGSL again.
fn kernel_key(chain: &Chain) -> u32 {
    static KEYS: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());
    let mut keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, k)) = keys.iter().find(|(p, _)| *p == chain.program) {
        return *k;
    }
    let k = intern(chain.wgsl());
    keys.push((chain.program.clone(), k));
    k
}

fn intern(body: String) -> u32 {
    let mut b = BODIES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = b.iter().position(|x| *x == body) {
        return i as u32;
    }
    b.push(body);
    (b.len() - 1) as u32
}

/// One chain per fusable row (the row applied to a sum of two inputs), so the validation
/// test covers every expression a fused kernel can contain.
fn canonical_keys() -> Vec<u32> {
    let mut programs: Vec<String> = UNARY_OPS
        .iter()
        .filter(|d| fusable_unary(d.name).is_some())
        .map(|d| format!("x0 x1 b.add u.{}:0.5:2.0", d.name))
        .collect();
    programs.push("c.1.0 x0 b.divide".into());
    programs.push("x0 s.view x1 s.expand u.relu".into());
    programs.extend(
        BINARY_OPS.iter().filter(|d| fusable_binary(d.name).is_some()).map(|d| format!("x0 x1 b.{} u.relu", d.name)),
    );
    let mut keys: Vec<u32> =
        programs.iter().filter_map(|p| Chain::parse(OP, p).ok()).map(|c| intern(c.wgsl())).collect();
    let n = BODIES.lock().unwrap_or_else(|e| e.into_inner()).len() as u32;
    keys.extend(0..n);
    keys.sort_unstable();
    keys.dedup();
    keys
}

pub(crate) static FUSED_KERNEL: Kernel = Kernel {
    file: "fused.wgsl",
    keys: canonical_keys,
    variant: |key| {
        let b = BODIES.lock().unwrap_or_else(|e| e.into_inner());
        vec![("BODY", b.get(key as usize).cloned().unwrap_or_default())]
    },
};

/// What `infer` works out once: the chain, the output shape and each input's strides.
pub(crate) struct FusedPlan {
    chain: Chain,
    shape: Vec<usize>,
    strides: Vec<Vec<isize>>,
}

impl Op for FusedOp {
    fn infer(&self, x: &[&TensorMeta], a: &FusedAttrs) -> Result<(Vec<TensorMeta>, FusedPlan)> {
        let chain = Chain::parse(OP, &a.program)?;
        let (out, strides) = chain.operands(OP, &a.program, x)?;
        let shape = out.dims().to_vec();
        Ok((vec![out], FusedPlan { chain, shape, strides }))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &FusedAttrs, p: &FusedPlan) -> Result<Vec<CpuData>> {
        let inputs: Vec<&CpuData> = (0..p.chain.inputs).map(|j| k.x(j)).collect();
        Ok(vec![p.chain.eval_cpu(&inputs, &p.shape, &p.strides)?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &FusedAttrs, p: &FusedPlan) -> Result<()> {
        if k.ins[0].dtype != DType::Float32 {
            return Err(Error::unsupported(OP, k.ins[0].dtype, "on the GPU (float32 only)"));
        }
        let inputs: Vec<&GpuBuffer> = (0..p.chain.inputs).map(|j| k.x(j)).collect();
        p.chain.run_gpu(k.ctx, &inputs, k.y(0), &p.shape, &p.strides)
    }
}

impl Chain {
    /// Checks `x` as the chain's operands (their count, one float dtype) for op `op` running
    /// `program`: the chain's result (their broadcast shape) and each one's strides into it.
    pub(crate) fn operands(
        &self,
        op: &'static str,
        program: &str,
        x: &[&TensorMeta],
    ) -> Result<(TensorMeta, Vec<Vec<isize>>)> {
        if x.len() != self.inputs || x.is_empty() {
            return Err(Error::invalid(
                op,
                format!("program {program:?} takes {} inputs, got {}", self.inputs, x.len()),
            ));
        }
        let dtype = x[0].dtype;
        if let Some(m) = x.iter().find(|m| m.dtype != dtype) {
            return Err(Error::DTypeMismatch { op, lhs: dtype, rhs: m.dtype });
        }
        if !matches!(dtype, DType::Float32 | DType::Float64) {
            return Err(Error::unsupported(op, dtype, "(float32 and float64)"));
        }
        let mut shape: Vec<usize> = x[0].dims().to_vec();
        for m in &x[1..] {
            shape = broadcast_shapes(op, &shape, m.dims())?;
        }
        let strides =
            x.iter().map(|m| broadcast_strides(m.dims(), &shape).into_iter().map(|v| v as isize).collect()).collect();
        Ok((TensorMeta::new(shape, dtype, x[0].place), strides))
    }

    /// The chain as one float32 kernel over `inputs` broadcast to `shape` by `strides`.
    pub(crate) fn run_gpu(
        &self,
        ctx: &Arc<GpuContext>,
        inputs: &[&GpuBuffer],
        out: &GpuBuffer,
        shape: &[usize],
        strides: &[Vec<isize>],
    ) -> Result<()> {
        let n: usize = shape.iter().product();
        let (mut params, cs) = strided_params(n, shape, strides);
        let flat = cs.len() <= 1;
        if cs.is_empty() {
            params.truncate(2);
            params.push(1);
            params.extend(std::iter::repeat_n(0, self.inputs));
        }
        params.extend(self.node_words());
        let key = kernel_key(self);
        let mut binds: Vec<Bind<'_>> = inputs.iter().map(|x| Bind::read(x)).collect();
        binds.push(Bind::write(out));
        let entry = if flat { "flat" } else { "main" };
        ctx.dispatch(&FUSED_KERNEL, key, entry, &binds, &params, n as u64)
    }
}

/// The expanded WGSL of the kernel a `fused_elementwise` op with this `program` attribute
/// runs (for validation and tools).
pub fn fused_kernel_source(program: &str) -> Result<String> {
    FUSED_KERNEL.source(kernel_key(&Chain::parse(OP, program)?))
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&FUSED], kernels: &[&FUSED_KERNEL] };
