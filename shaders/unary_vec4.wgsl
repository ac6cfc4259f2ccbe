// Float32 elementwise unary ops four elements per invocation, through 16-byte loads and
// stores: the path the dispatcher takes when the element count is a multiple of 4 (the
// expression comes from the op table in src/ops/elementwise/unary.rs, as in unary.wgsl).
// params: [n / 4, p0 (f32 bits), p1 (f32 bits)]
// in-place: dst  (a plan may write dst over a same-typed input of its length; see src/backend/gpu/in_place.rs)
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

fn op(x: f32, p0: f32, p1: f32) -> f32 {
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let p0 = bitcast<f32>(params[1]);
    let p1 = bitcast<f32>(params[2]);
    let v = src[i];
    dst[i] = vec4<f32>(op(v.x, p0, p1), op(v.y, p0, p1), op(v.z, p0, p1), op(v.w, p0, p1));
}
