// Random tensors from Philox4x32-10 (see lib/philox.wgsl and src/random.rs for the bit
// layout). One invocation per counter block; each block feeds 4 outputs (uniform, normal,
// dropout_mask) or 2 outputs (randint_*, one 64-bit word each). The output is raw words:
// f32 and i32 one word per element, int64 two little-endian words per element.
// params: [n, seed_lo, seed_hi, offset_lo, offset_hi, entry-specific...].
#include "lib/philox.wgsl"

@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> params: array<u32>;

fn block(j: u32) -> vec4<u32> {
    return philox_block(vec2<u32>(params[1], params[2]), vec2<u32>(params[3], params[4]), j);
}

fn block_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * {{WG}}u;
}

// Element 4j + l = unit24(word l) * scale + shift. params[5..7]: scale, shift (f32 bits).
@compute @workgroup_size({{WG}})
fn uniform(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = block_index(gid, nwg);
    let n = params[0];
    if (j >= (n + 3u) / 4u) {
        return;
    }
    let r = block(j);
    let scale = bitcast<f32>(params[5]);
    let shift = bitcast<f32>(params[6]);
    for (var l = 0u; l < 4u; l = l + 1u) {
        let i = 4u * j + l;
        if (i < n) {
            dst[i] = bitcast<u32>(unit24(r[l]) * scale + shift);
        }
    }
}

// Box-Muller on the word pairs (0, 1) and (2, 3): u1 = (top24 + 1) * 2^-24 in (0, 1] (never
// log 0), u2 = unit24, radius sqrt(-2 ln u1), angle 2π(u2 - 1/2) in [-π, π); element 4j + 2p
// takes the cosine of pair p, 4j + 2p + 1 the sine. params[5..7]: mean, std (f32 bits).
@compute @workgroup_size({{WG}})
fn normal(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = block_index(gid, nwg);
    let n = params[0];
    if (j >= (n + 3u) / 4u) {
        return;
    }
    let r = block(j);
    let mean = bitcast<f32>(params[5]);
    let stdev = bitcast<f32>(params[6]);
    for (var p = 0u; p < 2u; p = p + 1u) {
        let u1 = (f32(r[2u * p] >> 8u) + 1.0) * 5.9604644775390625e-8;
        let u2 = unit24(r[2u * p + 1u]);
        let rad = sqrt(-2.0 * log(u1));
        let theta = 6.283185307179586 * (u2 - 0.5);
        let i = 4u * j + 2u * p;
        if (i < n) {
            dst[i] = bitcast<u32>(rad * cos(theta) * stdev + mean);
        }
        if (i + 1u < n) {
            dst[i + 1u] = bitcast<u32>(rad * sin(theta) * stdev + mean);
        }
    }
}

// low + floor(x * range / 2^64) for the 64-bit word x = (word 2h, word 2h + 1) (low word
// first), wrapping. params[5..9]: low (int64 words), range = high - low (uint64 words).
fn randint_value(r: vec4<u32>, h: u32) -> vec2<u32> {
    let x = vec2<u32>(r[2u * h], r[2u * h + 1u]);
    let low = vec2<u32>(params[5], params[6]);
    let range = vec2<u32>(params[7], params[8]);
    return i64_add(low, u64_mulhi(x, range));
}

@compute @workgroup_size({{WG}})
fn randint_i32(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = block_index(gid, nwg);
    let n = params[0];
    if (j >= (n + 1u) / 2u) {
        return;
    }
    let r = block(j);
    for (var h = 0u; h < 2u; h = h + 1u) {
        let i = 2u * j + h;
        if (i < n) {
            dst[i] = randint_value(r, h).x;
        }
    }
}

@compute @workgroup_size({{WG}})
fn randint_i64(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = block_index(gid, nwg);
    let n = params[0];
    if (j >= (n + 1u) / 2u) {
        return;
    }
    let r = block(j);
    for (var h = 0u; h < 2u; h = h + 1u) {
        let i = 2u * j + h;
        if (i < n) {
            let v = randint_value(r, h);
            dst[2u * i] = v.x;
            dst[2u * i + 1u] = v.y;
        }
    }
}

// Dropout's scaled keep-mask (f32): element 4j + l is `scale` when top24(word l) >= threshold
// (i.e. unit24 >= p exactly, threshold = ceil(p * 2^24)), else 0.
// params[5..7]: threshold, scale (f32 bits).
@compute @workgroup_size({{WG}})
fn dropout_mask(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = block_index(gid, nwg);
    let n = params[0];
    if (j >= (n + 3u) / 4u) {
        return;
    }
    let r = block(j);
    let threshold = params[5];
    let scale = bitcast<f32>(params[6]);
    for (var l = 0u; l < 4u; l = l + 1u) {
        let i = 4u * j + l;
        if (i < n) {
            dst[i] = bitcast<u32>(select(0.0, scale, (r[l] >> 8u) >= threshold));
        }
    }
}
