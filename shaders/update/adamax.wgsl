// Adamax (Paddle): g' = g + wd·p; m = β1·m + (1−β1)·g'; u = max(β2·u + ε, |g'|);
// p -= lr / (1 − β1ᵗ) · m / u.
// params: [n, lr, wd, beta1, beta2, eps, beta1_pow, scheduled]; when `scheduled`, lr is a
// multiplier of schedule[0] and β1ᵗ is schedule[1].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> moment: array<f32>;
@group(0) @binding(3) var<storage, read_write> inf_norm: array<f32>;
@group(0) @binding(4) var<storage, read> schedule: array<f32>;
@group(0) @binding(5) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    if (params[7] == 2u && schedule[3] != 0.0) {
        return;
    }
    var lr = bitcast<f32>(params[1]);
    var beta1_pow = bitcast<f32>(params[6]);
    if (params[7] != 0u) {
        lr = lr * schedule[0];
        beta1_pow = schedule[1];
    }
    let beta1 = bitcast<f32>(params[3]);
    let g = grad[i] + bitcast<f32>(params[2]) * param[i];
    let m = beta1 * moment[i] + (1.0 - beta1) * g;
    moment[i] = m;
    let u = max(bitcast<f32>(params[4]) * inf_norm[i] + bitcast<f32>(params[5]), abs(g));
    inf_norm[i] = u;
    param[i] = param[i] - lr / (1.0 - beta1_pow) * m / u;
}
