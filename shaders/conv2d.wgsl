// 2-D convolution (NCHW) as an implicit GEMM: C[M × NC] = A[M × K] · B[K × NC] per group,
// where B is never materialised — each K-tile of it is gathered from the image straight
// into workgroup memory. One template, four problems ({{MODE}}):
//   fwd        y  = W · im2col(x)           M = cout_g, NC = n·oh·ow,  K = cin_g·kh·kw
//   bwd_data   dx = Wᵀ · dy (transposed)     M = cin_g,  NC = n·h·w,    K = cout_g·kh·kw
//   bwd_filter dW = dy · im2col(x)ᵀ          M = cout_g, NC = cin_g·kh·kw, K = n·oh·ow
//   bwd_cols   cols = Wᵀ · dy               M = cin_g·kh·kw, NC = n·oh·ow, K = cout_g
// (bwd_cols: software adapters' input gradient, whose `col2im` entry then sums each pixel's
// columns into dx.)
// Each workgroup (16×16 invocations) computes a BM×64 output tile (BM = 16·RM), every
// invocation RM×4 outputs strided by 16 so global loads and stores coalesce; K advances in
// 16-deep tiles staged in workgroup memory. A product with few tiles splits K across
// workgroups (z), each writing its own partial slice of the output; `finish` then sums the
// slices in a fixed order (no atomics) and stores as the unsplit product would.
// Grid: x·y = tiles (m fastest), z = group·splits + split (offset by z_base).
//
// params: [0 n, 1 c, 2 h, 3 w, 4 oc, 5 oh, 6 ow, 7 kh, 8 kw, 9 sh, 10 sw, 11 pt, 12 pl,
//          13 dh, 14 dw, 15 cin_g, 16 cout_g, 17 M, 18 NC, 19 K, 20 tiles_m, 21 k_chunk,
//          22 splits, 23 has_bias, 24 z_base, 25 row_blocks, 26 col_blocks (direct only),
//          27 outputs (one slice)], an epilogue's from word 64.
// fwd stores every value through `epilogue(value, index)`: the identity, or in a variant a
// chain of elementwise ops fused after the convolution, its extra inputs bound after `dst`
// (src/ops/epilogue.rs). bwd_data and col2im check that each tap lands on the stride's grid
// only in their STRIDED variant (col2im's also serves dilations above 1): unit strides
// compile without the check.
#include "lib/int64.wgsl"
#include "lib/math.wgsl"
#include "lib/split_k.wgsl"

// `a_src` and `b_src` with their accessors `a_at`/`b_at` (one value) and `a4_at`/`b4_at` (four
// from an index that is a multiple of 4): arrays of f32 (or f16), or in the VECTOR variant
// (bwd_cols) of vec4s, which software adapters load a vector at a time (conv_block.rs).
// The float16 variants (devices with `SHADER_F16`) read f16 operands and bias and write an
// f16 `dst` ({{DS}}), computing in f32; split slices and the columns stay f32.
{{OPERANDS}}
@group(0) @binding(2) var<storage, read> bias: array<{{BS}}>;
@group(0) @binding(3) var<storage, read_write> dst: array<{{DS}}>;

fn store_dst(i: u32, v: f32) {
    dst[i] = {{DS}}(v);
}
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

{{EPILOGUE}}

const RM: u32 = {{RM}}u;
const STRIDED: bool = {{STRIDED}};
const BM: u32 = {{BM}}u;
const BN: u32 = 64u;
const BK: u32 = 16u;
const COLS: u32 = {{COLS}}u;

// The parameters, copied once per invocation into private memory so the loaders' index
// math reads registers rather than the storage buffer.
var<private> P: array<u32, 28>;

fn load_params() {
    for (var i = 0u; i < 28u; i = i + 1u) {
        P[i] = params[i];
    }
}

var<workgroup> tile_a: array<f32, {{A_TILE}}>;
var<workgroup> tile_b: array<f32, 1024>;

// Reduction index k is also carried decomposed as a 3-digit counter `s` (outer, mid,
// inner) with digit sizes {{MODE}}_k_dims(), so the direct entry steps it without divisions.

fn k_start(k: u32, dims: vec3<u32>) -> vec3<u32> {
    let inner = k % dims.z;
    let rest = k / dims.z;
    return vec3<u32>(rest / dims.y, rest % dims.y, inner);
}

