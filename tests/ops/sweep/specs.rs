//! The sweep's spec of every registered op: sample inputs (fresh random values, edge shapes,
//! special values), attributes and the float64 reference.

use dygraph::ops::{AttrMap, AttrValue};
use dygraph::{DType, Tensor};

use super::refs::{self, Conv, at_broadcast, axis, numel, ravel, reduce, unravel, wrap_int, zip_n};
use super::{Host, OutDType, Reference, Sample, Spec, data, fixed, same_dtype, sample};
use crate::common::Rng;

use DType::{BFloat16 as BF16, Bool, Float16 as F16, Float32 as F32, Float64 as F64, Int32 as I32, Int64 as I64};

const FLOATS: [DType; 4] = [F16, BF16, F32, F64];

fn floats() -> Vec<DType> {
    FLOATS.to_vec()
}

fn spec(
    name: &'static str,
    dtypes: Vec<DType>,
    samples: impl Fn(&mut Rng) -> Vec<Sample> + 'static,
    reference: impl Fn(&[Host], &AttrMap, DType) -> Vec<Host> + 'static,
) -> Spec {
    Spec {
        name,
        dtypes,
        samples: Box::new(samples),
        reference: Reference::Of(Box::new(reference)),
        tol: 1.0,
        gradcheck: false,
        second_order: false,
        out_dtype: same_dtype,
        exact: false,
        check_aux: false,
    }
}

impl Spec {
    fn out(mut self, f: OutDType) -> Self {
        self.out_dtype = f;
        self
    }
    fn exact(mut self) -> Self {
        self.exact = true;
        self
    }
    fn check_aux(mut self) -> Self {
        self.check_aux = true;
        self
    }
    fn tol(mut self, t: f64) -> Self {
        self.tol = t;
        self
    }
    fn grad(mut self) -> Self {
        self.gradcheck = true;
        self
    }
    fn second(mut self) -> Self {
        self.second_order = true;
        self
    }
}

fn attr_f(m: &AttrMap, name: &str) -> f64 {
    m.field::<f64>("sweep", name).unwrap_or_else(|e| panic!("{e}"))
}

fn attr_i(m: &AttrMap, name: &str) -> i64 {
    m.field::<i64>("sweep", name).unwrap_or_else(|e| panic!("{e}"))
}

fn attr_b(m: &AttrMap, name: &str) -> bool {
    m.field::<bool>("sweep", name).unwrap_or_else(|e| panic!("{e}"))
}

fn attr_is(m: &AttrMap, name: &str) -> Vec<i64> {
    m.field::<Vec<i64>>("sweep", name).unwrap_or_else(|e| panic!("{e}"))
}

/// The output dtype is the `dtype` attribute (cast, creation and random ops).
fn attr_dtype(_: DType, m: &AttrMap, _: usize) -> DType {
    m.field::<DType>("sweep", "dtype").unwrap_or_else(|e| panic!("{e}"))
}

fn bool_dtype(_: DType, _: &AttrMap, _: usize) -> DType {
    Bool
}

fn i64_dtype(_: DType, _: &AttrMap, _: usize) -> DType {
    I64
}

fn attr_us(m: &AttrMap, name: &str) -> Vec<usize> {
    m.field::<Vec<usize>>("sweep", name).unwrap_or_else(|e| panic!("{e}"))
}

/// Values in `[lo, hi)` at least `gap` from zero, exactly representable in float16 up to
/// rounding (so every float dtype sees close inputs).
fn vals(rng: &mut Rng, n: usize, lo: f64, hi: f64, gap: f64) -> Vec<f64> {
    if gap > 0.0 { rng.vec_away_from_zero(n, lo, hi, gap) } else { rng.vec(n, lo, hi) }
}

fn ints(rng: &mut Rng, n: usize, lo: i64, hi: i64) -> Vec<f64> {
    rng.ints(n, lo, hi).into_iter().map(|v| v as f64).collect()
}

/// The shapes every elementwise op is swept over: 0-d, a vector, a matrix, empty, rank 5.
const SHAPES: [&[usize]; 5] = [&[], &[7], &[3, 5], &[0, 4], &[2, 1, 3, 2, 2]];

/// Special float values every float op meets (where it defines them).
const SPECIALS: [f64; 9] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1e30, -1e30, 1e-30, 65504.0];

// ---------------------------------------------------------------------------------------
// Elementwise unary ops.

/// One unary op: its parameters (attribute names and values), float domain, float and
/// integer references, dtypes, and whether special values are part of its contract.
struct Unary {
    name: &'static str,
    params: &'static [(&'static str, f64)],
    domain: (f64, f64, f64),
    float: fn(f64, &[f64]) -> f64,
    int: Option<fn(i64, &[i64]) -> i64>,
    bool_out: bool,
    with_bool: bool,
    /// The special values the op defines (none for some).
    specials: &'static [f64],
    /// More float values whose results are part of the contract (rounding's halves).
    extra: &'static [f64],
    /// Other parameters, each on its own domain.
    alt: &'static [Alt],
    grad: bool,
    tol: f64,
}

/// Another set of parameters of a unary op: their values, the float domain, the dtypes it
/// runs for (all of the op's when `None`) and whether it has a gradient sample.
struct Alt {
    params: &'static [f64],
    domain: (f64, f64, f64),
    only: Option<&'static [DType]>,
    grad: bool,
}

const fn alt(params: &'static [f64], domain: (f64, f64, f64)) -> Alt {
    Alt { params, domain, only: None, grad: true }
}

const fn alt_floats(params: &'static [f64], domain: (f64, f64, f64)) -> Alt {
    Alt { params, domain, only: Some(&FLOATS), grad: true }
}

const fn alt_ints(params: &'static [f64], domain: (f64, f64, f64)) -> Alt {
    Alt { params, domain, only: Some(&[I32, I64]), grad: false }
}

/// Integer operands past 32 bits (the GPU's two-word int64) and wide int32 ones (wrapping):
/// `(int64 bound, int32 bound)` of an op's integer samples.
fn wide_ints(name: &str) -> (i64, i64) {
    match name {
        "square" | "multiply" => (3_000_000_000, 1_500_000_000),
        _ => (3_000_000_000_000, 1_500_000_000),
    }
}

/// Halves and values next to them: round's ties go to even; floor, ceil and trunc.
const HALVES: [f64; 9] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -3.7];

fn unary(u: Unary) -> Spec {
    let Unary { name, params, domain, float, int, bool_out, with_bool, specials, extra, alt, grad, tol } = u;
    let mut dtypes = floats();
    if int.is_some() {
        dtypes.extend([I32, I64]);
    }
    if with_bool {
        dtypes.push(Bool);
    }
    let attrs = || params.iter().fold(AttrMap::new(), |m, (n, v)| m.with(*n, *v));
    let alt_attrs = |p: &[f64]| params.iter().zip(p).fold(AttrMap::new(), |m, ((n, _), v)| m.with(*n, *v));
    let samples = move |rng: &mut Rng| {
        let mut out = Vec::new();
        for shape in SHAPES {
            let n = numel(shape);
            out.push(sample(
                format!("{shape:?}"),
                vec![data(vals(rng, n, domain.0, domain.1, domain.2), shape)],
                attrs(),
            ));
        }
        if !specials.is_empty() {
            out.push(sample("special values", vec![data(specials.to_vec(), &[specials.len()])], attrs()).floats_only());
        }
        if !extra.is_empty() {
            out.push(sample("exact halves", vec![data(extra.to_vec(), &[extra.len()])], attrs()).floats_only());
        }
        if int.is_some() {
            let (b64, b32) = wide_ints(name);
            out.push(
                sample("int64 past 32 bits", vec![data(ints(rng, 40, -b64, b64 + 1), &[40])], attrs()).only(&[I64]),
            );
            out.push(sample("wide int32", vec![data(ints(rng, 40, -b32, b32 + 1), &[40])], attrs()).only(&[I32]));
        }
        for a in alt {
            let (lo, hi, gap) = a.domain;
            let label = format!("{name}{:?}", a.params);
            let only = |s: Sample| if let Some(d) = a.only { s.only(d) } else { s };
            for n in [7, 8] {
                let x = data(vals(rng, n, lo, hi, gap), &[n]);
                out.push(only(sample(format!("{label} [{n}]"), vec![x], alt_attrs(a.params))));
            }
            if a.grad {
                let x = data(vals(rng, 6, lo, hi, gap.max(0.05)), &[2, 3]);
                out.push(only(sample(format!("{label} grad"), vec![x], alt_attrs(a.params))).with_grad());
            }
        }
        out.push(
            sample("grad", vec![data(vals(rng, 6, domain.0, domain.1, domain.2.max(0.05)), &[2, 3])], attrs())
                .with_grad(),
        );
        out
    };
    let reference = move |x: &[Host], m: &AttrMap, dtype: DType| {
        let p: Vec<f64> = params.iter().map(|(n, _)| attr_f(m, n)).collect();
        let pi: Vec<i64> = p.iter().map(|&v| v as i64).collect();
        let v = x[0]
            .v
            .iter()
            .map(|&a| {
                if dtype.is_float() {
                    float(a, &p)
                } else if dtype == Bool && !bool_out {
                    (float(a, &p) != 0.0) as u8 as f64
                } else {
                    let f = int.unwrap_or(|a, _| a);
                    let r = f(a as i64, &pi);
                    if bool_out { (r != 0) as u8 as f64 } else { wrap_int(r, dtype) }
                }
            })
            .collect();
        vec![Host { v, shape: x[0].shape.clone() }]
    };
    let mut s = spec(name, dtypes, samples, reference).tol(tol);
    if bool_out {
        s = s.out(bool_dtype);
    }
    if grad { s.grad() } else { s }
}

fn u(name: &'static str, float: fn(f64, &[f64]) -> f64) -> Unary {
    Unary {
        name,
        params: &[],
        domain: (-4.0, 4.0, 0.0),
        float,
        int: None,
        bool_out: false,
        with_bool: false,
        specials: &SPECIALS,
        extra: &[],
        alt: &[],
        grad: true,
        tol: 1.0,
    }
}

/// Special values for functions whose GPU accuracy is defined only for moderate arguments
/// (WGSL's sin and cos: absolute error bounds inside [−π, π]).
const SMALL_SPECIALS: [f64; 6] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1e-30];

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + libm::exp(-x))
}

fn unary_specs() -> Vec<Spec> {
    const INV_SQRT_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
    let none = |x: f64| x;
    let _ = none;
    vec![
        unary(Unary { int: Some(|a, _| a.wrapping_neg()), ..u("neg", |x, _| -x) }),
        unary(Unary { int: Some(|a, _| a.wrapping_abs()), domain: (-4.0, 4.0, 0.1), ..u("abs", |x, _| x.abs()) }),
        unary(Unary {
            int: Some(|a, _| a.signum()),
            domain: (-4.0, 4.0, 0.1),
            ..u("sign", |x, _| {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            })
        }),
        unary(Unary { int: Some(|a, _| a.wrapping_mul(a)), ..u("square", |x, _| x * x) }),
        unary(Unary { domain: (0.1, 5.0, 0.0), ..u("sqrt", |x, _| libm::sqrt(x)) }),
        unary(Unary { domain: (0.1, 5.0, 0.0), ..u("rsqrt", |x, _| 1.0 / libm::sqrt(x)) }),
        unary(Unary { domain: (-3.0, 3.0, 0.25), ..u("reciprocal", |x, _| 1.0 / x) }),
        unary(Unary { tol: 2.0, ..u("exp", |x, _| libm::exp(x)) }),
        unary(Unary { domain: (0.1, 5.0, 0.0), tol: 2.0, ..u("log", |x, _| libm::log(x)) }),
        unary(Unary { domain: (-0.9, 5.0, 0.0), tol: 2.0, ..u("log1p", |x, _| libm::log1p(x)) }),
        unary(Unary { tol: 2.0, specials: &SMALL_SPECIALS, ..u("sin", |x, _| libm::sin(x)) }),
        unary(Unary { tol: 2.0, specials: &SMALL_SPECIALS, ..u("cos", |x, _| libm::cos(x)) }),
        unary(Unary { tol: 2.0, ..u("tanh", |x, _| libm::tanh(x)) }),
        unary(Unary { tol: 2.0, ..u("sigmoid", |x, _| sigmoid(x)) }),
        unary(Unary { domain: (-4.0, 4.0, 0.05), ..u("relu", |x, _| if x > 0.0 || x.is_nan() { x } else { 0.0 }) }),
        unary(Unary { domain: (-3.0, 9.0, 0.05), ..u("relu6", |x, _| if x.is_nan() { x } else { x.clamp(0.0, 6.0) }) }),
        unary(Unary {
            params: &[("negative_slope", 0.1)],
            alt: const { &[alt(&[0.01], (-4.0, 4.0, 0.05))] },
            domain: (-4.0, 4.0, 0.05),
            ..u("leaky_relu", |x, p| if x > 0.0 { x } else { p[0] * x })
        }),
        unary(Unary {
            params: &[("alpha", 1.3)],
            alt: const { &[alt(&[0.5], (-4.0, 4.0, 0.05))] },
            domain: (-4.0, 4.0, 0.05),
            tol: 2.0,
            ..u("elu", |x, p| if x > 0.0 { x } else { p[0] * libm::expm1(x) })
        }),
        unary(Unary { tol: 2.0, ..u("gelu_erf", |x, _| 0.5 * x * (1.0 + libm::erf(x * INV_SQRT_2))) }),
        unary(Unary {
            tol: 2.0,
            ..u("gelu_tanh", |x, _| {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + libm::tanh(k * (x + 0.044715 * x * x * x)))
            })
        }),
        unary(Unary { tol: 2.0, ..u("erf", |x, _| libm::erf(x)) }),
        unary(Unary {
            params: &[("beta", 1.5), ("threshold", 10.0)],
            alt: const { &[alt(&[1.0, 20.0], (-30.0, 30.0, 0.0)), alt(&[2.0, 3.0], (-4.0, 4.0, 0.0))] },
            tol: 2.0,
            ..u("softplus", |x, p| if x * p[0] > p[1] { x } else { libm::log1p(libm::exp(p[0] * x)) / p[0] })
        }),
        unary(Unary { tol: 2.0, ..u("silu", |x, _| x * sigmoid(x)) }),
        unary(Unary { tol: 2.0, ..u("hardswish", |x, _| x * (x + 3.0).clamp(0.0, 6.0) / 6.0) }),
        unary(Unary {
            params: &[("slope", 0.2), ("offset", 0.4)],
            ..u("hardsigmoid", |x, p| (p[0] * x + p[1]).clamp(0.0, 1.0))
        }),
        unary(Unary {
            tol: 2.0,
            ..u("mish", |x, _| x * libm::tanh(if x > 20.0 { x } else { libm::log1p(libm::exp(x)) }))
        }),
        unary(Unary {
            params: &[("scale", 1.0507009873554805), ("alpha", 1.6732632423543772)],
            tol: 2.0,
            domain: (-4.0, 4.0, 0.05),
            ..u("selu", |x, p| if x > 0.0 { p[0] * x } else { p[0] * p[1] * libm::expm1(x) })
        }),
        unary(Unary {
            params: &[("min", -2.0), ("max", 3.0)],
            alt: const { &[alt(&[0.0, 0.0], (-1.0, 1.0, 0.05))] },
            int: Some(|a, p| a.clamp(p[0], p[1].max(p[0]))),
            domain: (-4.0, 5.0, 0.0),
            ..u("clip", |x, p| if x.is_nan() { x } else { x.max(p[0]).min(p[1]) })
        }),
        unary(Unary {
            params: &[("scale", 3.0), ("bias", -2.0)],
            alt: const { &[alt_floats(&[-0.5, 0.25], (-4.0, 4.0, 0.0))] },
            int: Some(|a, p| a.wrapping_mul(p[0]).wrapping_add(p[1])),
            ..u("scale", |x, p| x * p[0] + p[1])
        }),
        unary(Unary {
            params: &[("exponent", 3.0)],
            alt: const {
                &[
                    alt_floats(&[2.5], (0.1, 4.0, 0.0)),
                    alt_floats(&[-1.5], (0.1, 4.0, 0.0)),
                    alt(&[0.0], (-4.0, 4.0, 0.0)),
                    alt(&[-2.0], (0.5, 4.0, 0.0)),
                    Alt { params: &[0.5], domain: (-4.0, 4.0, 0.0), only: Some(&FLOATS), grad: false },
                    alt_ints(&[19.0], (-5.0, 6.0, 0.0)),
                    alt_ints(&[39.0], (-5.0, 6.0, 0.0)),
                ]
            },
            int: Some(|a, p| refs::int_pow(a, p[0])),
            tol: 2.0,
            ..u("pow_scalar", |x, p| libm::pow(x, p[0]))
        }),
        unary(Unary { extra: &HALVES, ..u("floor", |x, _| x.floor()) }),
        unary(Unary { extra: &HALVES, ..u("ceil", |x, _| x.ceil()) }),
        unary(Unary { extra: &HALVES, domain: (-4.0, 4.0, 0.0), ..u("round", |x, _| x.round_ties_even()) }),
        unary(Unary { extra: &HALVES, ..u("trunc", |x, _| x.trunc()) }),
        unary(Unary { int: Some(|_, _| 0), bool_out: true, grad: false, ..u("isnan", |x, _| x.is_nan() as u8 as f64) }),
        unary(Unary {
            int: Some(|_, _| 0),
            bool_out: true,
            grad: false,
            ..u("isinf", |x, _| x.is_infinite() as u8 as f64)
        }),
        unary(Unary {
            int: Some(|_, _| 1),
            bool_out: true,
            grad: false,
            ..u("isfinite", |x, _| x.is_finite() as u8 as f64)
        }),
        unary(Unary {
            int: Some(|a, _| (a == 0) as i64),
            bool_out: true,
            with_bool: true,
            grad: false,
            ..u("logical_not", |x, _| (x == 0.0) as u8 as f64)
        }),
    ]
}

// ---------------------------------------------------------------------------------------
// Elementwise binary ops.

struct Binary {
    name: &'static str,
    domains: [(f64, f64, f64); 2],
    float: fn(f64, f64) -> f64,
    int: Option<fn(i64, i64) -> i64>,
    int_domains: [(i64, i64); 2],
    boolean: Option<fn(bool, bool) -> bool>,
    bool_out: bool,
    floats: bool,
    grad: bool,
    ties: bool,
    /// The special values the op defines.
    specials: &'static [f64],
    tol: f64,
}

fn b(name: &'static str, float: fn(f64, f64) -> f64) -> Binary {
    Binary {
        name,
        domains: [(-4.0, 4.0, 0.0); 2],
        float,
        int: None,
        int_domains: [(-1_000_000, 1_000_000); 2],
        boolean: None,
        bool_out: false,
        floats: true,
        grad: true,
        ties: false,
        specials: &SPECIALS,
        tol: 1.0,
    }
}

/// Broadcast pairs of shapes every binary op meets: 0-d with 0-d and against a matrix on
/// either side, a vector against a matrix, operands broadcasting into each other (both
/// ways), empty results, rank 5, a same-shape pair of whole vec4 words, and rows of 64
/// broadcast over a middle axis (the GPU's `rows` entry).
const PAIRS: [(&[usize], &[usize]); 13] = [
    (&[], &[]),
    (&[], &[3, 4]),
    (&[3, 4], &[]),
    (&[6], &[6]),
    (&[3, 4], &[4]),
    (&[2, 1, 3], &[4, 1]),
    (&[4, 1], &[2, 1, 3]),
    (&[2, 1], &[1, 3]),
    (&[0, 3], &[1, 3]),
    (&[3], &[0, 1]),
    (&[2, 1, 2, 3, 1], &[3, 2]),
    (&[4, 8], &[4, 8]),
    (&[3, 1, 64], &[2, 64]),
];

/// Dividends `k·d` for small `k` over divisors whose float32 quotients land on either side of
/// an integer (a GPU's division need not round correctly), with dividends far smaller than the
/// divisor (only the quotient's sign decides the floor) and Python's `1.0 // 0.1 == 9`.
fn near_integer_quotients() -> (Vec<f64>, Vec<f64>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for d in [3.0f32, 0.1, 0.3, 1.1, -0.1, -3.0] {
        for k in -10..=10 {
            a.push((k as f32 * d) as f64);
            b.push(d as f64);
        }
    }
    a.extend([-1e-30f32 as f64, 1e-30f32 as f64, 1e-30f32 as f64, 1.0, -27.0, 1.0]);
    b.extend([3.0, 3.0, -3.0, 0.1f32 as f64, 3.0, -0.1f32 as f64]);
    (a, b)
}

