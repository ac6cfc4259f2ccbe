// Adam / AdamW with bias correction (Paddle's kernel):
//   p -= lr·decoupled_wd·p                        (AdamW only)
//   g' = g + l2_wd·p                              (Adam's L2 weight decay)
//   m = β1·m + (1−β1)·g';  v = β2·v + (1−β2)·g'²
//   p -= lr·√(1−β2ᵗ)/(1−β1ᵗ) · m / (√v + ε·√(1−β2ᵗ))
// One dispatch updates {{K}} parameters of the same settings (an execution plan merges
// adjacent updates, as Paddle's merged_adam does): parameter k's param, grad, moment1 and
// moment2 are bindings 4k to 4k + 3 (declared by the variant), the schedule and params next.
// params: [n, lr, l2_wd, decoupled_wd, beta1, beta2, eps, beta1_pow, beta2_pow, scheduled,
// then (first workgroup, elements) of each parameter], n the invocations of all K; when
// `scheduled`, lr is a multiplier of schedule[0] and the β powers are schedule[1..3]. Each
// workgroup updates one parameter, so the branch below is the same for all its invocations.
{{TENSORS}}
@group(0) @binding({{SCHEDULE}}) var<storage, read> schedule: array<f32>;
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

// One element: (p, g, m, v) → (p', m', v').
fn adam(p0: f32, g0: f32, m0: f32, v0: f32) -> vec3<f32> {
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
    let p = p0 - lr * decoupled * p0;
    let g = g0 + l2 * p;
    let m = b1 * m0 + (1.0 - b1) * g;
    let v = b2 * v0 + (1.0 - b2) * g * g;
    let c2 = sqrt(1.0 - b2p);
    return vec3<f32>(p - lr * c2 / (1.0 - b1p) * (m / (sqrt(v) + eps * c2)), m, v);
}

@compute @workgroup_size({{WG}})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let w = wid.x + wid.y * nwg.x;
    // The parameter this workgroup updates: the last whose first workgroup is at most w.
    var k = 0u;
    for (var j = 1u; j < {{K}}u; j++) {
        if (w >= params[10u + 2u * j]) {
            k = j;
        }
    }
    let e = (w - params[10u + 2u * k]) * {{WG}}u + lid;
    if (e >= params[11u + 2u * k]) {
        return;
    }
    var x = vec4<f32>();
    switch k {
{{LOADS}}
        default: {}
    }
    let r = adam(x.x, x.y, x.z, x.w);
    switch k {
{{STORES}}
        default: {}
    }
}
