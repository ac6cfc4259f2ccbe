// batch_norm backward w.r.t. x, one invocation per element of [N, C, S], from the
// per-channel coefficients of batch_norm_grad.wgsl: dx = w · k0 · (g − k1 − (x − mean) · k2).
// params: [N·C·S, C, S, has_weight]

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> mean: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> coef: array<f32>;
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    if (idx >= params[0]) {
        return;
    }
    let c = (idx / params[2]) % params[1];
    var k0 = coef[3u * c];
    if (params[3] != 0u) {
        k0 = k0 * w[c];
    }
    dx[idx] = k0 * (g[idx] - coef[3u * c + 1u] - (x[idx] - mean[c]) * coef[3u * c + 2u]);
}