// `d` as digits of the counter (the outer digit unbounded).
fn k_digits(d: u32, dims: vec3<u32>) -> vec3<u32> {
    return vec3<u32>(d / (dims.y * dims.z), (d / dims.z) % dims.y, d % dims.z);
}

// Counter `s` advanced by digits `d` (each digit below its size, so one carry at most each).
fn k_add(s: vec3<u32>, d: vec3<u32>, dims: vec3<u32>) -> vec3<u32> {
    var t = s + d;
    if (t.z >= dims.z) {
        t.z = t.z - dims.z;
        t.y = t.y + 1u;
    }
    if (t.y >= dims.y) {
        t.y = t.y - dims.y;
        t.x = t.x + 1u;
    }
    return t;
}

fn k_next(s: vec3<u32>, dims: vec3<u32>) -> vec3<u32> {
    var t = s;
    t.z = t.z + 1u;
    if (t.z == dims.z) {
        t.z = 0u;
        t.y = t.y + 1u;
        if (t.y == dims.y) {
            t.y = 0u;
            t.x = t.x + 1u;
        }
    }
    return t;
}

// ---- fwd: A = weight [oc, K] row-major, B = im2col(x), C = y (+ bias); k = (c, ki, kj) ----

fn fwd_k_dims() -> vec3<u32> {
    return vec3<u32>(P[15], P[7], P[8]);
}

fn fwd_load_a(m: u32, k: u32, s: vec3<u32>, grp: u32) -> f32 {
    return a_at((grp * P[16] + m) * P[19] + k);
}

// Column (image n, output pixel) -> (n, top input row, left input column).
fn fwd_col_info(col: u32) -> vec3<i32> {
    let l = P[5] * P[6];
    let n = col / l;
    let r = col % l;
    let oy = r / P[6];
    let ox = r % P[6];
    return vec3<i32>(i32(n), i32(oy * P[9]) - i32(P[11]), i32(ox * P[10]) - i32(P[12]));
}

fn fwd_load_b(s: vec3<u32>, info: vec3<i32>, grp: u32) -> f32 {
    let iy = info.y + i32(s.y * P[13]);
    let ix = info.z + i32(s.z * P[14]);
    if (iy < 0 || ix < 0 || iy >= i32(P[2]) || ix >= i32(P[3])) {
        return 0.0;
    }
    let plane = u32(info.x) * P[1] + grp * P[15] + s.x;
    return b_at((plane * P[2] + u32(iy)) * P[3] + u32(ix));
}

fn fwd_store(m: u32, col: u32, grp: u32, split: u32, v: f32) {
    let l = P[5] * P[6];
    let oc = grp * P[16] + m;
    let i = ((col / l) * P[4] + oc) * l + col % l;
    if (P[22] > 1u) {
        store_dst(split * P[27] + i, v);
        return;
    }
    fwd_output(i, oc, v);
}

// Output `i` (of channel `oc`) from its complete sum: the bias and the epilogue.
fn fwd_output(i: u32, oc: u32, v: f32) {
    var y = v;
    if (P[23] != 0u) {
        y = y + f32(bias[oc]);
    }
    store_dst(i, epilogue(y, i));
}

fn fwd_finish(i: u32, v: f32) {
    fwd_output(i, (i / (P[5] * P[6])) % P[4], v);
}

// ---- bwd_data: A = Wᵀ per group, B = dy through the transposed window, C = dx;
//      k = (o, ki, kj) ----

fn bwd_data_k_dims() -> vec3<u32> {
    return vec3<u32>(P[16], P[7], P[8]);
}

fn bwd_data_load_a(m: u32, k: u32, s: vec3<u32>, grp: u32) -> f32 {
    return a_at(((grp * P[16] + s.x) * P[15] + m) * P[7] * P[8] + s.y * P[8] + s.z);
}

// Column (image n, input pixel) -> (n, padded row, padded column).
fn bwd_data_col_info(col: u32) -> vec3<i32> {
    let hw = P[2] * P[3];
    let n = col / hw;
    let r = col % hw;
    return vec3<i32>(i32(n), i32(r / P[3] + P[11]), i32(r % P[3] + P[12]));
}

