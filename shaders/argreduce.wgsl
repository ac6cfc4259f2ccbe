// argmax / argmin over the middle axis of an (outer, R, inner) view: one invocation per
// output; the first index wins ties; NaN counts as the extreme (numpy).
// params: [outer, R, inner]. Output: int64 indices.
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

fn better(a: {{S}}, b: {{S}}) -> bool {
    return {{BETTER}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    let outer = params[0];
    let len = params[1];
    let inner = params[2];
    if (idx >= outer * inner) {
        return;
    }
    let o = idx / inner;
    let i = idx % inner;
    var best = src[o * len * inner + i];
    var arg = 0u;
    for (var r = 1u; r < len; r = r + 1u) {
        let v = src[(o * len + r) * inner + i];
        if (better(v, best)) {
            best = v;
            arg = r;
        }
    }
    dst[idx] = vec2<u32>(arg, 0u);
}
