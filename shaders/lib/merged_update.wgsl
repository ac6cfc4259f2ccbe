// The entry point of a mergeable update (src/ops/update/merged.rs). Variant k updates k + 1
// parameters of the same settings in one dispatch, each in a workgroup range of its own, so
// a workgroup's invocations never branch apart: parameter j's first workgroup and elements
// are params[{{AT}} + 2j] and params[{{AT}} + 2j + 1] (params[0], the dispatch's elements or
// invocations, is not read here).
// The including file declares the tensors' bindings and `update`, which maps
// (param, grad, state 0, state 1) to (param, unused, state 0, state 1).

@compute @workgroup_size({{WG}})
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    // A gated schedule's skip flag (src/ops/update/): the step changes nothing.
    if (params[{{AT}}u - 1u] == 2u && schedule[3] != 0.0) {
        return;
    }
    let w = wid.x + wid.y * nwg.x;
    // The parameter this workgroup updates: the last whose first workgroup is at most w.
    var k = 0u;
    for (var j = 1u; j < {{K}}u; j++) {
        if (w >= params[{{AT}}u + 2u * j]) {
            k = j;
        }
    }
    let e = (w - params[{{AT}}u + 2u * k]) * {{WG}}u + lid;
    if (e >= params[{{AT}}u + 1u + 2u * k]) {
        return;
    }
    var x = vec4<f32>();
    switch k {
{{LOADS}}
        default: {}
    }
    let r = update(x);
    switch k {
{{STORES}}
        default: {}
    }
}
