// 2-D convolution (NCHW) as implicit GEMM: no im2col buffer, the B operand is gathered from
// the image on the fly. One template, three products ({{MODE}}), one group per wid.z:
//   fwd: out[n, co, oy, ox]  M = cout/g, N = batch·OH·OW, K = cin/g·KH·KW   (A = weight, B = x)
//   dx:  dx[n, ci, y, x]     M = cin/g,  N = batch·H·W,   K = cout/g·KH·KW  (A = weight, B = grad)
//   dw:  dw[co, ci, ky, kx]  M = cout/g, N = cin/g·KH·KW, K = batch·OH·OW   (A = grad,   B = x)
// `main` stages 64×16 and 16×64 tiles in workgroup memory (4×4 outputs per invocation);
// `direct` is the barrier-free form used on software adapters.

@group(0) @binding(0) var<storage, read> src_a: array<f32>;
@group(0) @binding(1) var<storage, read> src_b: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

const P_M = 0u;
const P_N = 1u;
const P_K = 2u;
const P_BATCH = 3u;
const P_C = 4u;
const P_H = 5u;
const P_W = 6u;
const P_COUT = 7u;
const P_OH = 8u;
const P_OW = 9u;
const P_KH = 10u;
const P_KW = 11u;
const P_SH = 12u;
const P_SW = 13u;
const P_PT = 14u;
const P_PL = 15u;
const P_DH = 16u;
const P_DW = 17u;
const P_CIN_G = 18u;
const P_COUT_G = 19u;
const P_HAS_BIAS = 20u;

// x[n, c, iy, ix] read from src_b, zero outside the image (padding).
fn image(n: u32, c: u32, iy: i32, ix: i32) -> f32 {
    let h = params[P_H];
    let w = params[P_W];
    if (iy < 0 || ix < 0 || iy >= i32(h) || ix >= i32(w)) {
        return 0.0;
    }
    return src_b[((n * params[P_C] + c) * h + u32(iy)) * w + u32(ix)];
}

// ---- fwd ----
fn load_a_fwd(g: u32, m: u32, k: u32) -> f32 {
    return src_a[(g * params[P_COUT_G] + m) * params[P_K] + k];
}

fn load_b_fwd(g: u32, k: u32, j: u32) -> f32 {
    let khw = params[P_KH] * params[P_KW];
    let ci = k / khw;
    let r = k % khw;
    let ky = r / params[P_KW];
    let kx = r % params[P_KW];
    let ohw = params[P_OH] * params[P_OW];
    let n = j / ohw;
    let s = j % ohw;
    let oy = s / params[P_OW];
    let ox = s % params[P_OW];
    let iy = i32(oy * params[P_SH] + ky * params[P_DH]) - i32(params[P_PT]);
    let ix = i32(ox * params[P_SW] + kx * params[P_DW]) - i32(params[P_PL]);
    return image(n, g * params[P_CIN_G] + ci, iy, ix);
}

fn store_fwd(g: u32, m: u32, j: u32, v: f32) {
    let ohw = params[P_OH] * params[P_OW];
    let n = j / ohw;
    let s = j % ohw;
    let co = g * params[P_COUT_G] + m;
    var b = 0.0;
    if (params[P_HAS_BIAS] != 0u) {
        b = bias[co];
    }
    dst[(n * params[P_COUT] + co) * ohw + s] = v + b;
}

// ---- dx: the transposed convolution of the output gradient ----
fn load_a_dx(g: u32, m: u32, k: u32) -> f32 {
    let khw = params[P_KH] * params[P_KW];
    let co = k / khw;
    let r = k % khw;
    return src_a[((g * params[P_COUT_G] + co) * params[P_CIN_G] + m) * khw + r];
}

fn load_b_dx(g: u32, k: u32, j: u32) -> f32 {
    let khw = params[P_KH] * params[P_KW];
    let co = k / khw;
    let r = k % khw;
    let ky = r / params[P_KW];
    let kx = r % params[P_KW];
    let hw = params[P_H] * params[P_W];
    let n = j / hw;
    let s = j % hw;
    let y = s / params[P_W];
    let x = s % params[P_W];
    let ty = i32(y + params[P_PT]) - i32(ky * params[P_DH]);
    let tx = i32(x + params[P_PL]) - i32(kx * params[P_DW]);
    if (ty < 0 || tx < 0) {
        return 0.0;
    }
    let sh = params[P_SH];
    let sw = params[P_SW];
    if (u32(ty) % sh != 0u || u32(tx) % sw != 0u) {
        return 0.0;
    }
    let oy = u32(ty) / sh;
    let ox = u32(tx) / sw;
    if (oy >= params[P_OH] || ox >= params[P_OW]) {
        return 0.0;
    }
    return src_b[((n * params[P_COUT] + g * params[P_COUT_G] + co) * params[P_OH] + oy) * params[P_OW] + ox];
}

