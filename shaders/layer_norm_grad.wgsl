// layer_norm backward w.r.t. x, per row of D elements, from the saved mean and rstd:
//   gw = g · w,  x̂ = (x − mean) · rstd,
//   dx = rstd · (gw − mean(gw) − x̂ · mean(gw · x̂))
// `rows`: one workgroup per row (tree reductions); `rows_cached` (D ≤ CACHED × WG): the same,
// x − mean and g·w held in registers so x, g and w are read once; `small`: one invocation per row.
// params: [rows, D, has_weight]

@group(0) @binding(0) var<storage, read> x: array<{{E}}>;
@group(0) @binding(1) var<storage, read> g: array<{{E}}>;
@group(0) @binding(2) var<storage, read> w: array<{{W}}>;
@group(0) @binding(3) var<storage, read> mean: array<{{E}}>;
@group(0) @binding(4) var<storage, read> rstd: array<{{E}}>;
@group(0) @binding(5) var<storage, read_write> dx: array<{{E}}>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

#include "lib/wg_reduce.wgsl"

// Elements per invocation in `rows_cached`.
const CACHED: u32 = {{CACHED}}u;

fn gw(k: u32, j: u32) -> f32 {
    if (params[2] != 0u) {
        return f32(g[k]) * f32(w[j]);
    }
    return f32(g[k]);
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let n = params[0];
    let d = params[1];
    let in_range = row < n;
    let r = min(row, max(n, 1u) - 1u);
    let base = r * d;
    let mu = f32(mean[r]);
    let rs = f32(rstd[r]);
    var s1 = 0.0;
    var s2 = 0.0;
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            let v = gw(base + j, j);
            s1 = s1 + v;
            s2 = s2 + v * (f32(x[base + j]) - mu) * rs;
        }
    }
    let a = wg_sum(lid, s1) / f32(d);
    let c = wg_sum(lid, s2) / f32(d);
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            let xhat = (f32(x[base + j]) - mu) * rs;
            dx[base + j] = {{E}}(rs * (gw(base + j, j) - a - xhat * c));
        }
    }
}

@compute @workgroup_size({{WG}})
fn rows_cached(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let n = params[0];
    let d = params[1];
    let len = select(0u, d, row < n);
    let r = min(row, max(n, 1u) - 1u);
    let base = r * d;
    let mu = f32(mean[r]);
    let rs = f32(rstd[r]);
    var gws: array<f32, CACHED>;
    var xms: array<f32, CACHED>;
    var s1 = 0.0;
    var s2 = 0.0;
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let j = lid + i * {{WG}}u;
        if (j < len) {
            gws[i] = gw(base + j, j);
            xms[i] = f32(x[base + j]) - mu;
            s1 = s1 + gws[i];
            s2 = s2 + gws[i] * xms[i] * rs;
        }
    }
    let a = wg_sum(lid, s1) / f32(d);
    let c = wg_sum(lid, s2) / f32(d);
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let j = lid + i * {{WG}}u;
        if (j < len) {
            let xhat = xms[i] * rs;
            dx[base + j] = {{E}}(rs * (gws[i] - a - xhat * c));
        }
    }
}

@compute @workgroup_size({{WG}})
fn small(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * {{WG}}u;
    let n = params[0];
    let d = params[1];
    if (row >= n) {
        return;
    }
    let base = row * d;
    let mu = f32(mean[row]);
    let rs = f32(rstd[row]);
    var s1 = 0.0;
    var s2 = 0.0;
    for (var j = 0u; j < d; j = j + 1u) {
        let v = gw(base + j, j);
        s1 = s1 + v;
        s2 = s2 + v * (f32(x[base + j]) - mu) * rs;
    }
    let a = s1 / f32(d);
    let c = s2 / f32(d);
    for (var j = 0u; j < d; j = j + 1u) {
        let xhat = (f32(x[base + j]) - mu) * rs;
        dx[base + j] = {{E}}(rs * (gw(base + j, j) - a - xhat * c));
    }
}
