// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind every random op. The host twin is `philox4x32_10` in
// src/random.rs; both must produce the same words for the same (counter, key).
//
// Counter block b of a stream keyed by a 64-bit seed s is
//   counter = (lo(b), hi(b), 0, 0),  key = (lo(s), hi(s)),
// where b = offset + j is the stream's 64-bit offset (params) plus the block number j.
#include "lib/int64.wgsl"

fn philox4x32_10(ctr: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = ctr;
    var k = key;
    for (var r = 0u; r < 10u; r = r + 1u) {
        if (r > 0u) {
            k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
        }
        let p0 = u32_mul_wide(0xD2511F53u, c.x);
        let p1 = u32_mul_wide(0xCD9E8D57u, c.z);
        c = vec4<u32>(p1.y ^ c.y ^ k.x, p1.x, p0.y ^ c.w ^ k.y, p0.x);
    }
    return c;
}

// The four words of block j of the stream (seed, offset): counter offset + j (64-bit add).
fn philox_block(seed: vec2<u32>, offset: vec2<u32>, j: u32) -> vec4<u32> {
    let lo = offset.x + j;
    let hi = offset.y + select(0u, 1u, lo < offset.x);
    return philox4x32_10(vec4<u32>(lo, hi, 0u, 0u), seed);
}

// High 64 bits of the 128-bit product of two unsigned 64-bit values: maps a uniform 64-bit
// word x onto [0, range) as floor(x * range / 2^64) (Lemire's reduction, no rejection).
fn u64_mulhi(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let ll = u32_mul_wide(a.x, b.x);
    let lh = u32_mul_wide(a.x, b.y);
    let hl = u32_mul_wide(a.y, b.x);
    let hh = u32_mul_wide(a.y, b.y);
    // Bits 32..63 of the product, only for the carries they send upward.
    let s1 = ll.y + lh.x;
    let c1 = select(0u, 1u, s1 < ll.y);
    let s2 = s1 + hl.x;
    let c2 = select(0u, 1u, s2 < s1);
    var r = i64_add(hh, vec2<u32>(lh.y, 0u));
    r = i64_add(r, vec2<u32>(hl.y, 0u));
    return i64_add(r, vec2<u32>(c1 + c2, 0u));
}

// A uniform float in [0, 1) from the top 24 bits of a word: exactly k * 2^-24.
fn unit24(w: u32) -> f32 {
    return f32(w >> 8u) * 5.9604644775390625e-8;
}
