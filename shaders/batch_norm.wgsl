// batch_norm per-channel batch statistics of x viewed as [N, C, S]: one workgroup per
// channel reduces its N·S values (mean first, then the squared deviations, for accuracy)
// and writes mean, the biased variance and rstd = 1/sqrt(var + eps).
// params: [N, C, S, eps (f32 bits)]

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;
@group(0) @binding(2) var<storage, read_write> variance: array<f32>;
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

#include "lib/wg_reduce.wgsl"

@compute @workgroup_size({{WG}})
fn stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let c = wid.x + wid.y * nwg.x;
    let n = params[0];
    let channels = params[1];
    let s = params[2];
    let eps = bitcast<f32>(params[3]);
    let in_range = c < channels;
    let m = n * s;
    var acc = 0.0;
    if (in_range) {
        for (var k = lid; k < m; k = k + {{WG}}u) {
            let i = k / s;
            acc = acc + x[(i * channels + c) * s + (k - i * s)];
        }
    }
    let mu = wg_sum(lid, acc) / f32(m);
    var q = 0.0;
    if (in_range) {
        for (var k = lid; k < m; k = k + {{WG}}u) {
            let i = k / s;
            let t = x[(i * channels + c) * s + (k - i * s)] - mu;
            q = q + t * t;
        }
    }
    let v = wg_sum(lid, q) / f32(m);
    if (in_range && lid == 0u) {
        mean[c] = mu;
        variance[c] = v;
        rstd[c] = 1.0 / sqrt(v + eps);
    }
}
