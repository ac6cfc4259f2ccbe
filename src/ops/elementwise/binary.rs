//! Binary elementwise ops with numpy broadcasting: arithmetic, comparisons and logic. Each
//! table row is one registry entry.

use super::{
    GpuExprs, TableRow, family_dtypes, row_fields, table_keys, table_variant, vec4_keys, vec4_row, vec4_variant,
};
use crate::backend::cpu::CpuData;
use crate::backend::cpu::elementwise::{RunFn, zip_run, zip_strided, zip_strided_runs};
use crate::backend::gpu::{Bind, Kernel, Variant, WORKGROUP};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::{Facts, Fusion, op_header};
use crate::ops::wgsl;
use crate::shape::{broadcast_shapes, broadcast_strides, strided_params};
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Scalar, Tensor};

type FloatFn = fn(f64, f64) -> f64;
type IntFn = fn(i64, i64) -> i64;
type BoolFn = fn(bool, bool) -> bool;
/// The gradient of one operand from `(a, b, y, dy)`, in the broadcast output shape (summed
/// back to the operand's shape afterwards).
type GradFn = fn(&Tensor, &Tensor, &Tensor, &Tensor) -> Result<Tensor>;

/// Run kernels of a float op for float32 and float64.
type FloatRuns = (RunFn<f32, f32, f32>, RunFn<f64, f64, f64>);

/// One binary op: `y = f(a, b)`.
pub(crate) struct BinaryDef {
    pub name: &'static str,
    /// Position in `BINARY_OPS` (the GPU variant key).
    pub id: u32,
    pub float: Option<FloatFn>,
    /// The float closure compiled into run kernels for float32 and float64 (f64 arithmetic,
    /// as `float`), so the CPU backend pays one call per innermost run, not per element.
    pub float_runs: Option<FloatRuns>,
    pub int: Option<IntFn>,
    /// Closure for bool operands; an op with only this one is a logical op (operands of any
    /// dtype are converted to bool first).
    pub boolean: Option<BoolFn>,
    pub out_bool: bool,
    pub gpu: GpuExprs,
    /// The gradient of `a`, computed only when `a` needs one.
    pub grad_a: Option<GradFn>,
    /// The gradient of `b`, computed only when `b` needs one.
    pub grad_b: Option<GradFn>,
}

impl BinaryDef {
    pub fn is_logical(&self) -> bool {
        self.float.is_none() && self.int.is_none()
    }

    /// True when the backward rule covers either operand.
    pub fn has_backward(&self) -> bool {
        self.grad_a.is_some() || self.grad_b.is_some()
    }
}

impl TableRow for BinaryDef {
    row_fields!();

    /// Logical ops convert any dtype to bool in their public function; the registry entry
    /// itself takes bool.
    fn dtypes(&self) -> Vec<DType> {
        if self.is_logical() {
            return vec![DType::Bool];
        }
        family_dtypes(self.float.is_some(), self.int.is_some(), self.boolean.is_some())
    }

    fn accessors(&self, dtype: DType, out: DType) -> Variant {
        vec![
            ("LOAD_A", wgsl::table_load(dtype, "lhs", "ia")),
            ("LOAD_B", wgsl::table_load(dtype, "rhs", "ib")),
            ("STORE", wgsl::store(out, "y")),
        ]
    }
}

pub(crate) static BINARY: Kernel =
    Kernel { file: "binary.wgsl", keys: || table_keys(BINARY_OPS), variant: |key| table_variant(BINARY_OPS, key) };

/// Float32 rows over vec4s (same-shape operands, element counts that are multiples of 4),
/// keyed by row id.
pub(crate) static BINARY_VEC4: Kernel =
    Kernel { file: "binary_vec4.wgsl", keys: || vec4_keys(BINARY_OPS), variant: |key| vec4_variant(BINARY_OPS, key) };

