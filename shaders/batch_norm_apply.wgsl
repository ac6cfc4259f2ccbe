// batch_norm normalisation of x viewed as [N, C, S], one invocation per element:
// y = (x − mean[c]) · rstd[c] · w[c] + b[c].
// params: [N·C·S, C, S, has_weight, has_bias]

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> mean: array<f32>;
@group(0) @binding(2) var<storage, read> rstd: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> b: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    if (idx >= params[0]) {
        return;
    }
    let c = (idx / params[2]) % params[1];
    var v = (x[idx] - mean[c]) * rstd[c];
    if (params[3] != 0u) {
        v = v * w[c];
    }
    if (params[4] != 0u) {
        v = v + b[c];
    }
    y[idx] = v;
}