fn binary(bd: Binary) -> Spec {
    let Binary {
        name,
        domains,
        float,
        int,
        int_domains,
        boolean,
        bool_out,
        floats: has_floats,
        grad,
        ties,
        specials,
        tol,
    } = bd;
    let mut dtypes = if has_floats { floats() } else { Vec::new() };
    if int.is_some() {
        dtypes.extend([I32, I64]);
    }
    if boolean.is_some() {
        dtypes.push(Bool);
    }
    let samples = move |rng: &mut Rng| {
        let mut out = Vec::new();
        let operand = |rng: &mut Rng, k: usize, n: usize| -> Vec<f64> {
            if !has_floats && int.is_none() {
                return ints(rng, n, 0, 2);
            }
            let (lo, hi, gap) = domains[k];
            let v = vals(rng, n, lo, hi, gap);
            if int.is_some() {
                // Integral values inside the integer domain for int dtypes; the float dtypes
                // see them too (their own domain's values come from the grad sample).
                let (il, ih) = int_domains[k];
                let iv = ints(rng, n, il, ih);
                if k == 1 && matches!(name, "divide" | "floor_divide" | "remainder") {
                    return iv.into_iter().map(|x| if x == 0.0 { 3.0 } else { x }).collect();
                }
                // Kept under float16's 65504 so float16 sees finite operands; the full integer
                // domain has its own sample.
                let iv = iv.into_iter().map(|i| i % 30000.0);
                return v.iter().zip(iv).map(|(f, i)| if rng.uniform(0.0, 1.0) < 0.5 { *f } else { i }).collect();
            }
            v
        };
        for (sa, sb) in PAIRS {
            let (na, nb) = (numel(sa), numel(sb));
            let mut x = operand(rng, 0, na);
            let y = operand(rng, 1, nb);
            if ties && sa == sb {
                for i in (0..na).step_by(3) {
                    x[i] = y[i];
                }
            }
            out.push(sample(format!("{sa:?} {sb:?}"), vec![data(x, sa), data(y, sb)], AttrMap::new()));
        }
        if int.is_some() {
            let (a, b) = (int_domains[0], int_domains[1]);
            let mut y = ints(rng, 8, b.0, b.1);
            if matches!(name, "divide" | "floor_divide" | "remainder") {
                y.iter_mut().filter(|v| **v == 0.0).for_each(|v| *v = 3.0);
            }
            out.push(sample("large integers", vec![data(ints(rng, 8, a.0, a.1), &[8]), data(y, &[8])], AttrMap::new()));
            // Past 32 bits for int64, wrapping int32; divisors stay in their own domain.
            if name != "pow_tensor" {
                let quotient = matches!(name, "floor_divide" | "remainder");
                let (b64, b32) = wide_ints(name);
                for (dtype, bound) in [(I64, b64), (I32, b32)] {
                    let mut x = ints(rng, 40, -bound, bound + 1);
                    let y = if quotient {
                        ints(rng, 40, b.0, b.1).into_iter().map(|v| if v == 0.0 { 3.0 } else { v }).collect()
                    } else {
                        ints(rng, 40, -bound, bound + 1)
                    };
                    if ties {
                        x.iter_mut().zip(&y).step_by(3).for_each(|(p, q)| *p = *q);
                    }
                    out.push(
                        sample(format!("wide {dtype}"), vec![data(x, &[40]), data(y, &[40])], AttrMap::new())
                            .only(&[dtype]),
                    );
                }
            }
            // Integer `//` and `%` by zero give 0.
            if matches!(name, "floor_divide" | "remainder") {
                let x = ints(rng, 12, -1000, 1000);
                let y = vec![0.0, 3.0, 0.0, -2.0, 1.0, 0.0, -7.0, 0.0, 5.0, -1.0, 0.0, 2.0];
                out.push(
                    sample("integer zero divisors", vec![data(x, &[12]), data(y, &[12])], AttrMap::new())
                        .only(&[I32, I64]),
                );
            }
        }
        if matches!(name, "floor_divide" | "remainder") {
            let (x, y) = near_integer_quotients();
            let n = x.len();
            out.push(
                sample("near-integer quotients", vec![data(x, &[n]), data(y, &[n])], AttrMap::new()).floats_only(),
            );
        }
        if has_floats {
            let n = specials.len();
            let x: Vec<f64> = (0..n * n).map(|i| specials[i / n]).collect();
            let y: Vec<f64> = (0..n * n).map(|i| specials[i % n]).collect();
            out.push(
                sample("special values", vec![data(x, &[n * n]), data(y, &[n * n])], AttrMap::new()).floats_only(),
            );
        }
        if grad {
            let (g0, g1) = (domains[0], domains[1]);
            let x = vals(rng, 6, g0.0, g0.1, g0.2.max(0.1));
            let y = vals(rng, 3, g1.0, g1.1, g1.2.max(0.1));
            out.push(sample("grad, broadcast", vec![data(x, &[2, 3]), data(y, &[3])], AttrMap::new()).with_grad());
            let x = vals(rng, 6, g0.0, g0.1, g0.2.max(0.1));
            let y = vals(rng, 6, g1.0, g1.1, g1.2.max(0.1));
            out.push(
                sample("grad, both broadcast", vec![data(x, &[2, 1, 3]), data(y, &[2, 3])], AttrMap::new()).with_grad(),
            );
        }
        out
    };
    let reference = move |x: &[Host], _: &AttrMap, dtype: DType| {
        let h = zip_n(&[&x[0], &x[1]], |v| {
            let (a, b) = (v[0], v[1]);
            if dtype == Bool {
                let f = boolean.expect("bool reference");
                (f(a != 0.0, b != 0.0)) as u8 as f64
            } else if dtype.is_float() {
                float(a, b)
            } else {
                let r = int.expect("int reference")(a as i64, b as i64);
                if bool_out { (r != 0) as u8 as f64 } else { wrap_int(r, dtype) }
            }
        });
        vec![h]
    };
    let mut s = spec(name, dtypes, samples, reference).tol(tol);
    if bool_out {
        s = s.out(bool_dtype);
    }
    if grad { s.grad() } else { s }
}

fn cmp(
    name: &'static str,
    float: fn(f64, f64) -> f64,
    int: fn(i64, i64) -> i64,
    boolean: Option<fn(bool, bool) -> bool>,
) -> Spec {
    binary(Binary { int: Some(int), boolean, bool_out: true, grad: false, ties: true, ..b(name, float) })
}

fn logical(name: &'static str, f: fn(bool, bool) -> bool) -> Spec {
    binary(Binary { boolean: Some(f), bool_out: true, grad: false, floats: false, ..b(name, |_, _| 0.0) })
}

fn b2f(b: bool) -> f64 {
    b as u8 as f64
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

fn floor_div(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let (q, r) = (a.wrapping_div(b), a.wrapping_rem(b));
    if r != 0 && ((r < 0) != (b < 0)) { q - 1 } else { q }
}

fn py_mod(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r }
}

/// Special values for ops built on a quotient: a quotient past float32's range (or below it)
/// depends on the precision it is formed in (the CPU's float64 or the GPU's float32).
const QUOTIENT_SPECIALS: [f64; 6] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 3.5];

fn binary_specs() -> Vec<Spec> {
    let nonzero = (-3.0, 3.0, 0.25);
    vec![
        binary(Binary { int: Some(|a, b| a.wrapping_add(b)), ..b("add", |a, b| a + b) }),
        binary(Binary { int: Some(|a, b| a.wrapping_sub(b)), ..b("subtract", |a, b| a - b) }),
        binary(Binary { int: Some(|a, b| a.wrapping_mul(b)), ..b("multiply", |a, b| a * b) }).second(),
        // Integer operands divide truly (float32 result) in the public function, as Paddle
        // 3.x; the entry itself takes floats.
        binary(Binary { domains: [(-6.0, 6.0, 0.0), nonzero], ..b("divide", |a, b| a / b) }),
        binary(Binary {
            domains: [(-6.0, 6.0, 0.0), nonzero],
            int: Some(floor_div),
            int_domains: [(-1000, 1000), (-7, 8)],
            grad: false,
            specials: &QUOTIENT_SPECIALS,
            ..b("floor_divide", |a, b| (a / b).floor())
        }),
        binary(Binary {
            domains: [(-6.0, 6.0, 0.0), nonzero],
            int: Some(py_mod),
            int_domains: [(-1000, 1000), (-7, 8)],
            tol: 4.0,
            specials: &QUOTIENT_SPECIALS,
            ..b("remainder", |a, b| a - (a / b).floor() * b)
        }),
        binary(Binary {
            domains: [(0.1, 3.0, 0.0), (-2.0, 2.0, 0.0)],
            int: Some(refs::int_pow),
            int_domains: [(-5, 6), (-2, 9)],
            tol: 4.0,
            ..b("pow_tensor", libm::pow)
        }),
        binary(Binary { int: Some(|a, b| a.max(b)), ties: true, ..b("maximum", nan_max) }),
        binary(Binary { int: Some(|a, b| a.min(b)), ties: true, ..b("minimum", nan_min) }),
        binary(Binary {
            domains: [(-4.0, 4.0, 0.1), (-4.0, 4.0, 0.0)],
            ..b("relu_grad", |a, b| if a > 0.0 { b } else { 0.0 })
        }),
        cmp("equal", |a, b| b2f(a == b), |a, b| (a == b) as i64, Some(|a, b| a == b)),
        cmp("not_equal", |a, b| b2f(a != b), |a, b| (a != b) as i64, Some(|a, b| a != b)),
        cmp("less_than", |a, b| b2f(a < b), |a, b| (a < b) as i64, None),
        cmp("less_equal", |a, b| b2f(a <= b), |a, b| (a <= b) as i64, None),
        cmp("greater_than", |a, b| b2f(a > b), |a, b| (a > b) as i64, None),
        cmp("greater_equal", |a, b| b2f(a >= b), |a, b| (a >= b) as i64, None),
        logical("logical_and", |a, b| a && b),
        logical("logical_or", |a, b| a || b),
        logical("logical_xor", |a, b| a != b),
    ]
}

// ---------------------------------------------------------------------------------------
// cast, where, reductions, matmul.

/// `x` converted to `to` from `from` as Rust's `as` does (what `cast` promises).
fn convert(x: f64, from: DType, to: DType) -> f64 {
    let xi = x as i64;
    match to {
        Bool => (x != 0.0) as u8 as f64,
        I32 if from.is_float() => x as i32 as f64,
        I32 => xi as i32 as f64,
        I64 if from.is_float() => x as i64 as f64,
        I64 => xi as f64,
        _ => x,
    }
}

fn cast_specs() -> Vec<Spec> {
    let samples = |rng: &mut Rng| {
        let mut out = Vec::new();
        for to in [Bool, I32, I64, F16, BF16, F32, F64] {
            let a = AttrMap::new().with("dtype", to);
            let mut v = vals(rng, 12, -1000.0, 1000.0, 0.0);
            v.extend([0.0, -0.0, 1.5, -1.5, 3e9, -3e9]);
            out.push(sample(format!("to {to}"), vec![data(v, &[3, 6])], a.clone()));
            out.push(
                sample(format!("to {to}, specials"), vec![data(SPECIALS.to_vec(), &[9])], a.clone()).floats_only(),
            );
            out.push(sample(format!("to {to}, empty"), vec![data(vec![], &[0, 2])], a));
        }
        out.push(
            sample("grad", vec![data(vals(rng, 6, -2.0, 2.0, 0.0), &[6])], AttrMap::new().with("dtype", F64))
                .with_grad(),
        );
        out
    };
    let reference = |x: &[Host], m: &AttrMap, from: DType| {
        let to = m.field::<DType>("sweep", "dtype").unwrap();
        vec![Host { v: x[0].v.iter().map(|&v| convert(v, from, to)).collect(), shape: x[0].shape.clone() }]
    };
    vec![spec("cast", vec![Bool, I32, I64, F16, BF16, F32, F64], samples, reference).out(attr_dtype).grad()]
}

fn where_specs() -> Vec<Spec> {
    let samples = |rng: &mut Rng| {
        let shapes: [(&[usize], &[usize], &[usize]); 4] =
            [(&[], &[], &[]), (&[2, 3], &[2, 3], &[2, 3]), (&[3, 1], &[1, 4], &[4]), (&[0, 2], &[1, 2], &[2])];
        let mut out: Vec<Sample> = shapes
            .iter()
            .map(|(c, a, b)| {
                let cond = fixed(ints(rng, numel(c), 0, 2), c, Bool);
                let (x, y) = (vals(rng, numel(a), -3.0, 3.0, 0.0), vals(rng, numel(b), -3.0, 3.0, 0.0));
                sample(format!("{c:?} {a:?} {b:?}"), vec![cond, data(x, a), data(y, b)], AttrMap::new())
            })
            .collect();
        let cond = fixed(vec![1.0, 0.0, 1.0], &[3], Bool);
        out.push(
            sample(
                "grad",
                vec![cond, data(vals(rng, 6, -2.0, 2.0, 0.0), &[2, 3]), data(vals(rng, 3, -2.0, 2.0, 0.0), &[3])],
                AttrMap::new(),
            )
            .with_grad(),
        );
        out
    };
    let reference = |x: &[Host], _: &AttrMap, _: DType| {
        vec![zip_n(&[&x[0], &x[1], &x[2]], |v| if v[0] != 0.0 { v[1] } else { v[2] })]
    };
    vec![spec("where", vec![Bool, I32, I64, F16, BF16, F32, F64], samples, reference).grad().exact()]
}

/// Axis lists every reduction meets: all, one (first, middle, last by a negative index),
/// non-adjacent (either order, negative), adjacent pairs, every axis listed.
const AXES: [&[i64]; 9] = [&[], &[0], &[1], &[-1], &[0, 2], &[2, 0], &[-1, 0], &[1, 2], &[0, 1, 2]];

/// Which reduction a sample set is for: the large samples' values depend on it.
#[derive(Clone, Copy, PartialEq)]
enum Red {
    /// sum and mean: small non-negative integers, so float sums of thousands are exact and
    /// the places' summation orders agree.
    Sum,
    /// prod: ±1 with sparse 2s and halves (floats), ±1 with a few 2s (integers): exact.
    Prod,
    /// max and min: random values.
    Extremum,
}

/// The GPU's reduction paths, on shapes worth them: the one-pass `planes` entry over a
/// leading and a trailing run (inner runs shorter than, equal to and longer than a
/// workgroup, and chunked from a start inside an inner run), planes of 256 rows or more
/// (barrier-free passes on a software adapter), a workgroup per row and many rows, a short
/// inner run (the axis passes), rows past 8192 (chunked, two passes).
const LARGE: [(&[usize], &[i64]); 9] = [
    (&[3, 4, 64], &[0, 2]),
    (&[2, 3, 256], &[0, 2]),
    (&[3, 4, 300], &[0, 2]),
    (&[4, 2, 2100], &[0, 2]),
    (&[16, 20, 40], &[0, 2]),
    (&[70, 40], &[1]),
    (&[300, 40], &[1]),
    (&[33, 2, 1, 1], &[0, 2, 3]),
    (&[2, 9000], &[1]),
];

fn reduce_samples(rng: &mut Rng, red: Red, lo: f64, hi: f64, gap: f64) -> Vec<Sample> {
    let mut out = Vec::new();
    for axes in AXES {
        for keepdim in [false, true] {
            let a = AttrMap::new().with("axis", axes.to_vec()).with("keepdim", keepdim);
            out.push(sample(
                format!("[3,4,5] axes {axes:?} keepdim {keepdim}"),
                vec![data(vals(rng, 60, lo, hi, gap), &[3, 4, 5])],
                a,
            ));
        }
    }
    let a = |axes: &[i64]| AttrMap::new().with("axis", axes.to_vec()).with("keepdim", false);
    out.push(sample("0-d", vec![data(vals(rng, 1, lo, hi, gap), &[])], a(&[])));
    out.push(sample("rank 5", vec![data(vals(rng, 48, lo, hi, gap), &[2, 1, 3, 4, 2])], a(&[0, 3, 4])));
    out.push(sample("empty output", vec![data(vec![], &[0, 3])], a(&[1])));
    for (shape, axes) in LARGE {
        let n = numel(shape);
        let label = format!("{shape:?} axes {axes:?}");
        match red {
            Red::Sum => out.push(sample(label, vec![data(ints(rng, n, 0, 4), shape)], a(axes))),
            Red::Extremum => out.push(sample(label, vec![data(vals(rng, n, lo, hi, gap), shape)], a(axes))),
            Red::Prod => {
                let sign = |rng: &mut Rng| if rng.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
                let f: Vec<f64> = (0..n)
                    .map(|i| match i % 97 {
                        3 => 2.0,
                        50 => 0.5,
                        _ => sign(rng),
                    })
                    .collect();
                let i: Vec<f64> = (0..n).map(|i| if i % 997 == 3 { 2.0 } else { sign(rng) }).collect();
                out.push(sample(format!("{label}, floats"), vec![data(f, shape)], a(axes)).floats_only());
                out.push(sample(format!("{label}, ints"), vec![data(i, shape)], a(axes)).only(&[I32, I64]));
            }
        }
    }
    // Integers past float32's range: int32 sums are int64 without wrapping; max, min and
    // prod stay int32 (prod wraps).
    for (dtype, bound) in [(I32, 2_000_000_000), (I64, 100_000_000_000_000)] {
        for axes in [&[][..], &[1], &[0, 2]] {
            let x = data(ints(rng, 60, -bound, bound), &[3, 4, 5]);
            out.push(sample(format!("large {dtype} axes {axes:?}"), vec![x], a(axes)).only(&[dtype]));
        }
    }
    out.push(sample("special values", vec![data(SPECIALS.to_vec(), &[3, 3])], a(&[1])).floats_only());
    out.push(sample("grad", vec![data(vals(rng, 24, lo, hi, gap.max(0.2)), &[2, 3, 4])], a(&[0, 2])).with_grad());
    out.push(sample("grad, all axes", vec![data(vals(rng, 12, lo, hi, gap.max(0.2)), &[3, 4])], a(&[])).with_grad());
    out.push(
        sample(
            "grad, keepdim",
            vec![data(vals(rng, 12, lo, hi, gap.max(0.2)), &[3, 4])],
            AttrMap::new().with("axis", vec![-1i64]).with("keepdim", true),
        )
        .with_grad(),
    );
    out
}

fn reduction(name: &'static str, dtypes: Vec<DType>, f: fn(&[f64], DType) -> f64, red: Red, gap: f64) -> Spec {
    let samples = move |rng: &mut Rng| {
        let mut out = reduce_samples(rng, red, -2.0, 2.0, gap);
        // A zero-length reduced axis gives each op's identity (NaN for mean); max and min
        // have none (an error, in errors.rs).
        if red != Red::Extremum {
            let a = |axes: Vec<i64>| AttrMap::new().with("axis", axes).with("keepdim", false);
            out.push(sample("empty axis", vec![data(vec![], &[3, 0])], a(vec![1])));
            out.push(sample("empty batch, planes", vec![data(vec![], &[0, 3, 40])], a(vec![0, 2])));
        }
        // max/min over distinct values for the gradcheck (ties split the gradient evenly,
        // in autograd.rs), and ties for the forward.
        if red == Red::Extremum {
            for x in out.iter_mut().filter(|x| x.grad) {
                let n = x.inputs[0].values.len();
                x.inputs[0].values = (0..n).map(|i| (i as f64 * 0.37).sin() * 2.0 + i as f64 * 0.01).collect();
            }
            out.push(sample(
                "ties",
                vec![data(vec![1.0, 3.0, 3.0, 2.0, 0.0, 0.0], &[2, 3])],
                AttrMap::new().with("axis", vec![1i64]).with("keepdim", false),
            ));
        }
        out
    };
    let reference = move |x: &[Host], m: &AttrMap, dtype: DType| {
        let axes: Vec<usize> = attr_is(m, "axis").iter().map(|&a| axis(a, x[0].shape.len())).collect();
        vec![reduce(&x[0], &axes, attr_b(m, "keepdim"), |g| f(g, dtype))]
    };
    spec(name, dtypes, samples, reference).tol(4.0).grad()
}

fn nan_fold(g: &[f64], init: f64, pick: fn(f64, f64) -> f64) -> f64 {
    g.iter().fold(init, |a, &b| if a.is_nan() || b.is_nan() { f64::NAN } else { pick(a, b) })
}

fn int_sum(g: &[f64], dtype: DType) -> f64 {
    let s = g.iter().fold(0i64, |a, &b| a.wrapping_add(b as i64));
    if dtype.is_float() { g.iter().sum() } else { s as f64 }
}

fn reduce_specs() -> Vec<Spec> {
    let all = vec![Bool, I32, I64, F16, BF16, F32, F64];
    let numeric = vec![I32, I64, F16, BF16, F32, F64];
    let mut v = vec![
        reduction("sum", all, int_sum, Red::Sum, 0.0).out(|d, _, _| if matches!(d, Bool | I32) { I64 } else { d }),
        reduction("mean", floats(), |g, _| g.iter().sum::<f64>() / g.len() as f64, Red::Sum, 0.0),
        reduction(
            "prod",
            numeric.clone(),
            |g, d| {
                if d.is_float() {
                    g.iter().product()
                } else {
                    wrap_int(g.iter().fold(1i64, |a, &b| a.wrapping_mul(b as i64)), d)
                }
            },
            Red::Prod,
            0.2,
        ),
        reduction("max", numeric.clone(), |g, _| nan_fold(g, f64::NEG_INFINITY, f64::max), Red::Extremum, 0.0),
        reduction("min", numeric.clone(), |g, _| nan_fold(g, f64::INFINITY, f64::min), Red::Extremum, 0.0),
    ];
    let arg = |name: &'static str, largest: bool| {
        let samples = |rng: &mut Rng| {
            let mut out = Vec::new();
            for (axis, keepdim) in
                [(None, false), (None, true), (Some(1i64), false), (Some(-1), true), (Some(0), false)]
            {
                let a = AttrMap::new().with("axis", axis).with("keepdim", keepdim);
                out.push(sample(
                    format!("axis {axis:?} keepdim {keepdim}"),
                    vec![data(vals(rng, 60, -50.0, 50.0, 0.0), &[3, 4, 5])],
                    a,
                ));
            }
            // Few distinct values, so ties (the first wins) are everywhere, along every axis
            // of shapes past a workgroup.
            for shape in [&[4usize, 33, 6][..], &[2, 3, 300]] {
                for axis in [None, Some(0i64), Some(1), Some(2), Some(-1)] {
                    let a = AttrMap::new().with("axis", axis).with("keepdim", false);
                    let x = data(ints(rng, numel(shape), -4, 5), shape);
                    out.push(sample(format!("ties {shape:?} axis {axis:?}"), vec![x], a));
                }
            }
            let a = AttrMap::new().with("axis", Some(0i64)).with("keepdim", false);
            out.push(sample("ties pick the first", vec![data(vec![2.0, 2.0, 1.0, 1.0], &[4])], a.clone()));
            let nan = vec![1.0, f64::NAN, 3.0, f64::NAN];
            out.push(sample("the first NaN wins", vec![data(nan, &[4])], a.clone()).floats_only());
            out.push(sample(
                "0-d",
                vec![data(vec![4.0], &[])],
                AttrMap::new().with("axis", None::<i64>).with("keepdim", false),
            ));
            out
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let ax = m.field::<Option<i64>>("sweep", "axis").unwrap();
            let keepdim = attr_b(m, "keepdim");
            let better = |a: f64, b: f64| (if largest { a > b } else { a < b }) || (a.is_nan() && !b.is_nan());
            let pick = |g: &[f64]| {
                let mut best = 0;
                for (i, &v) in g.iter().enumerate() {
                    if better(v, g[best]) {
                        best = i;
                    }
                }
                best as f64
            };
            let h = match ax {
                None => {
                    let flat = Host::new(x[0].v.clone(), &[x[0].v.len()]);
                    let r = reduce(&flat, &[0], false, pick);
                    Host::new(r.v, &if keepdim { vec![1; x[0].shape.len()] } else { vec![] })
                }
                Some(a) => reduce(&x[0], &[axis(a, x[0].shape.len())], keepdim, pick),
            };
            vec![h]
        };
        spec(name, vec![Bool, I32, I64, F16, BF16, F32, F64], samples, reference).out(i64_dtype)
    };
    v.push(arg("argmax", true));
    v.push(arg("argmin", false));
    v.push(reduce_prologue_spec());
    v
}

