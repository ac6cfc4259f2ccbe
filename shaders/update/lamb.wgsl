// Lamb's moments and update direction (Paddle): g' = g + wd·p; m = β1·m + (1−β1)·g';
// v = β2·v + (1−β2)·g'²; r = m̂ / (√v̂ + ε) + λ·p with m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ).
// The parameter is left alone: the trust-ratio step p -= lr·(‖p‖/‖r‖)·r follows as tensor
// ops, since it needs the norms.
// params: [n, lr (unused), wd, beta1, beta2, eps, beta1_pow, beta2_pow, lamb_wd, scheduled].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> moment1: array<f32>;
@group(0) @binding(3) var<storage, read_write> moment2: array<f32>;
@group(0) @binding(4) var<storage, read_write> update: array<f32>;
@group(0) @binding(5) var<storage, read> schedule: array<f32>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    if (params[9] == 2u && schedule[3] != 0.0) {
        return;
    }
    var beta1_pow = bitcast<f32>(params[6]);
    var beta2_pow = bitcast<f32>(params[7]);
    if (params[9] != 0u) {
        beta1_pow = schedule[1];
        beta2_pow = schedule[2];
    }
    let beta1 = bitcast<f32>(params[3]);
    let beta2 = bitcast<f32>(params[4]);
    let p = param[i];
    let g = grad[i] + bitcast<f32>(params[2]) * p;
    let m = beta1 * moment1[i] + (1.0 - beta1) * g;
    let v = beta2 * moment2[i] + (1.0 - beta2) * g * g;
    moment1[i] = m;
    moment2[i] = v;
    let m_hat = m / (1.0 - beta1_pow);
    let v_hat = v / (1.0 - beta2_pow);
    update[i] = m_hat / (sqrt(v_hat) + bitcast<f32>(params[5])) + bitcast<f32>(params[8]) * p;
}
