// Batched matrix multiply C[z] = A[z] · B[z] with a 64×64 output tile per workgroup of
// 16×16 invocations (4×4 outputs each, strided by 16 so loads and stores coalesce) and
// 16-deep K tiles staged in workgroup memory. Transposes are strides; broadcast batch dims
// have batch stride 0. Every value stored passes through `epilogue(value, index)`: the
// identity, or in a variant a chain of elementwise ops fused after the product (bias add,
// activation, scale), with its extra inputs bound after `c` (src/ops/epilogue.rs).
// Every entry may split K (src/ops/split_k.rs): workgroup z =
// batch·splits + split computes one slice of the reduction into its own partial output, and
// `finish` sums the slices.
// `{{AS}}` is the operands' element type and `{{CS}}` the output's: f32, or f16 in the
// variants for float16 on devices with `SHADER_F16`, which load f16, accumulate in f32 and
// round each output once (a split product's partial outputs stay f32).
// params: [M, N, K, a_rs, a_cs, b_rs, b_cs, z_base, splits, k_chunk, outputs (one slice),
//          batch_nd, batch_shape[nd], a_batch_stride[nd], b_batch_stride[nd]], an epilogue's
//          at word 64
#include "lib/int64.wgsl"
#include "lib/math.wgsl"
#include "lib/split_k.wgsl"
#include "lib/matmul_problem.wgsl"

@group(0) @binding(0) var<storage, read> a: array<{{AS}}>;
@group(0) @binding(1) var<storage, read> b: array<{{AS}}>;
@group(0) @binding(2) var<storage, read_write> c: array<{{CS}}>;
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

fn load_a(i: u32) -> f32 {
    return f32(a[i]);
}

fn load_b(i: u32) -> f32 {
    return f32(b[i]);
}

fn load_a4(i: u32) -> vec4<f32> {
    return vec4<f32>(a4[i]);
}

fn load_b4(i: u32) -> vec4<f32> {
    return vec4<f32>(b4[i]);
}

fn store_c(i: u32, v: f32) {
    c[i] = {{CS}}(v);
}

{{EPILOGUE}}

var<workgroup> tile_a: array<f32, 1024>;
var<workgroup> tile_b: array<f32, 1024>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = problem(wid.z);
    let row0 = wid.y * 64u;
    let col0 = wid.x * 64u;
    let tid = lid.y * 16u + lid.x;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i = i + 1u) {
        acc[i] = 0.0;
    }
    for (var k0 = p.k_begin; k0 < p.k_end; k0 = k0 + 16u) {
        for (var i = 0u; i < 4u; i = i + 1u) {
            let e = tid + i * 256u;
            // A tile: 64 rows × 16 k, k fastest (contiguous for a row-major A).
            let am = e / 16u;
            let ak = e % 16u;
            var av = 0.0;
            if (row0 + am < p.m && k0 + ak < p.k_end) {
                av = load_a(p.a_off + (row0 + am) * p.a_rs + (k0 + ak) * p.a_cs);
            }
            tile_a[ak * 64u + am] = av;
            // B tile: 16 k × 64 cols, cols fastest (contiguous for a row-major B).
            let bk = e / 64u;
            let bn = e % 64u;
            var bv = 0.0;
            if (k0 + bk < p.k_end && col0 + bn < p.n) {
                bv = load_b(p.b_off + (k0 + bk) * p.b_rs + (col0 + bn) * p.b_cs);
            }
            tile_b[bk * 64u + bn] = bv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk = kk + 1u) {
            var ar: array<f32, 4>;
            var br: array<f32, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                ar[i] = tile_a[kk * 64u + lid.y + 16u * i];
                br[i] = tile_b[kk * 64u + lid.x + 16u * i];
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i * 4u + j] = acc[i * 4u + j] + ar[i] * br[j];
                }
            }
        }
        workgroupBarrier();
    }
    let c_off = p.z * p.m * p.n;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let m = row0 + lid.y + 16u * i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let n = col0 + lid.x + 16u * j;
            if (m < p.m && n < p.n) {
                if (params[8] > 1u) {
                    store_c(p.split * params[10] + c_off + m * p.n + n, acc[i * 4u + j]);
                } else {
                    store_c(c_off + m * p.n + n, epilogue(acc[i * 4u + j], c_off + m * p.n + n));
                }
            }
        }
    }
}

