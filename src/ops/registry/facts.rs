//! What passes need to know about an op, declared with it ([`Facts`]): how it joins an
//! elementwise chain, whether a chain can run in its store (epilogue host) or its loads
//! (prologue host), whether it is an optimizer update and how it merges, what it becomes in
//! an evaluation copy of a program, how it commutes with max pooling, whether it draws
//! random numbers, whether it copies one input into another, which of Paddle's mixed-precision
//! lists it is on. Fusion, the relu/max-pool rewrite, update merging,
//! `clone_program(for_test)`, autocast and the sweep read these facts; no
//! pass compares an op's name, so an op that should fuse or be rewritten says so where it
//! is declared.

use super::{AttrMap, RegisteredOp};

/// An op's facts (everything absent by default: [`Facts::NONE`]).
#[derive(Clone, Copy)]
pub struct Facts {
    /// How the op joins an elementwise chain of a program's fusion pass.
    pub fusion: Option<Fusion>,
    /// A product whose store can run the chain after it.
    pub epilogue: Option<EpilogueHost>,
    /// A reduction whose loads can run the chain before it.
    pub prologue: Option<PrologueHost>,
    /// An optimizer update: tensors per parameter and its merged form.
    pub update: Option<Update>,
    /// A merged update of several parameters: tensors per parameter.
    pub merged_update: Option<usize>,
    /// What the op becomes in an evaluation copy of a program.
    pub eval: Option<EvalRewrite>,
    /// How the op takes part in the `max_pool(relu(x))` rewrite.
    pub commute: Option<Commute>,
    /// The op draws from the random generator.
    pub random: bool,
    /// The op copies input 1 into input 0 in place (`assign_`): how a program's running
    /// statistics are written.
    pub assigns: bool,
    /// Which of Paddle's mixed-precision lists the op is on (`amp::auto_cast`).
    pub amp: AmpList,
    /// The op's autocast dtype is decided by input 0 alone (the norms: their float32 scale
    /// and shift do not make a float16 input run in float32).
    pub amp_by_first: bool,
}

impl Facts {
    /// No facts.
    pub const NONE: Facts = Facts {
        fusion: None,
        epilogue: None,
        prologue: None,
        update: None,
        merged_update: None,
        eval: None,
        commute: None,
        random: false,
        assigns: false,
        amp: AmpList::Gray,
        amp_by_first: false,
    };
}

/// Where an op stands in Paddle 3.x's default mixed-precision lists
/// (`python/paddle/amp/amp_lists.py`), which decide the dtype it runs in under
/// `amp::auto_cast` (the user's custom lists come first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AmpList {
    /// On the white list of float16 and of bfloat16 (conv2d, matmul, einsum): its float
    /// inputs are cast to the low dtype.
    White,
    /// On float16's white list only (max_pool2d_with_index, fused_gemm_epilogue); gray for
    /// bfloat16.
    WhiteFloat16,
    /// On the extra black list, kept at every level and for both dtypes (interpolation,
    /// embedding, scatter): float32.
    Black,
    /// On float16's black list at level O1 (exp, log, pow, sums and means, norms, softmax,
    /// the losses): float32 there, gray at O2 and for bfloat16.
    BlackFloat16,
    /// On no list: at O1 (and at O2 with `use_promote`) the widest float input's dtype
    /// (float32 if any input is float32); at O2 without promotion the low dtype; at OD
    /// float32.
    Gray,
    /// Never cast (casts themselves, in-place updates, the NaN check): the op's inputs
    /// stay as they come.
    Keep,
}

/// How an op joins an elementwise chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fusion {
    /// A unary table row computing floats, with its scalar attributes `params`: the fused
    /// kernel evaluates the row's expression.
    Unary {
        /// The attributes holding the row's parameters, in its order.
        params: &'static [&'static str],
    },
    /// A binary table row computing floats.
    Binary,
    /// A scalar constant (rank 0, no inputs) filled with the float attribute `value`: a
    /// chain's leaf, no fill kernel.
    Constant {
        /// The attribute holding the value.
        value: &'static str,
    },
    /// A view that may add or drop leading 1s (reshape, unsqueeze): broadcasting aligns
    /// shapes from the right, so it changes no element's value.
    View,
    /// A view dropping the size-1 dims its `axes` attribute names (all of them when empty).
    Squeeze {
        /// The attribute listing the axes.
        axes: &'static str,
    },
    /// Input 0 broadcast into input 1's shape.
    Expand,
}

