// Gather along one axis: out[o, j, i] = src[o, index(o, j, i), i] for an (outer, M, inner)
// output, with src viewed as (outer, N, inner). The index of (o, j, i) sits at position
// o * so + j * sj + i * si, so a 1-D index list (so = si = 0, sj = 1: index_select, gather,
// embedding) and a full index tensor (take_along_axis) share the kernel. Elements move as raw
// words (S = u32 for 32-bit dtypes, vec2<u32> for int64). An index outside [0, N) reads 0
// and is recorded in the device's error flag (see lib/index_check.wgsl), which the next readback
// reports as the CPU's error; the padding index (params[7], 0xffffffff for none) reads 0.
// params: [total, M, inner, N, so, sj, si, pad, op code]
#include "lib/index_check.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read> index: array<{{I}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{S}}>;
@group(0) @binding(3) var<storage, read_write> index_errors: array<atomic<u32>, 5>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= params[0]) {
        return;
    }
    let m = params[1];
    let inner = params[2];
    let n = params[3];
    let i = t % inner;
    let j = (t / inner) % m;
    let o = t / (inner * m);
    let k = o * params[4] + j * params[5] + i * params[6];
    let v = index_at(k);
    var value = {{S}}();
    if (v < n && v != params[7]) {
        value = src[(o * n + v) * inner + i];
    } else if (v >= n) {
        report_index(params[8], index_raw(k), n);
    }
    dst[t] = value;
}
