// Float32 elementwise binary ops on two operands of the output's shape, four elements per
// invocation through 16-byte loads and stores: the path the dispatcher takes when the
// element count is a multiple of 4 (the expression comes from the op table in
// src/ops/elementwise/binary.rs, as in binary.wgsl).
// params: [n / 4]
// in-place: dst  (a plan may write dst over a same-typed input of its length; see src/backend/gpu/in_place.rs)
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> lhs: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> rhs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

fn op(a: f32, b: f32) -> f32 {
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let a = lhs[i];
    let b = rhs[i];
    dst[i] = vec4<f32>(op(a.x, b.x), op(a.y, b.y), op(a.z, b.z), op(a.w, b.w));
}
