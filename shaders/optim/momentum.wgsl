// Momentum (Paddle): v = mu·v + g'; p -= lr·(g' + mu·v) if nesterov else lr·v, where
// g' = g + wd·p. params: [n, lr, wd, mu, nesterov, scheduled].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> velocity: array<f32>;
@group(0) @binding(3) var<storage, read> schedule: array<f32>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    var lr = bitcast<f32>(params[1]);
    if (params[5] != 0u) {
        lr = lr * schedule[0];
    }
    let wd = bitcast<f32>(params[2]);
    let mu = bitcast<f32>(params[3]);
    let g = grad[i] + wd * param[i];
    let v = mu * velocity[i] + g;
    velocity[i] = v;
    if (params[4] != 0u) {
        param[i] = param[i] - lr * (g + mu * v);
    } else {
        param[i] = param[i] - lr * v;
    }
}
