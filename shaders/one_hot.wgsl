// one_hot: out[k, c] = 1.0 where index[k] == c, else 0.0 (float32). An index outside
// [0, C) gives an all-zero row and is recorded in the device's error flag (the next readback
// reports the CPU's error).
// params: [total, C, op code]
#include "lib/index_check.wgsl"

@group(0) @binding(0) var<storage, read> index: array<{{I}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read_write> index_errors: array<atomic<u32>, 5>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= params[0]) {
        return;
    }
    let classes = params[1];
    let v = index_at(t / classes);
    if (v >= classes && t % classes == 0u) {
        report_index(params[2], index_raw(t / classes), classes);
    }
    dst[t] = select(0.0, 1.0, v == t % classes);
}
