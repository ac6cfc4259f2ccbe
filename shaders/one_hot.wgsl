// one_hot: out[k, c] = 1.0 where index[k] == c, else 0.0 (float32). An index outside
// [0, C) gives an all-zero row (the CPU reports it as an error instead).
// params: [total, C]
@group(0) @binding(0) var<storage, read> index: array<{{I}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

// The index at position k as u32; 0xffffffff when it is negative or does not fit 32 bits.
fn index_at(k: u32) -> u32 {
    {{INDEX_AT}}
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= params[0]) {
        return;
    }
    let classes = params[1];
    dst[t] = select(0.0, 1.0, index_at(t / classes) == t % classes);
}
