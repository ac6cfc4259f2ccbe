// Adagrad (Paddle): g' = g + wd·p; moment += g'²; p -= lr·g' / (√moment + ε).
// params: [n, lr, wd, eps, scheduled].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> moment: array<f32>;
@group(0) @binding(3) var<storage, read> schedule: array<f32>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    if (params[4] == 2u && schedule[3] != 0.0) {
        return;
    }
    var lr = bitcast<f32>(params[1]);
    if (params[4] != 0u) {
        lr = lr * schedule[0];
    }
    let g = grad[i] + bitcast<f32>(params[2]) * param[i];
    let m = moment[i] + g * g;
    moment[i] = m;
    param[i] = param[i] - lr * g / (sqrt(m) + bitcast<f32>(params[3]));
}
