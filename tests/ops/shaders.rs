//! Every WGSL variant the library can dispatch parses and validates with naga at browser
//! WebGPU capabilities (no f16, f64, i64 or other extensions; a variant that enables f16, for
//! devices with `shader-f16`, with that extension alone added), and stays within WebGPU's
//! default compute limits; every shader file is used by some kernel. A merged variant (an
//! execution plan's multi-tensor dispatch) may exceed the storage-buffer limit by exactly
//! the bindings its extra members add: plans use it only where the device allows.

use naga::valid::{Capabilities, ValidationFlags, Validator};

/// What browser WebGPU offers a shader without extensions. naga gates the core WGSL
/// builtins `pack2x16float` / `unpack2x16float` / `quantizeToF16` behind a capability
/// (for GLES backends); WebGPU requires them (wgpu's `DownlevelFlags::compliant()` holds
/// `SHADER_F16_IN_F32`), so that one capability is the browser baseline. Everything else
/// (the `f16`/`f64`/`i64` types, subgroups, ...) stays off.
const WEBGPU: Capabilities = Capabilities::SHADER_FLOAT16_IN_FLOAT32;

/// WebGPU's default limits for compute shaders.
const MAX_INVOCATIONS: u32 = 256;
const MAX_SIZE: [u32; 3] = [256, 256, 64];
const MAX_WORKGROUP_BYTES: u32 = 16 * 1024;
const MAX_STORAGE_BUFFERS: usize = 8;

/// True for the name `file#key...` of a kernel's subgroup form (bit 31 of the key).
fn subgroup_form(name: &str) -> bool {
    let key = name.split('#').nth(1).and_then(|k| k.split(' ').next()?.parse::<u32>().ok());
    key.is_some_and(|k| k & (1 << 31) != 0)
}

/// Checks one expanded source; returns what is wrong with it.
fn check(key: &str, source: &str) -> Result<(), String> {
    check_with(key, source, MAX_STORAGE_BUFFERS)
}

/// `check` with `max_storage_buffers` storage buffers allowed.
fn check_with(key: &str, source: &str, max_storage_buffers: usize) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{key}: parse error:\n{}", e.emit_to_string(source)))?;
    // `enable f16;` is WebGPU's `shader-f16` feature: the only extension a variant may ask.
    // A kernel's subgroup form (key bit 31) runs only natively, where the device has
    // `SUBGROUP` (naga takes subgroup operations without a directive).
    let mut caps = if source.starts_with("enable f16;") { WEBGPU | Capabilities::SHADER_FLOAT16 } else { WEBGPU };
    if subgroup_form(key) {
        caps |= Capabilities::SUBGROUP;
    }
    // The cooperative-matrix product runs only natively, on adapters with the feature.
    if source.starts_with("enable f16;\nenable wgpu_cooperative_matrix;") {
        caps |= Capabilities::COOPERATIVE_MATRIX;
    }
    Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| format!("{key}: validation error:\n{}", e.emit_to_string(source)))?;

    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).map_err(|e| format!("{key}: layout: {e}"))?;
    let storage_buffers =
        module.global_variables.iter().filter(|(_, v)| matches!(v.space, naga::AddressSpace::Storage { .. })).count();
    if storage_buffers > max_storage_buffers {
        return Err(format!("{key}: {storage_buffers} storage buffers > {max_storage_buffers}"));
    }
    let entries: Vec<_> = module.entry_points.iter().filter(|e| e.stage == naga::ShaderStage::Compute).collect();
    if entries.is_empty() {
        return Err(format!("{key}: no compute entry point"));
    }
    for e in entries {
        let [x, y, z] = e.workgroup_size;
        if x * y * z > MAX_INVOCATIONS || x > MAX_SIZE[0] || y > MAX_SIZE[1] || z > MAX_SIZE[2] {
            return Err(format!("{key}: entry {} has workgroup size {:?}", e.name, e.workgroup_size));
        }
        // WebGPU counts the workgroup variables an entry point uses, itself or through the
        // functions it calls.
        let workgroup_bytes: u32 = globals_used(&module, &e.function)
            .into_iter()
            .map(|h| &module.global_variables[h])
            .filter(|v| v.space == naga::AddressSpace::WorkGroup)
            .map(|v| layouter[v.ty].size)
            .sum();
        if workgroup_bytes > MAX_WORKGROUP_BYTES {
            return Err(format!(
                "{key}: entry {} uses {workgroup_bytes} bytes of workgroup memory > {MAX_WORKGROUP_BYTES}",
                e.name
            ));
        }
    }
    Ok(())
}

/// The global variables `f` reads or writes, directly or through the functions it calls.
fn globals_used(
    module: &naga::Module,
    f: &naga::Function,
) -> std::collections::BTreeSet<naga::Handle<naga::GlobalVariable>> {
    fn calls(block: &naga::Block, out: &mut Vec<naga::Handle<naga::Function>>) {
        for s in block.iter() {
            match s {
                naga::Statement::Call { function, .. } => out.push(*function),
                naga::Statement::Block(b) => calls(b, out),
                naga::Statement::If { accept, reject, .. } => {
                    calls(accept, out);
                    calls(reject, out);
                }
                naga::Statement::Loop { body, continuing, .. } => {
                    calls(body, out);
                    calls(continuing, out);
                }
                naga::Statement::Switch { cases, .. } => cases.iter().for_each(|c| calls(&c.body, out)),
                _ => {}
            }
        }
    }
    let mut used = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![f];
    while let Some(f) = todo.pop() {
        used.extend(f.expressions.iter().filter_map(|(_, e)| match e {
            naga::Expression::GlobalVariable(g) => Some(*g),
            _ => None,
        }));
        let mut callees = Vec::new();
        calls(&f.body, &mut callees);
        todo.extend(callees.into_iter().filter(|h| seen.insert(*h)).map(|h| &module.functions[h]));
    }
    used
}

