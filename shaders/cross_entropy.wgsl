// cross_entropy_with_softmax over the middle axis of an (outer, C, inner) view. `src` is the
// log-softmax the op wrote first (softmax.wgsl), or without softmax the probabilities.
// `pick`: one invocation per (outer, inner) line: loss = −logp[label] (logp = log(src)
// without softmax) and valid = 1, or 0 and 0 where the label is ignore_index. A label outside
// [0, C) is recorded in the device's error flag (the next readback reports the CPU's error)
// and its line writes 0 and 1.
// `grad`: one invocation per element, 0 on an ignored line; with d = −dloss:
// onehot·d − exp(logp)·d (log_softmax_grad of a one-hot dlogp), or without softmax d / src at
// the label (log's gradient) and 0 elsewhere, in the order the composed ops take them.
// Both entries record an out-of-range label in the flag (grad once per line, for a program
// that calls it alone) and bind the same six slots, so the module declares no more than
// WebGPU's 8 storage buffers.
// params, pick: [lines, C, inner, ignore lo, ignore hi, softmax, op code]; grad: [total, C,
// inner, ignore lo, ignore hi, softmax, op code]
#include "lib/index_check.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{E}}>;
@group(0) @binding(1) var<storage, read> index: array<{{I}}>;
@group(0) @binding(2) var<storage, read_write> loss: array<{{E}}>;
// `valid` in pick, dx in grad.
@group(0) @binding(3) var<storage, read_write> dst: array<{{E}}>;
@group(0) @binding(4) var<storage, read_write> index_errors: array<atomic<u32>, 5>;
@group(0) @binding(5) var<storage, read> params: array<u32>;

@group(0) @binding(2) var<storage, read> dloss: array<{{E}}>;

fn ignored(raw: vec2<u32>, lo: u32, hi: u32) -> bool {
    return raw.x == lo && raw.y == hi;
}

@compute @workgroup_size({{WG}})
fn pick(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let line = gid.x + gid.y * nwg.x * {{WG}}u;
    if (line >= params[0]) {
        return;
    }
    let classes = params[1];
    let inner = params[2];
    if (ignored(index_raw(line), params[3], params[4])) {
        loss[line] = {{E}}(0.0);
        dst[line] = {{E}}(0.0);
        return;
    }
    dst[line] = {{E}}(1.0);
    let label = index_at(line);
    if (label >= classes) {
        report_index(params[6], index_raw(line), classes);
        loss[line] = {{E}}(0.0);
        return;
    }
    let v = f32(src[((line / inner) * classes + label) * inner + line % inner]);
    loss[line] = {{E}}(-select(log(v), v, params[5] != 0u));
}

@compute @workgroup_size({{WG}})
fn grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = gid.x + gid.y * nwg.x * {{WG}}u;
    if (t >= params[0]) {
        return;
    }
    let classes = params[1];
    let inner = params[2];
    let line = (t / (classes * inner)) * inner + t % inner;
    if (ignored(index_raw(line), params[3], params[4])) {
        dst[t] = {{E}}(0.0);
        return;
    }
    let d = -f32(dloss[line]);
    let label = index_at(line);
    if (label >= classes && (t / inner) % classes == 0u) {
        report_index(params[6], index_raw(line), classes);
    }
    let hit = label == (t / inner) % classes;
    if (params[5] != 0u) {
        dst[t] = {{E}}(select(0.0, d, hit) - exp(f32(src[t])) * d);
    } else {
        dst[t] = {{E}}(select(0.0, d / f32(src[t]), hit));
    }
}
