// batch_norm backward, per-channel pass over x and g viewed as [N, C, S]: one workgroup per
// channel computes Σg (= dbias) and Σg·x̂ (= dweight), x̂ = (x − mean) · rstd, and the
// coefficients of dx = w · k0 · (g − k1 − (x − mean) · k2) for batch_norm_dx.wgsl:
// batch statistics: k = (rstd, Σg/M, rstd · Σg·x̂/M); fixed statistics: k = (rstd, 0, 0).
// params: [N, C, S, batch_stats]

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> mean: array<f32>;
@group(0) @binding(3) var<storage, read> rstd: array<f32>;
@group(0) @binding(4) var<storage, read_write> dw: array<f32>;
@group(0) @binding(5) var<storage, read_write> db: array<f32>;
@group(0) @binding(6) var<storage, read_write> coef: array<f32>;
@group(0) @binding(7) var<storage, read> params: array<u32>;

#include "lib/wg_reduce.wgsl"

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let c = wid.x + wid.y * nwg.x;
    let n = params[0];
    let channels = params[1];
    let s = params[2];
    let in_range = c < channels;
    let cc = min(c, max(channels, 1u) - 1u);
    let mu = mean[cc];
    let rs = rstd[cc];
    let m = n * s;
    var sg = 0.0;
    var sgx = 0.0;
    if (in_range) {
        for (var k = lid; k < m; k = k + {{WG}}u) {
            let i = k / s;
            let at = (i * channels + c) * s + (k - i * s);
            sg = sg + g[at];
            sgx = sgx + g[at] * (x[at] - mu) * rs;
        }
    }
    let total_g = wg_sum(lid, sg);
    let total_gx = wg_sum(lid, sgx);
    if (in_range && lid == 0u) {
        db[c] = total_g;
        dw[c] = total_gx;
        coef[3u * c] = rs;
        if (params[3] != 0u) {
            coef[3u * c + 1u] = total_g / f32(m);
            coef[3u * c + 2u] = rs * total_gx / f32(m);
        } else {
            coef[3u * c + 1u] = 0.0;
            coef[3u * c + 2u] = 0.0;
        }
    }
}
