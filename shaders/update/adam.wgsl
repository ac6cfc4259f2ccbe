// Adam / AdamW with bias correction (Paddle's kernel):
//   p -= lr·decoupled_wd·p                        (AdamW only)
//   g' = g + l2_wd·p                              (Adam's L2 weight decay)
//   m = β1·m + (1−β1)·g';  v = β2·v + (1−β2)·g'²
//   p -= lr·√(1−β2ᵗ)/(1−β1ᵗ) · m / (√v + ε·√(1−β2ᵗ))
// params: [n, lr, l2_wd, decoupled_wd, beta1, beta2, eps, beta1_pow, beta2_pow, scheduled,
// then each parameter's first workgroup and elements]; when `scheduled`, lr is a multiplier
// of schedule[0] and the β powers are schedule[1..3]. Parameter k's param, grad, moment1 and
// moment2 are bindings 4k to 4k + 3 (lib/merged_update.wgsl).
{{TENSORS}}
@group(0) @binding({{SCHEDULE}}) var<storage, read> schedule: array<f32>;
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

fn update(x: vec4<f32>) -> vec4<f32> {
    var lr = bitcast<f32>(params[1]);
    let l2 = bitcast<f32>(params[2]);
    let decoupled = bitcast<f32>(params[3]);
    let b1 = bitcast<f32>(params[4]);
    let b2 = bitcast<f32>(params[5]);
    let eps = bitcast<f32>(params[6]);
    var b1p = bitcast<f32>(params[7]);
    var b2p = bitcast<f32>(params[8]);
    if (params[9] != 0u) {
        lr = lr * schedule[0];
        b1p = schedule[1];
        b2p = schedule[2];
    }
    let p = x.x - lr * decoupled * x.x;
    let g = x.y + l2 * p;
    let m = b1 * x.z + (1.0 - b1) * g;
    let v = b2 * x.w + (1.0 - b2) * g * g;
    let c2 = sqrt(1.0 - b2p);
    return vec4<f32>(p - lr * c2 / (1.0 - b1p) * (m / (sqrt(v) + eps * c2)), 0.0, m, v);
}

#include "lib/merged_update.wgsl"
