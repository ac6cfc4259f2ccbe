// SGD: p -= lr · (g + wd · p). params: [n, lr, wd, scheduled, then each parameter's first
// workgroup and elements] (floats as bits); when `scheduled`, lr is a multiplier of
// schedule[0] (see src/ops/update/). Parameter k's param and grad are bindings 2k
// and 2k + 1 (lib/merged_update.wgsl).
{{TENSORS}}
@group(0) @binding({{SCHEDULE}}) var<storage, read> schedule: array<f32>;
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

fn update(x: vec4<f32>) -> vec4<f32> {
    var lr = bitcast<f32>(params[1]);
    if (params[3] != 0u) {
        lr = lr * schedule[0];
    }
    let wd = bitcast<f32>(params[2]);
    return vec4<f32>(x.x - lr * (x.y + wd * x.x), 0.0, 0.0, 0.0);
}

#include "lib/merged_update.wgsl"
