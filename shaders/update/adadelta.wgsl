// Adadelta (Paddle): g' = g + wd·p; E[g²] = ρ·E[g²] + (1−ρ)·g'²;
// u = −√((E[u²] + ε) / (E[g²] + ε))·g'; E[u²] = ρ·E[u²] + (1−ρ)·u²; p += lr·u.
// params: [n, lr, wd, rho, eps, scheduled].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> avg_squared_grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> avg_squared_update: array<f32>;
@group(0) @binding(4) var<storage, read> schedule: array<f32>;
@group(0) @binding(5) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    if (params[5] == 2u && schedule[3] != 0.0) {
        return;
    }
    var lr = bitcast<f32>(params[1]);
    if (params[5] != 0u) {
        lr = lr * schedule[0];
    }
    let rho = bitcast<f32>(params[3]);
    let eps = bitcast<f32>(params[4]);
    let g = grad[i] + bitcast<f32>(params[2]) * param[i];
    let sg = rho * avg_squared_grad[i] + (1.0 - rho) * g * g;
    avg_squared_grad[i] = sg;
    let u = -sqrt((avg_squared_update[i] + eps) / (sg + eps)) * g;
    avg_squared_update[i] = rho * avg_squared_update[i] + (1.0 - rho) * u * u;
    param[i] = param[i] + lr * u;
}
