// Elementwise binary ops with numpy broadcasting, one variant per (op, dtype). The
// expression comes from the op tables in src/ops/elementwise/binary.rs.
// params: [n, ndim, shape[ndim], lhs_strides[ndim], rhs_strides[ndim]] (collapsed dims).
// Entry points: `main` walks any number of dimensions; `flat` serves one collapsed
// dimension (same shapes, or a scalar operand) with no index arithmetic; `rows` serves two
// or three dimensions on a 3-D grid (x the innermost dimension), so no division is needed.
// in-place: dst  (a plan may write dst over a same-typed input of its length; see src/backend/gpu/in_place.rs)
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> lhs: array<{{XS}}>;
@group(0) @binding(1) var<storage, read> rhs: array<{{XS}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{YS}}>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

fn op(a: {{XT}}, b: {{XT}}) -> {{YT}} {
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    var rem = i;
    var ia = 0u;
    var ib = 0u;
    for (var k = nd; k > 0u; k = k - 1u) {
        let d = k - 1u;
        let size = params[2u + d];
        let c = rem % size;
        rem = rem / size;
        ia = ia + c * params[2u + nd + d];
        ib = ib + c * params[2u + 2u * nd + d];
    }
    let y = op({{LOAD_A}}, {{LOAD_B}});
    dst[i] = {{STORE}};
}

@compute @workgroup_size({{WG}})
fn flat(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let ia = i * params[3];
    let ib = i * params[4];
    let y = op({{LOAD_A}}, {{LOAD_B}});
    dst[i] = {{STORE}};
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let nd = params[1];
    let inner = params[1u + nd];
    if (gid.x >= inner) {
        return;
    }
    let sa = 2u + nd;
    let sb = 2u + 2u * nd;
    var i = gid.y * inner + gid.x;
    var ia = gid.x * params[sa + nd - 1u] + gid.y * params[sa + nd - 2u];
    var ib = gid.x * params[sb + nd - 1u] + gid.y * params[sb + nd - 2u];
    if (nd == 3u) {
        i = i + gid.z * params[3] * inner;
        ia = ia + gid.z * params[sa];
        ib = ib + gid.z * params[sb];
    }
    let y = op({{LOAD_A}}, {{LOAD_B}});
    dst[i] = {{STORE}};
}
