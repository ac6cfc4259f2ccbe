// Split-K's sum (src/ops/split_k.rs): output `i`'s partial slices, `outputs` apart, added four
// at a time in independent lanes (the loads overlap), then the lanes and the remainder: a
// fixed order. The including kernel defines `fn partial(at: u32) -> f32` over its binding.
fn sum_slices(i: u32, outputs: u32, splits: u32) -> f32 {
    var lanes = vec4<f32>(0.0);
    var s = 0u;
    for (; s + 4u <= splits; s = s + 4u) {
        let at = s * outputs + i;
        lanes = lanes + vec4<f32>(partial(at), partial(at + outputs), partial(at + 2u * outputs), partial(at + 3u * outputs));
    }
    var v = (lanes.x + lanes.y) + (lanes.z + lanes.w);
    for (; s < splits; s = s + 1u) {
        v = v + partial(s * outputs + i);
    }
    return v;
}
