// cumprod's input gradient along the middle axis of an (outer, len, inner) view, one
// invocation per line. In scan order: dx_s = E_s * T_s with E_s the product of the
// elements before s and T_s = g_s + x_{s+1} T_{s+1} (exclusive: T_s = g_{s+1} +
// x_{s+1} T_{s+1}, T_last = 0); no division, so zeros are exact.
// params: [outer, len, inner, exclusive, reverse].
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let line = gid.x + gid.y * nwg.x * {{WG}}u;
    let len = params[1];
    let inner = params[2];
    if (line >= params[0] * inner || len == 0u) {
        return;
    }
    let exclusive = params[3] != 0u;
    let reverse = params[4] != 0u;
    let base = (line / inner) * len * inner + line % inner;
    // Position of the s-th element in scan order.
    var before = 1.0;
    for (var s = 0u; s < len; s = s + 1u) {
        let at = base + select(s, len - 1u - s, reverse) * inner;
        dst[at] = before;
        before = before * x[at];
    }
    let last = base + select(len - 1u, 0u, reverse) * inner;
    var tail = select(g[last], 0.0, exclusive);
    dst[last] = dst[last] * tail;
    for (var k = 1u; k < len; k = k + 1u) {
        let s = len - 1u - k;
        let at = base + select(s, len - 1u - s, reverse) * inner;
        let nx = base + select(s + 1u, len - 2u - s, reverse) * inner;
        tail = select(g[at], g[nx], exclusive) + x[nx] * tail;
        dst[at] = dst[at] * tail;
    }
}