fn cpu_binary(
    def: &BinaryDef,
    a: &CpuData,
    sa: &[isize],
    b: &CpuData,
    sb: &[isize],
    shape: &[usize],
) -> Option<CpuData> {
    let ob = def.out_bool;
    Some(match (a, b) {
        (CpuData::F32(x), CpuData::F32(y)) if !ob => {
            CpuData::F32(zip_strided_runs(x, sa, y, sb, shape, def.float_runs?.0))
        }
        (CpuData::F64(x), CpuData::F64(y)) if !ob => {
            CpuData::F64(zip_strided_runs(x, sa, y, sb, shape, def.float_runs?.1))
        }
        (CpuData::F32(x), CpuData::F32(y)) => {
            let f = def.float?;
            CpuData::Bool(zip_strided(x, sa, y, sb, shape, |p, q| f(p as f64, q as f64) != 0.0))
        }
        (CpuData::F64(x), CpuData::F64(y)) => {
            let f = def.float?;
            CpuData::Bool(zip_strided(x, sa, y, sb, shape, |p, q| f(p, q) != 0.0))
        }
        (CpuData::I32(x), CpuData::I32(y)) => {
            let f = def.int?;
            if ob {
                CpuData::Bool(zip_strided(x, sa, y, sb, shape, |p, q| f(p as i64, q as i64) != 0))
            } else {
                CpuData::I32(zip_strided(x, sa, y, sb, shape, |p, q| f(p as i64, q as i64) as i32))
            }
        }
        (CpuData::I64(x), CpuData::I64(y)) => {
            let f = def.int?;
            if ob {
                CpuData::Bool(zip_strided(x, sa, y, sb, shape, |p, q| f(p, q) != 0))
            } else {
                CpuData::I64(zip_strided(x, sa, y, sb, shape, f))
            }
        }
        (CpuData::Bool(x), CpuData::Bool(y)) => CpuData::Bool(zip_strided(x, sa, y, sb, shape, def.boolean?)),
        _ => return None,
    })
}

/// Element strides of both operands over the broadcast output shape.
pub(crate) struct BroadcastPlan {
    pub shape: Vec<usize>,
    pub sa: Vec<isize>,
    pub sb: Vec<isize>,
}

impl BroadcastPlan {
    pub fn new(op: &'static str, a: &[usize], b: &[usize]) -> Result<BroadcastPlan> {
        let shape = broadcast_shapes(op, a, b)?;
        let strides = |s: &[usize]| broadcast_strides(s, &shape).into_iter().map(|v| v as isize).collect();
        Ok(BroadcastPlan { sa: strides(a), sb: strides(b), shape })
    }
}

op_header!(BinaryDef: (), BroadcastPlan; |op| op.name);

impl Op for BinaryDef {
    fn infer(&self, x: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, BroadcastPlan)> {
        let [a, b] = inputs(self.name, x)?;
        if a.dtype != b.dtype {
            return Err(Error::DTypeMismatch { op: self.name, lhs: a.dtype, rhs: b.dtype });
        }
        if !self.dtypes().contains(&a.dtype) {
            return Err(self.unsupported(a.dtype));
        }
        let plan = BroadcastPlan::new(self.name, a.dims(), b.dims())?;
        let out = TensorMeta::new(plan.shape.clone(), self.out_dtype(a.dtype), a.place);
        Ok((vec![out], plan))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, _: &(), p: &BroadcastPlan) -> Result<Vec<CpuData>> {
        let out = cpu_binary(self, k.x(0), &p.sa, k.x(1), &p.sb, &p.shape);
        Ok(vec![out.ok_or_else(|| self.unsupported(k.ins[0].dtype))?])
    }

