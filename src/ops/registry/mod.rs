//! The op registry: every op is one entry (an [`Op`](op::Op) implementation) with a name,
//! typed attributes, meta inference, CPU and GPU kernels and a backward rule, and every
//! call goes through the one generic entry point [`apply`](apply::apply).
//!
//! Each family declares its entries and kernels beside its ops (`static FAMILY`) and [`catalog`] names each
//! family once; `apply` refuses an op that is not listed, so one declared and left out fails
//! on its first call.

pub(crate) mod apply;
pub(crate) mod attr_text;
pub mod attrs;
mod catalog;
pub(crate) mod dispatch;
pub mod facts;
pub(crate) mod op;

use std::sync::OnceLock;

pub use attrs::{AttrField, AttrMap, AttrValue, Attrs};
pub(crate) use catalog::Family;
pub use facts::{AmpList, Commute, EpilogueHost, EvalOp, EvalRewrite, EvalVar, Facts, Fusion, PrologueHost, Update};

use crate::tensor::TensorMeta;
use crate::{Error, Result, Tensor};

/// Declares a registry entry:
/// ```ignore
/// registry_entry!(
///     /// Docs of the op.
///     STATIC: TypeOp = "name", Attrs, Plan
/// );
/// ```
/// defines the unit struct `TypeOp`, its static (which its family lists in its `FAMILY`) and
/// its [`op::OpHeader`]; the [`op::Op`] implementation follows.
macro_rules! registry_entry {
    ($(#[$doc:meta])* $stat:ident: $ty:ident = $name:expr, $attrs:ty, $plan:ty) => {
        $(#[$doc])*
        pub(crate) struct $ty;

        pub(crate) static $stat: $ty = $ty;

        impl $crate::ops::registry::op::OpHeader for $ty {
            type Attrs = $attrs;
            type Plan = $plan;

            fn name(&self) -> &'static str {
                $name
            }
        }
    };
}
pub(crate) use registry_entry;

/// The [`op::OpHeader`] of an op type whose name depends on its value (families declared
/// as several statics): `op_header!(TypeOp: Attrs, Plan; |op| op.name);`.
macro_rules! op_header {
    (impl<$g:ident: $bound:path> $ty:ty: $attrs:ty, $plan:ty; |$op:ident| $name:expr) => {
        impl<$g: $bound> $crate::ops::registry::op::OpHeader for $ty {
            type Attrs = $attrs;
            type Plan = $plan;

            fn name(&self) -> &'static str {
                let $op = self;
                $name
            }
        }
    };
    ($ty:ty: $attrs:ty, $plan:ty; |$op:ident| $name:expr) => {
        impl $crate::ops::registry::op::OpHeader for $ty {
            type Attrs = $attrs;
            type Plan = $plan;

            fn name(&self) -> &'static str {
                let $op = self;
                $name
            }
        }
    };
}
pub(crate) use op_header;

/// A registered op, as tools, tests and the program interpreter see it: run it on tensors
/// (eager or meta) or infer its outputs, with attributes as a flat map.
pub trait RegisteredOp: Send + Sync {
    /// The op's name.
    fn name(&self) -> &'static str;
    /// True when the op has a backward rule.
    fn differentiable(&self) -> bool;
    /// Inputs the op updates in place, for a call with `inputs` inputs.
    fn inplace(&self, inputs: usize) -> Vec<usize>;
    /// Trailing outputs that carry no gradient (masks, statistics, indices).
    fn aux_outputs(&self) -> usize;
    /// True when output 0 shares input 0's memory (reshape-like ops): no kernel runs.
    fn view(&self) -> bool;
    /// True when inputs may live on different places (moving between places).
    fn mixed_places(&self) -> bool;
    /// What passes need to know about the op.
    fn facts(&self) -> Facts;
    /// Runs the op (eagerly, or on meta tensors) with attributes parsed from `attrs`.
    fn run(&'static self, inputs: &[&Tensor], attrs: &AttrMap) -> Result<Vec<Tensor>>;
    /// The outputs' shapes, dtypes and places, without running anything.
    fn infer(&self, inputs: &[TensorMeta], attrs: &AttrMap) -> Result<Vec<TensorMeta>>;
    /// Parses `attrs` and prints them back in the op's own order (checks a map).
    fn normalize_attrs(&self, attrs: &AttrMap) -> Result<AttrMap>;
}

impl<T: op::Op> RegisteredOp for T {
    fn name(&self) -> &'static str {
        op::OpHeader::name(self)
    }
    fn differentiable(&self) -> bool {
        op::Op::differentiable(self)
    }
    fn inplace(&self, inputs: usize) -> Vec<usize> {
        op::Op::inplace(self, inputs)
    }
    fn aux_outputs(&self) -> usize {
        op::Op::aux_outputs(self)
    }
    fn view(&self) -> bool {
        op::Op::view(self)
    }
    fn mixed_places(&self) -> bool {
        op::Op::mixed_places(self)
    }
    fn facts(&self) -> Facts {
        op::Op::facts(self)
    }
    fn run(&'static self, inputs: &[&Tensor], attrs: &AttrMap) -> Result<Vec<Tensor>> {
        apply::apply(self, inputs, self.parse_attrs(attrs)?)
    }
    fn infer(&self, inputs: &[TensorMeta], attrs: &AttrMap) -> Result<Vec<TensorMeta>> {
        let a = self.parse_attrs(attrs)?;
        let refs: Vec<&TensorMeta> = inputs.iter().collect();
        Ok(apply::infer(self, &refs, &a)?.0)
    }
    fn normalize_attrs(&self, attrs: &AttrMap) -> Result<AttrMap> {
        Ok(self.attr_map(&self.parse_attrs(attrs)?))
    }
}

/// Every registered op, in a fixed order.
pub fn registry() -> &'static [&'static dyn RegisteredOp] {
    static ALL: OnceLock<Vec<&'static dyn RegisteredOp>> = OnceLock::new();
    ALL.get_or_init(catalog::registered_ops)
}

/// True when the op at `addr` named `name` is a registry entry (`apply` refuses others, so
/// an op left out of the registry fails on its first call instead of being silently missing
/// from programs and tools).
pub(crate) fn is_registered(addr: usize, name: &str) -> bool {
    static ENTRIES: OnceLock<std::collections::HashSet<(usize, &'static str)>> = OnceLock::new();
    ENTRIES
        .get_or_init(|| {
            registry().iter().map(|o| ((*o as *const dyn RegisteredOp).cast::<()>() as usize, o.name())).collect()
        })
        .contains(&(addr, name))
}

/// The registered op called `name`.
pub fn find_op(name: &str) -> Result<&'static dyn RegisteredOp> {
    static BY_NAME: OnceLock<std::collections::HashMap<&'static str, &'static dyn RegisteredOp>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| registry().iter().rev().map(|o| (o.name(), *o)).collect())
        .get(name)
        .copied()
        .ok_or_else(|| Error::invalid("find_op", format!("no registered op named {name:?}")))
}

/// Runs the registered op `name` on `inputs` with `attrs` (the interpreter's entry point).
pub fn run_op(name: &str, inputs: &[&Tensor], attrs: &AttrMap) -> Result<Vec<Tensor>> {
    find_op(name)?.run(inputs, attrs)
}
