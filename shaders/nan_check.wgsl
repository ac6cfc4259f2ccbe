// FLAGS_check_nan_inf's deferred check of one GPU output (src/backend/gpu/index_check.rs):
// finds a NaN or infinity among its n float32 values (or float16/bfloat16 values, two to a word) by
// their exponent bits, which no compiler folds away, and records the first one met in the
// device's error flag as [count, code, element, 0, bits]. The next readback or sync reads it.
// params: [n, code, half (0 for float32, 1 for float16, 2 for bfloat16)].
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> index_errors: array<atomic<u32>, 5>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    if (i >= params[0]) {
        return;
    }
    var bits: u32;
    var all_ones: u32;
    if (params[2] == 1u) {
        bits = (x[i / 2u] >> ((i % 2u) * 16u)) & 0xffffu;
        all_ones = 0x7c00u;
    } else if (params[2] == 2u) {
        bits = (x[i / 2u] >> ((i % 2u) * 16u)) & 0xffffu;
        all_ones = 0x7f80u;
    } else {
        bits = x[i];
        all_ones = 0x7f800000u;
    }
    if ((bits & all_ones) == all_ones && atomicAdd(&index_errors[0], 1u) == 0u) {
        atomicStore(&index_errors[1], params[1]);
        atomicStore(&index_errors[2], i);
        atomicStore(&index_errors[3], 0u);
        atomicStore(&index_errors[4], bits);
    }
}
