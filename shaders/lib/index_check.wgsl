// The device's index-error flag (src/backend/gpu/index_check.rs): [count, op code, index lo,
// index hi, n]. The first invocation to meet an out-of-range index writes the details. Each
// kernel declares `index_errors: array<atomic<u32>, 5>` at its own binding, after its buffers,
// and its indices as `index` (an array of the index dtype), which the readers below take through the variant's
// `INDEX_AT` / `INDEX_RAW` substitutions (src/ops/index.rs `index_variant`).

// The index at position k as u32; 0xffffffff when it is negative or does not fit 32 bits.
fn index_at(k: u32) -> u32 {
    {{INDEX_AT}}
}

// The index at position k as the two words of an int64.
fn index_raw(k: u32) -> vec2<u32> {
    {{INDEX_RAW}}
}

fn report_index(code: u32, raw: vec2<u32>, n: u32) {
    if (atomicAdd(&index_errors[0], 1u) == 0u) {
        atomicStore(&index_errors[1], code);
        atomicStore(&index_errors[2], raw.x);
        atomicStore(&index_errors[3], raw.y);
        atomicStore(&index_errors[4], n);
    }
}