/// `reduce_prologue`: `(x0 − x1)²` (and `|x0|`) reduced by each kind, over same-shape
/// inputs (the prologue kernel) and broadcasting ones (the chain through a temporary),
/// against the chain rounded to the dtype after every op, then reduced in float64.
fn reduce_prologue_spec() -> Spec {
    const SQUARED: &str = "x0 x1 b.subtract u.square:0.0:0.0";
    let samples = |rng: &mut Rng| {
        type Case = (&'static str, &'static [usize], &'static [usize], &'static [i64], bool);
        let cases: [Case; 8] = [
            ("sum", &[3, 4, 5], &[3, 4, 5], &[], false),
            ("mean", &[3, 4, 5], &[3, 4, 5], &[1], true),
            ("max", &[3, 4, 5], &[3, 4, 5], &[0, 2], false),
            ("min", &[2, 9000], &[2, 9000], &[1], false),
            ("prod", &[4, 3], &[4, 3], &[-1], false),
            ("mean", &[2, 9000], &[2, 9000], &[], false),
            ("sum", &[3, 4], &[4], &[0], true),
            ("sum", &[0, 3], &[0, 3], &[1], false),
        ];
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|(kind, a, b, axes, keepdim)| {
                let m = AttrMap::new()
                    .with("reduce", kind.to_string())
                    .with("axis", axes.to_vec())
                    .with("keepdim", *keepdim)
                    .with("program", SQUARED.to_string());
                let hi = if *kind == "prod" { 0.6 } else { 2.0 };
                let inputs =
                    vec![data(vals(rng, numel(a), -hi, hi, 0.0), a), data(vals(rng, numel(b), -hi, hi, 0.0), b)];
                sample(format!("{kind} {a:?} {b:?} axes {axes:?}"), inputs, m)
            })
            .collect();
        let m = AttrMap::new()
            .with("reduce", "max".to_string())
            .with("axis", vec![1i64])
            .with("keepdim", false)
            .with("program", "x0 u.abs:0.0:0.0".to_string());
        out.push(sample("max |x|", vec![data(vals(rng, 12, -2.0, 2.0, 0.0), &[3, 4])], m));
        out
    };
    let reference = |x: &[Host], m: &AttrMap, d: DType| {
        let r = |v: f64| refs::held_as(v, d);
        let chain = match x.len() {
            1 => Host { v: x[0].v.iter().map(|v| v.abs()).collect(), shape: x[0].shape.clone() },
            _ => zip_n(&[&x[0], &x[1]], |v| r(r(v[0] - v[1]).powi(2))),
        };
        let axes: Vec<usize> = attr_is(m, "axis").iter().map(|&a| axis(a, chain.shape.len())).collect();
        let kind = match m.get("reduce") {
            Some(AttrValue::Str(s)) => s.clone(),
            _ => String::new(),
        };
        let f = |g: &[f64]| match kind.as_str() {
            "sum" => g.iter().sum(),
            "mean" => g.iter().sum::<f64>() / g.len() as f64,
            "prod" => g.iter().product(),
            "max" => nan_fold(g, f64::NEG_INFINITY, f64::max),
            _ => nan_fold(g, f64::INFINITY, f64::min),
        };
        vec![reduce(&chain, &axes, attr_b(m, "keepdim"), f)]
    };
    spec("reduce_prologue", vec![F32, F64], samples, reference).tol(4.0)
}

/// `matmul(x[0], x[1])` in float64, with the transposes of `m`.
fn matmul_ref(x: &[Host], m: &AttrMap) -> Host {
    let (tx, ty) = (attr_b(m, "transpose_x"), attr_b(m, "transpose_y"));
    let (a, b) = (&x[0], &x[1]);
    let (av, bv) = (a.shape.len() == 1, b.shape.len() == 1);
    let a2: Vec<usize> = if av { vec![1, a.shape[0]] } else { a.shape.clone() };
    let b2: Vec<usize> = if bv { vec![b.shape[0], 1] } else { b.shape.clone() };
    let (tx, ty) = (tx && !av, ty && !bv);
    let (ar, ac) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (br, bc) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    let (mm, k) = if tx { (ac, ar) } else { (ar, ac) };
    let nn = if ty { br } else { bc };
    let batch = refs::broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let mut shape = batch.clone();
    shape.extend([mm, nn]);
    let mut v = vec![0.0; numel(&shape)];
    for (o, out) in v.iter_mut().enumerate() {
        let idx = unravel(o, &shape);
        let (bi, i, j) = (&idx[..batch.len()], idx[batch.len()], idx[batch.len() + 1]);
        let pick = |h: &[usize], bi: &[usize]| -> Vec<usize> {
            let lead = bi.len() - (h.len() - 2);
            h[..h.len() - 2].iter().enumerate().map(|(d, &s)| if s == 1 { 0 } else { bi[lead + d] }).collect()
        };
        let (ba, bb) = (pick(&a2, bi), pick(&b2, bi));
        for kk in 0..k {
            let (ai, aj) = if tx { (kk, i) } else { (i, kk) };
            let (bi2, bj) = if ty { (j, kk) } else { (kk, j) };
            let mut ia = ba.clone();
            ia.extend([ai, aj]);
            let mut ib = bb.clone();
            ib.extend([bi2, bj]);
            *out += a.v[ravel(&ia, &a2)] * b.v[ravel(&ib, &b2)];
        }
    }
    if av {
        shape.remove(shape.len() - 2);
    }
    if bv {
        shape.pop();
    }
    Host { v, shape }
}

fn matmul_specs() -> Vec<Spec> {
    let samples = |rng: &mut Rng| {
        let cases: [(&[usize], &[usize], bool, bool); 17] = [
            (&[3, 5], &[5], false, false),
            (&[5], &[2, 5, 4], false, false),
            (&[3, 5], &[2, 5, 4], false, false),
            (&[2, 1, 5, 3], &[4, 2, 5], true, true),
            (&[5], &[5], true, true),
            (&[1, 5], &[5, 1], false, false),
            (&[70, 33], &[33, 65], false, false),
            (&[3, 0], &[0, 4], false, false),
            (&[3, 4], &[4, 5], false, false),
            (&[4, 3], &[4, 5], true, false),
            (&[3, 4], &[5, 4], false, true),
            (&[4, 3], &[5, 4], true, true),
            (&[4], &[4], false, false),
            (&[4], &[4, 2], false, false),
            (&[2, 3, 4], &[4], false, false),
            (&[2, 1, 3, 4], &[5, 4, 2], false, false),
            (&[0, 3], &[3, 2], false, false),
        ];
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|(a, b, tx, ty)| {
                let attrs = AttrMap::new().with("transpose_x", *tx).with("transpose_y", *ty);
                sample(
                    format!("{a:?}·{b:?} tx={tx} ty={ty}"),
                    vec![data(vals(rng, numel(a), -2.0, 2.0, 0.0), a), data(vals(rng, numel(b), -2.0, 2.0, 0.0), b)],
                    attrs,
                )
            })
            .collect();
        let attrs = AttrMap::new().with("transpose_x", false).with("transpose_y", true);
        out.push(
            sample(
                "grad, batched",
                vec![data(vals(rng, 12, -1.0, 1.0, 0.0), &[2, 2, 3]), data(vals(rng, 6, -1.0, 1.0, 0.0), &[2, 3])],
                attrs,
            )
            .with_grad(),
        );
        out.push(
            sample(
                "grad, vector",
                vec![data(vals(rng, 3, -1.0, 1.0, 0.0), &[3]), data(vals(rng, 6, -1.0, 1.0, 0.0), &[3, 2])],
                AttrMap::new().with("transpose_x", false).with("transpose_y", false),
            )
            .with_grad(),
        );
        let grads: [(&[usize], &[usize], bool, bool); 4] = [
            (&[2, 1, 3, 4], &[3, 4, 2], false, false),
            (&[2, 4, 3], &[2, 4], true, true),
            (&[4], &[4], false, false),
            (&[3, 4], &[4], false, false),
        ];
        for (a, b, tx, ty) in grads {
            let attrs = AttrMap::new().with("transpose_x", tx).with("transpose_y", ty);
            let inputs =
                vec![data(vals(rng, numel(a), -1.0, 1.0, 0.0), a), data(vals(rng, numel(b), -1.0, 1.0, 0.0), b)];
            out.push(sample(format!("grad {a:?}·{b:?} tx={tx} ty={ty}"), inputs, attrs).with_grad());
        }
        out
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| vec![matmul_ref(x, m)];
    vec![spec("matmul", floats(), samples, reference).tol(10.0).grad().second(), matmul_epilogue_spec()]
}

/// `matmul_epilogue`: the product followed by a bias add, relu and scale, against the
/// float64 product and the chain rounded to the dtype after every op.
fn matmul_epilogue_spec() -> Spec {
    const PROGRAM: &str = "x0 x1 b.add u.relu:0.0:0.0 u.scale:0.5:1.0";
    let samples = |rng: &mut Rng| {
        // (x, y, bias shapes; transpose_x)
        type Case<'a> = (&'a [usize], &'a [usize], &'a [usize], bool);
        let cases: [Case; 5] = [
            (&[3, 4], &[4, 5], &[5], false),
            (&[4, 3], &[4, 5], &[1, 5], true),
            (&[2, 3, 4], &[4, 2], &[3, 1], false),
            (&[0, 3], &[3, 2], &[2], false),
            (&[70, 9], &[9, 66], &[66], false),
        ];
        cases
            .iter()
            .map(|(a, b, c, tx)| {
                let attrs = AttrMap::new()
                    .with("transpose_x", *tx)
                    .with("transpose_y", false)
                    .with("program", PROGRAM.to_string());
                let inputs = [a, b, c].iter().map(|s| data(vals(rng, numel(s), -2.0, 2.0, 0.0), s)).collect();
                sample(format!("{a:?}·{b:?} + {c:?} tx={tx}"), inputs, attrs)
            })
            .collect()
    };
    let reference = |x: &[Host], m: &AttrMap, d: DType| {
        let r = |v: f64| refs::held_as(v, d);
        let p = matmul_ref(x, m);
        let p = Host { v: p.v.iter().map(|&v| r(v)).collect(), shape: p.shape };
        vec![zip_n(&[&p, &x[2]], |v| {
            let s = r(v[0] + v[1]);
            let h = if s > 0.0 || s.is_nan() { s } else { 0.0 };
            r(0.5 * h + 1.0)
        })]
    };
    spec("matmul_epilogue", vec![F32, F64], samples, reference).tol(10.0)
}

// ---------------------------------------------------------------------------------------
// Shape ops.

const ANY: [DType; 7] = [Bool, I32, I64, F16, BF16, F32, F64];

