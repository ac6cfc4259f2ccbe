//! Chains fused into other kernels: epilogues run a `fused_elementwise` chain on each value
//! a product kernel stores (`matmul_epilogue`, `conv2d_epilogue`), prologues on each element
//! a reduction reads (`reduce_prologue`). Here: the chains' WGSL functions and parameter
//! words, each kernel's table of the chains it has run (its variants), and the checks the
//! epilogue ops share.

use std::sync::Mutex;

use super::fused::Chain;
use crate::shape::{broadcast_shapes, broadcast_strides, collapse};
use crate::tensor::TensorMeta;
use crate::{Error, Result};

/// Words of a kernel's params window where an epilogue's parameters start (the product's
/// own parameters come first and stay below it).
pub(crate) const EPILOGUE_BASE: usize = 64;
/// Nodes and extra inputs an epilogue may hold (its parameters fit the window's second half).
pub(crate) const EPILOGUE_NODES: usize = 10;
pub(crate) const EPILOGUE_EXTRAS: usize = 3;
pub(crate) const EPILOGUE_RANK: usize = 6;

impl Chain {
    /// The WGSL of an epilogue applying this chain to a product's value: input 0 is the
    /// value, inputs 1.. are read from bindings `first_binding..` at offsets of the output
    /// index (`fn epilogue(v: f32, i: u32) -> f32`). Its parameters start at word
    /// `EPILOGUE_BASE`: `[nd, shape[nd], strides of each extra input[nd], two f32 words per
    /// node]`.
    pub(crate) fn epilogue_wgsl(&self, first_binding: usize) -> String {
        let extras = self.inputs.saturating_sub(1);
        let mut s = String::new();
        for j in 1..=extras {
            s += &format!("@group(0) @binding({}) var<storage, read> x{j}: array<f32>;\n", first_binding + j - 1);
        }
        let input = |j: usize| if j == 0 { "v".to_string() } else { format!("x{j}[o{j}]") };
        let (fns, eval) = self.wgsl_nodes("ep", input, |w| format!("params[pb + {w}u]"));
        s += &fns;
        let decl: String = (1..=extras).map(|j| format!("    var o{j} = 0u;\n")).collect();
        let step: String =
            (1..=extras).map(|j| format!("        o{j} = o{j} + c * params[e + 1u + {j}u * nd + d];\n")).collect();
        s += &format!(
            "fn epilogue(v: f32, i: u32) -> f32 {{
    let e = {EPILOGUE_BASE}u;
    let nd = params[e];
    let pb = e + 1u + {k1}u * nd;
    var rem = i;
{decl}    for (var kk = nd; kk > 0u; kk = kk - 1u) {{
        let d = kk - 1u;
        let size = params[e + 1u + d];
        let c = rem % size;
        rem = rem / size;
{step}    }}
{eval}    return v{last};
}}
",
            k1 = extras + 1,
            last = self.nodes.len() - 1,
        );
        s
    }

    /// The WGSL of a reduction prologue computing this chain for element `i` of inputs of one
    /// shape: input 0 is the reduction's `src`, inputs 1.. are read from bindings
    /// `first_binding..` (`fn load(i: u32) -> f32`). Its parameters start at word
    /// `EPILOGUE_BASE`: two f32 words per node.
    pub(crate) fn prologue_wgsl(&self, first_binding: usize) -> String {
        let mut s = String::new();
        for j in 1..self.inputs {
            s += &format!("@group(0) @binding({}) var<storage, read> x{j}: array<f32>;\n", first_binding + j - 1);
        }
        let input = |j: usize| if j == 0 { "src[i]".to_string() } else { format!("x{j}[i]") };
        let (fns, eval) = self.wgsl_nodes("pr", input, |w| format!("params[{}u]", EPILOGUE_BASE + w));
        s += &fns;
        s += &format!("fn load(i: u32) -> f32 {{\n{eval}    return v{};\n}}\n", self.nodes.len() - 1);
        s
    }

    /// The epilogue's parameter words (placed at `EPILOGUE_BASE`) for an output of `shape`
    /// and each extra input's `strides` into it.
    pub(crate) fn epilogue_params(&self, shape: &[usize], strides: &[Vec<isize>]) -> Result<Vec<u32>> {
        let (mut cs, mut st) = collapse(shape, strides);
        if cs.is_empty() {
            cs.push(1);
            st.iter_mut().for_each(|s| s.push(0));
        }
        let mut w = vec![cs.len() as u32];
        w.extend(cs.iter().map(|&d| d as u32));
        for s in &st {
            w.extend(s.iter().map(|&d| d as u32));
        }
        w.extend(self.node_words());
        if EPILOGUE_BASE + w.len() > crate::backend::gpu::PARAMS_WORDS {
            return Err(Error::invalid(
                "fused_elementwise",
                format!("an epilogue of {} parameter words does not fit the params window", w.len()),
            ));
        }
        Ok(w)
    }
}

/// Where a table's chains run in their kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Site {
    /// After a product, on each value stored (`fn epilogue(v, i)`).
    Epilogue,
    /// Before a reduction, on each element read (`fn load(i)`, every input at `i`).
    Prologue,
}

