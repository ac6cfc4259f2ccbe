//! Every WGSL variant the library can dispatch compiles on the browser's WebGPU device. The
//! browser's compiler enforces rules naga's validation lets through (uniform control flow
//! around barriers, no constant Inf/NaN), so this is the check that the shaders run on the web.
//! The variants that enable f16 compile where the adapter has `shader-f16` and are counted as
//! skipped where it has not (the library dispatches them only on such devices). The kernels'
//! subgroup forms (key bit 31) and the cooperative-matrix product run only natively and are
//! counted as skipped here.

use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn every_shader_variant_compiles_in_the_browser() {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
    let adapter = instance.request_adapter(&wgpu::RequestAdapterOptions::default()).await.expect("a WebGPU adapter");
    let f16 = adapter.features().contains(wgpu::Features::SHADER_F16);
    let required_features = if f16 { wgpu::Features::SHADER_F16 } else { wgpu::Features::empty() };
    let (device, _queue) = adapter
        .request_device(&wgpu::DeviceDescriptor {
            required_limits: adapter.limits(),
            required_features,
            ..Default::default()
        })
        .await
        .expect("a WebGPU device");
    let variants = dygraph::testing::all_shader_variants().expect("every variant expands");
    assert!(variants.len() > 100, "only {} variants", variants.len());
    let mut failures = Vec::new();
    let (mut skipped, mut native_only) = (0, 0);
    for (key, source) in &variants {
        if source.starts_with("enable f16;") && !f16 {
            skipped += 1;
            continue;
        }
        let form = key.split('#').nth(1).and_then(|k| k.split(' ').next()?.parse::<u32>().ok());
        if form.is_some_and(|k| k & (1 << 31) != 0) || source.contains("enable wgpu_cooperative_matrix;") {
            native_only += 1;
            continue;
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(key),
            source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
        });
        let info = module.get_compilation_info().await;
        let errors: Vec<String> = info
            .messages
            .iter()
            .filter(|m| m.message_type == wgpu::CompilationMessageType::Error)
            .map(|m| m.message.clone())
            .collect();
        if let Some(e) = scope.pop().await {
            failures.push(format!("{key}: {e}"));
        } else if !errors.is_empty() {
            failures.push(format!("{key}: {}", errors.join("; ")));
        }
    }
    wasm_bindgen_test::console_log!(
        "compiled {} of {} shader variants in the browser ({skipped} that enable f16 skipped: no shader-f16; \
         {native_only} subgroup forms and cooperative-matrix kernels skipped: native only)",
        variants.len() - skipped - native_only,
        variants.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} variants fail to compile:\n{}",
        failures.len(),
        variants.len(),
        failures.join("\n")
    );
}
