// Fills a buffer with a repeating pattern of one or two u32 words (params[1..]). Covers
// every dtype: a 32-bit value, an int64 (two words), or two packed float16 values.
// params: [words, period, w0, w1].
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    dst[i] = params[2u + i % params[1]];
}
