// 2-D pooling over the h×w planes of an NCHW tensor: max (with argmax), average, fixed
// windows (kh×kw, stride, top/left padding, clipped to the input) or Paddle's adaptive
// bins [floor(o·in/out), ceil((o+1)·in/out)). The backward entries run one invocation per
// INPUT element that gathers from the outputs whose windows cover it, in ascending output
// order (max_bwd_tiles, for windows that tile the input: one per window): deterministic, no
// atomics. `gather` is the transpose of max_bwd (its gradient).
//
// params: [0 total, 1 planes, 2 h, 3 w, 4 oh, 5 ow, 6 kh, 7 kw, 8 sh, 9 sw, 10 pt, 11 pl,
//          12 adaptive (the variant key), 13 exclusive, 14 pb, 15 pr]
// `E` is the float element type: f32, or f16 on devices with `SHADER_F16` (f32 arithmetic).
// Bindings differ per entry (each entry uses only its own):
//   max_fwd:          src, mf_out, mf_idx, params3
//   avg_fwd, avg_bwd: src, out1, params2
//   max_bwd, max_bwd_tiles, gather: src, idx_in, out2, params3
#include "lib/math.wgsl"

// Adaptive bins (word 12) as a compile-time constant: software adapters run both sides of a
// branch on a uniform value, and the adaptive side divides.
const ADAPTIVE: bool = {{ADAPTIVE}};

@group(0) @binding(0) var<storage, read> src: array<{{E}}>;
@group(0) @binding(1) var<storage, read_write> mf_out: array<{{E}}>;
@group(0) @binding(2) var<storage, read_write> mf_idx: array<i32>;
@group(0) @binding(3) var<storage, read> params3: array<u32>;
@group(0) @binding(1) var<storage, read_write> out1: array<{{E}}>;
@group(0) @binding(2) var<storage, read> params2: array<u32>;
@group(0) @binding(1) var<storage, read> idx_in: array<i32>;
@group(0) @binding(2) var<storage, read_write> out2: array<{{E}}>;

var<private> P: array<u32, 16>;

fn load_params3() {
    for (var i = 0u; i < 16u; i = i + 1u) {
        P[i] = params3[i];
    }
}

fn load_params2() {
    for (var i = 0u; i < 16u; i = i + 1u) {
        P[i] = params2[i];
    }
}

fn thread_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * {{WG}}u;
}

// Window [start, end) of output o along an axis of `len` inputs and `out` outputs.
fn win(o: u32, len: u32, out: u32, k: u32, s: u32, p: u32) -> vec2<u32> {
    if (ADAPTIVE) {
        return vec2<u32>(o * len / out, ((o + 1u) * len + out - 1u) / out);
    }
    let start = i32(o * s) - i32(p);
    let end = min(start + i32(k), i32(len));
    return vec2<u32>(u32(max(start, 0)), u32(max(end, 0)));
}

// Outputs [lo, hi) along an axis whose windows may contain input index i.
fn cover(i: u32, len: u32, out: u32, k: u32, s: u32, p: u32) -> vec2<u32> {
    if (ADAPTIVE) {
        return vec2<u32>(i * out / len, min(((i + 1u) * out + len - 1u) / len, out));
    }
    var lo = 0u;
    if (i + p >= k) {
        lo = (i + p - k) / s + 1u;
    }
    let hi = min((i + p) / s + 1u, out);
    return vec2<u32>(lo, max(hi, lo));
}

fn rows(oy: u32) -> vec2<u32> {
    return win(oy, P[2], P[4], P[6], P[8], P[10]);
}

fn cols(ox: u32) -> vec2<u32> {
    return win(ox, P[3], P[5], P[7], P[9], P[11]);
}

// Extent of output o's window inside the padded input along an axis (`pad_end` after it).
fn padded(o: u32, len: u32, k: u32, s: u32, p: u32, pad_end: u32) -> u32 {
    let start = i32(o * s) - i32(p);
    let end = min(start + i32(k), i32(len + pad_end));
    return u32(end - start);
}

// Divisor of average-pool output (oy, ox): the in-input window area (exclusive or
// adaptive), else the window's area inside the padded input (Paddle and PyTorch: a
// ceil_mode window past the bottom/right padding counts only its padded part).
fn count(oy: u32, ox: u32, r: vec2<u32>, c: vec2<u32>) -> f32 {
    if (P[13] != 0u || ADAPTIVE) {
        return f32((r.y - r.x) * (c.y - c.x));
    }
    return f32(padded(oy, P[2], P[6], P[8], P[10], P[14]) * padded(ox, P[3], P[7], P[9], P[11], P[15]));
}