    fn gpu(&self, k: &GpuCall<'_>, _: &(), p: &BroadcastPlan) -> Result<()> {
        let dtype = k.ins[0].dtype;
        if self.gpu_expr(dtype).is_none() {
            return Err(self.unsupported(dtype));
        }
        let n = k.outs[0].numel();
        let (mut params, cs) = strided_params(n, &p.shape, &[p.sa.clone(), p.sb.clone()]);
        let binds = [Bind::read(k.x(0)), Bind::read(k.x(1)), Bind::write(k.y(0))];
        let max = k.ctx.limits.max_compute_workgroups_per_dimension as usize;
        let inner = cs.last().copied().unwrap_or(1);
        let rows = matches!(cs.len(), 2 | 3) && inner >= 64 && cs[..cs.len() - 1].iter().all(|&d| d <= max);
        if cs.len() <= 1 {
            if cs.is_empty() {
                params.extend([1, 0, 0]);
            }
            if dtype == DType::Float32 && vec4_row(self) && n.is_multiple_of(4) && params[3] == 1 && params[4] == 1 {
                let groups = (n / 4) as u64;
                return k.ctx.dispatch(&BINARY_VEC4, self.id, "main", &binds, &[groups as u32], groups);
            }
            k.ctx.dispatch(&BINARY, self.key(dtype), "flat", &binds, &params, n as u64)
        } else if rows {
            let outer = if cs.len() == 3 { cs[0] } else { 1 };
            let groups = [inner.div_ceil(WORKGROUP as usize) as u32, cs[cs.len() - 2] as u32, outer as u32];
            k.ctx.dispatch(&BINARY, self.key(dtype), "rows", &binds, &params, groups)
        } else {
            k.ctx.dispatch(&BINARY, self.key(dtype), "main", &binds, &params, n as u64)
        }
    }

    fn half(&self) -> Half {
        Half::GpuFloat16
    }

    fn differentiable(&self) -> bool {
        self.has_backward()
    }

    fn facts(&self) -> Facts {
        let fuses = self.float.is_some() && !self.out_bool;
        Facts { fusion: fuses.then_some(Fusion::Binary), ..Facts::NONE }
    }

    fn backward(&self, g: &GradCall<'_>, _: &(), _: &BroadcastPlan) -> Result<Vec<Option<Tensor>>> {
        let (a, b, y, dy) = (g.x(0), g.x(1), g.y(0)?, g.g());
        let one = |i: usize, f: Option<GradFn>, like: &Tensor| -> Result<Option<Tensor>> {
            match f {
                Some(f) if g.needs(i) => Ok(Some(crate::ops::shape::sum_to_shape(&f(a, b, &y, dy)?, like.shape())?)),
                _ => Ok(None),
            }
        };
        Ok(vec![one(0, self.grad_a, a)?, one(1, self.grad_b, b)?])
    }
}

/// Records `out = a · b` for `n` float32 elements of equally shaped buffers (kernels that
/// end in a product, such as dropout).
pub(crate) fn gpu_multiply(
    ctx: &crate::backend::gpu::GpuContext,
    a: &crate::backend::gpu::GpuBuffer,
    b: &crate::backend::gpu::GpuBuffer,
    out: &crate::backend::gpu::GpuBuffer,
    n: usize,
) -> Result<()> {
    let params = [n as u32, 1, n as u32, 1, 1];
    let binds = [Bind::read(a), Bind::read(b), Bind::write(out)];
    ctx.dispatch(&BINARY, defs::multiply.key(DType::Float32), "main", &binds, &params, n as u64)
}

/// Runs binary op `def` on `a` and `b`. Logical ops first convert both to bool; float-only
/// ops (`divide`) convert integer operands to float32 (true division, as Paddle 3.x).
pub(crate) fn binary(def: &'static BinaryDef, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if def.is_logical() && (a.dtype() != DType::Bool || b.dtype() != DType::Bool) {
        a.same_place(def.name, b)?;
        return apply1(def, &[&a.cast(DType::Bool)?, &b.cast(DType::Bool)?], ());
    }
    let int = |t: &Tensor| t.dtype().is_int() || t.dtype() == DType::Bool;
    if def.int.is_none() && def.float.is_some() && int(a) && int(b) {
        a.same_place(def.name, b)?;
        return apply1(def, &[&a.cast(DType::Float32)?, &b.cast(DType::Float32)?], ());
    }
    apply1(def, &[a, b], ())
}

