//! The pipeline cache: one compiled compute pipeline per (kernel, variant key, entry point,
//! binding access, in-place form), built from the kernel's expanded source on first use. A
//! leaf of the runtime: it takes the device it compiles on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::lock;
use super::shader::Kernel;
use crate::{Error, Result};

/// How a kernel binds a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    Read,
    ReadWrite,
}

/// A compiled kernel: its pipeline, its bind-group layout and the binding its in-place form
/// leaves out.
pub(crate) struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    /// The binding an in-place form leaves out (its output is written into an input).
    pub skip: Option<usize>,
}

impl Pipeline {
    /// A bind group of `binds` ((buffer, offset, size; `None` to the end) at bindings 0..,
    /// leaving out the binding an in-place form skips) and then `params`' first
    /// `params_window` bytes.
    pub fn bind_group(
        &self,
        device: &wgpu::Device,
        binds: &[(&wgpu::Buffer, u64, Option<u64>)],
        params: &wgpu::Buffer,
        params_window: u64,
    ) -> wgpu::BindGroup {
        let at = |buffer, offset, size: Option<u64>| {
            wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer,
                offset,
                size: size.and_then(wgpu::BufferSize::new),
            })
        };
        let mut entries: Vec<wgpu::BindGroupEntry> = binds
            .iter()
            .enumerate()
            .filter(|(i, _)| self.skip != Some(*i))
            .map(|(i, &(b, offset, size))| wgpu::BindGroupEntry { binding: i as u32, resource: at(b, offset, size) })
            .collect();
        entries
            .push(wgpu::BindGroupEntry { binding: binds.len() as u32, resource: at(params, 0, Some(params_window)) });
        device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &self.layout, entries: &entries })
    }
}

/// A compiled pipeline's identity: the kernel (by address), its variant key, the entry point,
/// the access of each bound buffer (one bit per binding, set for read-write) and, for an
/// in-place form, its (output, input) bindings.
type PipelineKey = (usize, u32, &'static str, u128, Option<(usize, usize)>);

/// The device's compiled pipelines.
#[derive(Default)]
pub(crate) struct PipelineCache {
    map: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
}

impl PipelineCache {
    /// Pipelines compiled so far.
    pub fn compiled(&self) -> usize {
        lock(&self.map).len()
    }

    /// The pipeline of `kernel`'s variant `key` at `entry` on `device`, binding `access`
    /// buffers then the params window; with `in_place` = (output, input) the kernel's in-place
    /// form (`in_place.rs`): binding `output` is left out and its values go to binding `input`.
    pub fn get(
        &self,
        device: &wgpu::Device,
        kernel: &Kernel,
        key: u32,
        entry: &'static str,
        access: &[Access],
        in_place: Option<(usize, usize)>,
    ) -> Result<Arc<Pipeline>> {
        let bits = writable_bits(access).ok_or_else(|| Error::Gpu {
            op: "pipeline",
            msg: format!("{}#{key}: {} bindings, more than the pipeline cache keys", kernel.file, access.len()),
        })?;
        let cache_key = (kernel as *const Kernel as usize, key, entry, bits, in_place);
        if let Some(p) = lock(&self.map).get(&cache_key) {
            return Ok(p.clone());
        }
        if !kernel.is_registered() {
            return Err(Error::Gpu {
                op: "pipeline",
                msg: format!(
                    "kernel {} is not registered (list it in its family's `static FAMILY`, and the family in ops/registry/catalog.rs)",
                    kernel.file
                ),
            });
        }
        let mut source = kernel.source(key)?;
        if let Some((output, input)) = in_place {
            source = super::in_place::in_place_source(&source, input)
                .filter(|_| super::in_place::output_binding(&source) == Some(output))
                .ok_or_else(|| Error::Gpu {
                    op: "pipeline",
                    msg: format!("{}#{key}: no in-place form writing binding {output} into {input}", kernel.file),
                })?;
        }
        let source = writable(&source, access);
        let skip = in_place.map(|(output, _)| output);
        let storage = |read_only| wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        };
        let mut entries: Vec<wgpu::BindGroupLayoutEntry> = access
            .iter()
            .enumerate()
            .filter(|(i, _)| skip != Some(*i))
            .map(|(i, a)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: storage(*a == Access::Read),
                count: None,
            })
            .collect();
        // The params: a fixed-size window of the recorder's arena at a dynamic offset, so a
        // bind group serves every dispatch over the same buffers.
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: access.len() as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: true },
                has_dynamic_offset: true,
                min_binding_size: None,
            },
            count: None,
        });
        #[cfg(not(target_arch = "wasm32"))]
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let descriptor =
            wgpu::ShaderModuleDescriptor { label: Some(kernel.file), source: wgpu::ShaderSource::Wgsl(source.into()) };
        // SAFETY: the kernels are the crate's own (and fused chains generated from its own
        // expression table); with `runtime_checks()`'s default only the loop bounding is
        // dropped, and every loop in them counts to a bound taken from the parameters.
        let module = unsafe { device.create_shader_module_trusted(descriptor, runtime_checks()) };
        let layout =
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu { op: "pipeline", msg: format!("{}#{key}@{entry}: {e}", kernel.file) });
        }
        let p = Arc::new(Pipeline { pipeline, layout, skip });
        lock(&self.map).insert(cache_key, p.clone());
        Ok(p)
    }
}

