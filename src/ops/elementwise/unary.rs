//! Unary elementwise ops: the table (one row per op) and the registry entry every row is.

use super::{
    GpuExprs, TableRow, family_dtypes, pad2, row_fields, table_keys, table_variant, vec4_keys, vec4_row, vec4_variant,
};
use crate::backend::cpu::CpuData;
use crate::backend::cpu::elementwise::{PAR_MIN, par_map};
use crate::backend::cpu::par_chunks_new;
use crate::backend::gpu::{Bind, Kernel, Variant};
use crate::ops::registry::apply::apply1;
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Half, Op, inputs};
use crate::ops::registry::op_header;
use crate::ops::registry::{AmpList, AttrMap, AttrValue, Commute, Facts, Fusion};
use crate::ops::wgsl;
use crate::tensor::TensorMeta;
use crate::{DType, Error, Result, Tensor};

type FloatFn = fn(f64, f64, f64) -> f64;
type IntFn = fn(i64, i64, i64) -> i64;
type UnaryBackward = fn(&Tensor, &Tensor, &Tensor, [f64; 2]) -> Result<Tensor>;
/// `ys[i] = f(xs[i]; p0, p1)` over a whole slice: the float closure compiled into a loop of
/// its own per dtype, so that the CPU backend pays one call per chunk, not per element.
type SliceFn<T> = fn(&[T], &mut [T], f64, f64);

/// One unary op: `y = f(x; p0, p1)`.
pub(crate) struct UnaryDef {
    pub name: &'static str,
    /// Position in `UNARY_OPS` (the GPU variant key).
    pub id: u32,
    /// Names of the scalar parameters (up to two), as attributes.
    pub params: &'static [&'static str],
    /// Float closure (f64 arithmetic, rounded to the dtype).
    pub float: Option<FloatFn>,
    /// The same closure over float32 and float64 slices (computed in f64 as `float` is).
    pub float_slices: Option<(SliceFn<f32>, SliceFn<f64>)>,
    /// Integer closure (wrapping i64 arithmetic, truncated to i32 for int32); also used for
    /// bool inputs (as 0/1) when `gpu.bool` is set.
    pub int: Option<IntFn>,
    /// The result is bool (closures return 0/1).
    pub out_bool: bool,
    pub gpu: GpuExprs,
    /// `dx = backward(x, y, dy, params)`.
    pub backward: Option<UnaryBackward>,
    /// How the op takes part in the max-pooling rewrite (relu).
    pub commute: Option<Commute>,
    /// Its mixed-precision list.
    pub amp: AmpList,
}

impl TableRow for UnaryDef {
    row_fields!();

    fn dtypes(&self) -> Vec<DType> {
        family_dtypes(self.float.is_some(), self.int.is_some(), self.gpu.bool.is_some())
    }

    fn accessors(&self, dtype: DType, out: DType) -> Variant {
        vec![
            ("LOAD", wgsl::table_load(dtype, "src", "i")),
            ("STORE", wgsl::store(out, "y")),
            ("P0", wgsl::param(dtype, 1)),
            ("P1", wgsl::param(dtype, 1 + wgsl::param_words(dtype))),
        ]
    }
}

pub(crate) static UNARY: Kernel =
    Kernel { file: "unary.wgsl", keys: || table_keys(UNARY_OPS), variant: |key| table_variant(UNARY_OPS, key) };

/// Float32 rows over vec4s (element counts that are multiples of 4), keyed by row id.
pub(crate) static UNARY_VEC4: Kernel =
    Kernel { file: "unary_vec4.wgsl", keys: || vec4_keys(UNARY_OPS), variant: |key| vec4_variant(UNARY_OPS, key) };

