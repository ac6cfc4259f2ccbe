// Fused backward of softmax / log_softmax over the middle axis of an (outer, R, inner) view:
//   softmax:     dx = y · (g − Σ g·y)
//   log_softmax: dx = g − exp(y) · Σ g
// `rows` (inner == 1): one workgroup per row, the sum as a tree reduction.
// `rows_cached` (inner == 1, R ≤ CACHED × WG): the same, y and g read once into registers.
// `strided`: one invocation per (outer, inner) line.
// params: [outer, R, inner]

@group(0) @binding(0) var<storage, read> y: array<{{E}}>;
@group(0) @binding(1) var<storage, read> g: array<{{E}}>;
@group(0) @binding(2) var<storage, read_write> dx: array<{{E}}>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

const LOG_SOFTMAX: bool = {{LOG}};

#include "lib/wg_reduce.wgsl"

// Elements per invocation in `rows_cached`.
const CACHED: u32 = {{CACHED}}u;

// The summand of the row reduction.
fn term(k: u32) -> f32 {
    if (LOG_SOFTMAX) {
        return f32(g[k]);
    }
    return f32(g[k]) * f32(y[k]);
}

fn result(k: u32, total: f32) -> f32 {
    if (LOG_SOFTMAX) {
        return f32(g[k]) - exp(f32(y[k])) * total;
    }
    return f32(y[k]) * (f32(g[k]) - total);
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let outer = params[0];
    let len = params[1];
    let in_range = row < outer;
    let base = row * len;
    var acc = 0.0;
    if (in_range) {
        for (var r = lid; r < len; r = r + {{WG}}u) {
            acc = acc + term(base + r);
        }
    }
    let total = wg_sum(lid, acc);
    if (in_range) {
        for (var r = lid; r < len; r = r + {{WG}}u) {
            dx[base + r] = {{E}}(result(base + r, total));
        }
    }
}

@compute @workgroup_size({{WG}})
fn rows_cached(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let len = select(0u, params[1], row < params[0]);
    let base = row * params[1];
    var yv: array<f32, CACHED>;
    var gv: array<f32, CACHED>;
    var acc = 0.0;
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let r = lid + i * {{WG}}u;
        if (r < len) {
            yv[i] = f32(y[base + r]);
            gv[i] = f32(g[base + r]);
            acc = acc + select(gv[i] * yv[i], gv[i], LOG_SOFTMAX);
        }
    }
    let total = wg_sum(lid, acc);
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let r = lid + i * {{WG}}u;
        if (r < len) {
            if (LOG_SOFTMAX) {
                dx[base + r] = {{E}}(gv[i] - exp(yv[i]) * total);
            } else {
                dx[base + r] = {{E}}(yv[i] * (gv[i] - total));
            }
        }
    }
}

@compute @workgroup_size({{WG}})
fn strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    let outer = params[0];
    let len = params[1];
    let inner = params[2];
    if (idx >= outer * inner) {
        return;
    }
    let base = (idx / inner) * len * inner + idx % inner;
    var total = 0.0;
    for (var r = 0u; r < len; r = r + 1u) {
        total = total + term(base + r * inner);
    }
    for (var r = 0u; r < len; r = r + 1u) {
        let k = base + r * inner;
        dx[k] = {{E}}(result(k, total));
    }
}