// The partial outputs of a split product are bound as `a` (lib/split_k.wgsl).
fn partial(at: u32) -> f32 {
    return load_a(at);
}

// A split product's last step, one invocation per output: the sum of its K slices (the
// partial outputs, bound as `a`), in a fixed order, through the epilogue.
@compute @workgroup_size(256)
fn finish(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let outputs = params[10];
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= outputs) {
        return;
    }
    store_c(i, epilogue(sum_slices(i, outputs, params[8]), i));
}

// The same product without workgroup memory or barriers, for software adapters (lavapipe,
// SwiftShader), which emulate barriers slowly and load from a buffer one lane at a time: a
// flat grid of invocations per matrix and K slice (z), each accumulating a 4-row × 8-column
// block of C (rows m0.., columns n0..n0+7) in eight vec4 registers, 12 loads per k for 32
// products. A product that gives the grid few workgroups splits K (src/ops/matmul.rs), so
// that every core of the adapter has one. `direct4` loads vec4s through `a4`/`b4` where
// `wide4` may (row-major operands, K and N multiples of 4): per 4 k, one per row and two per
// k, 12 loads for 128 products.
struct DirectBlock {
    m0: u32,
    n0: u32,
    // Row starts of A (rows past the end clamped) and the columns of B's two column quads
    // (each clamped to the last column; `direct4` reads the first quad's start and works
    // out the second's itself).
    ra: vec4<u32>,
    cb0: vec4<u32>,
    cb1: vec4<u32>,
}

// Block `t` of matrix `p`, or false past the last block.
fn direct_block(p: Problem, t: u32, block: ptr<function, DirectBlock>) -> bool {
    let col_blocks = (p.n + 7u) / 8u;
    if (t >= ((p.m + 3u) / 4u) * col_blocks) {
        return false;
    }
    let m0 = (t / col_blocks) * 4u;
    let n0 = (t % col_blocks) * 8u;
    let last_m = p.m - 1u;
    let ra = min(vec4<u32>(0u, 1u, 2u, 3u) + m0, vec4<u32>(last_m)) * p.a_rs + p.a_off;
    let n = vec4<u32>(0u, 1u, 2u, 3u) + n0;
    let last_n = vec4<u32>(p.n - 1u);
    *block = DirectBlock(m0, n0, ra, min(n, last_n) * p.b_cs + p.b_off, min(n + 4u, last_n) * p.b_cs + p.b_off);
    return true;
}

// One k of a direct block: the four rows' A values times B's two column quads.
fn direct_fma(acc: ptr<function, array<vec4<f32>, 8>>, av: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>) {
    (*acc)[0] = (*acc)[0] + av.x * b0;
    (*acc)[1] = (*acc)[1] + av.x * b1;
    (*acc)[2] = (*acc)[2] + av.y * b0;
    (*acc)[3] = (*acc)[3] + av.y * b1;
    (*acc)[4] = (*acc)[4] + av.z * b0;
    (*acc)[5] = (*acc)[5] + av.z * b1;
    (*acc)[6] = (*acc)[6] + av.w * b0;
    (*acc)[7] = (*acc)[7] + av.w * b1;
}

@compute @workgroup_size(256)
fn direct(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let p = problem(wid.z);
    var blk: DirectBlock;
    if (!direct_block(p, gid.x + gid.y * nwg.x * 256u, &blk)) {
        return;
    }
    var acc: array<vec4<f32>, 8>;
    for (var k = p.k_begin; k < p.k_end; k = k + 1u) {
        let ra = blk.ra + k * p.a_cs;
        let c0 = blk.cb0 + k * p.b_rs;
        let c1 = blk.cb1 + k * p.b_rs;
        let b0 = vec4<f32>(load_b(c0.x), load_b(c0.y), load_b(c0.z), load_b(c0.w));
        let b1 = vec4<f32>(load_b(c1.x), load_b(c1.y), load_b(c1.z), load_b(c1.w));
        direct_fma(&acc, vec4<f32>(load_a(ra.x), load_a(ra.y), load_a(ra.z), load_a(ra.w)), b0, b1);
    }
    direct_store(p, blk.m0, blk.n0, acc);
}