/// `source` with each storage buffer bound `ReadWrite` in `access` but declared `read`
/// declared `read_write`: the form of a kernel an execution plan binds to an arena (WebGPU
/// allows one buffer bound several times in a dispatch only when every binding of it is
/// writable; reading a `read_write` binding computes the same). Other kernels are unchanged.
fn writable(source: &str, access: &[Access]) -> String {
    let rw = |l: &str| {
        access.iter().enumerate().any(|(i, a)| *a == Access::ReadWrite && l.contains(&format!("@binding({i}) ")))
    };
    if !source.lines().any(|l| l.contains("var<storage, read> ") && rw(l)) {
        return source.to_string();
    }
    source
        .lines()
        .map(|l| {
            if l.contains("var<storage, read> ") && rw(l) {
                l.replace("var<storage, read> ", "var<storage, read_write> ")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What wgpu adds to every kernel (`DYGRAPH_SHADER_CHECKS`):
/// - `bounds` (default): every buffer and array access clamped to its binding, as
///   `create_shader_module` does; no loop bounding. With the counter wgpu otherwise puts in
///   every loop, the kernels ran 30 to 50 times slower on an NVIDIA H100 (matmul, conv, the
///   MNIST step: ARCHITECTURE.md, "Runtime checks").
/// - `full`: wgpu's defaults (bounds and loop bounding), for comparison.
/// - `none`: neither (a kernel's own bugs would then go unchecked): for measurement only.
///
/// The browser's WebGPU applies its own checks whatever this says.
fn runtime_checks() -> wgpu::ShaderRuntimeChecks {
    static CHECKS: OnceLock<wgpu::ShaderRuntimeChecks> = OnceLock::new();
    *CHECKS.get_or_init(|| {
        let mut c = wgpu::ShaderRuntimeChecks::checked();
        match std::env::var("DYGRAPH_SHADER_CHECKS").as_deref() {
            Ok("full") => {}
            Ok("none") => c = wgpu::ShaderRuntimeChecks::unchecked(),
            _ => c.force_loop_bounding = false,
        }
        c
    })
}

/// Bit i set when binding i is writable, for the pipeline cache's key; None past 128
/// bindings (merged update dispatches bind up to 66, `merge.rs`).
fn writable_bits(access: &[Access]) -> Option<u128> {
    (access.len() <= 128)
        .then(|| access.iter().enumerate().fold(0u128, |b, (i, a)| b | (((*a == Access::ReadWrite) as u128) << i)))
}

#[cfg(test)]
mod tests {
    use super::{Access, writable_bits};

    #[test]
    fn pipeline_keys_tell_writable_bindings_apart_past_32() {
        let with_writable = |i: usize| {
            let mut access = vec![Access::Read; 66];
            access[i] = Access::ReadWrite;
            writable_bits(&access).unwrap()
        };
        assert_ne!(with_writable(1), with_writable(33));
        assert_ne!(with_writable(1), with_writable(65));
        assert_eq!(writable_bits(&[Access::Read, Access::ReadWrite]), Some(2));
        assert_eq!(writable_bits(&[Access::Read; 129]), None);
    }
}
