//! What the elementwise tables declare, for tools and tests: [`elementwise_ops`] lists every
//! row, [`apply_elementwise`] runs one by name.

use super::binary::binary;
use super::unary::unary;
use super::{BINARY_OPS, TableRow, UNARY_OPS};
use crate::{DType, Error, Result, Tensor};

/// What the tables declare about one elementwise op.
#[derive(Clone, Debug)]
pub struct OpInfo {
    /// The op's name (also its function name).
    pub name: &'static str,
    /// 1 or 2 tensor operands.
    pub arity: usize,
    /// Dtypes the op accepts.
    pub dtypes: Vec<DType>,
    /// True when the op has a backward rule.
    pub differentiable: bool,
    /// True when the result is bool.
    pub returns_bool: bool,
}

/// Every table-declared elementwise op.
pub fn elementwise_ops() -> Vec<OpInfo> {
    let mut v: Vec<OpInfo> = UNARY_OPS
        .iter()
        .map(|d| OpInfo {
            name: d.name,
            arity: 1,
            dtypes: d.dtypes(),
            differentiable: d.backward.is_some(),
            returns_bool: d.out_bool,
        })
        .collect();
    v.extend(BINARY_OPS.iter().map(|d| OpInfo {
        name: d.name,
        arity: 2,
        dtypes: d.dtypes(),
        differentiable: d.has_backward(),
        returns_bool: d.out_bool,
    }));
    v
}

/// Runs the table op `name` on `inputs` (one or two) with scalar parameters `params`.
pub fn apply_elementwise(name: &str, inputs: &[&Tensor], params: [f64; 2]) -> Result<Tensor> {
    if let Some(d) = UNARY_OPS.iter().find(|d| d.name == name) {
        let [x] = inputs else {
            return Err(Error::invalid("apply_elementwise", format!("{name} takes one tensor")));
        };
        return unary(d, x, params);
    }
    if let Some(d) = BINARY_OPS.iter().find(|d| d.name == name) {
        let [a, b] = inputs else {
            return Err(Error::invalid("apply_elementwise", format!("{name} takes two tensors")));
        };
        return binary(d, a, b);
    }
    Err(Error::invalid("apply_elementwise", format!("no elementwise op named {name:?}")))
}
