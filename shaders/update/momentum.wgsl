// Momentum (Paddle): v = mu·v + g'; p -= lr·(g' + mu·v) if nesterov else lr·v, where
// g' = g + wd·p. params: [n, lr, wd, mu, nesterov, scheduled, then each parameter's first
// workgroup and elements]. Parameter k's param, grad and velocity are bindings 3k to 3k + 2
// (lib/merged_update.wgsl).
{{TENSORS}}
@group(0) @binding({{SCHEDULE}}) var<storage, read> schedule: array<f32>;
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

fn update(x: vec4<f32>) -> vec4<f32> {
    var lr = bitcast<f32>(params[1]);
    if (params[5] != 0u) {
        lr = lr * schedule[0];
    }
    let wd = bitcast<f32>(params[2]);
    let mu = bitcast<f32>(params[3]);
    let g = x.y + wd * x.x;
    let v = mu * x.z + g;
    if (params[4] != 0u) {
        return vec4<f32>(x.x - lr * (g + mu * v), 0.0, v, 0.0);
    }
    return vec4<f32>(x.x - lr * v, 0.0, v, 0.0);
}

#include "lib/merged_update.wgsl"
