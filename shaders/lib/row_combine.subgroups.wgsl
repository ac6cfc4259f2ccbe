// `lib/row_combine.wgsl` through subgroup operations (devices with `SUBGROUP`): each subgroup
// combines its accumulators by shuffles (any `{{T}}`, the emulated 64-bit types included),
// its first invocation stores the result at the subgroup's index, and after one barrier
// invocation 0 combines the partials in index order (a fixed order). Subgroup k holds
// invocations k·size.. of the 1-D workgroup, as in `lib/wg_reduce.subgroups.wgsl`.
fn combine_workgroup(lid: u32, acc: {{T}}) -> {{T}} {
    let size = subgroupAdd(1u);
    var v = acc;
    for (var d = size / 2u; d > 0u; d = d >> 1u) {
        v = combine(v, subgroupShuffleDown(v, d));
    }
    if (subgroupExclusiveAdd(1u) == 0u) {
        partial[lid / size] = v;
    }
    workgroupBarrier();
    var total = partial[0];
    for (var i = 1u; i < {{WG}}u / size; i = i + 1u) {
        total = combine(total, partial[i]);
    }
    return total;
}