fn bwd_data_load_b(s: vec3<u32>, info: vec3<i32>, grp: u32) -> f32 {
    let ty = info.y - i32(s.y * P[13]);
    let tx = info.z - i32(s.z * P[14]);
    if (ty < 0 || tx < 0) {
        return 0.0;
    }
    var oy = u32(ty);
    var ox = u32(tx);
    if (STRIDED) {
        if (oy % P[9] != 0u || ox % P[10] != 0u) {
            return 0.0;
        }
        oy = oy / P[9];
        ox = ox / P[10];
    }
    if (oy >= P[5] || ox >= P[6]) {
        return 0.0;
    }
    let plane = u32(info.x) * P[4] + grp * P[16] + s.x;
    return b_at((plane * P[5] + oy) * P[6] + ox);
}

fn bwd_data_store(m: u32, col: u32, grp: u32, split: u32, v: f32) {
    let hw = P[2] * P[3];
    store_dst(split * P[27] + ((col / hw) * P[1] + grp * P[15] + m) * hw + col % hw, v);
}

fn bwd_data_finish(i: u32, v: f32) {
    store_dst(i, v);
}

// ---- bwd_filter: A = dy [cout_g × n·oh·ow], B = im2col(x)ᵀ, C = partial dW of one split;
//      k = (n, oy, ox) ----

fn bwd_filter_k_dims() -> vec3<u32> {
    return vec3<u32>(P[0], P[5], P[6]);
}

fn bwd_filter_load_a(m: u32, k: u32, s: vec3<u32>, grp: u32) -> f32 {
    return a_at(((s.x * P[4] + grp * P[16] + m) * P[5] + s.y) * P[6] + s.z);
}

// Column (c, ki, kj) of the filter -> (c, row offset, column offset).
fn bwd_filter_col_info(col: u32) -> vec3<i32> {
    let khw = P[7] * P[8];
    let r = col % khw;
    return vec3<i32>(
        i32(col / khw),
        i32((r / P[8]) * P[13]) - i32(P[11]),
        i32((r % P[8]) * P[14]) - i32(P[12]),
    );
}

fn bwd_filter_load_b(s: vec3<u32>, info: vec3<i32>, grp: u32) -> f32 {
    let iy = i32(s.y * P[9]) + info.y;
    let ix = i32(s.z * P[10]) + info.z;
    if (iy < 0 || ix < 0 || iy >= i32(P[2]) || ix >= i32(P[3])) {
        return 0.0;
    }
    let plane = s.x * P[1] + grp * P[15] + u32(info.x);
    return b_at((plane * P[2] + u32(iy)) * P[3] + u32(ix));
}

fn bwd_filter_store(m: u32, col: u32, grp: u32, split: u32, v: f32) {
    store_dst(split * P[27] + (grp * P[16] + m) * P[18] + col, v);
}

fn bwd_filter_finish(i: u32, v: f32) {
    store_dst(i, v);
}

// ---- bwd_cols (software adapters): A = Wᵀ per group, B = dy, C = the input gradient's
//      columns [group, cin_g·kh·kw, n·oh·ow] that `col2im` sums; k = o ----

fn bwd_cols_k_dims() -> vec3<u32> {
    return vec3<u32>(P[16], 1u, 1u);
}

fn bwd_cols_load_a(m: u32, k: u32, s: vec3<u32>, grp: u32) -> f32 {
    return a_at((grp * P[16] + k) * P[17] + m);
}

// Column (image n, output pixel) -> (n, pixel).
fn bwd_cols_col_info(col: u32) -> vec3<i32> {
    let l = P[5] * P[6];
    return vec3<i32>(i32(col / l), i32(col % l), 0);
}

fn bwd_cols_load_b(s: vec3<u32>, info: vec3<i32>, grp: u32) -> f32 {
    return b_at((u32(info.x) * P[4] + grp * P[16] + s.x) * P[5] * P[6] + u32(info.y));
}

// Rows m..m+3 of Wᵀ at k, and dy at four adjacent columns of one image (the VECTOR variant).
fn bwd_cols_load_a4(m: u32, k: u32, s: vec3<u32>, grp: u32) -> vec4<f32> {
    return a4_at((grp * P[16] + k) * P[17] + m);
}

fn bwd_cols_load_b4(s: vec3<u32>, info: vec3<i32>, grp: u32) -> vec4<f32> {
    return b4_at((u32(info.x) * P[4] + grp * P[16] + s.x) * P[5] * P[6] + u32(info.y));
}

fn bwd_cols_store(m: u32, col: u32, grp: u32, split: u32, v: f32) {
    store_dst(split * P[27] + (grp * P[17] + m) * P[18] + col, v);
}

