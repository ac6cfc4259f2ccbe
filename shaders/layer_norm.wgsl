// layer_norm forward over rows of D contiguous elements: y = (x − mean) · rstd · w + b, and
// the row's mean and rstd = 1/sqrt(var + eps) (biased variance) saved for backward.
// `rows`: one workgroup per row, mean and variance (two passes, for accuracy) as tree
// reductions. `small`: one invocation per row, for short rows.
// params: [rows, D, has_weight, has_bias, eps (f32 bits)]

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> mean: array<f32>;
@group(0) @binding(5) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

var<workgroup> red: array<f32, {{WG}}>;

// Σ v over the workgroup; every invocation must call it (it holds barriers).
fn wg_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = {{WG}}u / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            red[lid] = red[lid] + red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

fn affine(j: u32, v: f32) -> f32 {
    var r = v;
    if (params[2] != 0u) {
        r = r * w[j];
    }
    if (params[3] != 0u) {
        r = r + b[j];
    }
    return r;
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let n = params[0];
    let d = params[1];
    let eps = bitcast<f32>(params[4]);
    let in_range = row < n;
    let base = row * d;
    var s = 0.0;
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            s = s + x[base + j];
        }
    }
    let mu = wg_sum(lid, s) / f32(d);
    var q = 0.0;
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            let t = x[base + j] - mu;
            q = q + t * t;
        }
    }
    let rs = 1.0 / sqrt(wg_sum(lid, q) / f32(d) + eps);
    if (in_range) {
        for (var j = lid; j < d; j = j + {{WG}}u) {
            y[base + j] = affine(j, (x[base + j] - mu) * rs);
        }
        if (lid == 0u) {
            mean[row] = mu;
            rstd[row] = rs;
        }
    }
}

@compute @workgroup_size({{WG}})
fn small(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * {{WG}}u;
    let n = params[0];
    let d = params[1];
    let eps = bitcast<f32>(params[4]);
    if (row >= n) {
        return;
    }
    let base = row * d;
    var s = 0.0;
    for (var j = 0u; j < d; j = j + 1u) {
        s = s + x[base + j];
    }
    let mu = s / f32(d);
    var q = 0.0;
    for (var j = 0u; j < d; j = j + 1u) {
        let t = x[base + j] - mu;
        q = q + t * t;
    }
    let rs = 1.0 / sqrt(q / f32(d) + eps);
    for (var j = 0u; j < d; j = j + 1u) {
        y[base + j] = affine(j, (x[base + j] - mu) * rs);
    }
    mean[row] = mu;
    rstd[row] = rs;
}