/// Declares the binary ops: for each row a free function, a `Tensor` method and a table entry.
macro_rules! binary_ops {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            float: $(|$fa:ident, $fb:ident| $fbody:expr)?,
            int: $(|$ia:ident, $ib:ident| $ibody:expr)?,
            boolean: $(|$ba:ident, $bb:ident| $bbody:expr)?,
            wgsl: $w:expr,
            $( wgsl_i32: $w32:expr, )?
            $( wgsl_i64: $w64:expr, )?
            $( wgsl_bool: $wb:expr, )?
            $( out_bool: $ob:expr, )?
            grad_a: $(|$ga:ident, $gb:ident, $gy:ident, $gg:ident| $gabody:expr)?,
            grad_b: $(|$ha:ident, $hb:ident, $hy:ident, $hg:ident| $gbbody:expr)?,
        }
    )*) => {
        $(
            $(#[$doc])*
            pub fn $name(a: &Tensor, b: &Tensor) -> Result<Tensor> {
                binary(&defs::$name, a, b)
            }
        )*

        impl Tensor {
            $(
                $(#[$doc])*
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    binary(&defs::$name, self, other)
                }
            )*
        }

        #[allow(non_upper_case_globals, unused_variables)]
        mod defs {
            use super::*;

            /// Row positions, the ops' ids.
            #[allow(non_camel_case_types)]
            enum Id { $($name),* }

            $(
                pub(crate) static $name: BinaryDef = BinaryDef {
                    name: stringify!($name),
                    id: Id::$name as u32,
                    float: $crate::ops::opt!($(|$fa: f64, $fb: f64| -> f64 { $fbody })?),
                    float_runs: $crate::ops::opt!($((
                        |a: &[f32], oa: usize, sa: isize, b: &[f32], ob: usize, sb: isize, out: &mut [f32]| {
                            zip_run(a, oa, sa, b, ob, sb, out, |x: f32, y: f32| {
                                let ($fa, $fb) = (x as f64, y as f64);
                                ($fbody) as f32
                            })
                        },
                        |a: &[f64], oa: usize, sa: isize, b: &[f64], ob: usize, sb: isize, out: &mut [f64]| {
                            zip_run(a, oa, sa, b, ob, sb, out, |$fa: f64, $fb: f64| $fbody)
                        },
                    ))?),
                    int: $crate::ops::opt!($(|$ia: i64, $ib: i64| -> i64 { $ibody })?),
                    boolean: $crate::ops::opt!($(|$ba: bool, $bb: bool| -> bool { $bbody })?),
                    out_bool: false $(|| $ob)?,
                    gpu: GpuExprs::new($w, $crate::ops::opt!($($w32)?), $crate::ops::opt!($($w64)?), $crate::ops::opt!($($wb)?)),
                    grad_a: $crate::ops::opt!($(|$ga: &Tensor, $gb: &Tensor, $gy: &Tensor, $gg: &Tensor| -> Result<Tensor> {
                        $gabody
                    })?),
                    grad_b: $crate::ops::opt!($(|$ha: &Tensor, $hb: &Tensor, $hy: &Tensor, $hg: &Tensor| -> Result<Tensor> {
                        $gbbody
                    })?),
                };
            )*
        }

        /// Every binary op, in declaration order (the registry lists each).
        pub(crate) static BINARY_OPS: &[&BinaryDef] = &[$(&defs::$name),*];
    };
}

fn b2f(b: bool) -> f64 {
    b as u8 as f64
}

fn i_div(a: i64, b: i64) -> i64 {
    if b == 0 { 0 } else { a.wrapping_div(b) }
}

fn i_rem(a: i64, b: i64) -> i64 {
    if b == 0 { 0 } else { a.wrapping_rem(b) }
}