#[test]
fn every_shader_variant_validates_at_webgpu_capabilities() {
    let variants = dygraph::testing::all_shader_variants().expect("every variant expands (no unfilled placeholder)");
    assert!(!variants.is_empty(), "no shader variants registered");
    let mut failures = Vec::new();
    let mut kernels = std::collections::BTreeSet::new();
    let merged = dygraph::testing::merged_kernel_files();
    let mut merged_variants = 0;
    let float16 = variants.iter().filter(|(_, s)| s.starts_with("enable f16;")).count();
    let subgroups = variants.iter().filter(|(k, _)| subgroup_form(k)).count();
    assert!(subgroups >= 6, "{subgroups} subgroup forms: softmax, layer and batch norm and their gradients have one");
    for (key, source) in &variants {
        let file = key.split('#').next().unwrap_or(key);
        kernels.insert(file.to_string());
        // A merged variant `file#k` takes k members more than variant 0.
        let extra = merged.iter().find(|(f, _)| *f == file).map_or(0, |(_, own)| {
            let k: usize = key.split('#').nth(1).and_then(|k| k.split(' ').next()?.parse().ok()).unwrap_or(0);
            merged_variants += (k > 0) as usize;
            own * k
        });
        if let Err(e) = check_with(key, source, MAX_STORAGE_BUFFERS + extra) {
            failures.push(e);
        }
    }
    println!(
        "validated {} shader variants of {} kernel files with naga ({merged_variants} merged, beyond {MAX_STORAGE_BUFFERS} storage buffers by their extra members; {float16} enable f16; {subgroups} subgroup forms, native only)",
        variants.len(),
        kernels.len()
    );
    assert!(merged.iter().all(|(f, _)| kernels.contains(*f)), "a merged kernel {merged:?} has no variants");
    assert!(
        failures.is_empty(),
        "{} of {} shader variants fail:\n{}",
        failures.len(),
        variants.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_validator_rejects_what_browsers_reject() {
    // Guards the test itself: capabilities beyond WebGPU must fail here.
    let f64_src = "@group(0) @binding(0) var<storage, read_write> x: array<f64>;\n@compute @workgroup_size(1) fn main() { x[0] = x[0] * 2.0lf; }";
    assert!(check("f64", f64_src).is_err(), "f64 must be rejected");
    let f16_body = "@group(0) @binding(0) var<storage, read_write> x: array<f16>;\n@compute @workgroup_size(1) fn main() { x[0] = x[0] * 2.0h; }";
    assert!(check("f16", f16_body).is_err(), "f16 without the extension must be rejected");
    // With it (`shader-f16`), the one extension a variant may enable.
    assert!(check("f16", &format!("enable f16;\n{f16_body}")).is_ok(), "f16 behind `enable f16;`");
    let i64_src = "@group(0) @binding(0) var<storage, read_write> x: array<i64>;\n@compute @workgroup_size(1) fn main() { x[0] = x[0] * 2li; }";
    assert!(check("i64", i64_src).is_err(), "i64 must be rejected");
    let packed = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(1) fn main() { x[0] = pack2x16float(unpack2x16float(x[0]) * 2.0); }";
    check("pack2x16float", packed).unwrap();
    let big = "var<workgroup> t: array<f32, 8192>;\n@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) { t[i] = 1.0; }";
    assert!(check("workgroup memory", big).unwrap_err().contains("workgroup memory"));
    // 12 KiB for each of two entries is within the limit; an entry reaching both arrays, one
    // through a function it calls, is not.
    let arrays =
        "var<workgroup> t: array<f32, 3072>;\nvar<workgroup> u: array<f32, 3072>;\nfn touch(i: u32) { u[i] = 2.0; }\n";
    let apart = format!(
        "{arrays}@compute @workgroup_size(64) fn a(@builtin(local_invocation_index) i: u32) {{ t[i] = 1.0; }}\n@compute @workgroup_size(64) fn b(@builtin(local_invocation_index) i: u32) {{ touch(i); }}"
    );
    check("workgroup memory per entry", &apart).unwrap();
    let both = format!(
        "{arrays}@compute @workgroup_size(64) fn a(@builtin(local_invocation_index) i: u32) {{ t[i] = 1.0; touch(i); }}"
    );
    assert!(check("workgroup memory through a call", &both).unwrap_err().contains("workgroup memory"));
    let wide = "@compute @workgroup_size(512) fn main() {}";
    assert!(check("workgroup size", wide).unwrap_err().contains("workgroup size"));
    let reserved = "@compute @workgroup_size(1) fn main() { let filter = 1; }";
    assert!(check("reserved word", reserved).is_err(), "reserved words must be rejected");
    let ok = "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = 1.0; }";
    check("ok", ok).unwrap();
}

#[test]
fn every_shader_file_belongs_to_a_kernel() {
    let files = dygraph::testing::shader_files();
    let kernels = dygraph::testing::kernel_files();
    assert!(!files.is_empty() && !kernels.is_empty());
    for f in &files {
        if !f.starts_with("lib/") {
            assert!(kernels.contains(f), "shaders/{f} is not used by any registered Kernel");
        }
    }
    for k in &kernels {
        assert!(files.contains(k), "a Kernel names shaders/{k}, which does not exist");
    }
    assert!(files.iter().any(|f| f.starts_with("lib/")), "the shared WGSL library is embedded");
    println!("{} shader files, {} kernels", files.len(), kernels.len());
}