fn cpu_unary(def: &UnaryDef, data: &CpuData, p: [f64; 2]) -> Option<CpuData> {
    let (p0, p1) = (p[0], p[1]);
    let (i0, i1) = (p[0] as i64, p[1] as i64);
    let ob = def.out_bool;
    Some(match data {
        CpuData::F32(v) if !ob => CpuData::F32(map_slices(v, def.float_slices?.0, p)),
        CpuData::F64(v) if !ob => CpuData::F64(map_slices(v, def.float_slices?.1, p)),
        CpuData::F32(v) => {
            let f = def.float?;
            CpuData::Bool(par_map(v, |x| f(x as f64, p0, p1) != 0.0))
        }
        CpuData::F64(v) => {
            let f = def.float?;
            CpuData::Bool(par_map(v, |x| f(x, p0, p1) != 0.0))
        }
        CpuData::I32(v) => {
            let f = def.int?;
            if ob {
                CpuData::Bool(par_map(v, |x| f(x as i64, i0, i1) != 0))
            } else {
                CpuData::I32(par_map(v, |x| f(x as i64, i0, i1) as i32))
            }
        }
        CpuData::I64(v) => {
            let f = def.int?;
            if ob {
                CpuData::Bool(par_map(v, |x| f(x, i0, i1) != 0))
            } else {
                CpuData::I64(par_map(v, |x| f(x, i0, i1)))
            }
        }
        CpuData::Bool(v) => {
            def.gpu.bool?;
            let f = def.int?;
            CpuData::Bool(par_map(v, |x| f(x as i64, i0, i1) != 0))
        }
        CpuData::F16(_) | CpuData::BF16(_) => return None,
    })
}

/// `f` over `xs` in parallel chunks.
fn map_slices<T: Copy + Default + Send + Sync>(xs: &[T], f: SliceFn<T>, p: [f64; 2]) -> Vec<T> {
    par_chunks_new(xs.len(), T::default(), PAR_MIN, |start, chunk| {
        f(&xs[start..start + chunk.len()], chunk, p[0], p[1])
    })
}

// The attributes are the two scalar parameters (named by `params` in the attribute map).
op_header!(UnaryDef: [f64; 2], (); |op| op.name);

impl Op for UnaryDef {
    fn infer(&self, x: &[&TensorMeta], _: &[f64; 2]) -> Result<(Vec<TensorMeta>, ())> {
        let [x] = inputs(self.name, x)?;
        if !self.dtypes().contains(&x.dtype) {
            return Err(self.unsupported(x.dtype));
        }
        Ok((vec![x.with_dtype(self.out_dtype(x.dtype))], ()))
    }

    fn cpu(&self, k: &mut CpuCall<'_>, p: &[f64; 2], _: &()) -> Result<Vec<CpuData>> {
        let x = k.x(0);
        Ok(vec![cpu_unary(self, x, *p).ok_or_else(|| self.unsupported(x.dtype()))?])
    }

    fn gpu(&self, k: &GpuCall<'_>, p: &[f64; 2], _: &()) -> Result<()> {
        let dtype = k.ins[0].dtype;
        if self.gpu_expr(dtype).is_none() {
            return Err(self.unsupported(dtype));
        }
        let n = k.outs[0].numel();
        if dtype == DType::Float32 && vec4_row(self) && n.is_multiple_of(4) {
            let params = [(n / 4) as u32, (p[0] as f32).to_bits(), (p[1] as f32).to_bits()];
            let binds = [Bind::read(k.x(0)), Bind::write(k.y(0))];
            return k.ctx.dispatch(&UNARY_VEC4, self.id, "main", &binds, &params, (n / 4) as u64);
        }
        let mut params = vec![n as u32];
        for &v in p {
            params.extend(wgsl::scalar_words(dtype, v.into()));
        }
        k.ctx.dispatch(&UNARY, self.key(dtype), "main", &[Bind::read(k.x(0)), Bind::write(k.y(0))], &params, n as u64)
    }

    fn half(&self) -> Half {
        Half::GpuFloat16
    }

    fn differentiable(&self) -> bool {
        self.backward.is_some()
    }

    fn facts(&self) -> Facts {
        let fuses = self.float.is_some() && !self.out_bool;
        let fusion = fuses.then_some(Fusion::Unary { params: self.params });
        Facts { fusion, commute: self.commute, amp: self.amp, ..Facts::NONE }
    }

    fn backward(&self, g: &GradCall<'_>, p: &[f64; 2], _: &()) -> Result<Vec<Option<Tensor>>> {
        let bw = self.backward.ok_or_else(|| Error::Autograd(format!("{} has no backward rule", self.name)))?;
        Ok(vec![g.grad_if(0, || bw(g.x(0), &g.y(0)?, g.g(), *p))?])
    }

    fn attr_map(&self, p: &[f64; 2]) -> AttrMap {
        let mut m = AttrMap::new();
        for (name, v) in self.params.iter().zip(p) {
            m.set(*name, AttrValue::Float(*v));
        }
        m
    }

