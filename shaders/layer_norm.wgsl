// layer_norm forward over rows of D contiguous elements: y = (x − mean) · rstd · w + b, and
// the row's mean and rstd = 1/sqrt(var + eps) (biased variance) saved for backward.
// `rows`: one workgroup per row, mean and variance (two passes, for accuracy) as tree
// reductions. `rows_cached` (D ≤ CACHED × WG): the same, x read once into registers where
// `rows` reads it three times. `small`: one invocation per row, for short rows.
// params: [rows, D, has_weight, has_bias, eps (f32 bits)]

@group(0) @binding(0) var<storage, read> x: array<{{E}}>;
@group(0) @binding(1) var<storage, read> w: array<{{W}}>;
@group(0) @binding(2) var<storage, read> b: array<{{W}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{E}}>;
@group(0) @binding(4) var<storage, read_write> mean: array<{{E}}>;
@group(0) @binding(5) var<storage, read_write> rstd: array<{{E}}>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

#include "lib/wg_reduce.wgsl"

// Elements per invocation in `rows_cached`.
const CACHED: u32 = {{CACHED}}u;

fn affine(j: u32, v: f32) -> f32 {
    var r = v;
    if (params[2] != 0u) {
        r = r * f32(w[j]);
    }
    if (params[3] != 0u) {
        r = r + f32(b[j]);
    }
    return r;
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let n = params[0];
    let d = params[1];
    let eps = bitcast<f32>(params[4]);
    let in_range = row < n;
    let base = row * d;
    var s = 0.0;
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            s = s + f32(x[base + j]);
        }
    }
    let mu = wg_sum(lid, s) / f32(d);
    var q = 0.0;
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            let t = f32(x[base + j]) - mu;
            q = q + t * t;
        }
    }
    let rs = 1.0 / sqrt(wg_sum(lid, q) / f32(d) + eps);
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            y[base + j] = {{E}}(affine(j, (f32(x[base + j]) - mu) * rs));
        }
        if (lid == 0u) {
            mean[row] = {{E}}(mu);
            rstd[row] = {{E}}(rs);
        }
    }
}

@compute @workgroup_size({{WG}})
fn rows_cached(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let in_range = row < params[0];
    let d = params[1];
    let len = select(0u, d, in_range);
    let eps = bitcast<f32>(params[4]);
    let base = row * d;
    var v: array<f32, CACHED>;
    var s = 0.0;
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let j = lid + i * {{WG}}u;
        if (j < len) {
            v[i] = f32(x[base + j]);
            s = s + v[i];
        }
    }
    let mu = wg_sum(lid, s) / f32(d);
    var q = 0.0;
    for (var i = 0u; i < CACHED; i = i + 1u) {
        if (lid + i * {{WG}}u < len) {
            v[i] = v[i] - mu;
            q = q + v[i] * v[i];
        }
    }
    let rs = 1.0 / sqrt(wg_sum(lid, q) / f32(d) + eps);
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let j = lid + i * {{WG}}u;
        if (j < len) {
            y[base + j] = {{E}}(affine(j, v[i] * rs));
        }
    }
    if (in_range && lid == 0u) {
        mean[row] = {{E}}(mu);
        rstd[row] = {{E}}(rs);
    }
}

@compute @workgroup_size({{WG}})
fn small(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * {{WG}}u;
    let n = params[0];
    let d = params[1];
    let eps = bitcast<f32>(params[4]);
    if (row >= n) {
        return;
    }
    let base = row * d;
    var s = 0.0;
    for (var j = 0u; j < d; j = j + 1u) {
        s = s + f32(x[base + j]);
    }
    let mu = s / f32(d);
    var q = 0.0;
    for (var j = 0u; j < d; j = j + 1u) {
        let t = f32(x[base + j]) - mu;
        q = q + t * t;
    }
    let rs = 1.0 / sqrt(q / f32(d) + eps);
    for (var j = 0u; j < d; j = j + 1u) {
        y[base + j] = {{E}}(affine(j, (f32(x[base + j]) - mu) * rs));
    }
    mean[row] = {{E}}(mu);
    rstd[row] = {{E}}(rs);
}