fn store_dx(g: u32, m: u32, j: u32, v: f32) {
    let hw = params[P_H] * params[P_W];
    let n = j / hw;
    let s = j % hw;
    dst[(n * params[P_C] + g * params[P_CIN_G] + m) * hw + s] = v;
}

// ---- dw: output gradient against the image ----
fn load_a_dw(g: u32, m: u32, k: u32) -> f32 {
    let ohw = params[P_OH] * params[P_OW];
    let n = k / ohw;
    let s = k % ohw;
    return src_a[(n * params[P_COUT] + g * params[P_COUT_G] + m) * ohw + s];
}

fn load_b_dw(g: u32, k: u32, j: u32) -> f32 {
    let khw = params[P_KH] * params[P_KW];
    let ci = j / khw;
    let r = j % khw;
    let ky = r / params[P_KW];
    let kx = r % params[P_KW];
    let ohw = params[P_OH] * params[P_OW];
    let n = k / ohw;
    let s = k % ohw;
    let oy = s / params[P_OW];
    let ox = s % params[P_OW];
    let iy = i32(oy * params[P_SH] + ky * params[P_DH]) - i32(params[P_PT]);
    let ix = i32(ox * params[P_SW] + kx * params[P_DW]) - i32(params[P_PL]);
    return image(n, g * params[P_CIN_G] + ci, iy, ix);
}

fn store_dw(g: u32, m: u32, j: u32, v: f32) {
    dst[(g * params[P_COUT_G] + m) * params[P_N] + j] = v;
}

// ---- the GEMM skeleton ----
fn load_a(g: u32, m: u32, k: u32) -> f32 {
    return load_a_{{MODE}}(g, m, k);
}

fn load_b(g: u32, k: u32, j: u32) -> f32 {
    return load_b_{{MODE}}(g, k, j);
}

fn store(g: u32, m: u32, j: u32, v: f32) {
    store_{{MODE}}(g, m, j, v);
}

var<workgroup> tile_a: array<f32, 1024>;
var<workgroup> tile_b: array<f32, 1024>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m_len = params[P_M];
    let n_len = params[P_N];
    let k_len = params[P_K];
    let g = wid.z;
    let row0 = wid.y * 64u;
    let col0 = wid.x * 64u;
    let tid = lid.y * 16u + lid.x;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i = i + 1u) {
        acc[i] = 0.0;
    }
    let k_tiles = (k_len + 15u) / 16u;
    for (var t = 0u; t < k_tiles; t = t + 1u) {
        let k0 = t * 16u;
        for (var i = 0u; i < 4u; i = i + 1u) {
            let e = tid + i * 256u;
            let am = e / 16u;
            let ak = e % 16u;
            var av = 0.0;
            if (row0 + am < m_len && k0 + ak < k_len) {
                av = load_a(g, row0 + am, k0 + ak);
            }
            tile_a[ak * 64u + am] = av;
            let bk = e / 64u;
            let bn = e % 64u;
            var bv = 0.0;
            if (k0 + bk < k_len && col0 + bn < n_len) {
                bv = load_b(g, k0 + bk, col0 + bn);
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
    for (var i = 0u; i < 4u; i = i + 1u) {
        let m = row0 + lid.y + 16u * i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let n = col0 + lid.x + 16u * j;
            if (m < m_len && n < n_len) {
                store(g, m, n, acc[i * 4u + j]);
            }
        }
    }
}

@compute @workgroup_size(16, 16)
fn direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m_len = params[P_M];
    let n_len = params[P_N];
    let k_len = params[P_K];
    let g = wid.z;
    let m0 = wid.y * 64u + lid.y * 4u;
    let n0 = wid.x * 64u + lid.x;
    let last_m = max(m_len, 1u) - 1u;
    let last_n = max(n_len, 1u) - 1u;
    let rows = vec4<u32>(min(m0, last_m), min(m0 + 1u, last_m), min(m0 + 2u, last_m), min(m0 + 3u, last_m));
    let cols = vec4<u32>(min(n0, last_n), min(n0 + 16u, last_n), min(n0 + 32u, last_n), min(n0 + 48u, last_n));
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    for (var k = 0u; k < k_len; k = k + 1u) {
        let bv = vec4<f32>(load_b(g, k, cols.x), load_b(g, k, cols.y), load_b(g, k, cols.z), load_b(g, k, cols.w));
        c0 = c0 + load_a(g, rows.x, k) * bv;
        c1 = c1 + load_a(g, rows.y, k) * bv;
        c2 = c2 + load_a(g, rows.z, k) * bv;
        c3 = c3 + load_a(g, rows.w, k) * bv;
    }
    let out = array<vec4<f32>, 4>(c0, c1, c2, c3);
    for (var i = 0u; i < 4u; i = i + 1u) {
        let m = m0 + i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let n = n0 + 16u * j;
            if (m < m_len && n < n_len) {
                store(g, m, n, out[i][j]);
            }
        }
    }
}
