// Inclusive or exclusive scan (sum or product) along the middle axis of an (outer, len,
// inner) view: one invocation per line, walking it in order (or reversed).
// params: [outer, len, inner, exclusive, reverse].
#include "lib/int64.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{S}}>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

fn combine(a: {{S}}, b: {{S}}) -> {{S}} {
    return {{COMBINE}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let line = gid.x + gid.y * nwg.x * {{WG}}u;
    let len = params[1];
    let inner = params[2];
    if (line >= params[0] * inner) {
        return;
    }
    let exclusive = params[3] != 0u;
    let reverse = params[4] != 0u;
    let base = (line / inner) * len * inner + line % inner;
    var acc: {{S}} = {{IDENTITY}};
    for (var s = 0u; s < len; s = s + 1u) {
        let r = select(s, len - 1u - s, reverse);
        let at = base + r * inner;
        let next = combine(acc, src[at]);
        dst[at] = select(next, acc, exclusive);
        acc = next;
    }
}