fn bwd_cols_finish(i: u32, v: f32) {
    store_dst(i, v);
}

@compute @workgroup_size(16, 16)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    load_params();
    let m_len = P[17];
    let n_len = P[18];
    // The K loop holds barriers, so its bounds must be uniform values: WGSL counts reads of
    // the read-only params buffer as uniform, but not reads of the private copy.
    let k_len = params[19];
    let tiles_m = P[20];
    let k_chunk = params[21];
    let splits = params[22];
    let tile = wid.x + wid.y * nwg.x;
    let row0 = (tile % tiles_m) * BM;
    let col0 = (tile / tiles_m) * BN;
    let z = wid.z + params[24];
    let grp = z / splits;
    let split = z % splits;
    let k_begin = split * k_chunk;
    let k_end = min(k_len, k_begin + k_chunk);
    let tid = lid.y * 16u + lid.x;
    let dims = {{MODE}}_k_dims();

    // BN divides 256, so each invocation always loads the same B column: decode it once.
    let b_n = tid % BN;
    let b_k = tid / BN;
    let b_col = col0 + b_n;
    let info = {{MODE}}_col_info(min(b_col, max(n_len, 1u) - 1u));

    // The k an invocation loads within each staged tile never changes (A: tid % BK, the same
    // for all RM of its rows; B: b_k + 4i), so its counters are decomposed once and advance
    // one tile per stage without a division (the loads' index math, not the products, bounded
    // these kernels on an H100).
    let ak = tid % BK;
    let step = k_digits(BK, dims);
    var sa = k_start(k_begin + ak, dims);
    var sb: array<vec3<u32>, 4>;
    for (var i = 0u; i < 4u; i = i + 1u) {
        sb[i] = k_start(k_begin + b_k + i * 4u, dims);
    }
    var acc: array<f32, {{ACC}}>;
    for (var i = 0u; i < RM * 4u; i = i + 1u) {
        acc[i] = 0.0;
    }
    for (var k0 = k_begin; k0 < k_end; k0 = k0 + BK) {
        for (var i = 0u; i < RM; i = i + 1u) {
            let am = (tid + i * 256u) / BK;
            var av = 0.0;
            if (row0 + am < m_len && k0 + ak < k_end) {
                av = {{MODE}}_load_a(row0 + am, k0 + ak, sa, grp);
            }
            tile_a[ak * BM + am] = av;
        }
        for (var i = 0u; i < 4u; i = i + 1u) {
            let bk = b_k + i * 4u;
            var bv = 0.0;
            if (b_col < n_len && k0 + bk < k_end) {
                bv = {{MODE}}_load_b(sb[i], info, grp);
            }
            tile_b[bk * BN + b_n] = bv;
        }
        sa = k_add(sa, step, dims);
        for (var i = 0u; i < 4u; i = i + 1u) {
            sb[i] = k_add(sb[i], step, dims);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk = kk + 1u) {
            var ar: array<f32, {{RM}}>;
            var br: array<f32, 4>;
            for (var i = 0u; i < RM; i = i + 1u) {
                ar[i] = tile_a[kk * BM + lid.y + 16u * i];
            }
            for (var j = 0u; j < 4u; j = j + 1u) {
                br[j] = tile_b[kk * BN + lid.x + 16u * j];
            }
            for (var i = 0u; i < RM; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i * 4u + j] = acc[i * 4u + j] + ar[i] * br[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < RM; i = i + 1u) {
        let m = row0 + lid.y + 16u * i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let col = col0 + lid.x + 16u * j;
            if (m < m_len && col < n_len) {
                {{MODE}}_store(m, col, grp, split, acc[i * 4u + j]);
            }
        }
    }
}