/// A product whose store can run an elementwise chain.
#[derive(Clone, Copy)]
pub struct EpilogueHost {
    /// The op running the product with the chain in its store (its attributes are the
    /// product's with `program` the chain; its inputs the product's, then the chain's).
    pub fused: &'static dyn RegisteredOp,
    /// The input counts the product takes that have a fused form (a bias makes three).
    pub inputs: (usize, usize),
    /// Whether a chain of `nodes` nodes reading `extras` other tensors fits the fused
    /// kernel, for an output of rank `rank`.
    pub fits: fn(nodes: usize, extras: usize, rank: usize) -> bool,
}

/// A reduction whose loads can run an elementwise chain.
#[derive(Clone, Copy)]
pub struct PrologueHost {
    /// The op running the reduction of the chain (its attributes are the reduction's, with
    /// `reduce` naming it and `program` the chain; its inputs the chain's).
    pub fused: &'static dyn RegisteredOp,
    /// Whether a chain of `nodes` nodes reading `inputs` tensors fits the fused kernel.
    pub fits: fn(nodes: usize, inputs: usize) -> bool,
}

/// An optimizer update's facts.
#[derive(Clone, Copy)]
pub struct Update {
    /// Tensors each parameter takes (the parameter, its gradient and its states), before
    /// the optional schedule.
    pub per_param: usize,
    /// The merged form updating several parameters of one rule in one op, if there is one.
    pub merged: Option<&'static dyn RegisteredOp>,
}

/// What an op becomes in an evaluation copy of a program (`clone_program(for_test)`): the
/// ops that take its place, written by the op itself, so the pass that applies them knows
/// no op by name.
#[derive(Clone, Copy)]
pub struct EvalRewrite {
    /// How many leading outputs are batch statistics that the program also folds into
    /// running statistics with `assign_` ops (the `assigns` fact): the evaluation form reads
    /// those running variables as [`EvalVar::Running`], and the ops updating them go. Zero
    /// for an op whose form needs only its attributes (dropout).
    pub running: usize,
    /// The replacement ops from the op's attributes; `None` keeps the op as built. Outputs
    /// the form does not write (dropout's mask) are no longer produced.
    pub form: fn(&AttrMap) -> Option<Vec<EvalOp>>,
}

/// One op of an evaluation form.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOp {
    /// The registered op it runs.
    pub op_type: &'static str,
    /// Its inputs, in the op's order.
    pub inputs: Vec<EvalVar>,
    /// Its outputs, in the op's order.
    pub outputs: Vec<EvalVar>,
    /// Its attributes.
    pub attrs: AttrMap,
}

/// A variable of an evaluation form, relative to the op it replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalVar {
    /// The replaced op's input `i`.
    Input(usize),
    /// The replaced op's output `i`.
    Output(usize),
    /// The running counterpart of the replaced op's output `i` (`i < running`).
    Running(usize),
    /// A fresh variable `id`, described like the replaced op's output `like`.
    Temp {
        /// Which fresh variable (equal ids are one variable).
        id: usize,
        /// The output whose description (dtype, shape) it takes.
        like: usize,
    },
}

/// How an op takes part in the `max_pool(relu(x))` → `relu(max_pool(x))` rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commute {
    /// Non-decreasing, keeps NaN, maps everything at or below zero to `0.0` (relu); its
    /// gradient is the select `grad`.
    ZeroFloor {
        /// The gradient op (`b` where `a > 0`, else `0.0`).
        grad: &'static str,
    },
    /// Takes each window's first maximum, its argmax as output 1; its gradient scatters at
    /// the argmax through `grad`.
    MaxWindow {
        /// The gradient op.
        grad: &'static str,
    },
}
