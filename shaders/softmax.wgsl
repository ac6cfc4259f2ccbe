// softmax / log_softmax over the middle axis of an (outer, R, inner) view, max subtracted.
// `rows` (inner == 1): one workgroup per row; max, Σexp and the write in one dispatch,
// the two reductions as tree reductions in workgroup memory.
// `rows_cached` (inner == 1, R ≤ CACHED × WG): the same, each element read once into
// registers and its exp taken once, where `rows` reads the row three times.
// `strided`: one invocation per (outer, inner) line, looping over R.
// params: [outer, R, inner]
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{E}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{E}}>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

const LOG_SOFTMAX: bool = {{LOG}};

#include "lib/wg_reduce.wgsl"

// Elements per invocation in `rows_cached`.
const CACHED: u32 = {{CACHED}}u;

// The result for one element, from x − max and the row's Σexp(x − max).
fn result(shifted: f32, total: f32) -> f32 {
    if (LOG_SOFTMAX) {
        return shifted - log(total);
    }
    return exp(shifted) / total;
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let outer = params[0];
    let len = params[1];
    let in_range = row < outer;
    let base = row * len;

    var m = -f32_inf();
    if (in_range) {
        for (var r = lid; r < len; r = r + {{WG}}u) {
            m = max(m, f32(src[base + r]));
        }
    }
    let row_max = wg_max(lid, m);

    var acc = 0.0;
    if (in_range) {
        for (var r = lid; r < len; r = r + {{WG}}u) {
            acc = acc + exp(f32(src[base + r]) - row_max);
        }
    }
    let total = wg_sum(lid, acc);

    if (in_range) {
        for (var r = lid; r < len; r = r + {{WG}}u) {
            dst[base + r] = {{E}}(result(f32(src[base + r]) - row_max, total));
        }
    }
}

@compute @workgroup_size({{WG}})
fn rows_cached(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    let len = select(0u, params[1], row < params[0]);
    let base = row * params[1];

    var v: array<f32, CACHED>;
    var m = -f32_inf();
    for (var i = 0u; i < CACHED; i = i + 1u) {
        let r = lid + i * {{WG}}u;
        if (r < len) {
            v[i] = f32(src[base + r]);
            m = max(m, v[i]);
        }
    }
    let row_max = wg_max(lid, m);

    var acc = 0.0;
    for (var i = 0u; i < CACHED; i = i + 1u) {
        if (lid + i * {{WG}}u < len) {
            let shifted = v[i] - row_max;
            let e = exp(shifted);
            acc = acc + e;
            v[i] = select(e, shifted, LOG_SOFTMAX);
        }
    }
    let total = wg_sum(lid, acc);
    let log_total = log(total);

    for (var i = 0u; i < CACHED; i = i + 1u) {
        let r = lid + i * {{WG}}u;
        if (r < len) {
            dst[base + r] = {{E}}(select(v[i] / total, v[i] - log_total, LOG_SOFTMAX));
        }
    }
}

@compute @workgroup_size({{WG}})
fn strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    let outer = params[0];
    let len = params[1];
    let inner = params[2];
    if (idx >= outer * inner) {
        return;
    }
    let base = (idx / inner) * len * inner + idx % inner;
    var m = -f32_inf();
    for (var r = 0u; r < len; r = r + 1u) {
        m = max(m, f32(src[base + r * inner]));
    }
    var total = 0.0;
    for (var r = 0u; r < len; r = r + 1u) {
        total = total + exp(f32(src[base + r * inner]) - m);
    }
    for (var r = 0u; r < len; r = r + 1u) {
        let k = base + r * inner;
        dst[k] = {{E}}(result(f32(src[k]) - m, total));
    }
}