/// One shape-op case: a label, the input shape and the attributes.
type ShapeCase = (&'static str, Vec<usize>, AttrMap);

/// int64 values past 32 bits (and past float64's 53-bit mantissa, none): the GPU's two
/// words must both move.
fn wide(rng: &mut Rng, n: usize) -> Vec<f64> {
    ints(rng, n, -(1 << 50), 1 << 50)
}

/// The shape of the "wide values" samples: several workgroups of a mid-size tensor.
const WIDE: [usize; 3] = [5, 7, 11];

/// A spec whose samples are built from `(label, shape, attrs)` cases on random values, the
/// `wide` case on int64 values past 32 bits, and gradient cases; the GPU must match the CPU
/// bit for bit.
fn shape_spec(
    name: &'static str,
    cases: fn() -> Vec<ShapeCase>,
    grads: Vec<(Vec<usize>, AttrMap)>,
    wide_case: (Vec<usize>, AttrMap),
    reference: impl Fn(&[Host], &AttrMap, DType) -> Vec<Host> + 'static,
) -> Spec {
    let samples = move |rng: &mut Rng| {
        let mut out: Vec<Sample> = cases()
            .into_iter()
            .map(|(label, shape, attrs)| sample(label, vec![data(ints(rng, numel(&shape), -9, 10), &shape)], attrs))
            .collect();
        let (shape, attrs) = &wide_case;
        let x = data(wide(rng, numel(shape)), shape);
        out.push(sample(format!("wide values {shape:?} {attrs}"), vec![x], attrs.clone()).only(&[I64]));
        for (shape, attrs) in &grads {
            let x = data(vals(rng, numel(shape), -2.0, 2.0, 0.0), shape);
            out.push(sample(format!("grad {shape:?} {attrs}"), vec![x], attrs.clone()).with_grad());
        }
        out
    };
    spec(name, ANY.to_vec(), samples, reference).grad().exact()
}

/// `x` with a new shape (the values keep their order).
fn reshaped(x: &Host, shape: Vec<usize>) -> Vec<Host> {
    vec![Host { v: x.v.clone(), shape }]
}

/// Python's `range(start, end, step)` for one axis of size `d` with Paddle's clamping.
fn slice_indices(d: usize, start: i64, end: i64, step: i64) -> Vec<usize> {
    let d = d as i64;
    let norm = |v: i64| if v < 0 { v + d } else { v };
    let mut out = Vec::new();
    if step > 0 {
        let (mut i, e) = (norm(start).clamp(0, d), norm(end).clamp(0, d));
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else {
        let (mut i, e) = (norm(start).clamp(-1, d - 1), norm(end).clamp(-1, d - 1));
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

/// The index lists a slice reads along each axis of `shape`.
fn slice_lists(shape: &[usize], m: &AttrMap) -> Vec<Vec<usize>> {
    let (axes, starts, ends) = (attr_is(m, "axes"), attr_is(m, "starts"), attr_is(m, "ends"));
    let steps = m.field::<Vec<i64>>("sweep", "steps").unwrap_or_else(|_| vec![1; axes.len()]);
    let mut lists: Vec<Vec<usize>> = shape.iter().map(|&d| (0..d).collect()).collect();
    for k in 0..axes.len() {
        let a = axis(axes[k], shape.len());
        lists[a] = slice_indices(shape[a], starts[k], ends[k], steps[k]);
    }
    lists
}

/// Every output position of a selection by per-axis index lists, with the source position.
fn select(shape: &[usize], lists: &[Vec<usize>]) -> (Vec<usize>, Vec<usize>) {
    let out_shape: Vec<usize> = lists.iter().map(|l| l.len()).collect();
    let src = (0..numel(&out_shape))
        .map(|o| {
            let idx = unravel(o, &out_shape);
            let s: Vec<usize> = idx.iter().enumerate().map(|(d, &i)| lists[d][i]).collect();
            ravel(&s, shape)
        })
        .collect();
    (out_shape, src)
}

fn slice_attrs(axes: Vec<i64>, starts: Vec<i64>, ends: Vec<i64>, steps: Vec<i64>) -> AttrMap {
    AttrMap::new().with("axes", axes).with("starts", starts).with("ends", ends).with("steps", steps)
}

fn shape_specs() -> Vec<Spec> {
    let a = AttrMap::new;
    vec![
        shape_spec(
            "reshape",
            || {
                vec![
                    ("[2,3,4] -> [4,-1]", vec![2, 3, 4], AttrMap::new().with("shape", vec![4i64, -1])),
                    ("0 copies a dim", vec![2, 3, 4], AttrMap::new().with("shape", vec![0i64, 12])),
                    ("to 0-d", vec![1, 1], AttrMap::new().with("shape", Vec::<i64>::new())),
                    ("empty", vec![0, 4], AttrMap::new().with("shape", vec![2i64, 0, -1])),
                    ("rank 5", vec![24], AttrMap::new().with("shape", vec![1i64, 2, 3, 2, 2])),
                    ("0 copies the middle dim", vec![2, 3, 4], AttrMap::new().with("shape", vec![4i64, 0, 2])),
                    ("0 and -1", vec![2, 3, 4], AttrMap::new().with("shape", vec![0i64, -1])),
                ]
            },
            vec![(vec![2, 3], a().with("shape", vec![3i64, 2]))],
            (WIDE.to_vec(), a().with("shape", vec![5i64, 77])),
            |x, m, _| {
                let spec = attr_is(m, "shape");
                let known: usize = spec
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| {
                        if d == 0 {
                            x[0].shape[i]
                        } else if d < 0 {
                            1
                        } else {
                            d as usize
                        }
                    })
                    .product();
                let shape = spec
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| {
                        if d == 0 {
                            x[0].shape[i]
                        } else if d < 0 {
                            x[0].v.len() / known.max(1)
                        } else {
                            d as usize
                        }
                    })
                    .collect();
                reshaped(&x[0], shape)
            },
        ),
        shape_spec(
            "flatten",
            || {
                vec![
                    ("all", vec![2, 3, 4], AttrMap::new().with("start_axis", 0i64).with("stop_axis", -1i64)),
                    ("middle", vec![2, 3, 4, 5], AttrMap::new().with("start_axis", 1i64).with("stop_axis", 2i64)),
                    ("0-d", vec![], AttrMap::new().with("start_axis", 0i64).with("stop_axis", -1i64)),
                ]
            },
            vec![(vec![2, 3], a().with("start_axis", 0i64).with("stop_axis", 1i64))],
            (WIDE.to_vec(), a().with("start_axis", 1i64).with("stop_axis", 2i64)),
            |x, m, _| {
                let s = &x[0].shape;
                if s.is_empty() {
                    return reshaped(&x[0], vec![1]);
                }
                let (st, sp) = (axis(attr_i(m, "start_axis"), s.len()), axis(attr_i(m, "stop_axis"), s.len()));
                let mut shape = s[..st].to_vec();
                shape.push(s[st..=sp].iter().product());
                shape.extend(&s[sp + 1..]);
                reshaped(&x[0], shape)
            },
        ),
        shape_spec(
            "squeeze",
            || {
                vec![
                    ("all", vec![1, 3, 1, 2], AttrMap::new().with("axes", Vec::<i64>::new())),
                    ("listed", vec![1, 3, 1, 2], AttrMap::new().with("axes", vec![-2i64])),
                    ("non-1 listed axis stays", vec![1, 3], AttrMap::new().with("axes", vec![1i64])),
                    ("two listed, negative first", vec![1, 3, 1, 2], AttrMap::new().with("axes", vec![-2i64, 0])),
                ]
            },
            vec![(vec![2, 1, 3], a().with("axes", vec![1i64]))],
            (vec![5, 1, 77], a().with("axes", vec![1i64])),
            |x, m, _| {
                let s = &x[0].shape;
                let axes: Vec<usize> = attr_is(m, "axes").iter().map(|&v| axis(v, s.len())).collect();
                let shape = s
                    .iter()
                    .enumerate()
                    .filter(|&(i, &d)| !(d == 1 && (axes.is_empty() || axes.contains(&i))))
                    .map(|(_, &d)| d)
                    .collect();
                reshaped(&x[0], shape)
            },
        ),
        shape_spec(
            "unsqueeze",
            || {
                vec![
                    ("front and back", vec![2, 3], AttrMap::new().with("axes", vec![0i64, -1])),
                    ("0-d", vec![], AttrMap::new().with("axes", vec![0i64])),
                    ("two inside", vec![2, 3], AttrMap::new().with("axes", vec![0i64, 2])),
                    ("inside and last", vec![2, 3], AttrMap::new().with("axes", vec![1i64, -1])),
                ]
            },
            vec![(vec![2, 3], a().with("axes", vec![1i64]))],
            (WIDE.to_vec(), a().with("axes", vec![1i64])),
            |x, m, _| {
                let s = &x[0].shape;
                let rank = s.len() + attr_is(m, "axes").len();
                let pos: Vec<usize> = attr_is(m, "axes").iter().map(|&v| axis(v, rank)).collect();
                let mut it = s.iter();
                let shape = (0..rank).map(|i| if pos.contains(&i) { 1 } else { *it.next().unwrap() }).collect();
                reshaped(&x[0], shape)
            },
        ),
        shape_spec(
            "transpose",
            || {
                vec![
                    ("matrix", vec![3, 4], AttrMap::new().with("perm", vec![1usize, 0])),
                    ("rank 4", vec![2, 3, 4, 5], AttrMap::new().with("perm", vec![2usize, 0, 3, 1])),
                    ("identity", vec![2, 3], AttrMap::new().with("perm", vec![0usize, 1])),
                    ("empty", vec![0, 3], AttrMap::new().with("perm", vec![1usize, 0])),
                ]
            },
            vec![(vec![2, 3, 2], a().with("perm", vec![2usize, 0, 1]))],
            (WIDE.to_vec(), a().with("perm", vec![2usize, 0, 1])),
            |x, m, _| {
                let perm = attr_us(m, "perm");
                let s = &x[0].shape;
                let shape: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
                let v = (0..numel(&shape))
                    .map(|o| {
                        let idx = unravel(o, &shape);
                        let mut src = vec![0; s.len()];
                        for (i, &p) in perm.iter().enumerate() {
                            src[p] = idx[i];
                        }
                        x[0].v[ravel(&src, s)]
                    })
                    .collect();
                vec![Host { v, shape }]
            },
        ),
        shape_spec(
            "broadcast_to",
            || {
                vec![
                    ("vector to matrix", vec![3], AttrMap::new().with("shape", vec![2usize, 3])),
                    ("middle", vec![2, 1, 3], AttrMap::new().with("shape", vec![4usize, 2, 5, 3])),
                    ("0-d", vec![], AttrMap::new().with("shape", vec![2usize, 2])),
                    ("to empty", vec![1, 3], AttrMap::new().with("shape", vec![0usize, 3])),
                ]
            },
            vec![(vec![3, 1], a().with("shape", vec![2usize, 3, 2]))],
            (vec![5, 1, 11], a().with("shape", vec![2usize, 3, 5, 7, 11])),
            |x, m, _| {
                let shape = attr_us(m, "shape");
                let v = (0..numel(&shape)).map(|o| at_broadcast(&x[0], &unravel(o, &shape))).collect();
                vec![Host { v, shape }]
            },
        ),
        shape_spec(
            "slice",
            || {
                vec![
                    ("steps 1", vec![4, 5], slice_attrs(vec![0, 1], vec![1, -3], vec![3, 100], vec![1, 1])),
                    ("steps 2 and -1", vec![6, 5], slice_attrs(vec![0, 1], vec![0, -1], vec![6, -100], vec![2, -1])),
                    ("negative step from the end", vec![7], slice_attrs(vec![0], vec![-2], vec![1], vec![-3])),
                    ("empty range", vec![4, 3], slice_attrs(vec![0], vec![3], vec![1], vec![1])),
                    ("rank 5", vec![2, 3, 2, 3, 2], slice_attrs(vec![1, 3], vec![1, 0], vec![3, 3], vec![1, 2])),
                    ("negative axis", vec![2, 3, 4], slice_attrs(vec![-2], vec![1], vec![3], vec![1])),
                    ("start clamps", vec![2, 3, 4], slice_attrs(vec![2], vec![-100], vec![2], vec![1])),
                    ("step -2 clamps both ends", vec![10], slice_attrs(vec![0], vec![100], vec![-100], vec![-2])),
                    ("step -1, empty", vec![10], slice_attrs(vec![0], vec![2], vec![5], vec![-1])),
                    (
                        "two axes, steps -2",
                        vec![2, 3, 4],
                        slice_attrs(vec![1, 2], vec![-1, 3], vec![-100, 0], vec![-2, -2]),
                    ),
                ]
            },
            vec![(vec![4, 3], slice_attrs(vec![0, 1], vec![1, 2], vec![4, -100], vec![2, -1]))],
            (WIDE.to_vec(), slice_attrs(vec![2, 0], vec![-2, 2], vec![0, -100], vec![-3, -1])),
            |x, m, _| {
                let (shape, src) = select(&x[0].shape, &slice_lists(&x[0].shape, m));
                vec![Host { v: src.iter().map(|&i| x[0].v[i]).collect(), shape }]
            },
        ),
        shape_spec(
            "flip",
            || {
                vec![
                    ("one axis", vec![3, 4], AttrMap::new().with("axes", vec![1i64])),
                    ("all axes", vec![2, 3, 2], AttrMap::new().with("axes", vec![0i64, 1, 2])),
                    ("empty", vec![0, 2], AttrMap::new().with("axes", vec![0i64])),
                ]
            },
            vec![(vec![2, 3], a().with("axes", vec![-1i64]))],
            (WIDE.to_vec(), a().with("axes", vec![0i64, 2])),
            |x, m, _| {
                let s = &x[0].shape;
                let axes: Vec<usize> = attr_is(m, "axes").iter().map(|&v| axis(v, s.len())).collect();
                let lists: Vec<Vec<usize>> = s
                    .iter()
                    .enumerate()
                    .map(|(d, &n)| if axes.contains(&d) { (0..n).rev().collect() } else { (0..n).collect() })
                    .collect();
                let (shape, src) = select(s, &lists);
                vec![Host { v: src.iter().map(|&i| x[0].v[i]).collect(), shape }]
            },
        ),
        shape_spec(
            "pad",
            || {
                vec![
                    ("last axes", vec![2, 3, 4], AttrMap::new().with("pad", vec![1usize, 2, 0, 1]).with("value", 7.0)),
                    ("every axis", vec![2, 3], AttrMap::new().with("pad", vec![1usize, 0, 2, 1]).with("value", -1.5)),
                    ("empty input", vec![0, 2], AttrMap::new().with("pad", vec![1usize, 1]).with("value", 0.0)),
                ]
            },
            vec![
                (vec![2, 3], a().with("pad", vec![1usize, 1]).with("value", 0.5)),
                (vec![2, 3], a().with("pad", vec![1usize, 0, 2, 1]).with("value", 0.5)),
            ],
            (WIDE.to_vec(), a().with("pad", vec![1usize, 2, 0, 3, 4, 0]).with("value", 5.0)),
            |x, m, dtype| {
                let (s, pad) = (&x[0].shape, attr_us(m, "pad"));
                let n = s.len();
                let (mut before, mut after) = (vec![0; n], vec![0; n]);
                for k in 0..pad.len() / 2 {
                    let d = if pad.len() == 2 * n { k } else { n - 1 - k };
                    before[d] = pad[2 * k];
                    after[d] = pad[2 * k + 1];
                }
                let shape: Vec<usize> = (0..n).map(|d| s[d] + before[d] + after[d]).collect();
                let fill = refs::held_as(attr_f(m, "value"), dtype);
                let v = (0..numel(&shape))
                    .map(|o| {
                        let idx = unravel(o, &shape);
                        let inside = (0..n).all(|d| idx[d] >= before[d] && idx[d] < before[d] + s[d]);
                        if inside {
                            let src: Vec<usize> = (0..n).map(|d| idx[d] - before[d]).collect();
                            x[0].v[ravel(&src, s)]
                        } else {
                            fill
                        }
                    })
                    .collect();
                vec![Host { v, shape }]
            },
        ),
        slice_grad_spec(),
        concat_spec(),
        expand_as_spec(),
        full_like_spec(),
        fused_elementwise_spec(),
        argsort_spec(),
    ]
}

fn slice_grad_spec() -> Spec {
    let cases: Vec<(Vec<usize>, AttrMap)> = vec![
        (vec![4, 5], slice_attrs(vec![0, 1], vec![1, -3], vec![3, 100], vec![1, 1])),
        (vec![6, 5], slice_attrs(vec![0, 1], vec![0, -1], vec![6, -100], vec![2, -1])),
        (vec![4, 3], slice_attrs(vec![0], vec![3], vec![1], vec![1])),
    ];
    let samples = move |rng: &mut Rng| {
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|(shape, m)| {
                let (g_shape, _) = select(shape, &slice_lists(shape, m));
                let attrs = m.clone().with("shape", shape.clone());
                sample(format!("{shape:?} {m}"), vec![data(ints(rng, numel(&g_shape), -9, 10), &g_shape)], attrs)
            })
            .collect();
        let m = slice_attrs(vec![2, 0], vec![-2, 2], vec![0, -100], vec![-3, -1]);
        let (g_shape, _) = select(&WIDE, &slice_lists(&WIDE, &m));
        let x = data(wide(rng, numel(&g_shape)), &g_shape);
        out.push(sample("wide values", vec![x], m.with("shape", WIDE.to_vec())).only(&[I64]));
        let attrs = slice_attrs(vec![1], vec![0], vec![3], vec![2]).with("shape", vec![2usize, 3]);
        out.push(sample("grad", vec![data(vals(rng, 4, -2.0, 2.0, 0.0), &[2, 2])], attrs).with_grad());
        out
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| {
        let shape = attr_us(m, "shape");
        let (_, src) = select(&shape, &slice_lists(&shape, m));
        let mut v = vec![0.0; numel(&shape)];
        for (k, &i) in src.iter().enumerate() {
            v[i] = x[0].v[k];
        }
        vec![Host { v, shape }]
    };
    spec("slice_grad", vec![Bool, I32, I64, F16, BF16, F32, F64], samples, reference).grad().exact()
}

/// `expand_as(x, like)`: only `like`'s shape matters (its values are fixed zeros).
fn expand_as_spec() -> Spec {
    let samples = |rng: &mut Rng| {
        let cases: [(&[usize], &[usize]); 4] =
            [(&[3], &[2, 3]), (&[2, 1, 3], &[4, 2, 5, 3]), (&[], &[2, 2]), (&[1, 3], &[0, 3])];
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|(s, t)| {
                let inputs = vec![data(ints(rng, numel(s), -9, 10), s), fixed(vec![0.0; numel(t)], t, F32)];
                sample(format!("{s:?} as {t:?}"), inputs, AttrMap::new())
            })
            .collect();
        let inputs = vec![data(wide(rng, 55), &[5, 1, 11]), fixed(vec![0.0; 2310], &[2, 3, 5, 7, 11], F32)];
        out.push(sample("wide values", inputs, AttrMap::new()).only(&[I64]));
        let inputs = vec![data(vals(rng, 3, -2.0, 2.0, 0.0), &[3, 1]), fixed(vec![0.0; 12], &[2, 3, 2], F32)];
        out.push(sample("grad", inputs, AttrMap::new()).with_grad());
        out
    };
    let reference = |x: &[Host], _: &AttrMap, _: DType| {
        let shape = x[1].shape.clone();
        let v = (0..numel(&shape)).map(|o| at_broadcast(&x[0], &unravel(o, &shape))).collect();
        vec![Host { v, shape }]
    };
    spec("expand_as", ANY.to_vec(), samples, reference).grad().exact()
}

/// `argsort`: a stable sort of the indices in float64 (ties keep their order; NaN is the
/// largest value), on small integers so that ties occur.
fn argsort_spec() -> Spec {
    let samples = |rng: &mut Rng| {
        let cases: [(&[usize], i64, bool); 7] = [
            (&[7], -1, false),
            (&[3, 5], 1, true),
            (&[4, 3], 0, false),
            (&[2, 3, 4], 1, true),
            (&[], -1, false),
            (&[0, 3], 1, false),
            (&[2, 40], 1, true),
        ];
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|(s, ax, desc)| {
                let attrs = AttrMap::new().with("axis", *ax).with("descending", *desc);
                sample(format!("{s:?} axis {ax} descending {desc}"), vec![data(ints(rng, numel(s), -3, 4), s)], attrs)
            })
            .collect();
        let specials = vec![1.0, f64::NAN, -0.0, 0.0, f64::INFINITY, 1.0, f64::NEG_INFINITY, f64::NAN, -1e30];
        for desc in [false, true] {
            let attrs = AttrMap::new().with("axis", 0i64).with("descending", desc);
            out.push(
                sample(format!("special values, descending {desc}"), vec![data(specials.clone(), &[9])], attrs)
                    .floats_only(),
            );
        }
        out
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| {
        let shape = x[0].shape.clone();
        let desc = attr_b(m, "descending");
        let mut v = vec![0.0; x[0].v.len()];
        if !shape.is_empty() {
            let ax = axis(attr_i(m, "axis"), shape.len());
            let (outer, len, inner) =
                (shape[..ax].iter().product::<usize>(), shape[ax], shape[ax + 1..].iter().product::<usize>());
            let key = |a: f64| if a.is_nan() { f64::INFINITY } else { a };
            for o in 0..outer {
                for i in 0..inner {
                    let at = |r: usize| (o * len + r) * inner + i;
                    let mut idx: Vec<usize> = (0..len).collect();
                    idx.sort_by(|&p, &q| {
                        let (a, b) = (x[0].v[at(p)], x[0].v[at(q)]);
                        // NaN above +inf: compare NaN-ness first, then values.
                        let ord = (a.is_nan(), key(a)).partial_cmp(&(b.is_nan(), key(b))).unwrap();
                        if desc { ord.reverse() } else { ord }
                    });
                    for (r, &p) in idx.iter().enumerate() {
                        v[at(r)] = p as f64;
                    }
                }
            }
        }
        vec![Host { v, shape }]
    };
    spec("argsort", ANY.to_vec(), samples, reference).out(i64_dtype)
}

/// `fused_elementwise`: a chain of table ops in postfix, against the chain written out in
/// float64 (rounded to the dtype after every op, as the unfused ops round).
fn fused_elementwise_spec() -> Spec {
    const PROGRAM: &str = "x0 x1 b.multiply x2 b.add u.relu:0.0:0.0 u.scale:0.5:1.0 u.tanh:0.0:0.0 x0 b.subtract";
    let samples = |rng: &mut Rng| {
        let shapes: [[&[usize]; 3]; 5] = [
            [&[2, 3], &[2, 3], &[2, 3]],
            [&[4, 3], &[1, 3], &[3]],
            [&[2, 1, 4], &[3, 1], &[4]],
            [&[], &[], &[]],
            [&[0, 3], &[3], &[1]],
        ];
        shapes
            .iter()
            .map(|s| {
                let inputs = s.iter().map(|sh| data(rng.vec(numel(sh), -2.0, 2.0), sh)).collect();
                sample(format!("{s:?}"), inputs, AttrMap::new().with("program", PROGRAM.to_string()))
            })
            .collect()
    };
    let reference = |x: &[Host], _: &AttrMap, d: DType| {
        let r = |v: f64| refs::held_as(v, d);
        vec![zip_n(&[&x[0], &x[1], &x[2]], |v| {
            let s = r(r(v[0] * v[1]) + v[2]);
            let h = if s > 0.0 || s.is_nan() { s } else { 0.0 };
            r(r(r(0.5 * h + 1.0).tanh()) - v[0])
        })]
    };
    spec("fused_elementwise", vec![F32, F64], samples, reference)
}

/// `full_like(x, value)`: `x`'s shape and dtype, `value` everywhere.
fn full_like_spec() -> Spec {
    let samples = |rng: &mut Rng| {
        [(vec![2usize, 3], 2.0), (vec![], -7.0), (vec![0, 4], 1.0)]
            .into_iter()
            .map(|(s, v)| {
                sample(
                    format!("{s:?} {v}"),
                    vec![data(ints(rng, numel(&s), -9, 10), &s)],
                    AttrMap::new().with("value", v),
                )
            })
            .collect()
    };
    let reference = |x: &[Host], m: &AttrMap, d: DType| {
        vec![Host { v: vec![convert(attr_f(m, "value"), F64, d); numel(&x[0].shape)], shape: x[0].shape.clone() }]
    };
    spec("full_like", ANY.to_vec(), samples, reference).exact()
}

fn concat_spec() -> Spec {
    let samples = |rng: &mut Rng| {
        let cases: [(&[&[usize]], i64); 4] = [
            (&[&[2, 3], &[1, 3], &[4, 3]], 0),
            (&[&[2, 1, 2], &[2, 3, 2]], -2),
            (&[&[3]], 0),
            (&[&[0, 2], &[2, 2]], 0),
        ];
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|(shapes, ax)| {
                let inputs = shapes.iter().map(|s| data(ints(rng, numel(s), -9, 10), s)).collect();
                sample(format!("{shapes:?} axis {ax}"), inputs, AttrMap::new().with("axis", *ax))
            })
            .collect();
        // One tensor twice, around another.
        let (b, a) = (ints(rng, 2, -9, 10), ints(rng, 6, -9, 10));
        let inputs = vec![data(b.clone(), &[2, 1]), data(a, &[2, 3]), data(b, &[2, 1])];
        out.push(
            sample("the same tensor twice, axis -1", inputs, AttrMap::new().with("axis", -1i64)).same_tensor(2, 0),
        );
        let x = data(wide(rng, 385), &WIDE);
        let y = data(wide(rng, 5 * 3 * 11), &[5, 3, 11]);
        out.push(sample("wide values", vec![x.clone(), y, x], AttrMap::new().with("axis", 1i64)).only(&[I64]));
        out.push(
            sample(
                "grad",
                vec![data(vals(rng, 4, -2.0, 2.0, 0.0), &[2, 2]), data(vals(rng, 2, -2.0, 2.0, 0.0), &[2, 1])],
                AttrMap::new().with("axis", 1i64),
            )
            .with_grad(),
        );
        out
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| {
        let ax = axis(attr_i(m, "axis"), x[0].shape.len());
        let mut shape = x[0].shape.clone();
        shape[ax] = x.iter().map(|h| h.shape[ax]).sum();
        let v = (0..numel(&shape))
            .map(|o| {
                let mut idx = unravel(o, &shape);
                let mut k = 0;
                while idx[ax] >= x[k].shape[ax] {
                    idx[ax] -= x[k].shape[ax];
                    k += 1;
                }
                x[k].v[ravel(&idx, &x[k].shape)]
            })
            .collect();
        vec![Host { v, shape }]
    };
    spec("concat", ANY.to_vec(), samples, reference).grad().exact()
}

// ---------------------------------------------------------------------------------------
// Index ops.

fn index_specs() -> Vec<Spec> {
    let select_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let (src, ix) = (&x[0], &x[1]);
        let ax = axis(attr_i(m, "axis"), src.shape.len());
        let mut shape = src.shape.clone();
        let scalar = ix.shape.is_empty();
        if scalar {
            shape.remove(ax);
        } else {
            shape[ax] = ix.v.len();
        }
        let v = (0..numel(&shape))
            .map(|o| {
                let mut idx = unravel(o, &shape);
                if scalar {
                    idx.insert(ax, 0);
                }
                let j = if scalar { 0 } else { idx[ax] };
                idx[ax] = ix.v[j] as usize;
                src.v[ravel(&idx, &src.shape)]
            })
            .collect();
        vec![Host { v, shape }]
    };
    let select_samples = |scalar_ok: bool| {
        move |rng: &mut Rng| {
            let mut out = Vec::new();
            for it in [I32, I64] {
                out.push(sample(
                    format!("axis 1, {it}"),
                    vec![data(ints(rng, 24, -9, 10), &[2, 4, 3]), fixed(vec![3.0, 0.0, 3.0, 1.0, 2.0], &[5], it)],
                    AttrMap::new().with("axis", 1i64),
                ));
            }
            out.push(sample(
                "axis -1, empty index",
                vec![data(ints(rng, 6, -9, 10), &[2, 3]), fixed(vec![], &[0], I64)],
                AttrMap::new().with("axis", -1i64),
            ));
            if scalar_ok {
                out.push(sample(
                    "0-d index",
                    vec![data(ints(rng, 6, -9, 10), &[2, 3]), fixed(vec![2.0], &[], I64)],
                    AttrMap::new().with("axis", 1i64),
                ));
            }
            out.push(
                sample(
                    "grad, repeated rows",
                    vec![data(vals(rng, 6, -2.0, 2.0, 0.0), &[3, 2]), fixed(vec![2.0, 0.0, 2.0], &[3], I64)],
                    AttrMap::new().with("axis", 0i64),
                )
                .with_grad(),
            );
            out
        }
    };
    let take_samples = |rng: &mut Rng| {
        let idx = ints(rng, 12, 0, 4);
        vec![
            sample(
                "axis 1",
                vec![data(ints(rng, 12, -9, 10), &[3, 4]), fixed(idx.clone(), &[3, 4], I64)],
                AttrMap::new().with("axis", 1i64),
            ),
            sample(
                "axis 0, int32",
                vec![data(ints(rng, 8, -9, 10), &[4, 2]), fixed(vec![3.0, 0.0, 1.0, 1.0], &[2, 2], I32)],
                AttrMap::new().with("axis", 0i64),
            ),
            sample(
                "grad",
                vec![data(vals(rng, 6, -2.0, 2.0, 0.0), &[2, 3]), fixed(vec![2.0, 2.0, 0.0, 1.0], &[2, 2], I64)],
                AttrMap::new().with("axis", 1i64),
            )
            .with_grad(),
        ]
    };
    let take_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let (arr, ix) = (&x[0], &x[1]);
        let ax = axis(attr_i(m, "axis"), arr.shape.len());
        let v = (0..ix.v.len())
            .map(|o| {
                let mut idx = unravel(o, &ix.shape);
                idx[ax] = ix.v[o] as usize;
                arr.v[ravel(&idx, &arr.shape)]
            })
            .collect();
        vec![Host { v, shape: ix.shape.clone() }]
    };
    let embed_samples = |rng: &mut Rng| {
        let ids = vec![1.0, 4.0, 0.0, 4.0, 2.0, 1.0];
        vec![
            sample(
                "no padding",
                vec![data(vals(rng, 15, -2.0, 2.0, 0.0), &[5, 3]), fixed(ids.clone(), &[2, 3], I64)],
                AttrMap::new().with("padding_idx", None::<i64>),
            ),
            sample(
                "padding -1",
                vec![data(vals(rng, 15, -2.0, 2.0, 0.0), &[5, 3]), fixed(ids.clone(), &[2, 3], I32)],
                AttrMap::new().with("padding_idx", Some(-1i64)),
            ),
            sample(
                "grad",
                vec![data(vals(rng, 8, -2.0, 2.0, 0.0), &[4, 2]), fixed(vec![1.0, 3.0, 1.0], &[3], I64)],
                AttrMap::new().with("padding_idx", Some(3i64)),
            )
            .with_grad(),
        ]
    };
    let embed_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let (w, ids) = (&x[0], &x[1]);
        let (rows, dim) = (w.shape[0], w.shape[1]);
        let pad = m
            .field::<Option<i64>>("sweep", "padding_idx")
            .unwrap()
            .map(|p| if p < 0 { p + rows as i64 } else { p } as usize);
        let mut shape = ids.shape.clone();
        shape.push(dim);
        let v = (0..ids.v.len() * dim)
            .map(|o| {
                let r = ids.v[o / dim] as usize;
                if Some(r) == pad { 0.0 } else { w.v[r * dim + o % dim] }
            })
            .collect();
        vec![Host { v, shape }]
    };
    let one_hot_samples = |rng: &mut Rng| {
        vec![
            sample("labels", vec![data(ints(rng, 6, 0, 4), &[2, 3])], AttrMap::new().with("num_classes", 4usize)),
            sample("0-d", vec![data(vec![2.0], &[])], AttrMap::new().with("num_classes", 3usize)),
            sample("empty", vec![data(vec![], &[0])], AttrMap::new().with("num_classes", 3usize)),
        ]
    };
    let one_hot_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let c = m.field::<usize>("sweep", "num_classes").unwrap();
        let mut shape = x[0].shape.clone();
        shape.push(c);
        let v = (0..x[0].v.len() * c).map(|o| (x[0].v[o / c] as usize == o % c) as u8 as f64).collect();
        vec![Host { v, shape }]
    };
    vec![
        spec("index_select", ANY.to_vec(), select_samples(false), select_ref).grad().exact(),
        spec("gather", ANY.to_vec(), select_samples(true), select_ref).grad().exact(),
        spec("take_along_axis", ANY.to_vec(), take_samples, take_ref).grad().exact(),
        spec("embedding", ANY.to_vec(), embed_samples, embed_ref).grad().exact(),
        spec("one_hot", vec![I32, I64], one_hot_samples, one_hot_ref).out(|_, _, _| F32).exact(),
        geom_spec("index_gather"),
        geom_spec("index_scatter_add"),
    ]
}

/// A gather geometry as attributes.
fn geom_attrs(outer: usize, n: usize, m: usize, inner: usize, strides: [usize; 3], pad: Option<usize>) -> AttrMap {
    AttrMap::new()
        .with("outer", outer)
        .with("n", n)
        .with("m", m)
        .with("inner", inner)
        .with("so", strides[0])
        .with("sj", strides[1])
        .with("si", strides[2])
        .with("pad", pad)
        .with("out_shape", vec![outer, m, inner])
        .with("in_shape", vec![outer, n, inner])
        .with("axis", 1usize)
}

/// `index_gather` (out[o, j, i] = x[o, ix(o, j, i), i]) and its adjoint `index_scatter_add`.
fn geom_spec(name: &'static str) -> Spec {
    let scatter = name == "index_scatter_add";
    let samples = move |rng: &mut Rng| {
        let cases = [
            ("shared list", geom_attrs(2, 4, 3, 2, [0, 1, 0], None), 3),
            ("per-position indices", geom_attrs(2, 3, 2, 2, [4, 2, 1], None), 8),
            ("padding row", geom_attrs(1, 4, 5, 3, [0, 1, 0], Some(2)), 5),
        ];
        let mut out = Vec::new();
        for (k, (label, m, nidx)) in cases.into_iter().enumerate() {
            let g = |a: &str| m.field::<usize>("sweep", a).unwrap();
            let (outer, n, mm, inner) = (g("outer"), g("n"), g("m"), g("inner"));
            let shape = if scatter { vec![outer, mm, inner] } else { vec![outer, n, inner] };
            let values =
                if k == 0 { ints(rng, numel(&shape), -9, 10) } else { vals(rng, numel(&shape), -2.0, 2.0, 0.0) };
            let idx = fixed(ints(rng, nidx, 0, n as i64), &[nidx], I64);
            let s = sample(label, vec![data(values, &shape), idx], m);
            out.push(if k > 0 { s.with_grad() } else { s });
        }
        out
    };
    let reference = move |x: &[Host], m: &AttrMap, _: DType| {
        let g = |a: &str| m.field::<usize>("sweep", a).unwrap();
        let (outer, n, mm, inner, so, sj, si) = (g("outer"), g("n"), g("m"), g("inner"), g("so"), g("sj"), g("si"));
        let pad = m.field::<Option<usize>>("sweep", "pad").unwrap();
        let (src, ix) = (&x[0], &x[1]);
        let mut v = vec![0.0; if scatter { outer * n * inner } else { outer * mm * inner }];
        for o in 0..outer {
            for j in 0..mm {
                for i in 0..inner {
                    let r = ix.v[o * so + j * sj + i * si] as usize;
                    if Some(r) == pad {
                        continue;
                    }
                    let (at_in, at_out) = ((o * n + r) * inner + i, (o * mm + j) * inner + i);
                    if scatter {
                        v[at_in] += src.v[at_out];
                    } else {
                        v[at_out] = src.v[at_in];
                    }
                }
            }
        }
        let shape = if scatter { vec![outer, n, inner] } else { vec![outer, mm, inner] };
        vec![Host { v, shape }]
    };
    let dtypes = if scatter { floats() } else { ANY.to_vec() };
    let s = spec(name, dtypes, samples, reference).grad();
    if scatter { s } else { s.exact() }
}

// ---------------------------------------------------------------------------------------
// Softmax, convolution, pooling.