@compute @workgroup_size({{WG}})
fn max_fwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params3();
    let o = thread_index(gid, nwg);
    if (o >= P[0]) {
        return;
    }
    let ohw = P[4] * P[5];
    let p = o / ohw;
    let r = o % ohw;
    let rr = rows(r / P[5]);
    let cc = cols(r % P[5]);
    let w = P[3];
    let base = p * P[2] * w;
    var bi = rr.x * w + cc.x;
    var best = f32(src[base + bi]);
    for (var iy = rr.x; iy < rr.y; iy = iy + 1u) {
        for (var ix = cc.x; ix < cc.y; ix = ix + 1u) {
            let v = f32(src[base + iy * w + ix]);
            if (v > best || (is_nan_f(v) && !is_nan_f(best))) {
                best = v;
                bi = iy * w + ix;
            }
        }
    }
    mf_out[o] = {{E}}(best);
    mf_idx[o] = i32(bi);
}

@compute @workgroup_size({{WG}})
fn avg_fwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params2();
    let o = thread_index(gid, nwg);
    if (o >= P[0]) {
        return;
    }
    let ohw = P[4] * P[5];
    let p = o / ohw;
    let r = o % ohw;
    let rr = rows(r / P[5]);
    let cc = cols(r % P[5]);
    let w = P[3];
    let base = p * P[2] * w;
    var s = 0.0;
    for (var iy = rr.x; iy < rr.y; iy = iy + 1u) {
        for (var ix = cc.x; ix < cc.y; ix = ix + 1u) {
            s = s + f32(src[base + iy * w + ix]);
        }
    }
    out1[o] = {{E}}(s / count(r / P[5], r % P[5], rr, cc));
}

@compute @workgroup_size({{WG}})
fn max_bwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params3();
    let i = thread_index(gid, nwg);
    if (i >= P[0]) {
        return;
    }
    let hw = P[2] * P[3];
    let p = i / hw;
    let s = i % hw;
    let iy = s / P[3];
    let ix = s % P[3];
    let ry = cover(iy, P[2], P[4], P[6], P[8], P[10]);
    let rx = cover(ix, P[3], P[5], P[7], P[9], P[11]);
    let base = p * P[4] * P[5];
    var acc = 0.0;
    for (var oy = ry.x; oy < ry.y; oy = oy + 1u) {
        for (var ox = rx.x; ox < rx.y; ox = ox + 1u) {
            let o = base + oy * P[5] + ox;
            if (idx_in[o] == i32(s)) {
                acc = acc + f32(src[o]);
            }
        }
    }
    out2[i] = {{E}}(acc);
}

// max_bwd where the windows tile the input (stride = kernel, no padding, not adaptive, the
// input a whole number of windows): one invocation per window writes its kh×kw inputs, the
// gradient at the argmax and zero elsewhere. Each input belongs to exactly one window, so the
// values are max_bwd's, for four divisions per window instead of eight per input element.
@compute @workgroup_size({{WG}})
fn max_bwd_tiles(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params3();
    let o = thread_index(gid, nwg);
    if (o >= P[0]) {
        return;
    }
    // The window as max_fwd walks it.
    let ohw = P[4] * P[5];
    let r = o % ohw;
    let rr = rows(r / P[5]);
    let cc = cols(r % P[5]);
    let w = P[3];
    let base = (o / ohw) * P[2] * w;
    let at = idx_in[o];
    // 0.0 + g as max_bwd sums, so a -0.0 gradient is stored as +0.0 there too.
    let g = 0.0 + f32(src[o]);
    for (var iy = rr.x; iy < rr.y; iy = iy + 1u) {
        for (var ix = cc.x; ix < cc.y; ix = ix + 1u) {
            let s = iy * w + ix;
            out2[base + s] = {{E}}(select(0.0, g, at == i32(s)));
        }
    }
}

@compute @workgroup_size({{WG}})
fn avg_bwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params2();
    let i = thread_index(gid, nwg);
    if (i >= P[0]) {
        return;
    }
    let hw = P[2] * P[3];
    let p = i / hw;
    let s = i % hw;
    let iy = s / P[3];
    let ix = s % P[3];
    let ry = cover(iy, P[2], P[4], P[6], P[8], P[10]);
    let rx = cover(ix, P[3], P[5], P[7], P[9], P[11]);
    let base = p * P[4] * P[5];
    var acc = 0.0;
    for (var oy = ry.x; oy < ry.y; oy = oy + 1u) {
        let rr = rows(oy);
        if (iy < rr.x || iy >= rr.y) {
            continue;
        }
        for (var ox = rx.x; ox < rx.y; ox = ox + 1u) {
            let cc = cols(ox);
            if (ix < cc.x || ix >= cc.y) {
                continue;
            }
            acc = acc + f32(src[base + oy * P[5] + ox]) / count(oy, ox, rr, cc);
        }
    }
    out1[i] = {{E}}(acc);
}

@compute @workgroup_size({{WG}})
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params3();
    let o = thread_index(gid, nwg);
    if (o >= P[0]) {
        return;
    }
    let p = o / (P[4] * P[5]);
    out2[o] = src[p * P[2] * P[3] + u32(idx_in[o])];
}
