// scatter_axis: out = x with values written at index along the middle axis of an (outer, N,
// inner) view. Each output element loops over the M index entries of its (o, i) column in
// order: `assign` keeps the last matching value, `add` adds every match to x, `sum` replaces
// a written element by the sum of its matches. Deterministic, no atomics. An out-of-range
// index writes nothing and is recorded in the device's error flag (by the v == 0 element of
// its column).
// params: [total, M, inner, N, so, sj, si, pad (unused), op code, reduce: 0 assign, 1 add, 2 sum]
#include "lib/index_check.wgsl"
#include "lib/int64.wgsl"

@group(0) @binding(0) var<storage, read> x: array<{{S}}>;
@group(0) @binding(1) var<storage, read> index: array<{{I}}>;
@group(0) @binding(2) var<storage, read> values: array<{{S}}>;
@group(0) @binding(3) var<storage, read_write> dst: array<{{S}}>;
@group(0) @binding(4) var<storage, read_write> index_errors: array<atomic<u32>, 5>;
@group(0) @binding(5) var<storage, read> params: array<u32>;

fn combine(a: {{S}}, b: {{S}}) -> {{S}} {
    return {{COMBINE}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= params[0]) {
        return;
    }
    let m = params[1];
    let inner = params[2];
    let n = params[3];
    let reduce = params[9];
    let i = t % inner;
    let v = (t / inner) % n;
    let o = t / (inner * n);
    let base = o * params[4] + i * params[6];
    var acc: {{S}} = {{IDENTITY}};
    var hit = false;
    for (var j = 0u; j < m; j = j + 1u) {
        let u = index_at(base + j * params[5]);
        if (u == v) {
            let val = values[(o * m + j) * inner + i];
            acc = select(combine(acc, val), val, reduce == 0u);
            hit = true;
        } else if (u >= n && v == 0u) {
            report_index(params[8], index_raw(base + j * params[5]), n);
        }
    }
    if (reduce == 1u) {
        dst[t] = combine(x[t], acc);
    } else {
        dst[t] = select(x[t], acc, hit);
    }
}