@compute @workgroup_size(256)
fn direct4(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let p = problem(wid.z);
    var blk: DirectBlock;
    if (!direct_block(p, gid.x + gid.y * nwg.x * 256u, &blk)) {
        return;
    }
    // The second column quad starts at most at the last quad (N is a multiple of 4).
    let q0 = blk.cb0.x;
    let q1 = min(blk.n0 + 4u, p.n - 4u) + p.b_off;
    var acc: array<vec4<f32>, 8>;
    for (var k = p.k_begin; k < p.k_end; k = k + 4u) {
        let ra = (blk.ra + k) / 4u;
        let a0 = load_a4(ra.x);
        let a1 = load_a4(ra.y);
        let a2 = load_a4(ra.z);
        let a3 = load_a4(ra.w);
        for (var t = 0u; t < 4u; t = t + 1u) {
            let bk = (k + t) * p.b_rs;
            direct_fma(&acc, vec4<f32>(a0[t], a1[t], a2[t], a3[t]), load_b4((q0 + bk) / 4u), load_b4((q1 + bk) / 4u));
        }
    }
    direct_store(p, blk.m0, blk.n0, acc);
}

// A direct block's outputs inside the product: to the slice's partial output when K is
// split, else through the epilogue (row i's columns 4h.. in acc[2i + h]).
fn direct_store(p: Problem, m0: u32, n0: u32, acc: array<vec4<f32>, 8>) {
    let c_off = p.z * p.m * p.n;
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 8u; j = j + 1u) {
            let m = m0 + i;
            let n = n0 + j;
            if (m < p.m && n < p.n) {
                let at = c_off + m * p.n + n;
                let v = acc[2u * i + j / 4u][j % 4u];
                if (params[8] > 1u) {
                    store_c(p.split * params[10] + at, v);
                } else {
                    store_c(at, epilogue(v, at));
                }
            }
        }
    }
}

// The same product for large problems on hardware GPUs: a 128×128 output tile per workgroup
// of 16×16 invocations, each accumulating an 8×8 block (rows 4·ty.. and 64 + 4·ty..,
// columns 4·tx.. and 64 + 4·tx..) in sixteen vec4 registers from vec4 reads of workgroup
// memory. K advances 8 deep through two staging buffers: the next tile is read from the
// buffers into registers while the current one is multiplied, so one barrier per tile.
// `wide` reads A and B one float at a time (any strides); `wide4` reads them as vec4 through
// `a4`/`b4`, the same buffers bound at the same slots, where both are row-major with K and
// N multiples of 4 (src/ops/matmul.rs checks), so every vec4 lies inside one row.
var<workgroup> wide_a: array<vec4<f32>, 512>;
var<workgroup> wide_b: array<vec4<f32>, 512>;

@group(0) @binding(0) var<storage, read> a4: array<vec4<{{AS}}>>;
@group(0) @binding(1) var<storage, read> b4: array<vec4<{{AS}}>>;

// This invocation's share of each staged tile: 4 consecutive k of A row `a_r` from `a_k`,
// and 4 consecutive columns of B row `b_k` from `b_c`.
struct WideShare {
    a_r: u32,
    a_k: u32,
    b_k: u32,
    b_c: u32,
}

fn wide_share(tid: u32) -> WideShare {
    return WideShare(tid / 2u, (tid % 2u) * 4u, tid / 32u, (tid % 32u) * 4u);
}

fn wide_load(off: u32, rs: u32, cs: u32, r: u32, r_len: u32, k: u32, k_len: u32, from_a: bool) -> f32 {
    if (r < r_len && k < k_len) {
        if (from_a) {
            return load_a(off + r * rs + k * cs);
        }
        return load_b(off + k * rs + r * cs);
    }
    return 0.0;
}

