// Batched float16 matrix product on cooperative matrices (tensor cores, wgpu's
// EXPERIMENTAL_COOPERATIVE_MATRIX): each workgroup is one subgroup of 32 invocations computing
// a 32×32 block of C as 2×2 tiles of 16×16, loading A's and B's 16×16 float16 tiles straight
// from the buffers 16 deep at a time into float32 accumulators (one multiply-add per tile
// pair). The block is staged in workgroup memory and each invocation stores one column of it,
// rounded once to {{CS}}. Runs where the adapter has a 16×16×16 f16→f32 configuration and
// subgroups of 32, for row-major operands with M and N multiples of 32 and K of 16, unsplit
// and without an epilogue (src/ops/matmul/coop.rs); the same params as matmul.wgsl. Its
// variant enables f16 and wgpu_cooperative_matrix.
#include "lib/matmul_problem.wgsl"

@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<{{CS}}>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

var<workgroup> block: array<f32, 1024>;

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let p = problem(wid.z);
    let row0 = wid.y * 32u;
    let col0 = wid.x * 32u;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    let a_top = p.a_off + row0 * p.a_rs;
    let a_bottom = a_top + 16u * p.a_rs;
    for (var k = 0u; k < p.k; k = k + 16u) {
        let a0 = coopLoadT<coop_mat16x16<f16, A>>(&a[a_top + k], p.a_rs);
        let a1 = coopLoadT<coop_mat16x16<f16, A>>(&a[a_bottom + k], p.a_rs);
        let b_row = p.b_off + k * p.b_rs + col0;
        let b0 = coopLoadT<coop_mat16x16<f16, B>>(&b[b_row], p.b_rs);
        let b1 = coopLoadT<coop_mat16x16<f16, B>>(&b[b_row + 16u], p.b_rs);
        c00 = coopMultiplyAdd(a0, b0, c00);
        c01 = coopMultiplyAdd(a0, b1, c01);
        c10 = coopMultiplyAdd(a1, b0, c10);
        c11 = coopMultiplyAdd(a1, b1, c11);
    }
    coopStoreT(c00, &block[0], 32u);
    coopStoreT(c01, &block[16], 32u);
    coopStoreT(c10, &block[512], 32u);
    coopStoreT(c11, &block[528], 32u);
    workgroupBarrier();
    let c_off = p.z * p.m * p.n + row0 * p.n + col0 + lid;
    for (var i = 0u; i < 32u; i = i + 1u) {
        c[c_off + i * p.n] = {{CS}}(block[i * 32u + lid]);
    }
}
