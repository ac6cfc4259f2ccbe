// Strided copy: dst[dst_off + Σ c·dst_stride] = src[src_off + Σ c·src_stride] for every
// coordinate c of `shape`. Transpose, slice, flip (negative strides), expand (zero
// strides), concat, pad and their gradients are all this one kernel.
// params: [n, ndim, src_off, dst_off, shape[ndim], src_strides[ndim], dst_strides[ndim]]
// (strides are i32 bit patterns).
@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{S}}>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let nd = params[1];
    var rem = i;
    var si = i32(params[2]);
    var di = i32(params[3]);
    for (var k = nd; k > 0u; k = k - 1u) {
        let d = k - 1u;
        let size = params[4u + d];
        let c = i32(rem % size);
        rem = rem / size;
        si = si + c * bitcast<i32>(params[4u + nd + d]);
        di = di + c * bitcast<i32>(params[4u + 2u * nd + d]);
    }
    dst[u32(di)] = src[u32(si)];
}