// The share of the depth tile starting at `k0`, one float at a time: A's 4 k, B's 4 columns.
fn wide_fetch(p: Problem, s: WideShare, row0: u32, col0: u32, k0: u32) -> array<vec4<f32>, 2> {
    var pa = vec4<f32>(0.0);
    var pb = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j = j + 1u) {
        pa[j] = wide_load(p.a_off, p.a_rs, p.a_cs, row0 + s.a_r, p.m, k0 + s.a_k + j, p.k_end, true);
        pb[j] = wide_load(p.b_off, p.b_rs, p.b_cs, col0 + s.b_c + j, p.n, k0 + s.b_k, p.k_end, false);
    }
    return array<vec4<f32>, 2>(pa, pb);
}

// The same share as two vec4 reads (row-major operands, K and N multiples of 4).
fn wide_fetch4(p: Problem, s: WideShare, row0: u32, col0: u32, k0: u32) -> array<vec4<f32>, 2> {
    var pa = vec4<f32>(0.0);
    var pb = vec4<f32>(0.0);
    let r = row0 + s.a_r;
    let ka = k0 + s.a_k;
    if (r < p.m && ka < p.k_end) {
        pa = load_a4((p.a_off + r * p.a_rs + ka) / 4u);
    }
    let c = col0 + s.b_c;
    let kb = k0 + s.b_k;
    if (c < p.n && kb < p.k_end) {
        pb = load_b4((p.b_off + kb * p.b_rs + c) / 4u);
    }
    return array<vec4<f32>, 2>(pa, pb);
}

// Stores a fetched share into staging buffer `base` (0 or 256): A transposed to k-major
// vec4s of 4 rows, B as it is.
fn wide_stage(base: u32, s: WideShare, v: array<vec4<f32>, 2>) {
    for (var j = 0u; j < 4u; j = j + 1u) {
        wide_a[base + (s.a_k + j) * 32u + s.a_r / 4u][s.a_r % 4u] = v[0][j];
    }
    wide_b[base + s.b_k * 32u + s.b_c / 4u] = v[1];
}

// Multiplies the staged depth tile at `cur` into the 8×8 block.
fn wide_multiply(cur: u32, lid: vec3<u32>, acc: ptr<function, array<vec4<f32>, 16>>) {
    for (var kk = 0u; kk < 8u; kk = kk + 1u) {
        let a_lo = wide_a[cur + kk * 32u + lid.y];
        let a_hi = wide_a[cur + kk * 32u + 16u + lid.y];
        let b_lo = wide_b[cur + kk * 32u + lid.x];
        let b_hi = wide_b[cur + kk * 32u + 16u + lid.x];
        (*acc)[0] = (*acc)[0] + a_lo.x * b_lo;
        (*acc)[1] = (*acc)[1] + a_lo.x * b_hi;
        (*acc)[2] = (*acc)[2] + a_lo.y * b_lo;
        (*acc)[3] = (*acc)[3] + a_lo.y * b_hi;
        (*acc)[4] = (*acc)[4] + a_lo.z * b_lo;
        (*acc)[5] = (*acc)[5] + a_lo.z * b_hi;
        (*acc)[6] = (*acc)[6] + a_lo.w * b_lo;
        (*acc)[7] = (*acc)[7] + a_lo.w * b_hi;
        (*acc)[8] = (*acc)[8] + a_hi.x * b_lo;
        (*acc)[9] = (*acc)[9] + a_hi.x * b_hi;
        (*acc)[10] = (*acc)[10] + a_hi.y * b_lo;
        (*acc)[11] = (*acc)[11] + a_hi.y * b_hi;
        (*acc)[12] = (*acc)[12] + a_hi.z * b_lo;
        (*acc)[13] = (*acc)[13] + a_hi.z * b_hi;
        (*acc)[14] = (*acc)[14] + a_hi.w * b_lo;
        (*acc)[15] = (*acc)[15] + a_hi.w * b_hi;
    }
}

