//! `tril` and `triu`: the lower or upper triangle of the last two dimensions (a batch of
//! matrices), the rest zero; causal masks are built from them.

use crate::backend::cpu::{CpuData, map_data};
use crate::backend::gpu::{Bind, Kernel};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::op_header;
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{Error, Result, Tensor};

pub(crate) static TRI_KERNEL: Kernel = Kernel {
    file: "tri.wgsl",
    keys: || vec![1, 2],
    variant: |words| vec![("S", if words == 2 { "vec2<u32>" } else { "u32" }.to_string())],
};

/// `tril`/`triu`'s attribute: which diagonal bounds the triangle (0 the main one, positive
/// above it, negative below).
#[derive(Clone, Debug, PartialEq, dygraph_derive::Attrs)]
pub(crate) struct TriAttrs {
    pub diagonal: i64,
}

/// Keeps element `(r, c)` of each matrix when `c - r <= diagonal` (`lower`) or
/// `c - r >= diagonal`, zeroes the rest.
pub(crate) struct TriOp {
    name: &'static str,
    lower: bool,
}

pub(crate) static TRIL: TriOp = TriOp { name: "tril", lower: true };
pub(crate) static TRIU: TriOp = TriOp { name: "triu", lower: false };

/// `(rows, cols)` of the matrices.
type Matrix = (usize, usize);

op_header!(TriOp: TriAttrs, Matrix; |op| op.name);

impl TriOp {
    fn keeps(&self, r: usize, c: usize, diagonal: i64) -> bool {
        let d = c as i64 - r as i64;
        if self.lower { d <= diagonal } else { d >= diagonal }
    }
}

impl Op for TriOp {
    fn infer(&self, xs: &[&TensorMeta], _: &TriAttrs) -> Result<(Vec<TensorMeta>, Matrix)> {
        let [x] = inputs(self.name, xs)?;
        let d = x.dims();
        if d.len() < 2 {
            return Err(Error::shape(self.name, format!("the input must have at least 2 dimensions, got {d:?}")));
        }
        Ok((vec![x.clone()], (d[d.len() - 2], d[d.len() - 1])))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, a: &TriAttrs, &(rows, cols): &Matrix) -> Result<Vec<CpuData>> {
        let out = map_data!(k.x(0), v => v
            .iter()
            .enumerate()
            .map(|(i, &e)| if self.keeps((i / cols) % rows, i % cols, a.diagonal) { e } else { Default::default() })
            .collect());
        Ok(vec![out])
    }

    fn gpu(&self, k: &GpuCall<'_>, a: &TriAttrs, &(rows, cols): &Matrix) -> Result<()> {
        let dtype = k.ins[0].dtype;
        wgsl::check_gpu_dtype(self.name, dtype, k.ins[0].place)?;
        let n = k.ins[0].numel();
        // The diagonal, clamped into i32 (any |d| beyond the sizes keeps all or nothing).
        let diagonal = a.diagonal.clamp(-(1 << 30), 1 << 30) as i32;
        let params = [n as u32, rows as u32, cols as u32, diagonal as u32, self.lower as u32];
        let binds = [Bind::read(k.x(0)), Bind::write(k.y(0))];
        k.ctx.dispatch(&TRI_KERNEL, wgsl::param_words(dtype) as u32, "main", &binds, &params, n as u64)
    }

    fn half(&self) -> Half {
        Half::ViaF32
    }

    fn differentiable(&self) -> bool {
        true
    }

    fn backward(&self, g: &GradCall<'_>, a: &TriAttrs, _: &Matrix) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![g.grad_if(0, || apply1(self_static(self), &[g.g()], a.clone()))?])
    }
}

fn self_static(op: &TriOp) -> &'static TriOp {
    if op.lower { &TRIL } else { &TRIU }
}

/// The lower triangle of the last two dimensions (`paddle.tril`): elements with
/// `col - row <= diagonal` are kept, the others set to zero.
pub fn tril(x: &Tensor, diagonal: i64) -> Result<Tensor> {
    apply1(&TRIL, &[x], TriAttrs { diagonal })
}

/// The upper triangle of the last two dimensions (`paddle.triu`): elements with
/// `col - row >= diagonal` are kept, the others set to zero.
pub fn triu(x: &Tensor, diagonal: i64) -> Result<Tensor> {
    apply1(&TRIU, &[x], TriAttrs { diagonal })
}

impl Tensor {
    /// `tril` as a method.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        tril(self, diagonal)
    }

    /// `triu` as a method.
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        triu(self, diagonal)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[&TRIL, &TRIU], kernels: &[&TRI_KERNEL] };
