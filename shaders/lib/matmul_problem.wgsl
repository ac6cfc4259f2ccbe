// The matrix products' view of their parameters (matmul.wgsl, matmul_coop.wgsl; the
// including kernel declares `params`). One product's sizes, strides and where matrix z (this workgroup's, offset by the
// dispatch's first) of A and of B starts: z decomposed over the broadcast batch shape; and
// the slice of K it reduces (all of it unless the product is split).
struct Problem {
    m: u32,
    n: u32,
    k: u32,
    a_rs: u32,
    a_cs: u32,
    b_rs: u32,
    b_cs: u32,
    z: u32,
    a_off: u32,
    b_off: u32,
    split: u32,
    k_begin: u32,
    k_end: u32,
}

fn problem(wid_z: u32) -> Problem {
    let zs = wid_z + params[7];
    let z = zs / params[8];
    let split = zs % params[8];
    let nd = params[11];
    var rem = z;
    var off = vec2<u32>(0u);
    for (var k = nd; k > 0u; k = k - 1u) {
        let d = k - 1u;
        let size = params[12u + d];
        let coord = rem % size;
        rem = rem / size;
        off = off + coord * vec2<u32>(params[12u + nd + d], params[12u + 2u * nd + d]);
    }
    let k_begin = split * params[9];
    let k_end = min(params[2], k_begin + params[9]);
    return Problem(
        params[0], params[1], params[2], params[3], params[4], params[5], params[6], z, off.x, off.y, split,
        k_begin, k_end,
    );
}
