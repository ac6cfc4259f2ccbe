// where(cond, x, y) with numpy broadcasting of all three operands.
// params: [n, ndim, shape[ndim], cond_strides[ndim], x_strides[ndim], y_strides[ndim]].
// in-place: dst  (a plan may write dst over a same-typed input of its length; see src/backend/gpu/in_place.rs)
@group(0) @binding(0) var<storage, read> cond: array<u32>;
@group(0) @binding(1) var<storage, read> xs: array<{{S}}>;
@group(0) @binding(2) var<storage, read> ys: array<{{S}}>;
@group(0) @binding(3) var<storage, read_write> dst: array<{{S}}>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    var rem = i;
    var ic = 0u;
    var ix = 0u;
    var iy = 0u;
    for (var k = nd; k > 0u; k = k - 1u) {
        let d = k - 1u;
        let size = params[2u + d];
        let c = rem % size;
        rem = rem / size;
        ic = ic + c * params[2u + nd + d];
        ix = ix + c * params[2u + 2u * nd + d];
        iy = iy + c * params[2u + 3u * nd + d];
    }
    dst[i] = select(ys[iy], xs[ix], cond[ic] != 0u);
}