/// Softmax geometries: short lines, a middle axis (by a negative index too), rank 5, 0-d,
/// empty (along and across the empty axis), and every GPU entry: contiguous rows of 32 or
/// more (a workgroup per row; up to 1,024 held in registers, 1,025 the looping entry; 300
/// rows, one invocation each on a software adapter), strided lines (inner > 1), one line.
const SOFTMAX_CASES: [(&[usize], i64); 15] = [
    (&[3, 5], -1),
    (&[2, 4, 3], 1),
    (&[2, 3, 4], -2),
    (&[4, 40], -1),
    (&[2, 3, 2, 2, 2], 0),
    (&[], 0),
    (&[], -1),
    (&[0, 3], -1),
    (&[0, 4], 0),
    (&[5, 33], 1),
    (&[3, 1024], -1),
    (&[2, 1025], -1),
    (&[300, 40], -1),
    (&[5, 300, 3], 1),
    (&[37], 0),
];

fn softmax_specs() -> Vec<Spec> {
    let fwd = |log: bool| {
        let samples = |rng: &mut Rng| {
            let mut out = Vec::new();
            for (shape, ax) in SOFTMAX_CASES {
                out.push(sample(
                    format!("{shape:?} axis {ax}"),
                    vec![data(vals(rng, numel(shape), -4.0, 4.0, 0.0), shape)],
                    AttrMap::new().with("axis", ax),
                ));
            }
            let sp = vec![f64::NEG_INFINITY, 0.0, 1.0, f64::NAN, 1.0, 2.0, 1e30, 0.0, -1.0];
            out.push(
                sample("special values", vec![data(sp, &[3, 3])], AttrMap::new().with("axis", -1i64)).floats_only(),
            );
            // Large inputs: no overflow to inf/inf (the maximum is subtracted).
            let big = vec![1000.0, 1001.0, -1000.0];
            out.push(sample("large values", vec![data(big, &[1, 3])], AttrMap::new().with("axis", -1i64)));
            for (shape, ax) in [(&[2usize, 3][..], 0i64), (&[3, 5], -1), (&[2, 3, 4], 1)] {
                let x = data(vals(rng, numel(shape), -2.0, 2.0, 0.0), shape);
                out.push(
                    sample(format!("grad {shape:?} axis {ax}"), vec![x], AttrMap::new().with("axis", ax)).with_grad(),
                );
            }
            out
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let ax = if x[0].shape.is_empty() { 0 } else { axis(attr_i(m, "axis"), x[0].shape.len()) };
            vec![refs::softmax(&x[0], ax, log)]
        };
        spec(if log { "log_softmax" } else { "softmax" }, floats(), samples, reference).tol(4.0).grad().second()
    };
    let bwd = |log: bool| {
        let samples = move |rng: &mut Rng| {
            let mut out = Vec::new();
            for (shape, ax) in SOFTMAX_CASES.into_iter().filter(|(s, _)| !s.is_empty()) {
                let x = Host::new(vals(rng, numel(shape), -3.0, 3.0, 0.0), shape);
                let y = refs::softmax(&x, axis(ax, shape.len()), log);
                let dy = vals(rng, numel(shape), -1.0, 1.0, 0.0);
                out.push(sample(
                    format!("{shape:?} axis {ax}"),
                    vec![data(y.v, shape), data(dy, shape)],
                    AttrMap::new().with("axis", ax),
                ));
            }
            out
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let (y, dy) = (&x[0], &x[1]);
            let ax = axis(attr_i(m, "axis"), y.shape.len());
            let prod = Host { v: y.v.iter().zip(&dy.v).map(|(a, b)| a * b).collect(), shape: y.shape.clone() };
            let sum_dy = reduce(dy, &[ax], true, |g| g.iter().sum());
            let sum_p = reduce(&prod, &[ax], true, |g| g.iter().sum());
            let v = (0..y.v.len())
                .map(|i| {
                    let idx = unravel(i, &y.shape);
                    if log {
                        dy.v[i] - y.v[i].exp() * at_broadcast(&sum_dy, &idx)
                    } else {
                        y.v[i] * (dy.v[i] - at_broadcast(&sum_p, &idx))
                    }
                })
                .collect();
            vec![Host { v, shape: y.shape.clone() }]
        };
        spec(if log { "log_softmax_grad" } else { "softmax_grad" }, floats(), samples, reference).tol(4.0)
    };
    vec![fwd(false), fwd(true), bwd(false), bwd(true)]
}

/// `cross_entropy_with_softmax` and its fused gradient: hard labels with 1 on the class axis,
/// `ignore_index` lines giving 0; logits (`use_softmax`) or probabilities.
fn cross_entropy_specs() -> Vec<Spec> {
    const IGNORE: f64 = -100.0;
    let attrs = |ax: i64, softmax: bool| {
        AttrMap::new().with("axis", ax).with("ignore_index", IGNORE as i64).with("use_softmax", softmax)
    };
    // Labels in [0, C) along `ax` of `shape`, every third one ignored when `ignore` is set.
    let labels = |rng: &mut Rng, shape: &[usize], ax: usize, ignore: bool| {
        let mut lshape = shape.to_vec();
        lshape[ax] = 1;
        let mut v = ints(rng, numel(&lshape), 0, shape[ax] as i64);
        if ignore {
            v.iter_mut().step_by(3).for_each(|l| *l = IGNORE);
        }
        (v, lshape)
    };
    // (shape, axis, some labels ignored, label dtype, use_softmax)
    let geoms = || {
        [
            (vec![4usize, 5], -1i64, true, I64, true),
            (vec![2, 4, 3], 1, true, I32, true),
            (vec![3, 40], -1, false, I64, true),
            (vec![0, 3], -1, false, I64, true),
            (vec![4, 5], -1, true, I64, false),
            (vec![2, 4, 3], 1, false, I32, false),
        ]
    };
    // Logits, or probabilities away from 0.
    let input = |rng: &mut Rng, n: usize, softmax: bool| {
        if softmax { vals(rng, n, -4.0, 4.0, 0.0) } else { vals(rng, n, 0.05, 1.0, 0.0) }
    };
    let fwd_samples = move |rng: &mut Rng| {
        let mut out = Vec::new();
        for (shape, ax, ignore, dtype, softmax) in geoms() {
            let (l, lshape) = labels(rng, &shape, axis(ax, shape.len()), ignore);
            out.push(sample(
                format!("{shape:?} axis {ax} {dtype} labels, ignore {ignore}, softmax {softmax}"),
                vec![data(input(rng, numel(&shape), softmax), &shape), fixed(l, &lshape, dtype)],
                attrs(ax, softmax),
            ));
        }
        let sp = vec![f64::NEG_INFINITY, 0.0, 1.0, f64::NAN, 1.0, 2.0, 1e30, 0.0, -1.0];
        let sp_labels = fixed(vec![1.0, 2.0, 0.0], &[3, 1], I64);
        out.push(sample("special values", vec![data(sp, &[3, 3]), sp_labels], attrs(-1, true)).floats_only());
        for softmax in [true, false] {
            // The first label ignored: the second-order check sees a masked line.
            let (l, lshape) = labels(rng, &[2, 3], 0, true);
            let x = if softmax { vals(rng, 6, -2.0, 2.0, 0.0) } else { vals(rng, 6, 0.3, 1.0, 0.0) };
            out.push(
                sample(
                    format!("grad, softmax {softmax}"),
                    vec![data(x, &[2, 3]), fixed(l, &lshape, I64)],
                    attrs(0, softmax),
                )
                .with_grad(),
            );
        }
        out
    };
    // −log_softmax(x)[label] (or −log(x[label])) per line, 0 where ignored.
    let fwd_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let (logits, label) = (&x[0], &x[1]);
        let ax = axis(attr_i(m, "axis"), logits.shape.len());
        let logp = if attr_b(m, "use_softmax") {
            refs::softmax(logits, ax, true)
        } else {
            Host { v: logits.v.iter().map(|p| p.ln()).collect(), shape: logits.shape.clone() }
        };
        let v = (0..label.v.len())
            .map(|k| {
                if label.v[k] == IGNORE {
                    return 0.0;
                }
                let mut idx = unravel(k, &label.shape);
                idx[ax] = label.v[k] as usize;
                -logp.v[ravel(&idx, &logits.shape)]
            })
            .collect();
        vec![Host { v, shape: label.shape.clone() }]
    };
    let fwd = spec("cross_entropy_with_softmax", floats(), fwd_samples, fwd_ref).tol(4.0).grad().second();
    let bwd_samples = move |rng: &mut Rng| {
        let mut out = Vec::new();
        for (shape, ax, ignore, dtype, softmax) in geoms() {
            let a = axis(ax, shape.len());
            let x = Host::new(input(rng, numel(&shape), softmax), &shape);
            let src = if softmax { refs::softmax(&x, a, true) } else { x };
            let (l, lshape) = labels(rng, &shape, a, ignore);
            let dloss = vals(rng, numel(&lshape), -1.0, 1.0, 0.0);
            out.push(sample(
                format!("{shape:?} axis {ax} {dtype} labels, ignore {ignore}, softmax {softmax}"),
                vec![data(src.v, &shape), fixed(l, &lshape, dtype), data(dloss, &lshape)],
                attrs(ax, softmax),
            ));
        }
        out
    };
    // (softmax − onehot)·dloss, or −onehot·dloss / x, 0 on ignored lines.
    let bwd_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let (logp, label, dloss) = (&x[0], &x[1], &x[2]);
        let ax = axis(attr_i(m, "axis"), logp.shape.len());
        let softmax = attr_b(m, "use_softmax");
        let v = (0..logp.v.len())
            .map(|i| {
                let mut idx = unravel(i, &logp.shape);
                let class = idx[ax];
                idx[ax] = 0;
                let line = ravel(&idx, &label.shape);
                if label.v[line] == IGNORE {
                    return 0.0;
                }
                let onehot = if label.v[line] as usize == class { 1.0 } else { 0.0 };
                if softmax { (logp.v[i].exp() - onehot) * dloss.v[line] } else { -onehot * dloss.v[line] / logp.v[i] }
            })
            .collect();
        vec![Host { v, shape: logp.shape.clone() }]
    };
    let bwd = spec("cross_entropy_with_softmax_grad", floats(), bwd_samples, bwd_ref).tol(4.0);
    vec![fwd, bwd]
}

/// A convolution geometry as the gradient products' attributes.
fn conv_attrs(c: &Conv) -> AttrMap {
    [
        ("n", c.n),
        ("c", c.c),
        ("h", c.h),
        ("w", c.w),
        ("oc", c.oc),
        ("kh", c.kh),
        ("kw", c.kw),
        ("oh", c.oh),
        ("ow", c.ow),
        ("sh", c.sh),
        ("sw", c.sw),
        ("pt", c.pt),
        ("pl", c.pl),
        ("dh", c.dh),
        ("dw", c.dw),
        ("groups", c.groups),
    ]
    .into_iter()
    .fold(AttrMap::new(), |m, (k, v)| m.with(k, v))
}

fn conv_of_attrs(m: &AttrMap) -> Conv {
    let g = |k: &str| m.field::<usize>("sweep", k).unwrap();
    Conv {
        n: g("n"),
        c: g("c"),
        h: g("h"),
        w: g("w"),
        oc: g("oc"),
        kh: g("kh"),
        kw: g("kw"),
        oh: g("oh"),
        ow: g("ow"),
        sh: g("sh"),
        sw: g("sw"),
        pt: g("pt"),
        pl: g("pl"),
        dh: g("dh"),
        dw: g("dw"),
        groups: g("groups"),
    }
}

/// "SAME" padding `[before, after]` of an axis of `len` for kernel `k` and stride `s`: the
/// output has `⌈len / s⌉` positions, the odd cell of padding goes after.
fn same_pads(len: usize, k: usize, s: usize) -> [usize; 2] {
    let total = ((len.div_ceil(s) - 1) * s + k).saturating_sub(len);
    [total / 2, total - total / 2]
}

/// `conv2d`'s geometry from the input and weight shapes and its options, worked out here.
fn conv_geometry(x: &[usize], w: &[usize], m: &AttrMap) -> Conv {
    let stride = attr_us(m, "stride");
    let mut dil = attr_us(m, "dilation");
    let groups = m.field::<usize>("sweep", "groups").unwrap();
    let (h, wd, kh, kw) = (x[2], x[3], w[2], w[3]);
    let pad = match m.get("padding") {
        Some(AttrValue::Str(s)) if s == "SAME" => {
            dil = vec![1, 1];
            let ([t, b], [l, r]) = (same_pads(h, kh, stride[0]), same_pads(wd, kw, stride[1]));
            [t, b, l, r]
        }
        Some(AttrValue::Str(_)) => [0; 4],
        _ => {
            let p = attr_us(m, "padding");
            [p[0], p[1], p[2], p[3]]
        }
    };
    let out =
        |len: usize, p0: usize, p1: usize, k: usize, d: usize, s: usize| (len + p0 + p1 - (d * (k - 1) + 1)) / s + 1;
    Conv {
        n: x[0],
        c: x[1],
        h,
        w: wd,
        oc: w[0],
        kh,
        kw,
        oh: out(h, pad[0], pad[1], kh, dil[0], stride[0]),
        ow: out(wd, pad[2], pad[3], kw, dil[1], stride[1]),
        sh: stride[0],
        sw: stride[1],
        pt: pad[0],
        pl: pad[2],
        dh: dil[0],
        dw: dil[1],
        groups,
    }
}

fn conv_options(stride: [usize; 2], padding: AttrValue, dilation: [usize; 2], groups: usize) -> AttrMap {
    let mut m = AttrMap::new().with("stride", stride.to_vec());
    m.set("padding", padding);
    m.with("dilation", dilation.to_vec()).with("groups", groups).with("data_format", "NCHW".to_string())
}

fn pads(p: [usize; 4]) -> AttrValue {
    AttrValue::Ints(p.iter().map(|&v| v as i64).collect())
}

/// One conv2d case: a label, the input and weight shapes, a bias, the options.
type ConvCase = (&'static str, [usize; 4], [usize; 4], bool, AttrMap);

fn conv_specs() -> Vec<Spec> {
    let samples = |rng: &mut Rng| {
        let cases: Vec<ConvCase> = vec![
            (
                "3x3 pad 1 with bias",
                [2, 3, 6, 5],
                [4, 3, 3, 3],
                true,
                conv_options([1, 1], pads([1, 1, 1, 1]), [1, 1], 1),
            ),
            (
                "stride 2 dilation 2",
                [1, 2, 9, 8],
                [3, 2, 3, 2],
                false,
                conv_options([2, 2], pads([1, 2, 0, 1]), [2, 2], 1),
            ),
            ("groups 2", [2, 4, 5, 5], [6, 2, 3, 3], true, conv_options([1, 2], pads([0, 0, 1, 1]), [1, 1], 2)),
            ("depthwise", [1, 3, 4, 4], [3, 1, 2, 2], false, conv_options([1, 1], pads([0; 4]), [1, 1], 3)),
            ("SAME", [1, 2, 7, 6], [2, 2, 3, 3], false, conv_options([2, 2], AttrValue::Str("SAME".into()), [2, 2], 1)),
            ("1x1", [2, 5, 3, 3], [4, 5, 1, 1], true, conv_options([1, 1], pads([0; 4]), [1, 1], 1)),
            ("empty batch", [0, 2, 4, 4], [3, 2, 3, 3], false, conv_options([1, 1], pads([1; 4]), [1, 1], 1)),
        ];
        let mut out: Vec<Sample> = cases
            .into_iter()
            .map(|(label, xs, ws, bias, attrs)| {
                let mut inputs = vec![
                    data(vals(rng, numel(&xs), -1.0, 1.0, 0.0), &xs),
                    data(vals(rng, numel(&ws), -1.0, 1.0, 0.0), &ws),
                ];
                if bias {
                    inputs.push(data(vals(rng, ws[0], -1.0, 1.0, 0.0), &[ws[0]]));
                }
                sample(label, inputs, attrs)
            })
            .collect();
        let attrs = conv_options([2, 1], pads([1, 0, 0, 1]), [1, 1], 1);
        let g = vec![
            data(vals(rng, 32, -1.0, 1.0, 0.0), &[1, 2, 4, 4]),
            data(vals(rng, 16, -1.0, 1.0, 0.0), &[2, 2, 2, 2]),
            data(vals(rng, 2, -1.0, 1.0, 0.0), &[2]),
        ];
        out.push(sample("grad", g, attrs).with_grad());
        out
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| {
        let c = conv_geometry(&x[0].shape, &x[1].shape, m);
        let mut y = c.forward(&x[0], &x[1]);
        if let Some(b) = x.get(2) {
            let plane = c.oh * c.ow;
            for (i, v) in y.v.iter_mut().enumerate() {
                *v += b.v[(i / plane) % c.oc];
            }
        }
        vec![y]
    };
    let product = |name: &'static str| {
        let samples = move |rng: &mut Rng| {
            let cases = [
                Conv {
                    n: 2,
                    c: 4,
                    h: 5,
                    w: 4,
                    oc: 6,
                    kh: 3,
                    kw: 2,
                    oh: 3,
                    ow: 4,
                    sh: 1,
                    sw: 1,
                    pt: 0,
                    pl: 1,
                    dh: 1,
                    dw: 1,
                    groups: 2,
                },
                Conv {
                    n: 1,
                    c: 2,
                    h: 7,
                    w: 6,
                    oc: 3,
                    kh: 3,
                    kw: 3,
                    oh: 2,
                    ow: 3,
                    sh: 2,
                    sw: 2,
                    pt: 1,
                    pl: 0,
                    dh: 2,
                    dw: 1,
                    groups: 1,
                },
            ];
            cases
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    let shapes: [[usize; 4]; 2] = match name {
                        "conv2d_product" => [c.x_shape(), c.w_shape()],
                        "conv2d_grad_input" => [c.y_shape(), c.w_shape()],
                        _ => [c.x_shape(), c.y_shape()],
                    };
                    let inputs = shapes.iter().map(|s| data(vals(rng, numel(s), -1.0, 1.0, 0.0), s)).collect();
                    let s = sample(format!("geometry {k}"), inputs, conv_attrs(c));
                    if k == 1 { s.with_grad() } else { s }
                })
                .collect()
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let c = conv_of_attrs(m);
            vec![match name {
                "conv2d_product" => c.forward(&x[0], &x[1]),
                "conv2d_grad_input" => c.grad_input(&x[0], &x[1]),
                _ => c.grad_weight(&x[0], &x[1]),
            }]
        };
        spec(name, floats(), samples, reference).tol(20.0).grad()
    };
    vec![
        spec("conv2d", floats(), samples, reference).tol(20.0).grad().second(),
        product("conv2d_product"),
        product("conv2d_grad_input"),
        product("conv2d_grad_weight"),
        conv_epilogue_spec(),
    ]
}

/// `conv2d_epilogue`: the convolution (bias optional) followed by a chain — relu; a residual
/// add and relu; a per-channel scale and tanh — against the float64 convolution and the
/// chain rounded to the dtype after every op.
fn conv_epilogue_spec() -> Spec {
    // (label, x, w, bias, extra input's shape, program)
    type Case = (&'static str, [usize; 4], [usize; 4], bool, Option<Vec<usize>>, &'static str);
    let samples = |rng: &mut Rng| {
        let cases: Vec<Case> = vec![
            ("bias, relu", [2, 3, 6, 5], [4, 3, 3, 3], true, None, "x0 u.relu:0.0:0.0"),
            (
                "bias, residual add, relu",
                [1, 2, 5, 5],
                [3, 2, 3, 3],
                true,
                Some(vec![1, 3, 3, 3]),
                "x0 x1 b.add u.relu:0.0:0.0",
            ),
            (
                "channel scale, tanh",
                [2, 2, 4, 6],
                [5, 2, 1, 3],
                false,
                Some(vec![5, 1, 1]),
                "x0 x1 b.multiply u.tanh:0.0:0.0",
            ),
            ("empty batch", [0, 2, 4, 4], [3, 2, 3, 3], true, None, "x0 u.relu:0.0:0.0"),
        ];
        cases
            .into_iter()
            .map(|(label, xs, ws, bias, extra, program)| {
                let mut inputs = vec![
                    data(vals(rng, numel(&xs), -1.0, 1.0, 0.0), &xs),
                    data(vals(rng, numel(&ws), -1.0, 1.0, 0.0), &ws),
                ];
                if bias {
                    inputs.push(data(vals(rng, ws[0], -1.0, 1.0, 0.0), &[ws[0]]));
                }
                if let Some(e) = extra {
                    inputs.push(data(vals(rng, numel(&e), -1.0, 1.0, 0.0), &e));
                }
                let attrs = conv_options([1, 1], pads([0; 4]), [1, 1], 1).with("program", program.to_string());
                sample(label, inputs, attrs)
            })
            .collect()
    };
    let reference = |x: &[Host], m: &AttrMap, d: DType| {
        let r = |v: f64| refs::held_as(v, d);
        let program = match m.get("program") {
            Some(AttrValue::Str(s)) => s.clone(),
            _ => String::new(),
        };
        let extras = usize::from(program.contains("x1"));
        let bias = x.len() == 3 + extras;
        let c = conv_geometry(&x[0].shape, &x[1].shape, m);
        let mut y = c.forward(&x[0], &x[1]);
        if bias {
            let plane = c.oh * c.ow;
            for (i, v) in y.v.iter_mut().enumerate() {
                *v += x[2].v[(i / plane) % c.oc];
            }
        }
        let y = Host { v: y.v.iter().map(|&v| r(v)).collect(), shape: y.shape };
        let relu = |s: f64| if s > 0.0 || s.is_nan() { s } else { 0.0 };
        vec![match program.as_str() {
            "x0 u.relu:0.0:0.0" => Host { v: y.v.iter().map(|&v| relu(v)).collect(), shape: y.shape.clone() },
            "x0 x1 b.add u.relu:0.0:0.0" => zip_n(&[&y, &x[x.len() - 1]], |v| relu(r(v[0] + v[1]))),
            _ => zip_n(&[&y, &x[x.len() - 1]], |v| r(r(v[0] * v[1]).tanh())),
        }]
    };
    spec("conv2d_epilogue", vec![F32, F64], samples, reference).tol(20.0)
}

/// Pooling geometry worked out here: `(out, [pt, pb, pl, pr], kernel, stride)` for a window op.
fn pool_geometry(x: &[usize], m: &AttrMap) -> ([usize; 2], [usize; 4], [usize; 2], [usize; 2]) {
    let k = attr_us(m, "kernel_size");
    let s = match m.get("stride") {
        Some(AttrValue::None) | None => k.clone(),
        _ => attr_us(m, "stride"),
    };
    let (h, w) = (x[2], x[3]);
    let p = match m.get("padding") {
        Some(AttrValue::Str(v)) if v == "SAME" => {
            let ([t, b], [l, r]) = (same_pads(h, k[0], s[0]), same_pads(w, k[1], s[1]));
            [t, b, l, r]
        }
        Some(AttrValue::Str(_)) => [0; 4],
        _ => {
            let v = attr_us(m, "padding");
            [v[0], v[1], v[2], v[3]]
        }
    };
    let ceil = attr_b(m, "ceil_mode");
    let out =
        [refs::pool_windows(h, p[0], p[1], k[0], s[0], ceil), refs::pool_windows(w, p[2], p[3], k[1], s[1], ceil)];
    (out, p, [k[0], k[1]], [s[0], s[1]])
}

