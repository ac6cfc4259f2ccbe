// Elementwise unary ops, one variant per (op, dtype): the expression comes from the op
// table in src/ops/elementwise/unary.rs. p0 and p1 are the op's scalar parameters.
// in-place: dst  (a plan may write dst over a same-typed input of its length; see src/backend/gpu/in_place.rs)
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{XS}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{YS}}>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

fn op(x: {{XT}}, p0: {{XT}}, p1: {{XT}}) -> {{YT}} {
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let y = op({{LOAD}}, {{P0}}, {{P1}});
    dst[i] = {{STORE}};
}
