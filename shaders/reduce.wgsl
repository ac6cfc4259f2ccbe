// Reductions over the middle axis of an (outer, R, inner) view: sum, mean, prod, max, min.
// `rows` (inner == 1): one workgroup per (row, chunk of R), its accumulators combined by
// `lib/row_combine.wgsl` (a tree in workgroup memory, or subgroup shuffles); with several
// chunks it writes partial results that a second pass combines.
// `strided`: one invocation per output, looping over R (inner > 1 or short rows).
// `planes`: as `rows`, reducing the outer and inner axes together, keeping the middle: row o
// is the `outer` × `inner` elements with middle index o (a conv bias gradient: axes 0, 2, 3
// of NCHW), so the two runs of axes take one pass instead of two.
// `S` and `D` are the storage types read and written: T's, or `f16` in float16 forms, which
// accumulate in f32 as float32 does.
// Elements are read through `load(i)`: `src[i]`, or in a float32 variant a chain of
// elementwise ops fused before the reduction over inputs of src's shape, bound after `dst`
// (src/ops/epilogue.rs).
// params: [outer, R, inner, chunks, chunk_len, scale (f32 bits, used by mean)], a
// prologue's from word 64; `planes` reads [rows (the middle size), outer·inner, inner, ...].
#include "lib/int64.wgsl"
#include "lib/math.wgsl"
#include "lib/row_combine.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{S}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{D}}>;
@group(0) @binding({{PARAMS}}) var<storage, read> params: array<u32>;

{{LOAD}}

var<workgroup> partial: array<{{T}}, {{WG}}>;

fn identity() -> {{T}} {
    return {{IDENTITY}};
}

fn combine(a: {{T}}, b: {{T}}) -> {{T}} {
    return {{COMBINE}};
}

fn finalize(a: {{T}}) -> {{T}} {
    return {{FINAL}};
}

// Workgroup g's share of a row: row o, elements [start, end) of it (params[0] rows of
// params[1] elements, params[3] chunks of params[4] per row); `valid` when g has one.
struct Chunk {
    o: u32,
    start: u32,
    end: u32,
    valid: bool,
}

fn chunk_of(g: u32) -> Chunk {
    let chunks = max(params[3], 1u);
    let start = (g % chunks) * params[4];
    return Chunk(g / chunks, start, min(params[1], start + params[4]), g < params[0] * params[3]);
}

// Combines the workgroup's accumulators and writes chunk `ch`'s result (finalized when the
// row is one chunk).
fn store_row(lid: u32, acc: {{T}}, g: u32, ch: Chunk) {
    let total = combine_workgroup(lid, acc);
    if (lid == 0u && ch.valid) {
        dst[g] = {{D}}(select(total, finalize(total), params[3] == 1u));
    }
}

@compute @workgroup_size({{WG}})
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    let ch = chunk_of(g);
    var acc = identity();
    if (ch.valid) {
        for (var r = ch.start + lid; r < ch.end; r = r + {{WG}}u) {
            acc = combine(acc, load(ch.o * params[1] + r));
        }
    }
    store_row(lid, acc, g, ch);
}

@compute @workgroup_size({{WG}})
fn planes(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    let ch = chunk_of(g);
    let rows = params[0];
    let inner = params[2];
    var acc = identity();
    if (ch.valid && ch.start + lid < ch.end) {
        // Element r of the row is (i, j) = (r / inner, r % inner), at (i·rows + o)·inner + j;
        // stepping r by the workgroup size steps (i, j) by (q, m) with one carry.
        var r = ch.start + lid;
        var i = r / inner;
        var j = r % inner;
        let q = {{WG}}u / inner;
        let m = {{WG}}u % inner;
        while (r < ch.end) {
            acc = combine(acc, load((i * rows + ch.o) * inner + j));
            r = r + {{WG}}u;
            i = i + q;
            j = j + m;
            if (j >= inner) {
                j = j - inner;
                i = i + 1u;
            }
        }
    }
    store_row(lid, acc, g, ch);
}

@compute @workgroup_size({{WG}})
fn strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    let outer = params[0];
    let len = params[1];
    let inner = params[2];
    if (idx >= outer * inner) {
        return;
    }
    let o = idx / inner;
    let i = idx % inner;
    var acc = identity();
    for (var r = 0u; r < len; r = r + 1u) {
        acc = combine(acc, load((o * len + r) * inner + i));
    }
    dst[idx] = {{D}}(finalize(acc));
}