/// Max or average pooling by the window functions of `refs`, over every plane: the values
/// and (max) each window's argmax as a position in its plane — the first maximum in the
/// window's row-major order, a NaN beating every number and the first NaN winning (padding
/// is never a candidate).
#[allow(clippy::too_many_arguments)]
fn pool_ref(
    x: &Host,
    o: [usize; 2],
    p: [usize; 4],
    k: [usize; 2],
    s: [usize; 2],
    adaptive: bool,
    exclusive: bool,
    max: bool,
) -> (Host, Host) {
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let shape = vec![n, c, o[0], o[1]];
    let (v, at): (Vec<f64>, Vec<f64>) = (0..numel(&shape))
        .map(|i| {
            let idx = unravel(i, &shape);
            let (rows, rc) = refs::pool_window(idx[2], h, o[0], k[0], s[0], p[0], p[1], adaptive, exclusive);
            let (cols, cc) = refs::pool_window(idx[3], w, o[1], k[1], s[1], p[2], p[3], adaptive, exclusive);
            let plane = &x.v[(idx[0] * c + idx[1]) * h * w..][..h * w];
            let cells: Vec<usize> = rows.iter().flat_map(|&r| cols.iter().map(move |&q| r * w + q)).collect();
            if !max {
                return (cells.iter().map(|&j| plane[j]).sum::<f64>() / (rc * cc) as f64, 0.0);
            }
            let mut best = cells[0];
            for &j in &cells[1..] {
                let (v, b) = (plane[j], plane[best]);
                if v > b || (v.is_nan() && !b.is_nan()) {
                    best = j;
                }
            }
            (plane[best], best as f64)
        })
        .unzip();
    (Host { v, shape: shape.clone() }, Host { v: at, shape })
}

/// Values from a small set (so windows tie often and hold several NaNs, infinities and
/// zeros of both signs), the first plane all ones.
fn pool_specials(rng: &mut Rng, shape: &[usize]) -> Vec<f64> {
    let set = [-1.0, -0.0, 0.0, 1.0, 2.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    let plane = shape[2] * shape[3];
    (0..numel(shape)).map(|i| if i < plane { 1.0 } else { set[(rng.next_u64() % 8) as usize] }).collect()
}

/// Distinct values at least 0.05 apart, shuffled: no near-ties for max pooling's gradient.
fn distinct(rng: &mut Rng, n: usize) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 * 0.05 - 1.0).collect();
    for i in (1..n).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    v
}

/// Max pooling's outputs: the values (the dtype under test) and the argmax (int32).
fn max_pool_dtypes(d: DType, _: &AttrMap, i: usize) -> DType {
    if i == 1 { I32 } else { d }
}

fn pool_options(k: [usize; 2], stride: Option<[usize; 2]>, padding: AttrValue, ceil: bool, exclusive: bool) -> AttrMap {
    let mut m = AttrMap::new().with("kernel_size", k.to_vec()).with("stride", stride.map(|s| s.to_vec()));
    m.set("padding", padding);
    m.with("ceil_mode", ceil).with("exclusive", exclusive).with("data_format", "NCHW".to_string())
}

/// A pooling geometry as the primitives' attributes.
fn pool_geom_attrs(
    x: [usize; 4],
    o: [usize; 2],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 4],
    adaptive: bool,
    exclusive: bool,
) -> AttrMap {
    [
        ("n", x[0]),
        ("c", x[1]),
        ("h", x[2]),
        ("w", x[3]),
        ("oh", o[0]),
        ("ow", o[1]),
        ("kh", k[0]),
        ("kw", k[1]),
        ("sh", s[0]),
        ("sw", s[1]),
        ("pt", p[0]),
        ("pl", p[2]),
        ("pb", p[1]),
        ("pr", p[3]),
    ]
    .into_iter()
    .fold(AttrMap::new(), |m, (key, v)| m.with(key, v))
    .with("adaptive", adaptive)
    .with("exclusive", exclusive)
}

/// One pooling primitive's case: input shape, output size, kernel, stride, padding
/// `[pt, pb, pl, pr]`, adaptive, exclusive.
type PoolCase = ([usize; 4], [usize; 2], [usize; 2], [usize; 2], [usize; 4], bool, bool);

fn pool_specs() -> Vec<Spec> {
    let window_cases = || {
        vec![
            ("2x2", pool_options([2, 2], None, pads([0; 4]), false, true)),
            ("3x3 stride 2 pad 1", pool_options([3, 3], Some([2, 2]), pads([1, 1, 1, 1]), false, true)),
            ("3x3 stride 2 pad 1 ceil", pool_options([3, 3], Some([2, 2]), pads([1, 1, 1, 1]), true, true)),
            // Height 7: ceil's last window would start in the trailing padding, so it is not one.
            ("2x2 stride 3 pad 1 ceil", pool_options([2, 2], Some([3, 3]), pads([1, 1, 1, 1]), true, true)),
            ("VALID", pool_options([3, 3], Some([2, 2]), AttrValue::Str("VALID".into()), false, true)),
            ("non-exclusive ceil", pool_options([3, 2], Some([2, 2]), pads([1, 0, 1, 0]), true, false)),
            ("non-exclusive asymmetric", pool_options([2, 3], Some([1, 2]), pads([0, 1, 1, 1]), false, false)),
            ("SAME", pool_options([3, 3], Some([2, 2]), AttrValue::Str("SAME".into()), false, true)),
        ]
    };
    let window = |name: &'static str, max: bool| {
        let samples = move |rng: &mut Rng| {
            let mut out: Vec<Sample> = window_cases()
                .into_iter()
                .map(|(label, m)| sample(label, vec![data(vals(rng, 2 * 3 * 7 * 6, -3.0, 3.0, 0.0), &[2, 3, 7, 6])], m))
                .collect();
            // 2x2 windows over odd planes: the last row and column left out, or with ceil_mode
            // pooled in clipped windows.
            for shape in [[2usize, 3, 5, 7], [2, 3, 9, 2]] {
                for ceil in [false, true] {
                    let m = pool_options([2, 2], None, pads([0; 4]), ceil, true);
                    let x = data(pool_specials(rng, &shape), &shape);
                    out.push(sample(format!("special values {shape:?} ceil {ceil}"), vec![x], m).floats_only());
                }
            }
            let m = pool_options([2, 2], None, pads([0; 4]), false, true);
            out.push(sample("empty batch", vec![data(vec![], &[0, 2, 4, 4])], m).with_grad());
            let m = pool_options([2, 2], Some([2, 1]), pads([1, 0, 0, 1]), true, false);
            out.push(sample("grad, non-exclusive ceil", vec![data(distinct(rng, 40), &[1, 2, 5, 4])], m).with_grad());
            let m = pool_options([3, 3], Some([2, 2]), pads([1, 1, 1, 1]), false, true);
            out.push(sample("grad, exclusive padded", vec![data(distinct(rng, 60), &[1, 2, 5, 6])], m).with_grad());
            out
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let (o, p, k, s) = pool_geometry(&x[0].shape, m);
            let (y, at) = pool_ref(&x[0], o, p, k, s, false, attr_b(m, "exclusive") || max, max);
            if max { vec![y, at] } else { vec![y] }
        };
        let s = spec(name, floats(), samples, reference).tol(4.0).grad().second();
        if max { s.check_aux().out(max_pool_dtypes) } else { s }
    };
    let adaptive = |name: &'static str, max: bool| {
        let samples = |rng: &mut Rng| {
            let mut out: Vec<Sample> = [[1usize, 1], [3, 2], [5, 7]]
                .into_iter()
                .map(|o| {
                    let x = data(vals(rng, 2 * 2 * 7 * 5, -3.0, 3.0, 0.0), &[2, 2, 7, 5]);
                    sample(format!("to {o:?}"), vec![x], AttrMap::new().with("output_size", o.to_vec()))
                })
                .collect();
            let to = |o: [usize; 2]| AttrMap::new().with("output_size", o.to_vec());
            let x = data(pool_specials(rng, &[2, 3, 5, 7]), &[2, 3, 5, 7]);
            out.push(sample("special values", vec![x], to([3, 4])).floats_only());
            out.push(sample("empty batch", vec![data(vec![], &[0, 2, 4, 4])], to([2, 2])));
            for (x, o) in [([1usize, 1, 5, 6], [2usize, 4]), ([1, 1, 3, 2], [5, 4]), ([1, 2, 3, 3], [1, 1])] {
                let v = data(distinct(rng, numel(&x)), &x);
                out.push(sample(format!("grad {x:?} to {o:?}"), vec![v], to(o)).with_grad());
            }
            out
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let o = attr_us(m, "output_size");
            let (y, at) = pool_ref(&x[0], [o[0], o[1]], [0; 4], [0, 0], [1, 1], true, true, max);
            if max { vec![y, at] } else { vec![y] }
        };
        let s = spec(name, floats(), samples, reference).tol(4.0).grad().second();
        if max { s.check_aux().out(max_pool_dtypes) } else { s }
    };
    let primitive = |name: &'static str| {
        let samples = move |rng: &mut Rng| {
            // Padded windows, overlapping non-exclusive ones, adaptive bins, windows tiling
            // the input (the max gradient's `max_bwd_tiles` entry), upsampling adaptive bins.
            let cases: [PoolCase; 5] = [
                ([2, 2, 6, 5], [3, 3], [2, 2], [2, 2], [0, 1, 1, 0], false, true),
                ([1, 2, 5, 5], [3, 2], [3, 3], [2, 2], [1, 1, 1, 1], false, false),
                ([1, 1, 7, 4], [3, 3], [0, 0], [1, 1], [0; 4], true, true),
                ([2, 2, 6, 4], [3, 2], [2, 2], [2, 2], [0; 4], false, true),
                ([1, 2, 3, 2], [5, 4], [0, 0], [1, 1], [0; 4], true, true),
            ];
            cases
                .iter()
                .enumerate()
                .map(|(i, &(x, o, k, s, p, ad, ex))| {
                    let attrs = pool_geom_attrs(x, o, k, s, p, ad, ex);
                    let outs = [x[0], x[1], o[0], o[1]];
                    let idx = |rng: &mut Rng| {
                        // A valid argmax: some in-window position of each output.
                        let v: Vec<f64> = (0..numel(&outs))
                            .map(|j| {
                                let u = unravel(j, &outs);
                                let (rows, _) = refs::pool_window(u[2], x[2], o[0], k[0], s[0], p[0], p[1], ad, ex);
                                let (cols, _) = refs::pool_window(u[3], x[3], o[1], k[1], s[1], p[2], p[3], ad, ex);
                                let r = rows[(rng.next_u64() as usize) % rows.len()];
                                let q = cols[(rng.next_u64() as usize) % cols.len()];
                                (r * x[3] + q) as f64
                            })
                            .collect();
                        fixed(v, &outs, I32)
                    };
                    let inputs = match name {
                        "pool2d_avg" => vec![data(vals(rng, numel(&x), -2.0, 2.0, 0.0), &x)],
                        "pool2d_avg_grad" => vec![data(vals(rng, numel(&outs), -2.0, 2.0, 0.0), &outs)],
                        "pool2d_max_grad" => vec![data(vals(rng, numel(&outs), -2.0, 2.0, 0.0), &outs), idx(rng)],
                        _ => vec![data(vals(rng, numel(&x), -2.0, 2.0, 0.0), &x), idx(rng)],
                    };
                    let s = sample(format!("geometry {i}"), inputs, attrs);
                    if i == 1 { s.with_grad() } else { s }
                })
                .collect()
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let g = |k: &str| m.field::<usize>("sweep", k).unwrap();
            let (n, c, h, w, oh, ow) = (g("n"), g("c"), g("h"), g("w"), g("oh"), g("ow"));
            let (k, s, p) = ([g("kh"), g("kw")], [g("sh"), g("sw")], [g("pt"), g("pb"), g("pl"), g("pr")]);
            let (ad, ex) = (attr_b(m, "adaptive"), attr_b(m, "exclusive"));
            let (in_shape, out_shape) = (vec![n, c, h, w], vec![n, c, oh, ow]);
            match name {
                "pool2d_avg" => vec![pool_ref(&x[0], [oh, ow], p, k, s, ad, ex, false).0],
                "pool2d_avg_grad" => {
                    let mut v = vec![0.0; numel(&in_shape)];
                    for j in 0..numel(&out_shape) {
                        let u = unravel(j, &out_shape);
                        let (rows, rc) = refs::pool_window(u[2], h, oh, k[0], s[0], p[0], p[1], ad, ex);
                        let (cols, cc) = refs::pool_window(u[3], w, ow, k[1], s[1], p[2], p[3], ad, ex);
                        for &r in &rows {
                            for &q in &cols {
                                v[(u[0] * c + u[1]) * h * w + r * w + q] += x[0].v[j] / (rc * cc) as f64;
                            }
                        }
                    }
                    vec![Host { v, shape: in_shape }]
                }
                "pool2d_max_grad" => {
                    let mut v = vec![0.0; numel(&in_shape)];
                    for j in 0..numel(&out_shape) {
                        v[(j / (oh * ow)) * h * w + x[1].v[j] as usize] += x[0].v[j];
                    }
                    vec![Host { v, shape: in_shape }]
                }
                _ => {
                    let v =
                        (0..numel(&out_shape)).map(|j| x[0].v[(j / (oh * ow)) * h * w + x[1].v[j] as usize]).collect();
                    vec![Host { v, shape: out_shape }]
                }
            }
        };
        spec(name, floats(), samples, reference).tol(4.0).grad()
    };
    vec![
        window("max_pool2d", true),
        window("avg_pool2d", false),
        adaptive("adaptive_max_pool2d", true),
        adaptive("adaptive_avg_pool2d", false),
        primitive("pool2d_avg"),
        primitive("pool2d_avg_grad"),
        primitive("pool2d_max_grad"),
        primitive("pool2d_gather"),
    ]
}

// ---------------------------------------------------------------------------------------
// Normalisation, dropout.

/// Row statistics `(mean, rstd)` of `x` viewed as rows of `d`.
fn row_stats(x: &[f64], d: usize, eps: f64) -> (Vec<f64>, Vec<f64>) {
    x.chunks(d.max(1))
        .map(|r| {
            let mu = r.iter().sum::<f64>() / d as f64;
            let var = r.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / d as f64;
            (mu, 1.0 / (var + eps).sqrt())
        })
        .unzip()
}

/// Per-channel `(mean, biased var)` of NC... `x`.
fn channel_stats(x: &Host) -> (Vec<f64>, Vec<f64>) {
    let c = x.shape[1];
    let axes: Vec<usize> = (0..x.shape.len()).filter(|&a| a != 1).collect();
    let mean = reduce(x, &axes, false, |g| g.iter().sum::<f64>() / g.len() as f64).v;
    let mut var = vec![0.0; c];
    let mut count = vec![0usize; c];
    for (i, &v) in x.v.iter().enumerate() {
        let ch = unravel(i, &x.shape)[1];
        var[ch] += (v - mean[ch]) * (v - mean[ch]);
        count[ch] += 1;
    }
    (mean, var.iter().zip(count).map(|(v, n)| v / n as f64).collect())
}

fn channel_of(i: usize, shape: &[usize]) -> usize {
    unravel(i, shape)[1]
}

fn norm_specs() -> Vec<Spec> {
    let eps = 1e-5;
    let ln = {
        let attrs = |ns: &[usize], eps: f64, w: bool, b: bool| {
            AttrMap::new()
                .with("normalized_shape", ns.to_vec())
                .with("epsilon", eps)
                .with("has_weight", w)
                .with("has_bias", b)
        };
        let inputs = |rng: &mut Rng, shape: &[usize], ns: &[usize], w: bool, b: bool| {
            let d = numel(ns);
            let mut inputs = vec![data(vals(rng, numel(shape), -2.0, 2.0, 0.0), shape)];
            if w {
                inputs.push(data(vals(rng, d, 0.5, 1.5, 0.0), ns));
            }
            if b {
                inputs.push(data(vals(rng, d, -1.0, 1.0, 0.0), &[d]));
            }
            inputs
        };
        let samples = move |rng: &mut Rng| {
            let mut out = Vec::new();
            // Short rows (one invocation each on the GPU), rows held in registers (up to 1,024,
            // the last slice partial or full), looped over (1,300), 260 rows of 33 (one
            // invocation each on a software adapter, a workgroup each on hardware).
            type Case = (&'static [usize], &'static [usize], bool, bool, f64);
            let cases: [Case; 9] = [
                (&[2, 3, 4], &[4], true, true, 1e-5),
                (&[3, 40], &[40], false, true, 1e-5),
                (&[2, 2, 3], &[2, 3], true, false, 1e-5),
                (&[4, 6, 10], &[6, 10], false, false, 1e-3),
                (&[8, 300], &[300], true, true, 1e-5),
                (&[3, 1024], &[1024], true, false, 1e-5),
                (&[2, 1300], &[1300], true, true, 1e-5),
                (&[260, 33], &[33], true, true, 1e-5),
                (&[3, 2, 5], &[3, 2, 5], false, true, 0.1),
            ];
            for (shape, ns, w, b, eps) in cases {
                let label = format!("{shape:?} over {ns:?} w={w} b={b} eps {eps}");
                out.push(sample(label, inputs(rng, shape, ns, w, b), attrs(ns, eps, w, b)));
            }
            // A constant row: variance 0, so epsilon alone scales it.
            let mut x = inputs(rng, &[3, 5], &[5], true, true);
            x[0].values[5..10].fill(1.25);
            out.push(sample("a constant row", x, attrs(&[5], 1e-3, true, true)));
            // A float16 input with a float32 weight.
            let x =
                vec![data(vals(rng, 160, -2.0, 2.0, 0.0), &[4, 40]), fixed(vals(rng, 40, 0.5, 1.5, 0.0), &[40], F32)];
            out.push(sample("float32 weight", x, attrs(&[40], 1e-5, true, false)).only(&[F16, BF16]));
            for (shape, ns, w, b, eps) in [
                (&[2usize, 3][..], &[3usize][..], true, true, 1e-5),
                (&[2, 3], &[3], true, false, 1e-5),
                (&[3, 4], &[4], false, false, 1e-3),
                (&[2, 2, 3], &[2, 3], true, true, 1e-5),
            ] {
                let label = format!("grad {shape:?} over {ns:?} w={w} b={b}");
                out.push(sample(label, inputs(rng, shape, ns, w, b), attrs(ns, eps, w, b)).with_grad());
            }
            out
        };
        let reference = move |x: &[Host], m: &AttrMap, _: DType| {
            let d = numel(&attr_us(m, "normalized_shape"));
            let (hw, hb) = (attr_b(m, "has_weight"), attr_b(m, "has_bias"));
            let w = hw.then(|| &x[1]);
            let b = hb.then(|| &x[1 + hw as usize]);
            let (mean, rstd) = row_stats(&x[0].v, d, attr_f(m, "epsilon"));
            let v = x[0].v.iter().enumerate().map(|(i, &v)| {
                let (r, j) = (i / d, i % d);
                (v - mean[r]) * rstd[r] * w.map_or(1.0, |w| w.v[j]) + b.map_or(0.0, |b| b.v[j])
            });
            vec![Host { v: v.collect(), shape: x[0].shape.clone() }]
        };
        spec("layer_norm", floats(), samples, reference).tol(20.0).grad().second()
    };
    let grad_attrs = |extra: AttrMap, w: bool, need: [bool; 3]| {
        extra.with("has_weight", w).with("need_x", need[0]).with("need_weight", need[1]).with("need_bias", need[2])
    };
    let ln_grad = {
        let samples = move |rng: &mut Rng| {
            let mut out = Vec::new();
            // Short rows, many rows (chunked weight and bias gradients), rows looped over
            // (1,300), held in registers (1,024), one invocation or a workgroup each (260 of 33).
            for (rows, d, w, need) in [
                (4usize, 5usize, true, [true, true, true]),
                (3, 40, false, [true, false, true]),
                (2, 3, true, [false, true, false]),
                (200, 40, true, [true, true, true]),
                (2, 1300, true, [true, true, true]),
                (3, 1024, false, [true, false, true]),
                (260, 33, true, [true, true, true]),
            ] {
                let x = vals(rng, rows * d, -2.0, 2.0, 0.0);
                let (mean, rstd) = row_stats(&x, d, eps);
                let mut inputs = vec![
                    data(x, &[rows, d]),
                    data(vals(rng, rows * d, -1.0, 1.0, 0.0), &[rows, d]),
                    data(mean, &[rows]),
                    data(rstd, &[rows]),
                ];
                if w {
                    inputs.push(data(vals(rng, d, 0.5, 1.5, 0.0), &[d]));
                }
                out.push(sample(
                    format!("{rows}x{d} w={w} need {need:?}"),
                    inputs,
                    grad_attrs(AttrMap::new(), w, need),
                ));
            }
            out
        };
        let reference = |x: &[Host], m: &AttrMap, _: DType| {
            let (rows, d) = (x[2].v.len(), x[0].shape[1]);
            let w = attr_b(m, "has_weight").then(|| &x[4]);
            let need = [attr_b(m, "need_x"), attr_b(m, "need_weight"), attr_b(m, "need_bias")];
            let xhat = |r: usize, j: usize| (x[0].v[r * d + j] - x[2].v[r]) * x[3].v[r];
            let gw = |r: usize, j: usize| x[1].v[r * d + j] * w.map_or(1.0, |w| w.v[j]);
            let mut dx = vec![0.0; rows * d];
            for r in 0..rows {
                let a = (0..d).map(|j| gw(r, j)).sum::<f64>() / d as f64;
                let c = (0..d).map(|j| gw(r, j) * xhat(r, j)).sum::<f64>() / d as f64;
                for j in 0..d {
                    dx[r * d + j] = x[3].v[r] * (gw(r, j) - a - xhat(r, j) * c);
                }
            }
            let dw = (0..d).map(|j| (0..rows).map(|r| x[1].v[r * d + j] * xhat(r, j)).sum()).collect();
            let db = (0..d).map(|j| (0..rows).map(|r| x[1].v[r * d + j]).sum()).collect();
            let pick =
                |n: bool, v: Vec<f64>, shape: &[usize]| if n { Host::new(v, shape) } else { Host::new(vec![], &[0]) };
            vec![pick(need[0], dx, &[rows, d]), pick(need[1], dw, &[d]), pick(need[2], db, &[d])]
        };
        spec("layer_norm_grad", floats(), samples, reference).tol(20.0)
    };
    let bn_stats = {
        let samples = |rng: &mut Rng| {
            [vec![4usize, 3], vec![2, 3, 5], vec![3, 2, 4, 4], vec![2, 2, 2, 3, 2], vec![2, 3, 20, 20], vec![1, 2, 600]]
                .into_iter()
                .map(|shape| {
                    sample(
                        format!("{shape:?}"),
                        vec![data(vals(rng, numel(&shape), -2.0, 2.0, 0.0), &shape)],
                        AttrMap::new().with("epsilon", 1e-5),
                    )
                })
                .collect()
        };
        let reference = move |x: &[Host], _: &AttrMap, _: DType| {
            let (mean, var) = channel_stats(&x[0]);
            let c = mean.len();
            let rstd = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
            vec![Host::new(mean, &[c]), Host::new(var, &[c]), Host::new(rstd, &[c])]
        };
        spec("batch_norm_stats", floats(), samples, reference).tol(20.0)
    };
    let bn = {
        let samples = |rng: &mut Rng| {
            let mut out = Vec::new();
            for (shape, w, b, batch) in [
                (vec![4usize, 3], true, true, true),
                (vec![2, 3, 4, 4], true, false, false),
                (vec![2, 2, 5], false, true, true),
                (vec![2, 3, 20, 20], true, true, true),
                (vec![1, 2, 600], false, false, false),
            ] {
                let c = shape[1];
                let mut inputs = vec![
                    data(vals(rng, numel(&shape), -2.0, 2.0, 0.0), &shape),
                    data(vals(rng, c, -1.0, 1.0, 0.0), &[c]),
                    data(vals(rng, c, 0.5, 2.0, 0.0), &[c]),
                ];
                if w {
                    inputs.push(data(vals(rng, c, 0.5, 1.5, 0.0), &[c]));
                }
                if b {
                    inputs.push(data(vals(rng, c, -1.0, 1.0, 0.0), &[c]));
                }
                let attrs = AttrMap::new()
                    .with("batch_stats", batch)
                    .with("epsilon", 1e-5)
                    .with("has_weight", w)
                    .with("has_bias", b);
                out.push(sample(format!("{shape:?} w={w} b={b} batch={batch}"), inputs, attrs));
            }
            // With fixed statistics the mean and rstd are constants of the gradient.
            let attrs = AttrMap::new()
                .with("batch_stats", false)
                .with("epsilon", 1e-5)
                .with("has_weight", true)
                .with("has_bias", true);
            let inputs = vec![
                data(vals(rng, 12, -2.0, 2.0, 0.0), &[2, 3, 2]),
                data(vals(rng, 3, -1.0, 1.0, 0.0), &[3]),
                data(vals(rng, 3, 0.5, 2.0, 0.0), &[3]),
                data(vals(rng, 3, 0.5, 1.5, 0.0), &[3]),
                data(vals(rng, 3, -1.0, 1.0, 0.0), &[3]),
            ];
            out.push(sample("grad, fixed statistics", inputs, attrs).with_grad().constant(&[1, 2]));
            let attrs = AttrMap::new()
                .with("batch_stats", false)
                .with("epsilon", 1e-5)
                .with("has_weight", false)
                .with("has_bias", false);
            let inputs = vec![
                data(vals(rng, 12, -2.0, 2.0, 0.0), &[3, 2, 2]),
                data(vals(rng, 2, -1.0, 1.0, 0.0), &[2]),
                data(vals(rng, 2, 0.5, 2.0, 0.0), &[2]),
            ];
            out.push(sample("grad, no affine", inputs, attrs).with_grad().constant(&[1, 2]));
            out
        };
        let reference = |x: &[Host], m: &AttrMap, _: DType| {
            let (hw, hb) = (attr_b(m, "has_weight"), attr_b(m, "has_bias"));
            let w = hw.then(|| &x[3]);
            let b = hb.then(|| &x[3 + hw as usize]);
            let v = x[0].v.iter().enumerate().map(|(i, &v)| {
                let ch = channel_of(i, &x[0].shape);
                (v - x[1].v[ch]) * x[2].v[ch] * w.map_or(1.0, |w| w.v[ch]) + b.map_or(0.0, |b| b.v[ch])
            });
            vec![Host { v: v.collect(), shape: x[0].shape.clone() }]
        };
        spec("batch_norm", floats(), samples, reference).tol(20.0).grad().second()
    };
    let bn_grad = {
        let samples = move |rng: &mut Rng| {
            let mut out = Vec::new();
            for (shape, w, batch, need) in [
                (vec![4usize, 3], true, true, [true, true, true]),
                (vec![2, 3, 4, 4], false, false, [true, false, true]),
                (vec![3, 2, 5], true, true, [false, true, false]),
                (vec![2, 3, 20, 20], true, true, [true, true, true]),
                (vec![1, 2, 600], false, true, [true, false, true]),
            ] {
                let c = shape[1];
                let x = Host::new(vals(rng, numel(&shape), -2.0, 2.0, 0.0), &shape);
                let (mean, var) = channel_stats(&x);
                let rstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
                let mut inputs = vec![
                    data(x.v.clone(), &shape),
                    data(vals(rng, numel(&shape), -1.0, 1.0, 0.0), &shape),
                    data(mean, &[c]),
                    data(rstd, &[c]),
                ];
                if w {
                    inputs.push(data(vals(rng, c, 0.5, 1.5, 0.0), &[c]));
                }
                out.push(sample(
                    format!("{shape:?} w={w} batch={batch} need {need:?}"),
                    inputs,
                    grad_attrs(AttrMap::new().with("batch_stats", batch), w, need),
                ));
            }
            out
        };
        let reference = |x: &[Host], m: &AttrMap, _: DType| {
            let (shape, c) = (&x[0].shape, x[0].shape[1]);
            let w = attr_b(m, "has_weight").then(|| &x[4]);
            let need = [attr_b(m, "need_x"), attr_b(m, "need_weight"), attr_b(m, "need_bias")];
            let batch = attr_b(m, "batch_stats");
            let count = (x[0].v.len() / c) as f64;
            let xhat = |i: usize| {
                let ch = channel_of(i, shape);
                (x[0].v[i] - x[2].v[ch]) * x[3].v[ch]
            };
            let (mut sg, mut sgx) = (vec![0.0; c], vec![0.0; c]);
            for i in 0..x[0].v.len() {
                let ch = channel_of(i, shape);
                sg[ch] += x[1].v[i];
                sgx[ch] += x[1].v[i] * xhat(i);
            }
            let dx = (0..x[0].v.len())
                .map(|i| {
                    let ch = channel_of(i, shape);
                    let k = x[3].v[ch] * w.map_or(1.0, |w| w.v[ch]);
                    if batch { k * (x[1].v[i] - sg[ch] / count - xhat(i) * sgx[ch] / count) } else { k * x[1].v[i] }
                })
                .collect();
            let pick = |n: bool, v: Vec<f64>, s: &[usize]| if n { Host::new(v, s) } else { Host::new(vec![], &[0]) };
            vec![pick(need[0], dx, shape), pick(need[1], sgx, &[c]), pick(need[2], sg, &[c])]
        };
        spec("batch_norm_grad", floats(), samples, reference).tol(20.0)
    };
    let dropout = Spec {
        name: "dropout",
        dtypes: floats(),
        samples: Box::new(|rng: &mut Rng| {
            let mut out = Vec::new();
            for (p, mode) in [(0.5, "upscale_in_train"), (0.2, "downscale_in_infer"), (1.0, "upscale_in_train")] {
                let attrs = AttrMap::new().with("p", p).with("training", true).with("mode", mode.to_string());
                out.push(sample(
                    format!("p {p} {mode}"),
                    vec![data(vals(rng, 2000, -2.0, 2.0, 0.1), &[40, 50])],
                    attrs,
                ));
            }
            out.push(
                sample(
                    "grad",
                    vec![data(vals(rng, 6, -2.0, 2.0, 0.1), &[6])],
                    AttrMap::new().with("p", 0.0).with("training", true).with("mode", "upscale_in_train".to_string()),
                )
                .with_grad(),
            );
            out
        }),
        reference: Reference::Random,
        tol: 1.0,
        gradcheck: true,
        second_order: false,
        out_dtype: same_dtype,
        exact: false,
        check_aux: false,
    };
    vec![ln, ln_grad, bn_stats, bn, bn_grad, dropout]
}

