// dtype conversion. Most targets write one element per invocation; a float16 or bfloat16
// target writes one packed word (two values) per invocation. 16-bit sources unpack to f32.
#include "lib/int64.wgsl"
#include "lib/math.wgsl"

@group(0) @binding(0) var<storage, read> src: array<{{XS}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{YS}}>;
@group(0) @binding(2) var<storage, read> params: array<u32>;

fn load(i: u32) -> {{XT}} {
    return {{LOAD}};
}

fn convert(x: {{XT}}) -> {{YT}} {
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * {{WG}}u;
    let n = params[0];
    {{BODY}}
}
