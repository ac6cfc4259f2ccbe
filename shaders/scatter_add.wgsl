// The adjoint of gather.wgsl (the gradient of every gather-like op): with the same geometry,
// out[o, v, i] = Σ_j [index(o, j, i) == v] g[o, j, i] over an (outer, N, inner) output. Each
// output element loops over the M index positions of its (o, i) column and sums the matches
// in increasing j: deterministic, no float atomics, the same order as the CPU kernel. Cost is
// O(M) per output element. The padding index contributes nothing; an out-of-range index
// contributes nothing and is recorded in the device's error flag.
// params: [total, M, inner, N, so, sj, si, pad, op code]
#include "lib/index_check.wgsl"

@group(0) @binding(0) var<storage, read> g: array<f32>;
@group(0) @binding(1) var<storage, read> index: array<{{I}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read_write> index_errors: array<atomic<u32>, 5>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= params[0]) {
        return;
    }
    let m = params[1];
    let inner = params[2];
    let n = params[3];
    let i = t % inner;
    let v = (t / inner) % n;
    let o = t / (inner * n);
    // The padding row sums nothing; the v == 0 row of each column also checks its indices
    // (even when it is the padding row).
    let is_pad = v == params[7];
    var acc = 0.0;
    if (!is_pad || v == 0u) {
        let base = o * params[4] + i * params[6];
        for (var j = 0u; j < m; j = j + 1u) {
            let u = index_at(base + j * params[5]);
            if (u == v && !is_pad) {
                acc = acc + g[(o * m + j) * inner + i];
            } else if (u >= n && v == 0u) {
                report_index(params[8], index_raw(base + j * params[5]), n);
            }
        }
    }
    dst[t] = acc;
}