// ---------------------------------------------------------------------------------------
// Optimizer updates (in place: the updated parameter and states are the outputs).

/// An update op's spec: one parameter of each of `sizes` (several for the merged ops,
/// whose inputs are `[param, grad, states...]` per parameter, then the optional schedule).
fn update_spec(
    name: &'static str,
    sizes: &'static [usize],
    states: usize,
    attrs: fn() -> Vec<AttrMap>,
    step: fn(&AttrMap, f64, f64, &mut [f64]) -> f64,
) -> Spec {
    let rule = name.trim_start_matches("merged_");
    let per = 2 + states;
    // Each case runs plain, and with a schedule input `[lr, beta1_pow, beta2_pow]` (static
    // `minimize`'s form: `lr` becomes a multiplier, the β powers come from the tensor).
    let samples = move |rng: &mut Rng| {
        let mut out = Vec::new();
        for (k, a) in attrs().into_iter().enumerate() {
            // Plain, scheduled, and gated (a fourth schedule element: 0 runs, 1 skips).
            for schedule in [None, Some(None), Some(Some(0.0)), Some(Some(1.0))] {
                let mut inputs = Vec::new();
                for &n in sizes {
                    inputs.extend([data(vals(rng, n, -2.0, 2.0, 0.0), &[n]), data(vals(rng, n, -1.0, 1.0, 0.0), &[n])]);
                    for s in 0..states {
                        // Squared averages, accumulators and norms are non-negative.
                        let non_negative = matches!((rule, s), ("rmsprop", 0) | ("adam" | "adamax" | "lamb", 1))
                            || matches!(rule, "adagrad" | "adadelta");
                        let lo = if non_negative { 0.5 } else { -0.5 };
                        inputs.push(data(vals(rng, n, lo, 1.0, 0.0), &[n]));
                    }
                }
                let label = match schedule {
                    None => format!("case {k} {a}"),
                    Some(None) => format!("case {k} scheduled {a}"),
                    Some(Some(skip)) => format!("case {k} gated skip={skip} {a}"),
                };
                if let Some(gate) = schedule {
                    let mut s = vec![1.5, 0.9f64.powi(5), 0.999f64.powi(5)];
                    s.extend(gate);
                    let n = s.len();
                    inputs.push(data(s, &[n]));
                }
                out.push(sample(label, inputs, a.clone()));
            }
        }
        out
    };
    let reference = move |x: &[Host], m: &AttrMap, _: DType| {
        let scheduled = x.len() % per == 1;
        if scheduled && x[x.len() - 1].v.get(3).is_some_and(|&skip| skip != 0.0) {
            // A skipped step leaves the parameters and states as they were.
            return x[..x.len() - 1].chunks_exact(per).flat_map(|c| [&c[0..1], &c[2..]].concat()).collect();
        }
        let m = &match scheduled {
            true => {
                let s = &x[x.len() - 1].v;
                m.clone().with("lr", attr_f(m, "lr") * s[0]).with("beta1_pow", s[1]).with("beta2_pow", s[2])
            }
            false => m.clone(),
        };
        // The updated parameter and states of each parameter in turn.
        let mut out = Vec::new();
        for x in x.chunks_exact(per) {
            let n = x[0].v.len();
            let mut p = x[0].v.clone();
            let mut st: Vec<Vec<f64>> = x[2..].iter().map(|h| h.v.clone()).collect();
            for i in 0..n {
                let mut s: Vec<f64> = st.iter().map(|v| v[i]).collect();
                p[i] = step(m, p[i], x[1].v[i], &mut s);
                for (j, v) in s.into_iter().enumerate() {
                    st[j][i] = v;
                }
            }
            out.push(Host::new(p, &[n]));
            out.extend(st.into_iter().map(|v| Host::new(v, &[n])));
        }
        out
    };
    spec(name, vec![F32, F64], samples, reference).tol(4.0)
}

/// The parameter sizes of the merged update specs: several workgroups' worth, a scalar and
/// a partial workgroup.
const MERGED_SIZES: &[usize] = &[300, 1, 7];

fn sgd_attrs() -> Vec<AttrMap> {
    vec![
        AttrMap::new().with("lr", 0.1).with("weight_decay", 0.0),
        AttrMap::new().with("lr", 0.05).with("weight_decay", 0.01),
    ]
}

fn sgd_step(m: &AttrMap, p: f64, g: f64, _: &mut [f64]) -> f64 {
    p - attr_f(m, "lr") * (g + attr_f(m, "weight_decay") * p)
}

fn momentum_attrs() -> Vec<AttrMap> {
    let a = |nesterov: bool| {
        AttrMap::new().with("lr", 0.1).with("weight_decay", 0.01).with("mu", 0.9).with("nesterov", nesterov)
    };
    vec![a(false), a(true)]
}

fn momentum_step(m: &AttrMap, p: f64, g: f64, s: &mut [f64]) -> f64 {
    let (lr, mu) = (attr_f(m, "lr"), attr_f(m, "mu"));
    let g = g + attr_f(m, "weight_decay") * p;
    s[0] = mu * s[0] + g;
    if attr_b(m, "nesterov") { p - lr * (g + mu * s[0]) } else { p - lr * s[0] }
}

fn adam_attrs() -> Vec<AttrMap> {
    let a = |wd: f64, dwd: f64| {
        AttrMap::new()
            .with("lr", 0.01)
            .with("weight_decay", wd)
            .with("beta1", 0.9)
            .with("beta2", 0.999)
            .with("epsilon", 1e-8)
            .with("beta1_pow", 0.9f64.powi(3))
            .with("beta2_pow", 0.999f64.powi(3))
            .with("decoupled_weight_decay", dwd)
    };
    vec![a(0.0, 0.0), a(0.01, 0.0), a(0.0, 0.01)]
}

fn adam_step(m: &AttrMap, p: f64, g: f64, s: &mut [f64]) -> f64 {
    let (lr, b1, b2, eps) = (attr_f(m, "lr"), attr_f(m, "beta1"), attr_f(m, "beta2"), attr_f(m, "epsilon"));
    let p = p * (1.0 - lr * attr_f(m, "decoupled_weight_decay"));
    let g = g + attr_f(m, "weight_decay") * p;
    s[0] = b1 * s[0] + (1.0 - b1) * g;
    s[1] = b2 * s[1] + (1.0 - b2) * g * g;
    let m_hat = s[0] / (1.0 - attr_f(m, "beta1_pow"));
    let v_hat = s[1] / (1.0 - attr_f(m, "beta2_pow"));
    p - lr * m_hat / (v_hat.sqrt() + eps)
}

