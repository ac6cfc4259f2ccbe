// layer_norm backward w.r.t. weight and bias: per column j, Σ over rows of g · x̂ and of g.
// One invocation per (chunk of rows, column) writes partial sums laid out [chunks, D];
// neighbouring invocations read neighbouring columns. The chunks are summed afterwards.
// params: [rows, D, chunk_rows, chunks]

@group(0) @binding(0) var<storage, read> x: array<{{E}}>;
@group(0) @binding(1) var<storage, read> g: array<{{E}}>;
@group(0) @binding(2) var<storage, read> mean: array<{{E}}>;
@group(0) @binding(3) var<storage, read> rstd: array<{{E}}>;
@group(0) @binding(4) var<storage, read_write> dw: array<f32>;
@group(0) @binding(5) var<storage, read_write> db: array<f32>;
@group(0) @binding(6) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * {{WG}}u;
    let n = params[0];
    let d = params[1];
    let chunk_rows = params[2];
    if (idx >= d * params[3]) {
        return;
    }
    let j = idx % d;
    let start = (idx / d) * chunk_rows;
    let end = min(n, start + chunk_rows);
    var sw = 0.0;
    var sb = 0.0;
    for (var r = start; r < end; r = r + 1u) {
        let k = r * d + j;
        sw = sw + f32(g[k]) * (f32(x[k]) - f32(mean[r])) * f32(rstd[r]);
        sb = sb + f32(g[k]);
    }
    dw[idx] = sw;
    db[idx] = sb;
}
