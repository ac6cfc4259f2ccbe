// Float helpers WGSL lacks: NaN/Inf tests by bit pattern (robust against compilers that
// assume finite math), erf, exact floor division, and a real-valued pow that handles
// negative bases.
#include "lib/int64.wgsl"

// The bits go through a `var`: a constant expression may not evaluate to Inf or NaN, and
// browsers' WGSL compilers (Tint) reject `bitcast<f32>(0x7f800000u)` for that reason.
fn f32_inf() -> f32 {
    var bits = 0x7f800000u;
    return bitcast<f32>(bits);
}

fn f32_nan() -> f32 {
    var bits = 0x7fc00000u;
    return bitcast<f32>(bits);
}

// The bfloat16 nearest to `x` (ties to even) as its 16 bits; NaN stays a quiet NaN.
fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return (b >> 16u) | 0x40u;
    }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

fn is_nan_f(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn is_inf_f(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn sign_f(x: f32) -> f32 {
    if (is_nan_f(x)) {
        return x;
    }
    return select(select(0.0, 1.0, x > 0.0), -1.0, x < 0.0);
}

// erf: Taylor series near 0 (keeps the relative error small for tiny x), Abramowitz &
// Stegun 7.1.26 elsewhere (absolute error below 1.5e-7).
fn erf_f(x: f32) -> f32 {
    let ax = abs(x);
    if (ax < 0.5) {
        let x2 = x * x;
        return 1.1283791671 * x * (1.0 + x2 * (-0.3333333333 + x2 * (0.1 + x2 * (-0.0238095238 + x2 * (0.0046296296 - x2 * 0.0007575758)))));
    }
    if (ax > 4.0) {
        return select(1.0, -1.0, x < 0.0);
    }
    let t = 1.0 / (1.0 + 0.3275911 * ax);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let y = 1.0 - poly * exp(-ax * ax);
    return select(y, -y, x < 0.0);
}

// The sign of a − q·b, exactly, for |b| ≤ |a| < 2^24·|b| and integral |q| < 2^24: a and b
// as 24-bit integers times powers of two, both sides in 64-bit integers over b's power.
fn rem_sign(a: f32, b: f32, q: f32) -> i32 {
    let fa = frexp(a);
    let fb = frexp(b);
    var lhs = i64_from_i32(i32(fa.fract * 16777216.0));
    let rhs = i64_mul(i64_from_i32(i32(q)), i64_from_i32(i32(fb.fract * 16777216.0)));
    // |a| ≥ |b|: a's exponent is b's or up to 25 more.
    var d = fa.exp - fb.exp;
    while (d > 0) {
        let k = min(d, 24);
        lhs = i64_mul(lhs, i64_from_i32(1 << u32(k)));
        d = d - k;
    }
    let r = i64_sub(lhs, rhs);
    if (i64_is_zero(r)) {
        return 0;
    }
    return select(1, -1, i64_is_neg(r));
}

// floor(a / b) of the exact quotient (Python's //). A GPU's division need not round
// correctly (the NVIDIA driver's does not) and a rounded quotient can land on an integer the
// exact one falls short of (1 / 0.1 rounds to 10): where the quotient is an integer below
// 2^24, the exact sign of the remainder a − q·b says whether q is one off. (WGSL's fma may
// round twice, so it cannot give that remainder.) Infinite or NaN operands give floor(a / b).
fn floor_div_f(a: f32, b: f32) -> f32 {
    var q = floor(a / b);
    if (a == 0.0 || b == 0.0 || is_nan_f(a) || is_inf_f(a) || is_nan_f(b) || is_inf_f(b) || !(abs(q) < 16777216.0)) {
        return q;
    }
    if (abs(a) < abs(b)) {
        return select(-1.0, 0.0, (a > 0.0) == (b > 0.0));
    }
    let s = rem_sign(a, b, q) * select(-1, 1, b > 0.0);
    if (s < 0) {
        q = q - 1.0;
    } else if (rem_sign(a, b, q + 1.0) * select(-1, 1, b > 0.0) >= 0) {
        q = q + 1.0;
    }
    return q;
}

// x^y for real x and y, as numpy: exact repeated multiplication for small integral y, a
// negative base with a non-integral exponent gives NaN.
fn pow_f(x: f32, y: f32) -> f32 {
    if (y == 0.0 || x == 1.0) {
        return 1.0;
    }
    if (is_nan_f(x) || is_nan_f(y)) {
        return f32_nan();
    }
    if (x == -1.0 && is_inf_f(y)) {
        return 1.0;
    }
    if (is_inf_f(x) && x < 0.0) {
        // C's pow: the sign of an odd integral exponent survives, otherwise +inf or +0.
        let odd = y == floor(y) && abs(y) < 16777216.0 && (u32(abs(y)) & 1u) == 1u;
        let m = select(f32_inf(), 0.0, y < 0.0);
        return select(m, -m, odd);
    }
    let integral = y == floor(y);
    if (integral && abs(y) <= 64.0) {
        var k = u32(abs(y));
        var base = x;
        var r = 1.0;
        for (var i = 0u; i < 7u; i = i + 1u) {
            if ((k & 1u) == 1u) {
                r = r * base;
            }
            base = base * base;
            k = k >> 1u;
        }
        return select(r, 1.0 / r, y < 0.0);
    }
    if (x < 0.0) {
        if (!integral) {
            return f32_nan();
        }
        let m = exp2(y * log2(-x));
        let odd = abs(y) < 16777216.0 && (u32(abs(y)) & 1u) == 1u;
        return select(m, -m, odd);
    }
    if (x == 0.0) {
        return select(0.0, f32_inf(), y < 0.0);
    }
    return exp2(y * log2(x));
}

// ln(1 + x) without cancellation for small x (Kahan's trick).
fn log1p_f(x: f32) -> f32 {
    let u = 1.0 + x;
    if (u == 1.0 || (is_inf_f(u) && u > 0.0)) {
        return select(x, u, u > 1.0);
    }
    return log(u) * x / (u - 1.0);
}

// f32 to i32 truncating toward zero, saturating, NaN to 0 (Rust's `as`).
fn f32_to_i32(x: f32) -> i32 {
    if (is_nan_f(x)) {
        return 0;
    }
    // i32(x) clamps to the largest f32 below 2^31 (2147483520); saturate to i32::MAX.
    if (x >= 2147483648.0) {
        return 2147483647;
    }
    return i32(max(x, -2147483648.0));
}