// Writes the 8×8 block through the epilogue.
fn wide_store(p: Problem, row0: u32, col0: u32, lid: vec3<u32>, acc: ptr<function, array<vec4<f32>, 16>>) {
    let c_off = p.z * p.m * p.n;
    if (params[8] > 1u) {
        wide_store_partial(c_off + p.split * params[10], p, row0, col0, lid, acc);
        return;
    }
    for (var i = 0u; i < 8u; i = i + 1u) {
        let m = row0 + (i / 4u) * 64u + lid.y * 4u + i % 4u;
        for (var h = 0u; h < 2u; h = h + 1u) {
            let v = (*acc)[i * 2u + h];
            for (var j = 0u; j < 4u; j = j + 1u) {
                let n = col0 + h * 64u + lid.x * 4u + j;
                if (m < p.m && n < p.n) {
                    store_c(c_off + m * p.n + n, epilogue(v[j], c_off + m * p.n + n));
                }
            }
        }
    }
}

// A split product's slice, unreduced and without the epilogue, at `base`. Kept apart from
// `wide_store`'s loop: with the choice inside that loop the whole kernel ran 18× slower on an
// H100 (4096³: 68.9 ms against 3.8), likely its accumulators no longer held in registers.
fn wide_store_partial(base: u32, p: Problem, row0: u32, col0: u32, lid: vec3<u32>, acc: ptr<function, array<vec4<f32>, 16>>) {
    for (var i = 0u; i < 8u; i = i + 1u) {
        let m = row0 + (i / 4u) * 64u + lid.y * 4u + i % 4u;
        for (var h = 0u; h < 2u; h = h + 1u) {
            let v = (*acc)[i * 2u + h];
            for (var j = 0u; j < 4u; j = j + 1u) {
                let n = col0 + h * 64u + lid.x * 4u + j;
                if (m < p.m && n < p.n) {
                    store_c(base + m * p.n + n, v[j]);
                }
            }
        }
    }
}

@compute @workgroup_size(16, 16)
fn wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = problem(wid.z);
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;
    let s = wide_share(lid.y * 16u + lid.x);
    var acc: array<vec4<f32>, 16>;
    for (var i = 0u; i < 16u; i = i + 1u) {
        acc[i] = vec4<f32>(0.0);
    }
    wide_stage(0u, s, wide_fetch(p, s, row0, col0, p.k_begin));
    workgroupBarrier();
    let k_tiles = (p.k_end - p.k_begin + 7u) / 8u;
    for (var t = 0u; t < k_tiles; t = t + 1u) {
        let cur = (t % 2u) * 256u;
        let more = t + 1u < k_tiles;
        var next: array<vec4<f32>, 2>;
        if (more) {
            next = wide_fetch(p, s, row0, col0, p.k_begin + (t + 1u) * 8u);
        }
        wide_multiply(cur, lid, &acc);
        if (more) {
            wide_stage(256u - cur, s, next);
        }
        workgroupBarrier();
    }
    wide_store(p, row0, col0, lid, &acc);
}

@compute @workgroup_size(16, 16)
fn wide4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = problem(wid.z);
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;
    let s = wide_share(lid.y * 16u + lid.x);
    var acc: array<vec4<f32>, 16>;
    for (var i = 0u; i < 16u; i = i + 1u) {
        acc[i] = vec4<f32>(0.0);
    }
    wide_stage(0u, s, wide_fetch4(p, s, row0, col0, p.k_begin));
    workgroupBarrier();
    let k_tiles = (p.k_end - p.k_begin + 7u) / 8u;
    for (var t = 0u; t < k_tiles; t = t + 1u) {
        let cur = (t % 2u) * 256u;
        let more = t + 1u < k_tiles;
        var next: array<vec4<f32>, 2>;
        if (more) {
            next = wide_fetch4(p, s, row0, col0, p.k_begin + (t + 1u) * 8u);
        }
        wide_multiply(cur, lid, &acc);
        if (more) {
            wide_stage(256u - cur, s, next);
        }
        workgroupBarrier();
    }
    wide_store(p, row0, col0, lid, &acc);
}
