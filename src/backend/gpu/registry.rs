//! The adapter registry: every adapter wgpu enumerates (hardware first, software ones —
//! lavapipe, SwiftShader — after them, so `gpu:0` is the best adapter present), the
//! context of each opened one, and the user-facing device functions (`gpu_info`,
//! `memory_stats`, `sync`, ...). The top of the runtime: it opens contexts.

use std::sync::{Arc, Mutex};

use super::context::GpuContext;
use super::device::GpuInfo;
use super::lock;
use super::pool::MemoryStats;
use crate::{Error, Result};

struct Registry {
    adapters: Vec<wgpu::Adapter>,
    contexts: Vec<Option<Arc<GpuContext>>>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

#[cfg(not(target_arch = "wasm32"))]
fn is_hardware(info: &wgpu::AdapterInfo) -> bool {
    !matches!(info.device_type, wgpu::DeviceType::Cpu)
}

#[cfg(not(target_arch = "wasm32"))]
fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard = lock(&REGISTRY);
    let reg = guard.get_or_insert_with(|| {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        // Hardware first; among equals keep the enumeration order (stable sort).
        adapters.sort_by_key(|a| !is_hardware(&a.get_info()));
        let n = adapters.len();
        Registry { adapters, contexts: vec![None; n] }
    });
    f(reg)
}

#[cfg(target_arch = "wasm32")]
fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut guard = lock(&REGISTRY);
    // No instance until `init_gpu` has seen that the browser has WebGPU.
    let reg = guard.get_or_insert_with(|| Registry { adapters: Vec::new(), contexts: Vec::new() });
    f(reg)
}

/// True when a hardware (non-software) GPU adapter is present.
pub(crate) fn hardware_adapter_available() -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        with_registry(|r| r.adapters.first().is_some_and(|a| is_hardware(&a.get_info())))
    }
    #[cfg(target_arch = "wasm32")]
    {
        with_registry(|r| r.contexts.first().is_some_and(|c| c.is_some()))
    }
}

/// Number of hardware (non-software) GPU adapters.
#[cfg(all(feature = "mpi", not(target_arch = "wasm32")))]
pub(crate) fn hardware_adapter_count() -> usize {
    // One GPU can be listed once per backend (Vulkan and DX12 on Windows): the count is that
    // of the backend listing the most.
    with_registry(|r| {
        let mut per_backend: std::collections::HashMap<wgpu::Backend, usize> = std::collections::HashMap::new();
        for info in r.adapters.iter().map(|a| a.get_info()).filter(is_hardware) {
            *per_backend.entry(info.backend).or_default() += 1;
        }
        per_backend.into_values().max().unwrap_or(0)
    })
}

/// Number of GPU adapters visible (software ones included).
pub fn gpu_count() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    {
        with_registry(|r| r.adapters.len())
    }
    #[cfg(target_arch = "wasm32")]
    {
        with_registry(|r| r.contexts.len())
    }
}

/// The opened context of `gpu:index`, opening it on first use (natively; on wasm call
/// `init_gpu().await` first).
pub(crate) fn context(index: usize) -> Result<Arc<GpuContext>> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let adapter = with_registry(|r| {
            if let Some(Some(c)) = r.contexts.get(index) {
                return Ok(Err(c.clone()));
            }
            match r.adapters.get(index) {
                Some(a) => Ok(Ok(a.clone())),
                None => Err(Error::Device(format!(
                    "gpu:{index} requested but {} GPU adapter(s) found{}",
                    r.adapters.len(),
                    if r.adapters.is_empty() {
                        " (install a Vulkan/Metal/DX12 driver, or Mesa's lavapipe: mesa-vulkan-drivers)"
                    } else {
                        ""
                    }
                ))),
            }
        })?;
        let adapter = match adapter {
            Err(ctx) => return Ok(ctx),
            Ok(a) => a,
        };
        let ctx = Arc::new(pollster::block_on(GpuContext::open(index, &adapter))?);
        Ok(with_registry(|r| r.contexts[index].get_or_insert(ctx).clone()))
    }
    #[cfg(target_arch = "wasm32")]
    {
        with_registry(|r| match r.contexts.get(index) {
            Some(Some(c)) => Ok(c.clone()),
            _ => Err(Error::Device(format!("gpu:{index} is not initialised; call dygraph::init_gpu().await first"))),
        })
    }
}

