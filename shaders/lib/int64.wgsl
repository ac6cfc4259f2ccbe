// Exact 64-bit signed integers emulated with two u32 words: vec2<u32>(low, high), two's
// complement, the same bytes as a little-endian i64 on the host. Arithmetic wraps like
// Rust's wrapping_* ops; division by zero yields 0 (numpy's result), never a trap.

fn i64_from_i32(x: i32) -> vec2<u32> {
    return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0));
}

fn i64_is_neg(a: vec2<u32>) -> bool {
    return (a.y & 0x80000000u) != 0u;
}

fn i64_is_zero(a: vec2<u32>) -> bool {
    return a.x == 0u && a.y == 0u;
}

fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn i64_neg(a: vec2<u32>) -> vec2<u32> {
    let lo = ~a.x + 1u;
    return vec2<u32>(lo, ~a.y + select(0u, 1u, lo == 0u));
}

fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return i64_add(a, i64_neg(b));
}

// Full 64-bit product of two u32.
fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let t = p10 + (p00 >> 16u);
    let w1 = (t & 0xffffu) + p01;
    let hi = p11 + (t >> 16u) + (w1 >> 16u);
    let lo = (w1 << 16u) | (p00 & 0xffffu);
    return vec2<u32>(lo, hi);
}

fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = u32_mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn i64_eq(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x == b.x && a.y == b.y;
}

fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

fn i64_le(a: vec2<u32>, b: vec2<u32>) -> bool {
    return !i64_lt(b, a);
}

fn u64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

fn i64_abs(a: vec2<u32>) -> vec2<u32> {
    return select(a, i64_neg(a), i64_is_neg(a));
}

fn i64_sign(a: vec2<u32>) -> vec2<u32> {
    if (i64_is_zero(a)) {
        return vec2<u32>(0u, 0u);
    }
    return select(vec2<u32>(1u, 0u), vec2<u32>(0xffffffffu, 0xffffffffu), i64_is_neg(a));
}

fn i64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, i64_lt(a, b));
}

fn i64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, i64_lt(b, a));
}

// Unsigned 64-bit division by shift-and-subtract: returns (quotient, remainder).
struct U64DivMod {
    q: vec2<u32>,
    r: vec2<u32>,
}

fn u64_divmod(n: vec2<u32>, d: vec2<u32>) -> U64DivMod {
    var q = vec2<u32>(0u, 0u);
    var r = vec2<u32>(0u, 0u);
    for (var i = 63i; i >= 0; i = i - 1) {
        let word = select(n.x, n.y, i >= 32);
        let bit = (word >> (u32(i) & 31u)) & 1u;
        r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
        if (!u64_lt(r, d)) {
            r = i64_sub(r, d);
            if (i >= 32) {
                q.y = q.y | (1u << (u32(i) - 32u));
            } else {
                q.x = q.x | (1u << u32(i));
            }
        }
    }
    return U64DivMod(q, r);
}

// Division truncating toward zero (C and Rust semantics); x / 0 = 0.
fn i64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (i64_is_zero(b)) {
        return vec2<u32>(0u, 0u);
    }
    let qr = u64_divmod(i64_abs(a), i64_abs(b));
    return select(qr.q, i64_neg(qr.q), i64_is_neg(a) != i64_is_neg(b));
}

// Remainder with the sign of the dividend; x % 0 = 0.
fn i64_rem(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (i64_is_zero(b)) {
        return vec2<u32>(0u, 0u);
    }
    let qr = u64_divmod(i64_abs(a), i64_abs(b));
    return select(qr.r, i64_neg(qr.r), i64_is_neg(a));
}

// Floor division (Python's //); x // 0 = 0.
fn i64_floordiv(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let q = i64_div(a, b);
    let r = i64_rem(a, b);
    if (!i64_is_zero(r) && (i64_is_neg(r) != i64_is_neg(b))) {
        return i64_sub(q, vec2<u32>(1u, 0u));
    }
    return q;
}

// Modulo with the sign of the divisor (Python's %); x % 0 = 0.
fn i64_mod(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let r = i64_rem(a, b);
    if (!i64_is_zero(r) && (i64_is_neg(r) != i64_is_neg(b))) {
        return i64_add(r, b);
    }
    return r;
}

fn i64_to_f32(a: vec2<u32>) -> f32 {
    let m = i64_abs(a);
    let f = f32(m.y) * 4294967296.0 + f32(m.x);
    return select(f, -f, i64_is_neg(a));
}

// Truncates toward zero, saturating at the i64 range; NaN gives 0.
fn i64_from_f32(x: f32) -> vec2<u32> {
    if (x != x) {
        return vec2<u32>(0u, 0u);
    }
    if (x >= 9223372036854775807.0) {
        return vec2<u32>(0xffffffffu, 0x7fffffffu);
    }
    if (x <= -9223372036854775808.0) {
        return vec2<u32>(0u, 0x80000000u);
    }
    let m = trunc(abs(x));
    let hi = floor(m / 4294967296.0);
    let lo = m - hi * 4294967296.0;
    let v = vec2<u32>(u32(lo), u32(hi));
    return select(v, i64_neg(v), x < 0.0);
}

// a^e by squaring (wrapping). Negative exponents give trunc(1 / a^|e|): 1, -1 or 0.
fn i64_pow(a: vec2<u32>, e: vec2<u32>) -> vec2<u32> {
    if (i64_is_neg(e)) {
        if (i64_eq(a, vec2<u32>(1u, 0u))) {
            return a;
        }
        if (i64_eq(a, vec2<u32>(0xffffffffu, 0xffffffffu))) {
            return select(vec2<u32>(1u, 0u), a, (e.x & 1u) == 1u);
        }
        return vec2<u32>(0u, 0u);
    }
    var result = vec2<u32>(1u, 0u);
    var base = a;
    var k = e;
    for (var i = 0u; i < 64u; i = i + 1u) {
        if (i64_is_zero(k)) {
            break;
        }
        if ((k.x & 1u) == 1u) {
            result = i64_mul(result, base);
        }
        base = i64_mul(base, base);
        k = vec2<u32>((k.x >> 1u) | (k.y << 31u), k.y >> 1u);
    }
    return result;
}

// i32 helpers with the same conventions.
fn i32_div(a: i32, b: i32) -> i32 {
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return bitcast<i32>(0u - bitcast<u32>(a));
    }
    return a / b;
}

fn i32_rem(a: i32, b: i32) -> i32 {
    if (b == 0 || b == -1) {
        return 0;
    }
    return a % b;
}

fn i32_floordiv(a: i32, b: i32) -> i32 {
    let q = i32_div(a, b);
    let r = i32_rem(a, b);
    return select(q, q - 1, r != 0 && ((r < 0) != (b < 0)));
}

fn i32_mod(a: i32, b: i32) -> i32 {
    let r = i32_rem(a, b);
    return select(r, r + b, r != 0 && ((r < 0) != (b < 0)));
}

fn i32_pow(a: i32, e: i32) -> i32 {
    if (e < 0) {
        if (a == 1) {
            return 1;
        }
        if (a == -1) {
            return select(1, -1, (e & 1) == 1);
        }
        return 0;
    }
    var result = 1i;
    var base = a;
    var k = u32(e);
    for (var i = 0u; i < 32u; i = i + 1u) {
        if (k == 0u) {
            break;
        }
        if ((k & 1u) == 1u) {
            result = result * base;
        }
        base = base * base;
        k = k >> 1u;
    }
    return result;
}

fn i32_abs(a: i32) -> i32 {
    return select(a, bitcast<i32>(0u - bitcast<u32>(a)), a < 0);
}