// The same products without workgroup memory or barriers, for software adapters (lavapipe,
// SwiftShader) that emulate barriers slowly: a flat grid of invocations, each computing an
// RM-row × COLS-column block (P[25] row blocks × P[26] column blocks per group and split) by
// streaming its A rows and B columns from the buffers, stepping k as a counter (no
// divisions in the loop). The block's generated lines (src/ops/nn/conv_block.rs) name
// each row rI, column iJ and accumulator cI_H (columns 4H..4H+3 of row I), and advance `s`;
// the VECTOR variant (bwd_cols) loads vec4s, 4 rows and 4 columns at a time. Blocks this
// small waste almost nothing on thin problems.
@compute @workgroup_size({{WG}})
fn direct(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params();
    let m_len = P[17];
    let n_len = P[18];
    let splits = P[22];
    let row_blocks = P[25];
    let col_blocks = P[26];
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= row_blocks * col_blocks) {
        return;
    }
    let row0 = (t / col_blocks) * RM;
    let col0 = (t % col_blocks) * COLS;
    let z = gid.z + P[24];
    let grp = z / splits;
    let split = z % splits;
    let k_begin = split * P[21];
    let k_end = min(P[19], k_begin + P[21]);
    let dims = {{MODE}}_k_dims();
    // Rows and columns past the end compute on clamped indices and are not stored.
    let last_m = m_len - 1u;
    let last_n = n_len - 1u;
{{DIRECT_SETUP}}
    var s = k_start(k_begin, dims);
    for (var k = k_begin; k < k_end; k = k + 1u) {
{{DIRECT_PRODUCT}}
    }
{{DIRECT_STORE}}
}

// Four adjacent outputs of a direct block's row `m` from column `col`, those inside the
// product stored.
fn direct_store(m: u32, col: u32, grp: u32, split: u32, v: vec4<f32>) {
    for (var j = 0u; j < 4u; j = j + 1u) {
        if (m < P[17] && col + j < P[18]) {
            {{MODE}}_store(m, col + j, grp, split, v[j]);
        }
    }
}

// The input gradient from its columns (bound as `a_src`, P[17] rows × P[18] columns per
// group), one invocation per dx element (P[27] of them): the sum of the column entries its
// taps fed, in (ki, kj) order. With unit strides and dilations the taps that land on dy form
// a range per axis, worked out without a division, so no tap is tested; the STRIDED variant
// (any stride or dilation above 1) tests each. Software adapters divide one lane at a time,
// so the element's coordinates take three divisions and the ranges none.
@compute @workgroup_size({{WG}})
fn col2im(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params();
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= P[27]) {
        return;
    }
    let row = i / P[3];
    let x = i - row * P[3];
    let plane = row / P[2];
    let y = row - plane * P[2];
    let n = plane / P[1];
    let c = plane - n * P[1];
    let grp = c / P[15];
    let first = (grp * P[17] + (c - grp * P[15]) * P[7] * P[8]) * P[18] + n * P[5] * P[6];
    // Padded coordinates: tap (ki, kj) reads dy at ((py − ki·dh) / sh, (px − kj·dw) / sw).
    let py = y + P[11];
    let px = x + P[12];
    var ki0 = 0u;
    var ki1 = P[7];
    var kj0 = 0u;
    var kj1 = P[8];
    if (!STRIDED) {
        // py − ki in [0, oh): ki from py + 1 − oh to py.
        ki0 = select(0u, py + 1u - P[5], py + 1u > P[5]);
        ki1 = min(ki1, py + 1u);
        kj0 = select(0u, px + 1u - P[6], px + 1u > P[6]);
        kj1 = min(kj1, px + 1u);
    }
    var acc = 0.0;
    for (var ki = ki0; ki < ki1; ki = ki + 1u) {
        let ty = i32(py) - i32(ki * P[13]);
        if (STRIDED && (ty < 0 || u32(ty) % P[9] != 0u || u32(ty) / P[9] >= P[5])) {
            continue;
        }
        let oy = u32(ty) / select(1u, P[9], STRIDED);
        for (var kj = kj0; kj < kj1; kj = kj + 1u) {
            let tx = i32(px) - i32(kj * P[14]);
            if (STRIDED && (tx < 0 || u32(tx) % P[10] != 0u || u32(tx) / P[10] >= P[6])) {
                continue;
            }
            let ox = u32(tx) / select(1u, P[10], STRIDED);
            acc = acc + a_at(first + (ki * P[8] + kj) * P[18] + oy * P[6] + ox);
        }
    }
    store_dst(i, acc);
}

// The partial outputs of a split product are bound as `a_src` (lib/split_k.wgsl).
fn partial(at: u32) -> f32 {
    return a_at(at);
}

// A split product's last step, one invocation per output: the sum of its K slices (bound as
// `a_src`), in a fixed order, stored as the unsplit product stores (fwd: bias, epilogue).
@compute @workgroup_size(256)
fn finish(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    load_params();
    let outputs = P[27];
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= outputs) {
        return;
    }
    {{MODE}}_finish(i, sum_slices(i, outputs, P[22]));
}
