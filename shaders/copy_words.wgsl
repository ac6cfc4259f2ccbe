// A copy of 32-bit words: dst[params[2] + i] = src[params[1] + i] for i < params[0].
// Host writes (from the recorder's upload arena) and buffer-to-buffer copies run as this
// dispatch instead of a copy command, so they do not end the batch's compute pass (each
// pass costs the driver command buffers and barriers).
// params: [n, src_off, dst_off]
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i < params[0]) {
        dst[params[2] + i] = src[params[1] + i];
    }
}
