// `lib/wg_reduce.wgsl`'s reductions through subgroup operations, for devices with
// `SUBGROUP` (the kernels including that file run this form there, src/backend/gpu/shader.rs):
// each subgroup reduces its values with one operation, its first invocation (rank 0: naga has
// no subgroupElect) stores the result
// at the subgroup's index in workgroup memory, and after one barrier every invocation
// combines the partials in index order (a fixed order: the same result on every run).
// Two barriers where the tree takes log2({{WG}}) + 2. Subgroup k holds invocations
// k·size.. of the 1-D workgroup: the layout Vulkan, Metal and D3D12 drivers give compute
// shaders. Every invocation must call them, in uniform control flow; each ends with a
// barrier, so two may follow one another.

var<workgroup> red: array<f32, {{WG}}>;

// Σ v over the workgroup.
fn wg_sum(lid: u32, v: f32) -> f32 {
    let partial = subgroupAdd(v);
    let size = subgroupAdd(1u);
    if (subgroupExclusiveAdd(1u) == 0u) {
        red[lid / size] = partial;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < {{WG}}u / size; i = i + 1u) {
        total = total + red[i];
    }
    workgroupBarrier();
    return total;
}

// The maximum of v over the workgroup.
fn wg_max(lid: u32, v: f32) -> f32 {
    let partial = subgroupMax(v);
    let size = subgroupAdd(1u);
    if (subgroupExclusiveAdd(1u) == 0u) {
        red[lid / size] = partial;
    }
    workgroupBarrier();
    var m = red[0];
    for (var i = 1u; i < {{WG}}u / size; i = i + 1u) {
        m = max(m, red[i]);
    }
    workgroupBarrier();
    return m;
}
