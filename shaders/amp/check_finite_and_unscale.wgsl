// check_finite_and_unscale of one gradient (src/ops/amp/unscale.rs): each value times
// 1/scale in place; a quotient that is a NaN or an infinity (all exponent bits set) sets
// found[0]. float32 values one per invocation, float16 and bfloat16 two to a word, each
// invocation owning its word (the unused upper half of an odd count's last word is not looked
// at). params: [words, half (0 for float32, 1 for float16, 2 for bfloat16), n].
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read_write> found: array<u32>;
@group(0) @binding(1) var<storage, read> scale: array<f32>;
@group(0) @binding(2) var<storage, read_write> grad: array<u32>;
@group(0) @binding(3) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    let inv = 1.0 / scale[0];
    var bad = false;
    if (params[1] == 1u) {
        let w = pack2x16float(unpack2x16float(grad[i]) * inv);
        grad[i] = w;
        bad = (w & 0x7c00u) == 0x7c00u || (2u * i + 1u < params[2] && ((w >> 16u) & 0x7c00u) == 0x7c00u);
    } else if (params[1] == 2u) {
        let a = bitcast<f32>(grad[i] << 16u) * inv;
        let b = bitcast<f32>(grad[i] & 0xffff0000u) * inv;
        let w = bf16_bits(a) | (bf16_bits(b) << 16u);
        grad[i] = w;
        bad = (w & 0x7f80u) == 0x7f80u || (2u * i + 1u < params[2] && ((w >> 16u) & 0x7f80u) == 0x7f80u);
    } else {
        let v = bitcast<f32>(grad[i]) * inv;
        grad[i] = bitcast<u32>(v);
        bad = (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u;
    }
    if (bad) {
        found[0] = 1u;
    }
}
