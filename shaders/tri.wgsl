// tril / triu over the last two dimensions: element (r, c) of each rows x cols matrix is
// copied when c - r <= diagonal (lower) or c - r >= diagonal (upper), else zero (the zero
// bit pattern is zero in every dtype).
// params: [n, rows, cols, diagonal (i32 bits), lower]
@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{S}}>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let cols = params[2];
    let r = i32((i / cols) % params[1]);
    let c = i32(i % cols);
    let diagonal = bitcast<i32>(params[3]);
    let lower = params[4] != 0u;
    let keep = select(c - r >= diagonal, c - r <= diagonal, lower);
    dst[i] = select({{S}}(), src[i], keep);
}
