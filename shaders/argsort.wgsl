// Stable argsort along the middle axis of an (outer, R, inner) view by ranking: the
// invocation of element r counts the elements that sort before it (ties: the earlier
// index first) and writes r at that rank. O(R) work per element, every element in
// parallel; NaN sorts as the largest value.
// params: [outer, R, inner]. Output: int64 indices.
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

// True when `a` sorts strictly before `b`.
fn before(a: {{S}}, b: {{S}}) -> bool {
    return {{BEFORE}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    let outer = params[0];
    let len = params[1];
    let inner = params[2];
    if (idx >= outer * len * inner) {
        return;
    }
    let i = idx % inner;
    let r = (idx / inner) % len;
    let o = idx / (inner * len);
    let base = o * len * inner + i;
    let v = src[base + r * inner];
    var rank = 0u;
    for (var s = 0u; s < len; s = s + 1u) {
        let w = src[base + s * inner];
        if (before(w, v) || (s < r && !before(v, w))) {
            rank = rank + 1u;
        }
    }
    dst[base + rank * inner] = vec2<u32>(r, 0u);
}
