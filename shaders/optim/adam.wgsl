// Adam / AdamW with bias correction (Paddle's kernel):
//   p -= lr·decoupled_wd·p                        (AdamW only)
//   g' = g + l2_wd·p                              (Adam's L2 weight decay)
//   m = β1·m + (1−β1)·g';  v = β2·v + (1−β2)·g'²
//   p -= lr·√(1−β2ᵗ)/(1−β1ᵗ) · m / (√v + ε·√(1−β2ᵗ))
// params: [n, lr, l2_wd, decoupled_wd, beta1, beta2, eps, beta1_pow, beta2_pow, scheduled];
// when `scheduled`, lr is a multiplier of schedule[0] and the β powers are schedule[1..3].
@group(0) @binding(0) var<storage, read_write> param: array<f32>;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> moment1: array<f32>;
@group(0) @binding(3) var<storage, read_write> moment2: array<f32>;
@group(0) @binding(4) var<storage, read> schedule: array<f32>;
@group(0) @binding(5) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
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
    var p = param[i];
    p = p - lr * decoupled * p;
    let g = grad[i] + l2 * p;
    let m = b1 * moment1[i] + (1.0 - b1) * g;
    let v = b2 * moment2[i] + (1.0 - b2) * g * g;
    moment1[i] = m;
    moment2[i] = v;
    let c2 = sqrt(1.0 - b2p);
    param[i] = p - lr * c2 / (1.0 - b1p) * (m / (sqrt(v) + eps * c2));
}