    fn parse_attrs(&self, m: &AttrMap) -> Result<[f64; 2]> {
        m.check_known(self.name, self.params)?;
        let mut p = [0.0; 2];
        for (slot, name) in p.iter_mut().zip(self.params) {
            *slot = m.field(self.name, name)?;
        }
        Ok(p)
    }
}

/// Runs unary op `def` on `x` with parameters `p`.
pub(crate) fn unary(def: &'static UnaryDef, x: &Tensor, p: [f64; 2]) -> Result<Tensor> {
    apply1(def, &[x], p)
}

/// The free function and `Tensor` method of one unary op.
macro_rules! unary_fn {
    ($(#[$doc:meta])* $name:ident ($($p:ident),*)) => {
        $(#[$doc])*
        pub fn $name(x: &Tensor $(, $p: f64)*) -> Result<Tensor> {
            unary(&defs::$name::DEF, x, pad2(&[$($p),*]))
        }

        impl Tensor {
            $(#[$doc])*
            pub fn $name(&self $(, $p: f64)*) -> Result<Tensor> {
                unary(&defs::$name::DEF, self, pad2(&[$($p),*]))
            }
        }
    };
}

/// Binds an op's named parameters (`(alpha, beta)`) to the kernel's two parameter slots.
macro_rules! bind_params {
    (($($p:ident),*), $a:expr, $b:expr) => {
        let [$($p,)* ..] = [$a, $b];
    };
}

/// The parameter names of a row, as strings.
macro_rules! param_names {
    (($($p:ident),*)) => {
        &[$(stringify!($p)),*]
    };
}

/// Declares the unary ops: for each row a free function, a `Tensor` method and a table entry.
macro_rules! unary_ops {
    ($(
        $(#[$doc:meta])*
        $name:ident $params:tt {
            float: $(|$fx:ident| $fbody:expr)?,
            int: $(|$ix:ident| $ibody:expr)?,
            wgsl: $w:expr,
            $( wgsl_i32: $w32:expr, )?
            $( wgsl_i64: $w64:expr, )?
            $( wgsl_bool: $wb:expr, )?
            $( out_bool: $ob:expr, )?
            backward: $(|$bx:ident, $by:ident, $bg:ident| $bbody:expr)?,
            $( commute: $commute:expr, )?
            $( amp: $amp:expr, )?
        }
    )*) => {
        $( unary_fn! { $(#[$doc])* $name $params } )*

        #[allow(non_upper_case_globals, unused_variables, clippy::redundant_closure_call)]
        mod defs {
            /// Row positions, the ops' ids.
            #[allow(non_camel_case_types)]
            enum Id { $($name),* }

            $(
                pub(crate) mod $name {
                use super::super::*;
                pub(crate) static DEF: UnaryDef = UnaryDef {
                    name: stringify!($name),
                    id: super::Id::$name as u32,
                    params: param_names!($params),
                    float: $crate::ops::opt!($(|$fx: f64, p0: f64, p1: f64| -> f64 {
                        bind_params!($params, p0, p1);
                        $fbody
                    })?),
                    float_slices: $crate::ops::opt!($((
                        |xs: &[f32], ys: &mut [f32], p0: f64, p1: f64| {
                            bind_params!($params, p0, p1);
                            for (y, &x) in ys.iter_mut().zip(xs) {
                                let $fx = x as f64;
                                *y = ($fbody) as f32;
                            }
                        },
                        |xs: &[f64], ys: &mut [f64], p0: f64, p1: f64| {
                            bind_params!($params, p0, p1);
                            for (y, &$fx) in ys.iter_mut().zip(xs) {
                                *y = $fbody;
                            }
                        },
                    ))?),
                    int: $crate::ops::opt!($(|$ix: i64, p0: i64, p1: i64| -> i64 {
                        bind_params!($params, p0, p1);
                        $ibody
                    })?),
                    out_bool: false $(|| $ob)?,
                    gpu: GpuExprs::new($w, $crate::ops::opt!($($w32)?), $crate::ops::opt!($($w64)?), $crate::ops::opt!($($wb)?)),
                    backward: $crate::ops::opt!($(|$bx: &Tensor, $by: &Tensor, $bg: &Tensor, ps: [f64; 2]| -> Result<Tensor> {
                        bind_params!($params, ps[0], ps[1]);
                        $bbody
                    })?),
                    commute: $crate::ops::opt!($($commute)?),
                    amp: [$($amp,)? AmpList::Gray][0],
                };
                }
            )*
        }

        /// Every unary op, in declaration order (the registry lists each).
        pub(crate) static UNARY_OPS: &[&UnaryDef] = &[$(&defs::$name::DEF),*];
    };
}

/// `x^e` with wrapping; negative `e` gives trunc(1/x^|e|).
pub(crate) fn int_pow(x: i64, e: i64) -> i64 {
    if e < 0 {
        return match x {
            1 => 1,
            -1 => {
                if e % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut r, mut b, mut k) = (1i64, x, e as u64);
    while k > 0 {
        if k & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        k >>= 1;
    }
    r
}

fn sign_f(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

fn sigmoid_f(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const INV_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// 1 where `cond(x)`, else 0, in `x`'s float dtype (for masking gradients).
fn mask(x: &Tensor, cond: Result<Tensor>) -> Result<Tensor> {
    cond?.cast(x.dtype())
}

unary_ops! {
    /// `-x`.
    neg() {
        float: |x| -x,
        int: |x| x.wrapping_neg(),
        wgsl: "-x",
        wgsl_i64: "i64_neg(x)",
        backward: |x, y, g| g.neg(),
    }
    /// `|x|`.
    abs() {
        float: |x| x.abs(),
        int: |x| x.wrapping_abs(),
        wgsl: "abs(x)",
        wgsl_i64: "i64_abs(x)",
        backward: |x, y, g| g.mul(&x.sign()?),
    }
    /// -1, 0 or 1 by the sign of x (NaN stays NaN).
    sign() {
        float: |x| sign_f(x),
        int: |x| x.signum(),
        wgsl: "sign_f(x)",
        wgsl_i32: "sign(x)",
        wgsl_i64: "i64_sign(x)",
        backward: |x, y, g| g.zeros_like(),
    }
    /// `x²`.
    square() {
        float: |x| x * x,
        int: |x| x.wrapping_mul(x),
        wgsl: "x * x",
        wgsl_i64: "i64_mul(x, x)",
        backward: |x, y, g| g.mul(&x.scale(2.0, 0.0)?),
        amp: AmpList::BlackFloat16,
    }
    /// `√x`.
    sqrt() {
        float: |x| x.sqrt(),
        int:,
        wgsl: "sqrt(x)",
        backward: |x, y, g| g.div(&y.scale(2.0, 0.0)?),
    }
    /// `1/√x`.
    rsqrt() {
        float: |x| 1.0 / x.sqrt(),
        int:,
        wgsl: "inverseSqrt(x)",
        backward: |x, y, g| g.mul(&y.pow_scalar(3.0)?.scale(-0.5, 0.0)?),
        amp: AmpList::BlackFloat16,
    }
    /// `1/x`.
    reciprocal() {
        float: |x| 1.0 / x,
        int:,
        wgsl: "1.0 / x",
        backward: |x, y, g| g.mul(&y.square()?.neg()?),
        amp: AmpList::BlackFloat16,
    }
    /// `e^x`.
    exp() {
        float: |x| x.exp(),
        int:,
        wgsl: "exp(x)",
        backward: |x, y, g| g.mul(y),
        amp: AmpList::BlackFloat16,
    }
    /// Natural logarithm.
    log() {
        float: |x| x.ln(),
        int:,
        wgsl: "log(x)",
        backward: |x, y, g| g.div(x),
        amp: AmpList::BlackFloat16,
    }
    /// `ln(1 + x)`, accurate for small x.
    log1p() {
        float: |x| x.ln_1p(),
        int:,
        wgsl: "log1p_f(x)",
        backward: |x, y, g| g.div(&x.scale(1.0, 1.0)?),
    }
    /// Sine.
    sin() {
        float: |x| x.sin(),
        int:,
        wgsl: "sin(x)",
        backward: |x, y, g| g.mul(&x.cos()?),
    }
    /// Cosine.
    cos() {
        float: |x| x.cos(),
        int:,
        wgsl: "cos(x)",
        backward: |x, y, g| g.mul(&x.sin()?.neg()?),
    }
    /// Hyperbolic tangent.
    tanh() {
        float: |x| x.tanh(),
        int:,
        wgsl: "select(tanh(clamp(x, -15.0, 15.0)), x, is_nan_f(x))",
        backward: |x, y, g| g.mul(&y.square()?.scale(-1.0, 1.0)?),
    }
    /// `1 / (1 + e^-x)`.
    sigmoid() {
        float: |x| sigmoid_f(x),
        int:,
        wgsl: "1.0 / (1.0 + exp(-x))",
        backward: |x, y, g| g.mul(&y.mul(&y.scale(-1.0, 1.0)?)?),
    }
    /// `max(x, 0)` (NaN stays NaN).
    relu() {
        float: |x| if x > 0.0 || x.is_nan() { x } else { 0.0 },
        int:,
        wgsl: "select(0.0, x, x > 0.0 || is_nan_f(x))",
        // From the output, as PyTorch's threshold_backward: `y > 0` exactly where `x > 0`,
        // and the input is then read by nothing else, so a program fuses it into its producer.
        backward: |x, y, g| crate::ops::elementwise::binary::relu_grad(y, g),
        // relu_grad is the select `g where y > 0, else 0` the rewrite's argument needs.
        commute: Commute::ZeroFloor { grad: "relu_grad" },
    }
    /// `min(max(x, 0), 6)`.
    relu6() {
        float: |x| x.clamp(0.0, 6.0),
        int:,
        wgsl: "select(clamp(x, 0.0, 6.0), x, is_nan_f(x))",
        backward: |x, y, g| g.mul(&mask(x, x.greater_than_scalar(0.0)?.logical_and(&x.less_than_scalar(6.0)?))?),
    }
    /// `x` if positive, else `negative_slope · x`.
    leaky_relu(negative_slope) {
        float: |x| if x > 0.0 { x } else { negative_slope * x },
        int:,
        wgsl: "select(p0 * x, x, x > 0.0)",
        backward: |x, y, g| {
            let pos = mask(x, x.greater_than_scalar(0.0))?;
            g.mul(&pos.scale(1.0 - negative_slope, negative_slope)?)
        },
    }
    /// `x` if positive, else `alpha · (e^x − 1)`.
    elu(alpha) {
        float: |x| if x > 0.0 { x } else { alpha * x.exp_m1() },
        int:,
        wgsl: "select(p0 * (exp(x) - 1.0), x, x > 0.0)",
        backward: |x, y, g| {
            let pos = mask(x, x.greater_than_scalar(0.0))?;
            let neg = y.scale(1.0, alpha)?;
            g.mul(&where_mask(&pos, &neg)?)
        },
    }
    /// GELU with the exact erf form: `x · Φ(x)`.
    gelu_erf() {
        float: |x| 0.5 * x * (1.0 + libm::erf(x * INV_SQRT_2)),
        int:,
        wgsl: "0.5 * x * (1.0 + erf_f(x * 0.70710678118654752))",
        backward: |x, y, g| {
            let cdf = x.scale(INV_SQRT_2, 0.0)?.erf()?.scale(0.5, 0.5)?;
            let pdf = x.square()?.scale(-0.5, 0.0)?.exp()?.scale(INV_SQRT_2PI, 0.0)?;
            g.mul(&cdf.add(&x.mul(&pdf)?)?)
        },
    }
    /// GELU with the tanh approximation.
    gelu_tanh() {
        float: |x| 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh()),
        int:,
        wgsl: "select(0.5 * x * (1.0 + tanh(clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0))), x, is_nan_f(x))",
        backward: |x, y, g| {
            let x2 = x.square()?;
            let u = x.mul(&x2.scale(0.044715, 1.0)?)?.scale(SQRT_2_OVER_PI, 0.0)?;
            let t = u.tanh()?;
            let du = x2.scale(3.0 * 0.044715 * SQRT_2_OVER_PI, SQRT_2_OVER_PI)?;
            let d = t.scale(0.5, 0.5)?.add(&x.mul(&t.square()?.scale(-0.5, 0.5)?)?.mul(&du)?)?;
            g.mul(&d)
        },
    }
    /// The error function.
    erf() {
        float: |x| libm::erf(x),
        int:,
        wgsl: "erf_f(x)",
        backward: |x, y, g| g.mul(&x.square()?.neg()?.exp()?.scale(std::f64::consts::FRAC_2_SQRT_PI, 0.0)?),
    }
    /// `ln(1 + e^(beta·x)) / beta`, linear where `beta·x > threshold` (Paddle's softplus).
    softplus(beta, threshold) {
        float: |x| if x * beta > threshold { x } else { (x * beta).exp().ln_1p() / beta },
        int:,
        wgsl: "select(log1p_f(exp(p0 * x)) / p0, x, x * p0 > p1)",
        backward: |x, y, g| {
            let lin = mask(x, x.scale(beta, 0.0)?.greater_than_scalar(threshold))?;
            let s = x.scale(beta, 0.0)?.sigmoid()?;
            g.mul(&where_mask(&lin, &s)?)
        },
        amp: AmpList::BlackFloat16,
    }
    /// `x · sigmoid(x)` (SiLU / swish).
    silu() {
        float: |x| x * sigmoid_f(x),
        int:,
        wgsl: "x / (1.0 + exp(-x))",
        backward: |x, y, g| {
            let s = x.sigmoid()?;
            g.mul(&s.add(&x.mul(&s.mul(&s.scale(-1.0, 1.0)?)?)?)?)
        },
    }
    /// `x · relu6(x + 3) / 6` (Paddle's hardswish).
    hardswish() {
        float: |x| x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
        int:,
        wgsl: "select(x * clamp(x + 3.0, 0.0, 6.0) / 6.0, x, is_nan_f(x))",
        backward: |x, y, g| {
            let above = mask(x, x.greater_than_scalar(3.0))?;
            let inside = mask(x, x.greater_equal_scalar(-3.0)?.logical_and(&x.less_equal_scalar(3.0)?))?;
            g.mul(&above.add(&inside.mul(&x.scale(1.0 / 3.0, 0.5)?)?)?)
        },
    }
    /// `clamp(slope · x + offset, 0, 1)` (Paddle's hardsigmoid: slope 1/6, offset 0.5).
    hardsigmoid(slope, offset) {
        float: |x| (slope * x + offset).clamp(0.0, 1.0),
        int:,
        wgsl: "select(clamp(p0 * x + p1, 0.0, 1.0), x, is_nan_f(x))",
        backward: |x, y, g| {
            let z = x.scale(slope, offset)?;
            let inside = mask(x, z.greater_than_scalar(0.0)?.logical_and(&z.less_than_scalar(1.0)?))?;
            g.mul(&inside.scale(slope, 0.0)?)
        },
    }
    /// `x · tanh(softplus(x))` (Mish; softplus linear above 20, as Paddle's).
    mish() {
        float: |x| x * (if x > 20.0 { x } else { x.exp().ln_1p() }).tanh(),
        int:,
        wgsl: "select(x * tanh(min(select(log1p_f(exp(x)), x, x > 20.0), 15.0)), x, is_nan_f(x))",
        backward: |x, y, g| {
            let t = x.softplus(1.0, 20.0)?.tanh()?;
            let sech2 = t.square()?.scale(-1.0, 1.0)?;
            g.mul(&t.add(&x.mul(&sech2)?.mul(&x.sigmoid()?)?)?)
        },
    }
    /// `scale · x` if positive, else `scale · alpha · (e^x − 1)` (SELU).
    selu(scale, alpha) {
        float: |x| if x > 0.0 { scale * x } else { scale * alpha * x.exp_m1() },
        int:,
        wgsl: "select(p0 * p1 * (exp(x) - 1.0), p0 * x, x > 0.0)",
        backward: |x, y, g| {
            let pos = mask(x, x.greater_than_scalar(0.0))?;
            let neg = y.scale(1.0, scale * alpha)?;
            g.mul(&pos.scale(scale, 0.0)?.add(&pos.scale(-1.0, 1.0)?.mul(&neg)?)?)
        },
    }
    /// Clamps to `[min, max]`; the gradient flows where `min < x < max` (as Paddle).
    clip(min, max) {
        float: |x| if x < min { min } else if x > max { max } else { x },
        int: |x| x.clamp(min, max.max(min)),
        wgsl: "select(min(max(x, p0), p1), x, is_nan_f(x))",
        wgsl_i32: "min(max(x, p0), p1)",
        wgsl_i64: "i64_min(i64_max(x, p0), p1)",
        backward: |x, y, g| {
            let inside = x.greater_than_scalar(min)?.logical_and(&x.less_than_scalar(max)?)?;
            g.mul(&inside.cast(g.dtype())?)
        },
    }
    /// `scale · x + bias` (Paddle's `scale` with `bias_after_scale=True`).
    scale(scale, bias) {
        float: |x| x * scale + bias,
        int: |x| x.wrapping_mul(scale).wrapping_add(bias),
        wgsl: "x * p0 + p1",
        wgsl_i64: "i64_add(i64_mul(x, p0), p1)",
        backward: |x, y, g| g.scale(scale, 0.0),
    }
    /// `x^exponent` for a scalar exponent (exact for integers; numpy's rules otherwise).
    pow_scalar(exponent) {
        float: |x| x.powf(exponent),
        int: |x| int_pow(x, exponent),
        wgsl: "pow_f(x, p0)",
        wgsl_i32: "i32_pow(x, p0)",
        wgsl_i64: "i64_pow(x, p0)",
        backward: |x, y, g| {
            if exponent == 0.0 {
                return g.zeros_like();
            }
            g.mul(&x.pow_scalar(exponent - 1.0)?.scale(exponent, 0.0)?)
        },
        amp: AmpList::BlackFloat16,
    }
    /// Largest integer ≤ x.
    floor() {
        float: |x| x.floor(),
        int:,
        wgsl: "floor(x)",
        backward: |x, y, g| g.zeros_like(),
    }
    /// Smallest integer ≥ x.
    ceil() {
        float: |x| x.ceil(),
        int:,
        wgsl: "ceil(x)",
        backward: |x, y, g| g.zeros_like(),
    }
    /// Nearest integer, halves to even (as Paddle 3.x and numpy; Paddle 2.x rounded them away
    /// from zero).
    round() {
        float: |x| x.round_ties_even(),
        int:,
        wgsl: "round(x)",
        backward: |x, y, g| g.zeros_like(),
    }
    /// Integer part (rounds toward zero).
    trunc() {
        float: |x| x.trunc(),
        int:,
        wgsl: "trunc(x)",
        backward: |x, y, g| g.zeros_like(),
    }
    /// True where x is NaN.
    isnan() {
        float: |x| x.is_nan() as u8 as f64,
        int: |x| 0,
        wgsl: "is_nan_f(x)",
        wgsl_i32: "false",
        wgsl_i64: "false",
        out_bool: true,
        backward:,
    }
    /// True where x is ±∞.
    isinf() {
        float: |x| x.is_infinite() as u8 as f64,
        int: |x| 0,
        wgsl: "is_inf_f(x)",
        wgsl_i32: "false",
        wgsl_i64: "false",
        out_bool: true,
        backward:,
    }
    /// True where x is neither NaN nor ±∞.
    isfinite() {
        float: |x| x.is_finite() as u8 as f64,
        int: |x| 1,
        wgsl: "!(is_nan_f(x) || is_inf_f(x))",
        wgsl_i32: "true",
        wgsl_i64: "true",
        out_bool: true,
        backward:,
    }
    /// Logical not (non-bool inputs: true where zero).
    logical_not() {
        float: |x| (x == 0.0) as u8 as f64,
        int: |x| (x == 0) as i64,
        wgsl: "x == 0.0",
        wgsl_i32: "x == 0",
        wgsl_i64: "i64_is_zero(x)",
        wgsl_bool: "!x",
        out_bool: true,
        backward:,
    }
}

/// `where(mask != 0, a, 1)`-style helper for backward rules: `mask·1 + (1−mask)·other`.
fn where_mask(mask: &Tensor, other: &Tensor) -> Result<Tensor> {
    mask.add(&mask.scale(-1.0, 1.0)?.mul(other)?)
}

/// GELU activation; `approximate` selects the tanh form (Paddle's `F.gelu`).
pub fn gelu(x: &Tensor, approximate: bool) -> Result<Tensor> {
    if approximate { gelu_tanh(x) } else { gelu_erf(x) }
}

impl Tensor {
    /// A tensor of zeros with this tensor's shape, dtype and place.
    pub fn zeros_like(&self) -> Result<Tensor> {
        crate::zeros_like(self)
    }
}

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family =
    crate::ops::registry::Family { ops: &[], kernels: &[&UNARY, &UNARY_VEC4] };