/// Opens `gpu:0` asynchronously: needed once on wasm before using the GPU place; natively
/// it is optional (the GPU opens on first use). Returns the adapter's description.
pub async fn init_gpu() -> Result<GpuInfo> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let ctx = context(0)?;
        Ok(ctx.gpu_info())
    }
    #[cfg(target_arch = "wasm32")]
    {
        if let Ok(ctx) = context(0) {
            return Ok(ctx.gpu_info());
        }
        // False both when navigator.gpu is missing and when it offers no adapter (Chrome on
        // Linux without a supported GPU, or without chrome://flags/#enable-unsafe-webgpu).
        if !wgpu::util::is_browser_webgpu_supported().await {
            return Err(Error::Device(
                "no WebGPU in this browser (navigator.gpu is missing, or it offers no adapter)".into(),
            ));
        }
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Device(format!("no WebGPU adapter: {e}")))?;
        let ctx = Arc::new(GpuContext::open(0, &adapter).await?);
        let info = ctx.gpu_info();
        with_registry(|r| {
            r.adapters = vec![adapter];
            r.contexts = vec![Some(ctx)];
        });
        Ok(info)
    }
}

/// Description of `gpu:index` (opens it).
pub fn gpu_info(index: usize) -> Result<GpuInfo> {
    Ok(context(index)?.gpu_info())
}

/// Memory counters of `gpu:index`.
pub fn memory_stats(index: usize) -> Result<MemoryStats> {
    let ctx = context(index)?;
    let mut stats = lock(&ctx.pool).stats;
    stats.pipelines = ctx.pipelines.compiled() as u64;
    Ok(stats)
}

/// Caps the device memory `gpu:index` holds for tensors (live plus pooled bytes; PyTorch's
/// `set_per_process_memory_fraction` as a byte count): an allocation past it first empties
/// the pool, then fails with [`Error::DeviceLimit`], leaving the device usable. `None`
/// removes the cap.
pub fn set_memory_limit(index: usize, bytes: Option<u64>) -> Result<()> {
    lock(&context(index)?.pool).limit = bytes;
    Ok(())
}

/// Kernel dispatches recorded on `gpu:index` so far (replayed plans' included): divide a
/// host time by it for the cost per dispatch.
pub fn dispatch_count(index: usize) -> Result<u64> {
    Ok(context(index)?.dispatches.load(std::sync::atomic::Ordering::Relaxed))
}

/// Command buffers submitted to `gpu:index` so far. Work is batched: a replayed plan's run
/// and the readback of what it fetched are one submission.
pub fn submit_count(index: usize) -> Result<u64> {
    Ok(lock(&context(index)?.recorder).submits)
}

/// Resets the peak counter of `gpu:index` to the current allocation.
pub fn reset_peak_memory(index: usize) -> Result<()> {
    let ctx = context(index)?;
    let mut pool = lock(&ctx.pool);
    pool.stats.peak_allocated = pool.stats.allocated;
    Ok(())
}

/// Frees every pooled (unused) buffer of `gpu:index`.
pub fn empty_cache(index: usize) -> Result<()> {
    let ctx = context(index)?;
    ctx.sync()?;
    lock(&ctx.recorder).forget_bind_groups();
    lock(&ctx.pool).clear();
    Ok(())
}

/// Submits all recorded GPU work on every opened device, waits for it to finish (natively;
/// in the browser it only submits), and surfaces any GPU error. Readback does this
/// implicitly; call it to time device work, to bound latency or to check for errors.
pub fn sync() -> Result<()> {
    // Only devices already opened have work to submit: never open one here.
    let contexts: Vec<Arc<GpuContext>> =
        lock(&REGISTRY).as_ref().map(|r| r.contexts.iter().flatten().cloned().collect()).unwrap_or_default();
    for c in contexts {
        c.sync()?;
    }
    Ok(())
}
