// The workgroup's accumulators combined, a tree in workgroup memory: the result is valid in
// invocation 0. The including kernel defines `combine`, the accumulator type `{{T}}` and
// `partial` (one per invocation). Every invocation must call it, in uniform control flow.
fn combine_workgroup(lid: u32, acc: {{T}}) -> {{T}} {
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = {{WG}}u / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            partial[lid] = combine(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    return partial[0];
}
