// RMSProp (Paddle): ms = ρ·ms + (1−ρ)·g'²; centered: mg = ρ·mg + (1−ρ)·g', denom = ms − mg²;
// mom = μ·mom + lr·g'/√(denom + ε); p -= mom, with g' = g + wd·p.
// params: [n, lr, wd, rho, eps, momentum, centered, scheduled].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> mean_square: array<f32>;
@group(0) @binding(3) var<storage, read_write> mean_grad: array<f32>;
@group(0) @binding(4) var<storage, read_write> moment: array<f32>;
@group(0) @binding(5) var<storage, read> schedule: array<f32>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

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
    if (params[7] != 0u) {
        lr = lr * schedule[0];
    }
    let wd = bitcast<f32>(params[2]);
    let rho = bitcast<f32>(params[3]);
    let eps = bitcast<f32>(params[4]);
    let mu = bitcast<f32>(params[5]);
    let g = grad[i] + wd * param[i];
    let ms = rho * mean_square[i] + (1.0 - rho) * g * g;
    mean_square[i] = ms;
    var denom = ms;
    if (params[6] != 0u) {
        let mg = rho * mean_grad[i] + (1.0 - rho) * g;
        mean_grad[i] = mg;
        denom = ms - mg * mg;
    }
    let mom = mu * moment[i] + lr * g / sqrt(denom + eps);
    moment[i] = mom;
    param[i] = param[i] - mom;
}