fn update_specs() -> Vec<Spec> {
    vec![
        update_spec("sgd", &[7], 0, sgd_attrs, sgd_step),
        update_spec("merged_sgd", MERGED_SIZES, 0, sgd_attrs, sgd_step),
        update_spec("momentum", &[7], 1, momentum_attrs, momentum_step),
        update_spec("merged_momentum", MERGED_SIZES, 1, momentum_attrs, momentum_step),
        update_spec("adam", &[7], 2, adam_attrs, adam_step),
        update_spec("merged_adam", MERGED_SIZES, 2, adam_attrs, adam_step),
        update_spec(
            "rmsprop",
            &[7],
            3,
            || {
                let a = |centered: bool| {
                    AttrMap::new()
                        .with("lr", 0.01)
                        .with("weight_decay", 0.0)
                        .with("rho", 0.95)
                        .with("epsilon", 1e-6)
                        .with("momentum", 0.5)
                        .with("centered", centered)
                };
                vec![a(false), a(true)]
            },
            |m, p, g, s| {
                let (lr, rho, eps, mom) =
                    (attr_f(m, "lr"), attr_f(m, "rho"), attr_f(m, "epsilon"), attr_f(m, "momentum"));
                let g = g + attr_f(m, "weight_decay") * p;
                s[0] = rho * s[0] + (1.0 - rho) * g * g;
                let mut denom = s[0];
                if attr_b(m, "centered") {
                    s[1] = rho * s[1] + (1.0 - rho) * g;
                    denom -= s[1] * s[1];
                }
                s[2] = mom * s[2] + lr * g / (denom + eps).sqrt();
                p - s[2]
            },
        ),
        update_spec(
            "adagrad",
            &[7],
            1,
            || vec![AttrMap::new().with("lr", 0.1).with("weight_decay", 0.01).with("epsilon", 1e-6)],
            |m, p, g, s| {
                let g = g + attr_f(m, "weight_decay") * p;
                s[0] += g * g;
                p - attr_f(m, "lr") * g / (s[0].sqrt() + attr_f(m, "epsilon"))
            },
        ),
        update_spec(
            "adadelta",
            &[7],
            2,
            || vec![AttrMap::new().with("lr", 0.5).with("weight_decay", 0.0).with("rho", 0.9).with("epsilon", 1e-6)],
            |m, p, g, s| {
                let (rho, eps) = (attr_f(m, "rho"), attr_f(m, "epsilon"));
                s[0] = rho * s[0] + (1.0 - rho) * g * g;
                let u = -((s[1] + eps) / (s[0] + eps)).sqrt() * g;
                s[1] = rho * s[1] + (1.0 - rho) * u * u;
                p + attr_f(m, "lr") * u
            },
        ),
        update_spec(
            "adamax",
            &[7],
            2,
            || {
                vec![
                    AttrMap::new()
                        .with("lr", 0.01)
                        .with("weight_decay", 0.0)
                        .with("beta1", 0.9)
                        .with("beta2", 0.999)
                        .with("epsilon", 1e-8)
                        .with("beta1_pow", 0.9f64.powi(3)),
                ]
            },
            |m, p, g, s| {
                let (b1, b2) = (attr_f(m, "beta1"), attr_f(m, "beta2"));
                s[0] = b1 * s[0] + (1.0 - b1) * g;
                s[1] = (b2 * s[1] + attr_f(m, "epsilon")).max(g.abs());
                p - attr_f(m, "lr") / (1.0 - attr_f(m, "beta1_pow")) * s[0] / s[1]
            },
        ),
        update_spec(
            "lamb",
            &[7],
            3,
            || {
                vec![
                    AttrMap::new()
                        .with("lr", 0.01)
                        .with("weight_decay", 0.0)
                        .with("beta1", 0.9)
                        .with("beta2", 0.999)
                        .with("epsilon", 1e-6)
                        .with("beta1_pow", 0.9f64.powi(3))
                        .with("beta2_pow", 0.999f64.powi(3))
                        .with("lamb_weight_decay", 0.01),
                ]
            },
            // The kernel moves the moments and writes the direction r; the parameter stays.
            |m, p, g, s| {
                let (b1, b2) = (attr_f(m, "beta1"), attr_f(m, "beta2"));
                s[0] = b1 * s[0] + (1.0 - b1) * g;
                s[1] = b2 * s[1] + (1.0 - b2) * g * g;
                let m_hat = s[0] / (1.0 - attr_f(m, "beta1_pow"));
                let v_hat = s[1] / (1.0 - attr_f(m, "beta2_pow"));
                s[2] = m_hat / (v_hat.sqrt() + attr_f(m, "epsilon")) + attr_f(m, "lamb_weight_decay") * p;
                p
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// Creation, random, copies.

fn creation_spec(name: &'static str, cases: fn() -> Vec<(String, AttrMap)>, reference: fn(&AttrMap) -> Host) -> Spec {
    let samples = move |_: &mut Rng| cases().into_iter().map(|(label, a)| sample(label, vec![], a)).collect();
    let reference = move |_: &[Host], m: &AttrMap, _: DType| {
        let h = reference(m);
        let dtype = m.field::<DType>("sweep", "dtype").unwrap();
        // The reference values as the dtype holds them (integers truncate, bool is != 0).
        vec![Host::new(h.v.iter().map(|&v| refs::held_as(v, dtype)).collect(), &h.shape)]
    };
    spec(name, vec![], samples, reference).out(attr_dtype)
}

fn with_dtype_place(m: AttrMap, dtype: DType) -> AttrMap {
    m.with("dtype", dtype).with("place", dygraph::Place::Cpu)
}

fn creation_specs() -> Vec<Spec> {
    let fill = |name: &'static str, value: Option<f64>| {
        let _ = value;
        name
    };
    let _ = fill;
    vec![
        creation_spec(
            "full",
            || {
                ANY.iter()
                    .flat_map(|&d| {
                        [(vec![2usize, 3], 2.5), (vec![], -7.0), (vec![0, 4], 1.0)].into_iter().map(
                            move |(shape, v)| {
                                (
                                    format!("{shape:?} {v} {d}"),
                                    with_dtype_place(AttrMap::new().with("shape", shape).with("value", v), d),
                                )
                            },
                        )
                    })
                    .collect()
            },
            |m| {
                let shape = attr_us(m, "shape");
                Host::new(vec![attr_f(m, "value"); numel(&shape)], &shape)
            },
        ),
        creation_spec(
            "zeros",
            || {
                ANY.iter()
                    .map(|&d| {
                        (
                            format!("{d}"),
                            with_dtype_place(AttrMap::new().with("shape", vec![3usize, 2]).with("value", 0i64), d),
                        )
                    })
                    .collect()
            },
            |m| Host::new(vec![0.0; numel(&attr_us(m, "shape"))], &attr_us(m, "shape")),
        ),
        creation_spec(
            "ones",
            || {
                ANY.iter()
                    .map(|&d| {
                        (
                            format!("{d}"),
                            with_dtype_place(AttrMap::new().with("shape", vec![2usize, 1, 2]).with("value", 1i64), d),
                        )
                    })
                    .collect()
            },
            |m| Host::new(vec![1.0; numel(&attr_us(m, "shape"))], &attr_us(m, "shape")),
        ),
        creation_spec(
            "arange",
            || {
                let a = |s: f64, e: f64, st: f64| AttrMap::new().with("start", s).with("end", e).with("step", st);
                let mut v = Vec::new();
                for d in [F32, F64, F16, BF16] {
                    v.push((format!("0..5 by 0.5 {d}"), with_dtype_place(a(0.0, 5.0, 0.5), d)));
                    v.push((format!("3..-2 by -1.5 {d}"), with_dtype_place(a(3.0, -2.0, -1.5), d)));
                }
                for d in [I32, I64] {
                    v.push((format!("-3..10 by 4 {d}"), with_dtype_place(a(-3.0, 10.0, 4.0), d)));
                    v.push((format!("empty {d}"), with_dtype_place(a(5.0, 1.0, 1.0), d)));
                }
                v
            },
            |m| {
                let (s, e, st) = (attr_f(m, "start"), attr_f(m, "end"), attr_f(m, "step"));
                let mut v = Vec::new();
                let mut x = s;
                while (st > 0.0 && x < e) || (st < 0.0 && x > e) {
                    v.push(x);
                    x = s + v.len() as f64 * st;
                }
                let n = v.len();
                Host::new(v, &[n])
            },
        ),
        creation_spec(
            "linspace",
            || {
                [(0.0, 1.0, 5usize), (2.0, -3.0, 4), (1.0, 1.0, 1), (0.0, 1.0, 0)]
                    .into_iter()
                    .flat_map(|(a, b, n)| {
                        [F32, F64].into_iter().map(move |d| {
                            (
                                format!("{a}..={b} in {n} {d}"),
                                with_dtype_place(AttrMap::new().with("start", a).with("stop", b).with("num", n), d),
                            )
                        })
                    })
                    .collect()
            },
            |m| {
                let (a, b, n) = (attr_f(m, "start"), attr_f(m, "stop"), m.field::<usize>("sweep", "num").unwrap());
                let v = (0..n).map(|i| if n == 1 { a } else { a + (b - a) * i as f64 / (n - 1) as f64 }).collect();
                Host::new(v, &[n])
            },
        ),
        creation_spec(
            "eye",
            || {
                [(3usize, 3usize), (2, 4), (0, 2)]
                    .into_iter()
                    .flat_map(|(r, c)| {
                        ANY.iter().map(move |&d| {
                            (
                                format!("{r}x{c} {d}"),
                                with_dtype_place(AttrMap::new().with("rows", r).with("cols", c), d),
                            )
                        })
                    })
                    .collect()
            },
            |m| {
                let (r, c) = (m.field::<usize>("sweep", "rows").unwrap(), m.field::<usize>("sweep", "cols").unwrap());
                Host::new((0..r * c).map(|k| (k / c == k % c) as u8 as f64).collect(), &[r, c])
            },
        ),
        random_spec("uniform", || {
            [F32, F64, F16, BF16]
                .into_iter()
                .map(|d| {
                    (
                        format!("{d}"),
                        with_dtype_place(
                            AttrMap::new().with("shape", vec![40usize, 25]).with("min", -2.0).with("max", 3.0),
                            d,
                        ),
                    )
                })
                .collect()
        }),
        random_spec("gaussian", || {
            [F32, F64, F16, BF16]
                .into_iter()
                .map(|d| {
                    (
                        format!("{d}"),
                        with_dtype_place(
                            AttrMap::new().with("shape", vec![999usize]).with("mean", 1.0).with("std", 2.0),
                            d,
                        ),
                    )
                })
                .collect()
        }),
        random_spec("randint", || {
            [I32, I64]
                .into_iter()
                .map(|d| {
                    (
                        format!("{d}"),
                        with_dtype_place(
                            AttrMap::new().with("low", -5i64).with("high", 9i64).with("shape", vec![3usize, 33]),
                            d,
                        ),
                    )
                })
                .collect()
        }),
        random_spec("randperm", || {
            [I32, I64, F32, F64]
                .into_iter()
                .map(|d| (format!("{d}"), with_dtype_place(AttrMap::new().with("n", 37usize), d)))
                .collect()
        }),
    ]
}

fn random_spec(name: &'static str, cases: fn() -> Vec<(String, AttrMap)>) -> Spec {
    Spec {
        name,
        dtypes: vec![],
        samples: Box::new(move |_: &mut Rng| cases().into_iter().map(|(label, a)| sample(label, vec![], a)).collect()),
        reference: Reference::Random,
        tol: 10.0,
        gradcheck: false,
        second_order: false,
        out_dtype: attr_dtype,
        exact: false,
        check_aux: false,
    }
}

fn copy_specs() -> Vec<Spec> {
    let one = |name: &'static str, attrs: fn() -> AttrMap, grad: bool| {
        let samples = move |rng: &mut Rng| {
            let mut out: Vec<Sample> = [vec![2usize, 3], vec![], vec![0, 2]]
                .into_iter()
                .map(|shape| {
                    sample(format!("{shape:?}"), vec![data(ints(rng, numel(&shape), -9, 10), &shape)], attrs())
                })
                .collect();
            if grad {
                out.push(sample("grad", vec![data(vals(rng, 4, -2.0, 2.0, 0.0), &[4])], attrs()).with_grad());
            }
            out
        };
        let s = spec(name, ANY.to_vec(), samples, |x, _, _| vec![x[0].clone()]).exact();
        if grad { s.grad() } else { s }
    };
    let assign_inplace = {
        let samples = |rng: &mut Rng| {
            vec![
                sample(
                    "[2, 3]",
                    vec![data(ints(rng, 6, -9, 10), &[2, 3]), data(ints(rng, 6, -9, 10), &[2, 3])],
                    AttrMap::new(),
                ),
                sample("0-d", vec![data(vec![1.0], &[]), data(vec![-4.0], &[])], AttrMap::new()),
            ]
        };
        spec("assign_", ANY.to_vec(), samples, |x, _, _| vec![x[1].clone()]).exact()
    };
    vec![
        one("to", || AttrMap::new().with("place", dygraph::Place::Cpu), true),
        one("assign", AttrMap::new, true),
        assign_inplace,
    ]
}

/// Every spec.
pub fn all() -> Vec<Spec> {
    let mut v = unary_specs();
    v.extend(binary_specs());
    v.extend(cast_specs());
    v.extend(where_specs());
    v.extend(reduce_specs());
    v.extend(matmul_specs());
    v.extend(shape_specs());
    v.extend(index_specs());
    v.extend(softmax_specs());
    v.extend(cross_entropy_specs());
    v.extend(conv_specs());
    v.extend(pool_specs());
    v.extend(norm_specs());
    v.extend(update_specs());
    v.extend(loss_scaling_specs());
    v.extend(creation_specs());
    v.extend(copy_specs());
    v.extend(scan_tri_specs());
    v.push(scatter_axis_spec());
    v
}

/// A random op's outputs: in range for uniform draws, integers in `[low, high)`, a
/// permutation for randperm, and dropout's kept values scaled; the GPU sweep checks that
/// every place draws the same values under one seed.
pub fn check_random(name: &str, outs: &[Tensor], inputs: &[Host], attrs: &AttrMap) {
    let v = super::values(&outs[0]);
    match name {
        "uniform" => {
            let (lo, hi) = (attr_f(attrs, "min"), attr_f(attrs, "max"));
            assert!(v.iter().all(|&x| x >= lo && x <= hi), "uniform: a value outside [{lo}, {hi}]");
        }
        "gaussian" => assert!(v.iter().all(|x| x.is_finite()), "gaussian: a non-finite value"),
        "randint" => {
            let (lo, hi) = (attr_i(attrs, "low") as f64, attr_i(attrs, "high") as f64);
            assert!(v.iter().all(|&x| x >= lo && x < hi && x.fract() == 0.0), "randint: a value outside [{lo}, {hi})");
        }
        "randperm" => {
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(sorted, (0..v.len()).map(|i| i as f64).collect::<Vec<_>>(), "randperm: not a permutation");
        }
        "dropout" => {
            let p = attr_f(attrs, "p");
            let upscale = matches!(attrs.get("mode"), Some(AttrValue::Str(m)) if m == "upscale_in_train");
            let mask = super::values(&outs[1]);
            if p == 1.0 {
                assert!(v.iter().chain(&mask).all(|&y| y == 0.0), "dropout: p = 1 kept an element");
                return;
            }
            let scale = if upscale { 1.0 / (1.0 - p) } else { 1.0 };
            let (atol, rtol) = super::base_tol(outs[0].dtype());
            // Inputs are at least 0.1 away from zero: a dropped element is exactly 0, a kept one
            // is x·scale.
            for (i, ((&y, &x), &m)) in v.iter().zip(&inputs[0].v).zip(&mask).enumerate() {
                let want = if m == 0.0 { 0.0 } else { x * scale };
                assert!((y - want).abs() <= atol + rtol * want.abs(), "dropout: element {i} is {y}, expected {want}");
            }
            let kept = mask.iter().filter(|&&m| m != 0.0).count() as f64 / mask.len().max(1) as f64;
            if mask.len() >= 1000 {
                assert!((kept - (1.0 - p)).abs() < 0.06, "dropout: kept {kept}, expected about {}", 1.0 - p);
            }
        }
        other => panic!("{other}: not a random op"),
    }
}

// ---------------------------------------------------------------------------------------
// Scans and triangles.

/// The lines of `shape` around axis `ax` in scan order: each as the list of flat positions.
fn scan_lines(shape: &[usize], ax: usize, reverse: bool) -> Vec<Vec<usize>> {
    let (outer, len, inner) = (numel(&shape[..ax]), shape[ax], numel(&shape[ax + 1..]));
    (0..outer * inner)
        .map(|line| {
            let base = (line / inner) * len * inner + line % inner;
            (0..len).map(|s| base + (if reverse { len - 1 - s } else { s }) * inner).collect()
        })
        .collect()
}

/// The scanned axis of `x` (a 0-d tensor is one line of one element, as `[1]`).
fn scan_geometry(x: &Host, m: &AttrMap) -> (Vec<usize>, usize) {
    if x.shape.is_empty() { (vec![1], 0) } else { (x.shape.clone(), axis(attr_i(m, "axis"), x.shape.len())) }
}

fn scan_attrs(ax: i64, exclusive: bool, reverse: bool) -> AttrMap {
    AttrMap::new().with("axis", ax).with("exclusive", exclusive).with("reverse", reverse)
}

/// `cumsum` and `cumprod`: every line summed (multiplied) in float64, inclusive or
/// exclusive, forwards or reversed; small integers so that every dtype is exact.
fn scan_spec(name: &'static str, product: bool) -> Spec {
    let samples = move |rng: &mut Rng| {
        let cases: [(&[usize], i64, bool, bool); 8] = [
            (&[7], 0, false, false),
            (&[3, 5], 1, true, false),
            (&[4, 3], 0, false, true),
            (&[2, 3, 4], -2, true, true),
            (&[], -1, false, false),
            (&[0, 3], 1, false, false),
            (&[2, 1, 3, 2, 2], 3, false, true),
            (&[2, 40], 1, false, false),
        ];
        let (lo, hi) = if product { (-2, 3) } else { (-9, 10) };
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|&(s, ax, ex, rev)| {
                // Products of 40 factors would overflow float16: ±1 and 0 only there.
                let (lo, hi) = if product && numel(s) > 30 { (-1, 2) } else { (lo, hi) };
                let label = format!("{s:?} axis {ax} exclusive {ex} reverse {rev}");
                sample(label, vec![data(ints(rng, numel(s), lo, hi), s)], scan_attrs(ax, ex, rev))
            })
            .collect();
        let specials = vec![2.0, f64::INFINITY, -0.0, 3.0, f64::NAN, 1.0];
        out.push(sample("special values", vec![data(specials, &[6])], scan_attrs(0, false, false)).floats_only());
        for (ex, rev) in [(false, false), (true, true)] {
            let x = data(vals(rng, 12, -1.5, 1.5, 0.0), &[3, 4]);
            out.push(sample(format!("grad exclusive {ex} reverse {rev}"), vec![x], scan_attrs(1, ex, rev)).with_grad());
        }
        // An exact zero: cumprod's gradient divides by nothing.
        let x = data(vec![0.5, 0.0, -1.25, 2.0, 0.0, 0.75], &[6]);
        out.push(sample("grad with zeros", vec![x], scan_attrs(0, false, false)).with_grad());
        out
    };
    let reference = move |x: &[Host], m: &AttrMap, dtype: DType| {
        let (shape, ax) = scan_geometry(&x[0], m);
        let (ex, rev) = (attr_b(m, "exclusive"), attr_b(m, "reverse"));
        let mut v = vec![0.0; x[0].v.len()];
        for line in scan_lines(&shape, ax, rev) {
            let mut acc = if product { 1.0 } else { 0.0 };
            for p in line {
                let next = if product { acc * x[0].v[p] } else { acc + x[0].v[p] };
                v[p] = if ex { acc } else { next };
                acc = next;
            }
        }
        let v = v.into_iter().map(|e| if dtype.is_float() { e } else { wrap_int(e as i64, dtype) }).collect();
        vec![Host { v, shape: x[0].shape.clone() }]
    };
    spec(name, vec![I32, I64, F16, BF16, F32, F64], samples, reference).grad()
}

/// `cumprod_grad`: `Σ_j g_j · ∂y_j/∂x_i` with the partial products written out (every
/// factor but `x_i`), not the recurrence the kernels use.
fn cumprod_grad_spec() -> Spec {
    let samples = |rng: &mut Rng| {
        let cases: [(&[usize], i64, bool, bool); 6] = [
            (&[6], 0, false, false),
            (&[3, 5], 1, true, false),
            (&[4, 3], 0, false, true),
            (&[2, 3, 4], -1, true, true),
            (&[], 0, false, false),
            (&[0, 3], 1, false, false),
        ];
        cases
            .iter()
            .map(|&(s, ax, ex, rev)| {
                let mut x = vals(rng, numel(s), -1.5, 1.5, 0.0);
                if let Some(v) = x.get_mut(1) {
                    *v = 0.0;
                }
                let inputs = vec![data(x, s), data(vals(rng, numel(s), -1.0, 1.0, 0.0), s)];
                sample(format!("{s:?} axis {ax} exclusive {ex} reverse {rev}"), inputs, scan_attrs(ax, ex, rev))
            })
            .collect()
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| {
        let (shape, ax) = scan_geometry(&x[0], m);
        let (ex, rev) = (attr_b(m, "exclusive"), attr_b(m, "reverse"));
        let mut v = vec![0.0; x[0].v.len()];
        for line in scan_lines(&shape, ax, rev) {
            for (i, &p) in line.iter().enumerate() {
                // Output j multiplies the elements at scan positions 0..=j (0..j exclusive).
                v[p] = (0..line.len())
                    .map(|j| {
                        let upto = if ex { j } else { j + 1 };
                        if i >= upto {
                            return 0.0;
                        }
                        let others: f64 = (0..upto).filter(|&k| k != i).map(|k| x[0].v[line[k]]).product();
                        x[1].v[line[j]] * others
                    })
                    .sum();
            }
        }
        vec![Host { v, shape: x[0].shape.clone() }]
    };
    spec("cumprod_grad", floats(), samples, reference)
}

/// `tril` / `triu`: element `(r, c)` of each matrix kept by `c − r` against the diagonal.
fn tri_spec(name: &'static str, lower: bool) -> Spec {
    let samples = |rng: &mut Rng| {
        let cases: [(&[usize], i64); 8] = [
            (&[3, 5], 0),
            (&[4, 3], 1),
            (&[2, 3, 4], -1),
            (&[5, 2], 10),
            (&[3, 3], -10),
            (&[0, 3], 0),
            (&[2, 1, 3, 2, 2], 0),
            (&[1, 1], 0),
        ];
        let mut out: Vec<Sample> = cases
            .iter()
            .map(|&(s, d)| {
                let attrs = AttrMap::new().with("diagonal", d);
                sample(format!("{s:?} diagonal {d}"), vec![data(ints(rng, numel(s), -9, 10), s)], attrs)
            })
            .collect();
        let specials = SPECIALS.to_vec();
        out.push(
            sample("special values", vec![data(specials, &[3, 3])], AttrMap::new().with("diagonal", 0i64))
                .floats_only(),
        );
        let attrs = AttrMap::new().with("diagonal", 1i64);
        out.push(sample("grad", vec![data(vals(rng, 12, -2.0, 2.0, 0.0), &[3, 4])], attrs).with_grad());
        out
    };
    let reference = move |x: &[Host], m: &AttrMap, _: DType| {
        let shape = x[0].shape.clone();
        let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let d = attr_i(m, "diagonal");
        let v = (0..x[0].v.len())
            .map(|i| {
                let off = (i % cols) as i64 - ((i / cols) % rows) as i64;
                if (lower && off <= d) || (!lower && off >= d) { x[0].v[i] } else { 0.0 }
            })
            .collect();
        vec![Host { v, shape }]
    };
    spec(name, ANY.to_vec(), samples, reference).grad()
}

fn scan_tri_specs() -> Vec<Spec> {
    vec![
        scan_spec("cumsum", false),
        scan_spec("cumprod", true),
        cumprod_grad_spec(),
        tri_spec("tril", true),
        tri_spec("triu", false),
    ]
}

// ---------------------------------------------------------------------------------------
// Scatter.

fn scatter_attrs(ax: i64, reduce: &str, along: bool) -> AttrMap {
    AttrMap::new().with("axis", ax).with("reduce", reduce.to_string()).with("along", along)
}

/// `scatter_axis`: every index entry written in order into a copy of `x` (assign: the last
/// one wins; add: added to `x`; sum: written elements restart from zero), with both index
/// layouts, duplicates, both index dtypes and an empty index.
fn scatter_axis_spec() -> Spec {
    let samples = |rng: &mut Rng| {
        let mut out = Vec::new();
        for reduce in ["assign", "add", "sum"] {
            for it in [I32, I64] {
                // A shared list along axis 1 of [2, 4, 3], with duplicates.
                let inputs = vec![
                    data(ints(rng, 24, -9, 10), &[2, 4, 3]),
                    fixed(vec![3.0, 0.0, 3.0, 1.0, 3.0], &[5], it),
                    data(ints(rng, 30, -9, 10), &[2, 5, 3]),
                ];
                out.push(sample(format!("shared {reduce} {it}"), inputs, scatter_attrs(1, reduce, false)));
            }
            // A full index tensor along axis 0 of [3, 4] (put_along_axis), with duplicates.
            let inputs = vec![
                data(ints(rng, 12, -9, 10), &[3, 4]),
                fixed(vec![2.0, 0.0, 1.0, 2.0, 2.0, 0.0, 1.0, 2.0], &[2, 4], I64),
                data(ints(rng, 8, -9, 10), &[2, 4]),
            ];
            out.push(sample(format!("along {reduce}"), inputs, scatter_attrs(0, reduce, true)));
            let inputs = vec![data(ints(rng, 6, -9, 10), &[2, 3]), fixed(vec![], &[0], I64), data(vec![], &[0, 3])];
            out.push(sample(format!("empty index {reduce}"), inputs, scatter_attrs(0, reduce, false)));
            // Unique indices: finite differences see every value.
            let inputs = vec![
                data(vals(rng, 12, -2.0, 2.0, 0.0), &[4, 3]),
                fixed(vec![3.0, 1.0], &[2], I64),
                data(vals(rng, 6, -2.0, 2.0, 0.0), &[2, 3]),
            ];
            out.push(sample(format!("grad {reduce}"), inputs, scatter_attrs(-2, reduce, false)).with_grad());
        }
        out
    };
    let reference = |x: &[Host], m: &AttrMap, _: DType| {
        let (shape, idx, vals) = (&x[0].shape, &x[1], &x[2]);
        let reduce = match m.get("reduce") {
            Some(AttrValue::Str(s)) => s.clone(),
            other => panic!("reduce attribute {other:?}"),
        };
        let ax = axis(attr_i(m, "axis"), shape.len());
        let mut out = x[0].v.clone();
        let mut written = vec![false; out.len()];
        for (k, &val) in vals.v.iter().enumerate() {
            let mut at = unravel(k, &vals.shape);
            let entry = if attr_b(m, "along") { idx.v[k] } else { idx.v[at[ax]] };
            at[ax] = entry as usize;
            let t = ravel(&at, shape);
            out[t] = match reduce.as_str() {
                "assign" => val,
                "add" => out[t] + val,
                _ if !written[t] => val,
                _ => out[t] + val,
            };
            written[t] = true;
        }
        vec![Host { v: out, shape: shape.clone() }]
    };
    spec("scatter_axis", vec![I32, I64, F16, BF16, F32, F64], samples, reference).grad()
}

/// `check_finite_and_unscale` and `update_loss_scaling` (GradScaler's device work).
fn loss_scaling_specs() -> Vec<Spec> {
    let unscale_samples = |rng: &mut Rng| {
        let mut out = Vec::new();
        for (k, (found, scale, special)) in
            [(0.0, 1024.0, None), (1.0, 2.0, None), (0.0, 8.0, Some(f64::INFINITY)), (0.0, 1.0, Some(f64::NAN))]
                .into_iter()
                .enumerate()
        {
            let mut inputs = vec![fixed(vec![found], &[1], Bool), fixed(vec![scale], &[1], F32)];
            for (j, &n) in [7usize, 4, 0, 1].iter().enumerate() {
                let mut v = vals(rng, n, -100.0, 100.0, 0.0);
                if let (Some(x), true) = (special, j == 0) {
                    v[3] = x;
                }
                inputs.push(data(v, &[n]));
            }
            out.push(sample(
                format!("case {k} found={found} scale={scale} special={special:?}"),
                inputs,
                AttrMap::new(),
            ));
        }
        out
    };
    let unscale_ref = |x: &[Host], _: &AttrMap, _: DType| {
        let inv = 1.0 / x[1].v[0];
        let grads: Vec<Host> =
            x[2..].iter().map(|g| Host::new(g.v.iter().map(|v| v * inv).collect(), &g.shape)).collect();
        let bad = grads.iter().any(|g| g.v.iter().any(|v| !v.is_finite()));
        let found = if bad || x[0].v[0] != 0.0 { 1.0 } else { 0.0 };
        std::iter::once(Host::new(vec![found], &[1])).chain(grads).collect()
    };
    let bool_then_same: OutDType = |d, _, i| if i == 0 { Bool } else { d };
    let scaling_attrs = |incr: i64, decr: i64| {
        AttrMap::new()
            .with("incr_every_n_steps", incr)
            .with("decr_every_n_nan_or_inf", decr)
            .with("incr_ratio", 2.0)
            .with("decr_ratio", 0.5)
    };
    let scaling_samples = move |_: &mut Rng| {
        // (found, scale, good, bad, incr_every, decr_every): each branch of the rule.
        let cases = [
            (0.0, 1024.0, 0.0, 3.0, 5, 2), // good step: counts
            (0.0, 1024.0, 4.0, 0.0, 5, 2), // the fifth good step doubles the scale
            (0.0, 3.0e38, 1.0, 0.0, 2, 2), // doubling would overflow float32: kept
            (1.0, 1024.0, 7.0, 0.0, 5, 2), // first bad step: counted, good zeroed
            (1.0, 1024.0, 0.0, 1.0, 5, 2), // second bad step halves
            (1.0, 1.5, 0.0, 0.0, 5, 1),    // halving below 1 stops at 1
        ];
        cases
            .iter()
            .enumerate()
            .map(|(k, &(found, scale, good, bad, incr, decr))| {
                let inputs = vec![
                    fixed(vec![found], &[1], Bool),
                    data(vec![scale], &[1]),
                    fixed(vec![good], &[1], I32),
                    fixed(vec![bad], &[1], I32),
                ];
                sample(
                    format!("case {k}: found={found} scale={scale} good={good} bad={bad}"),
                    inputs,
                    scaling_attrs(incr, decr),
                )
            })
            .collect::<Vec<_>>()
    };
    let scaling_ref = |x: &[Host], m: &AttrMap, _: DType| {
        let (incr, decr) = (attr_i(m, "incr_every_n_steps"), attr_i(m, "decr_every_n_nan_or_inf"));
        let (mut scale, mut good, mut bad) = (x[1].v[0] as f32, x[2].v[0] as i64, x[3].v[0] as i64);
        if x[0].v[0] != 0.0 {
            good = 0;
            bad += 1;
            if bad == decr {
                scale = (scale * attr_f(m, "decr_ratio") as f32).max(1.0);
                bad = 0;
            }
        } else {
            bad = 0;
            good += 1;
            if good == incr {
                let grown = scale * attr_f(m, "incr_ratio") as f32;
                if grown.is_finite() {
                    scale = grown;
                }
                good = 0;
            }
        }
        vec![Host::new(vec![scale as f64], &[1]), Host::new(vec![good as f64], &[1]), Host::new(vec![bad as f64], &[1])]
    };
    let scale_then_counters: OutDType = |d, _, i| if i == 0 { d } else { I32 };
    vec![
        spec("check_finite_and_unscale", vec![F16, BF16, F32], unscale_samples, unscale_ref).out(bool_then_same),
        spec("update_loss_scaling", vec![F32], scaling_samples, scaling_ref).out(scale_then_counters).exact(),
    ]
}
