// 2-D pooling (NCHW), one invocation per output element (forward) or per input element
// (backward, gathering from every window that covers it: deterministic, no atomics).
// Windows are fixed (kernel, stride, padding) or adaptive (Paddle's bins
// [floor(i·in/out), ceil((i+1)·in/out))).
// params: [planes, H, W, OH, OW, kh, kw, sh, sw, pt, pl, adaptive, exclusive, H+pt+pb, W+pl+pr,
//          backward is max (1) or avg (0)]
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> aux: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read_write> idx_out: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

#include "lib/math.wgsl"

// [start, end) of window `o` along an axis, in unpadded coordinates (may reach into the
// padding); `e` is the end clipped to the padded extent (for count_include_pad).
struct Window {
    start: i32,
    end: i32,
    padded_end: i32,
}

fn window(o: u32, in_len: u32, out_len: u32, k: u32, s: u32, pad: u32, padded_len: u32) -> Window {
    if (params[11] != 0u) {
        let start = (o * in_len) / out_len;
        let end = ((o + 1u) * in_len + out_len - 1u) / out_len;
        return Window(i32(start), i32(end), i32(end));
    }
    let start = i32(o * s) - i32(pad);
    let end = start + i32(k);
    return Window(start, end, min(end, i32(padded_len) - i32(pad)));
}

fn count(wy: Window, wx: Window, h: u32, w: u32) -> f32 {
    if (params[12] != 0u || params[11] != 0u) {
        let ys = max(wy.start, 0);
        let ye = min(wy.end, i32(h));
        let xs = max(wx.start, 0);
        let xe = min(wx.end, i32(w));
        return f32(max(ye - ys, 0) * max(xe - xs, 0));
    }
    return f32((wy.padded_end - wy.start) * (wx.padded_end - wx.start));
}

fn out_windows(i: u32) -> array<Window, 2> {
    let oh = params[3];
    let ow = params[4];
    let oy = (i / ow) % oh;
    let ox = i % ow;
    let wy = window(oy, params[1], oh, params[5], params[7], params[9], params[13]);
    let wx = window(ox, params[2], ow, params[6], params[8], params[10], params[14]);
    return array<Window, 2>(wy, wx);
}

@compute @workgroup_size(256)
fn max_fwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    let h = params[1];
    let w = params[2];
    if (i >= params[0] * params[3] * params[4]) {
        return;
    }
    let plane = i / (params[3] * params[4]);
    let win = out_windows(i);
    var best = -f32_inf();
    var arg = 0u;
    var found = false;
    for (var y = max(win[0].start, 0); y < min(win[0].end, i32(h)); y = y + 1) {
        for (var x = max(win[1].start, 0); x < min(win[1].end, i32(w)); x = x + 1) {
            let at = u32(y) * w + u32(x);
            let v = src[plane * h * w + at];
            if (!found || v > best || (is_nan_f(v) && !is_nan_f(best))) {
                best = v;
                arg = at;
                found = true;
            }
        }
    }
    dst[i] = best;
    idx_out[i] = vec2<u32>(arg, 0u);
}

@compute @workgroup_size(256)
fn avg_fwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    let h = params[1];
    let w = params[2];
    if (i >= params[0] * params[3] * params[4]) {
        return;
    }
    let plane = i / (params[3] * params[4]);
    let win = out_windows(i);
    var acc = 0.0;
    for (var y = max(win[0].start, 0); y < min(win[0].end, i32(h)); y = y + 1) {
        for (var x = max(win[1].start, 0); x < min(win[1].end, i32(w)); x = x + 1) {
            acc = acc + src[(plane * h + u32(y)) * w + u32(x)];
        }
    }
    dst[i] = acc / max(count(win[0], win[1], h, w), 1.0);
}

// Output rows whose windows may cover input row `y` (a superset; callers test membership).
fn covering(y: u32, in_len: u32, out_len: u32, k: u32, s: u32, pad: u32) -> vec2<u32> {
    if (params[11] != 0u) {
        let lo = (y * out_len) / in_len;
        return vec2<u32>(max(lo, 1u) - 1u, min(((y + 1u) * out_len) / in_len + 1u, out_len - 1u));
    }
    let top = i32(y + pad) - i32(k) + 1;
    var lo = 0u;
    if (top > 0) {
        lo = (u32(top) + s - 1u) / s;
    }
    let hi = min((y + pad) / s, out_len - 1u);
    return vec2<u32>(lo, hi);
}

// dx[plane, y, x] = Σ over windows covering (y, x): g / count (avg) or g where the window's
// argmax is (y, x) (max; aux holds the int64 indices' words).
@compute @workgroup_size(256)
fn bwd(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    let h = params[1];
    let w = params[2];
    let oh = params[3];
    let ow = params[4];
    if (i >= params[0] * h * w) {
        return;
    }
    let plane = i / (h * w);
    let y = (i / w) % h;
    let x = i % w;
    let at = y * w + x;
    let ry = covering(y, h, oh, params[5], params[7], params[9]);
    let rx = covering(x, w, ow, params[6], params[8], params[10]);
    var acc = 0.0;
    for (var oy = ry.x; oy <= ry.y; oy = oy + 1u) {
        let wy = window(oy, h, oh, params[5], params[7], params[9], params[13]);
        if (i32(y) < wy.start || i32(y) >= wy.end) {
            continue;
        }
        for (var ox = rx.x; ox <= rx.y; ox = ox + 1u) {
            let wx = window(ox, w, ow, params[6], params[8], params[10], params[14]);
            if (i32(x) < wx.start || i32(x) >= wx.end) {
                continue;
            }
            let o = (plane * oh + oy) * ow + ox;
            if (params[15] != 0u) {
                if (aux[2u * o] == at) {
                    acc = acc + src[o];
                }
            } else {
                acc = acc + src[o] / max(count(wy, wx, h, w), 1.0);
            }
        }
    }
    dst[i] = acc;
}
