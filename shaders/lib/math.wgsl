// Float helpers WGSL lacks: NaN/Inf tests by bit pattern (robust against compilers that
// assume finite math), erf, and a real-valued pow that handles negative bases.

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