/// `⌊a / b⌋` of the exact quotient (Python's `//`): the rounded quotient can land on an
/// integer the true one falls short of (`1.0 // 0.1` is 9, not 10); the remainder, exact
/// through a fused multiply-add where `|a| ≥ |b|`, says when (below that the quotient's sign
/// decides: 0 or −1). Infinite or NaN operands give `floor(a / b)`. `floor_div_f` in
/// `lib/math.wgsl` is the same.
fn floor_div(a: f64, b: f64) -> f64 {
    let mut q = (a / b).floor();
    if !a.is_finite() || !b.is_finite() || a == 0.0 || b == 0.0 {
        return q;
    }
    if a.abs() < b.abs() {
        return if (a > 0.0) == (b > 0.0) { 0.0 } else { -1.0 };
    }
    let r = (-q).mul_add(b, a);
    if b > 0.0 {
        if r < 0.0 {
            q -= 1.0;
        } else if r >= b {
            q += 1.0;
        }
    } else if b < 0.0 {
        if r > 0.0 {
            q -= 1.0;
        } else if r <= b {
            q += 1.0;
        }
    }
    q
}

fn i_floordiv(a: i64, b: i64) -> i64 {
    let (q, r) = (i_div(a, b), i_rem(a, b));
    if r != 0 && ((r < 0) != (b < 0)) { q - 1 } else { q }
}

fn i_mod(a: i64, b: i64) -> i64 {
    let r = i_rem(a, b);
    if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
}

use super::unary::int_pow;

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

fn maskf(t: Result<Tensor>, like: &Tensor) -> Result<Tensor> {
    t?.cast(like.dtype())
}

/// `a`'s share of a maximum's or minimum's gradient: 1 where `a` wins (`wins`), ½ on ties,
/// 0 where `b` wins.
fn tie_share(wins: Result<Tensor>, a: &Tensor, b: &Tensor, like: &Tensor) -> Result<Tensor> {
    maskf(wins, like)?.add(&maskf(a.equal(b), like)?.scale(0.5, 0.0)?)
}

