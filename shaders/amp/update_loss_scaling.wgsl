// update_loss_scaling (src/ops/amp/loss_scaling.rs): one invocation moves the scale and the
// good/bad step counters by the found flag, as Paddle's op does.
// params: [incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio (bits)].
@group(0) @binding(0) var<storage, read> found: array<u32>;
@group(0) @binding(1) var<storage, read_write> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> good: array<i32>;
@group(0) @binding(3) var<storage, read_write> bad: array<i32>;
@group(0) @binding(4) var<storage, read> params: array<u32>;

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x != 0u || gid.y != 0u) {
        return;
    }
    if (found[0] != 0u) {
        good[0] = 0;
        bad[0] = bad[0] + 1;
        if (u32(bad[0]) == params[1]) {
            scale[0] = max(scale[0] * bitcast<f32>(params[3]), 1.0);
            bad[0] = 0;
        }
    } else {
        bad[0] = 0;
        good[0] = good[0] + 1;
        if (u32(good[0]) == params[0]) {
            let grown = scale[0] * bitcast<f32>(params[2]);
            // An overflow to infinity keeps the old scale.
            if ((bitcast<u32>(grown) & 0x7f800000u) != 0x7f800000u) {
                scale[0] = grown;
            }
            good[0] = 0;
        }
    }
}