/// The epilogues (or prologues) a kernel has run: interned bodies (with their extra-input
/// count) for a template whose extra inputs bind from `first_binding`; entry `k − 1` is the
/// kernel's chain number `k` (0 is the identity).
pub(crate) struct EpilogueTable {
    first_binding: usize,
    site: Site,
    entries: Mutex<Vec<(String, usize)>>,
    /// Numbers by program text, so that a dispatch does not generate the WGSL again.
    known: Mutex<Vec<(String, u32)>>,
}

impl EpilogueTable {
    pub(crate) const fn new(first_binding: usize) -> Self {
        EpilogueTable::at(first_binding, Site::Epilogue)
    }

    /// A table of reduction prologues (the template's `LOAD` placeholder).
    pub(crate) const fn prologues(first_binding: usize) -> Self {
        EpilogueTable::at(first_binding, Site::Prologue)
    }

    const fn at(first_binding: usize, site: Site) -> Self {
        EpilogueTable { first_binding, site, entries: Mutex::new(Vec::new()), known: Mutex::new(Vec::new()) }
    }

    /// The number of `chain`'s epilogue (≥ 1).
    pub(crate) fn intern(&self, chain: &Chain) -> u32 {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, n)) = known.iter().find(|(p, _)| *p == chain.program) {
            return *n;
        }
        let wgsl = match self.site {
            Site::Epilogue => chain.epilogue_wgsl(self.first_binding),
            Site::Prologue => chain.prologue_wgsl(self.first_binding),
        };
        let body = (wgsl, chain.inputs - 1);
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let i = e.iter().position(|x| *x == body).unwrap_or_else(|| {
            e.push(body);
            e.len() - 1
        });
        let n = i as u32 + 1;
        known.push((chain.program.clone(), n));
        n
    }

    /// Every epilogue number: two canonical chains (so the validation test sees the
    /// template with extra bindings) and every one interned so far.
    pub(crate) fn numbers(&self) -> Vec<u32> {
        for program in ["x0 x1 b.add u.relu:0.0:0.0", "x0 u.scale:0.5:1.0 x1 b.multiply x2 b.add u.tanh:0.0:0.0"] {
            if let Ok(c) = Chain::parse("epilogue", program) {
                self.intern(&c);
            }
        }
        let n = self.entries.lock().unwrap_or_else(|e| e.into_inner()).len() as u32;
        (0..=n).collect()
    }

    /// The template's substitutions for epilogue `number`: the params binding and the
    /// epilogue's bindings and functions.
    pub(crate) fn variant(&self, number: u32) -> crate::backend::gpu::Variant {
        let (body, extras) = match (number, self.site) {
            (0, Site::Epilogue) => ("fn epilogue(v: f32, i: u32) -> f32 {\n    return v;\n}".to_string(), 0),
            (0, Site::Prologue) => ("fn load(i: u32) -> {{T}} {\n    return {{T}}(src[i]);\n}".to_string(), 0),
            (k, _) => {
                self.entries.lock().unwrap_or_else(|e| e.into_inner()).get(k as usize - 1).cloned().unwrap_or_default()
            }
        };
        let name = if self.site == Site::Epilogue { "EPILOGUE" } else { "LOAD" };
        vec![("PARAMS", (self.first_binding + extras).to_string()), (name, body)]
    }
}

/// Each extra input's strides into `out`'s shape, after checking that it has `out`'s dtype
/// and broadcasts into that shape without growing it (an epilogue writes `out` only).
pub(crate) fn epilogue_strides(op: &'static str, out: &TensorMeta, extras: &[&TensorMeta]) -> Result<Vec<Vec<isize>>> {
    extras
        .iter()
        .map(|e| {
            if e.dtype != out.dtype {
                return Err(Error::DTypeMismatch { op, lhs: out.dtype, rhs: e.dtype });
            }
            if broadcast_shapes(op, out.dims(), e.dims())? != out.dims() {
                return Err(Error::shape(
                    op,
                    format!("epilogue input {:?} would broadcast the output {:?}", e.dims(), out.dims()),
                ));
            }
            Ok(broadcast_strides(e.dims(), out.dims()).into_iter().map(|v| v as isize).collect())
        })
        .collect()
}

/// An epilogue a product kernel applies to every value it stores: its number in the
/// kernel's table, its extra inputs and its parameter words (placed at `EPILOGUE_BASE`).
#[derive(Default)]
pub(crate) struct Epilogue<'a> {
    pub number: u32,
    pub extras: Vec<&'a crate::backend::gpu::GpuBuffer>,
    pub params: Vec<u32>,
}

impl Epilogue<'_> {
    /// `params` (the product's own, shorter than `EPILOGUE_BASE`) with the epilogue's after.
    pub(crate) fn append_params(&self, op: &'static str, params: &mut Vec<u32>) -> Result<()> {
        if self.params.is_empty() {
            return Ok(());
        }
        if params.len() > EPILOGUE_BASE {
            return Err(Error::invalid(op, format!("{} parameter words leave no room for an epilogue", params.len())));
        }
        params.resize(EPILOGUE_BASE, 0);
        params.extend(&self.params);
        Ok(())
    }
}