binary_ops! {
    /// `a + b`.
    add {
        float: |a, b| a + b,
        int: |a, b| a.wrapping_add(b),
        boolean:,
        wgsl: "a + b",
        wgsl_i64: "i64_add(a, b)",
        grad_a: |a, b, y, g| Ok(g.clone()),
        grad_b: |a, b, y, g| Ok(g.clone()),
    }
    /// `a - b`.
    subtract {
        float: |a, b| a - b,
        int: |a, b| a.wrapping_sub(b),
        boolean:,
        wgsl: "a - b",
        wgsl_i64: "i64_sub(a, b)",
        grad_a: |a, b, y, g| Ok(g.clone()),
        grad_b: |a, b, y, g| g.neg(),
    }
    /// `a · b`.
    multiply {
        float: |a, b| a * b,
        int: |a, b| a.wrapping_mul(b),
        boolean:,
        wgsl: "a * b",
        wgsl_i64: "i64_mul(a, b)",
        grad_a: |a, b, y, g| g.multiply(b),
        grad_b: |a, b, y, g| g.multiply(a),
    }
    /// `a / b`; integer operands divide truly into float32 (Paddle 3.x; use
    /// `floor_divide` for integer division).
    divide {
        float: |a, b| a / b,
        int:,
        boolean:,
        wgsl: "a / b",
        grad_a: |a, b, y, g| g.divide(b),
        grad_b: |a, b, y, g| g.multiply(y)?.divide(b)?.neg(),
    }
    /// Floor division (Python's `//`); `x // 0 = 0` for integers.
    floor_divide {
        float: |a, b| floor_div(a, b),
        int: |a, b| i_floordiv(a, b),
        boolean:,
        wgsl: "floor_div_f(a, b)",
        wgsl_i32: "i32_floordiv(a, b)",
        wgsl_i64: "i64_floordiv(a, b)",
        grad_a:,
        grad_b:,
    }
    /// Modulo with the sign of the divisor (Python's `%`, Paddle's `remainder`).
    remainder {
        float: |a, b| a - floor_div(a, b) * b,
        int: |a, b| i_mod(a, b),
        boolean:,
        wgsl: "a - floor_div_f(a, b) * b",
        wgsl_i32: "i32_mod(a, b)",
        wgsl_i64: "i64_mod(a, b)",
        grad_a: |a, b, y, g| Ok(g.clone()),
        grad_b: |a, b, y, g| g.multiply(&a.divide(b)?.floor()?)?.neg(),
    }
    /// `a^b` elementwise (exact for integers).
    pow_tensor {
        float: |a, b| a.powf(b),
        int: |a, b| int_pow(a, b),
        boolean:,
        wgsl: "pow_f(a, b)",
        wgsl_i32: "i32_pow(a, b)",
        wgsl_i64: "i64_pow(a, b)",
        grad_a: |a, b, y, g| g.multiply(&b.multiply(&a.pow_tensor(&b.scale(1.0, -1.0)?)?)?),
        grad_b: |a, b, y, g| {
            // d/db a^b = a^b·ln a, taken as 0 where a = 0 (the limit for b > 0).
            let pos = maskf(a.not_equal(&a.zeros_like()?), g)?;
            let safe_a = a.add(&pos.scale(-1.0, 1.0)?)?;
            g.multiply(&y.multiply(&safe_a.log()?)?)?.multiply(&pos)
        },
    }
    /// Elementwise maximum (NaN propagates); on ties the gradient splits evenly, as Paddle 3.x.
    maximum {
        float: |a, b| nan_max(a, b),
        int: |a, b| a.max(b),
        boolean:,
        wgsl: "select(max(a, b), f32_nan(), is_nan_f(a) || is_nan_f(b))",
        wgsl_i32: "max(a, b)",
        wgsl_i64: "i64_max(a, b)",
        grad_a: |a, b, y, g| g.multiply(&tie_share(a.greater_than(b), a, b, g)?),
        grad_b: |a, b, y, g| g.multiply(&tie_share(a.greater_than(b), a, b, g)?.scale(-1.0, 1.0)?),
    }
    /// Elementwise minimum (NaN propagates); on ties the gradient splits evenly, as Paddle 3.x.
    minimum {
        float: |a, b| nan_min(a, b),
        int: |a, b| a.min(b),
        boolean:,
        wgsl: "select(min(a, b), f32_nan(), is_nan_f(a) || is_nan_f(b))",
        wgsl_i32: "min(a, b)",
        wgsl_i64: "i64_min(a, b)",
        grad_a: |a, b, y, g| g.multiply(&tie_share(a.less_than(b), a, b, g)?),
        grad_b: |a, b, y, g| g.multiply(&tie_share(a.less_than(b), a, b, g)?.scale(-1.0, 1.0)?),
    }
    /// `b` where `a > 0`, else 0: relu's gradient in one pass (`a` relu's output, positive
    /// exactly where its input is; `b` the output gradient).
    #[doc(hidden)]
    relu_grad {
        float: |a, b| if a > 0.0 { b } else { 0.0 },
        int:,
        boolean:,
        wgsl: "select(0.0, b, a > 0.0)",
        grad_a:,
        grad_b: |a, b, y, g| crate::ops::elementwise::binary::relu_grad(a, g),
    }
    /// `a == b`.
    equal {
        float: |a, b| b2f(a == b),
        int: |a, b| (a == b) as i64,
        boolean: |a, b| a == b,
        wgsl: "a == b",
        wgsl_i64: "i64_eq(a, b)",
        wgsl_bool: "a == b",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// `a != b`.
    not_equal {
        float: |a, b| b2f(a != b),
        int: |a, b| (a != b) as i64,
        boolean: |a, b| a != b,
        // Not `a != b`: naga lowers float `!=` to an ordered compare, false for NaN.
        wgsl: "!(a == b)",
        wgsl_i64: "!i64_eq(a, b)",
        wgsl_bool: "a != b",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// `a < b`.
    less_than {
        float: |a, b| b2f(a < b),
        int: |a, b| (a < b) as i64,
        boolean:,
        wgsl: "a < b",
        wgsl_i64: "i64_lt(a, b)",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// `a <= b`.
    less_equal {
        float: |a, b| b2f(a <= b),
        int: |a, b| (a <= b) as i64,
        boolean:,
        wgsl: "a <= b",
        wgsl_i64: "i64_le(a, b)",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// `a > b`.
    greater_than {
        float: |a, b| b2f(a > b),
        int: |a, b| (a > b) as i64,
        boolean:,
        wgsl: "a > b",
        wgsl_i64: "i64_lt(b, a)",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// `a >= b`.
    greater_equal {
        float: |a, b| b2f(a >= b),
        int: |a, b| (a >= b) as i64,
        boolean:,
        wgsl: "a >= b",
        wgsl_i64: "i64_le(b, a)",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// Logical and (operands converted to bool).
    logical_and {
        float:,
        int:,
        boolean: |a, b| a && b,
        wgsl: "a && b",
        wgsl_bool: "a && b",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// Logical or (operands converted to bool).
    logical_or {
        float:,
        int:,
        boolean: |a, b| a || b,
        wgsl: "a || b",
        wgsl_bool: "a || b",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
    /// Logical exclusive or (operands converted to bool).
    logical_xor {
        float:,
        int:,
        boolean: |a, b| a != b,
        wgsl: "a != b",
        wgsl_bool: "a != b",
        out_bool: true,
        grad_a:,
        grad_b:,
    }
}

/// `Tensor` methods `name(&self, v)` that run binary op `op` against a scalar `v`.
macro_rules! scalar_forms {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, v: impl Into<Scalar>) -> Result<Tensor> {
                self.with_scalar($op, v.into())
            }
        )*
    };
}

impl Tensor {
    /// Shorthand for `subtract`.
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.subtract(other)
    }

    /// Shorthand for `multiply`.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.multiply(other)
    }

    /// Shorthand for `divide`.
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.divide(other)
    }

    /// A 0-d tensor holding `v` with this tensor's dtype and place; a non-integral `v` next
    /// to an integer tensor makes both float32 (numpy's promotion).
    pub(crate) fn scalar_operand(&self, v: Scalar) -> Result<(Tensor, Tensor)> {
        let lhs = if !self.dtype().is_float() && self.dtype() != DType::Bool && !v.is_integral() {
            self.cast(DType::Float32)?
        } else {
            self.clone()
        };
        let rhs = crate::full_on(&[] as &[usize], v, lhs.dtype(), lhs.place())?;
        Ok((lhs, rhs))
    }

    /// Applies binary op `def` with a scalar right-hand side.
    pub(crate) fn with_scalar(&self, def: fn(&Tensor, &Tensor) -> Result<Tensor>, v: Scalar) -> Result<Tensor> {
        let (a, b) = self.scalar_operand(v)?;
        def(&a, &b)
    }

    scalar_forms! {
        /// `self == v` for a scalar `v`.
        equal_scalar => equal;
        /// `self != v` for a scalar `v`.
        not_equal_scalar => not_equal;
        /// `self < v` for a scalar `v`.
        less_than_scalar => less_than;
        /// `self <= v` for a scalar `v`.
        less_equal_scalar => less_equal;
        /// `self > v` for a scalar `v`.
        greater_than_scalar => greater_than;
        /// `self >= v` for a scalar `v`.
        greater_equal_scalar => greater_equal;
        /// `max(self, v)` for a scalar `v`.
        maximum_scalar => maximum;
        /// `min(self, v)` for a scalar `v`.
        minimum_scalar => minimum;
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[], kernels: &[&BINARY, &BINARY_VEC4] };
