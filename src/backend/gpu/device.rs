//! The opened device as every facet of the runtime sees it: the wgpu device and queue, the
//! adapter's description and limits, the errors and loss it reports, the dispatch counter,
//! and the stand-in buffer bound where a kernel's optional input is absent. A leaf: the
//! recorder, the readback and the capture tape take it; the context owns it.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use super::lock;
use crate::{Error, Result};

/// One opened wgpu device and what it reports.
pub(crate) struct Device {
    pub index: usize,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// The optional features the device was opened with (of timestamps, `SHADER_F16` and
    /// `SUBGROUP`: every one the adapter has; `EXPERIMENTAL_COOPERATIVE_MATRIX` where it
    /// has the configuration the products use, see [`cooperative_f16`]).
    pub features: wgpu::Features,
    /// Dispatches recorded so far.
    pub(super) dispatches: AtomicU64,
    /// A small buffer bound where a kernel's optional input is absent (never read).
    pub(crate) unused: wgpu::Buffer,
    errors: Arc<Mutex<Vec<String>>>,
    lost: Arc<Mutex<Option<String>>>,
}

/// What the user can learn about a GPU adapter.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    /// Adapter name, e.g. "NVIDIA H100" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub name: String,
    /// Backend: Vulkan, Metal, Dx12 or BrowserWebGpu.
    pub backend: String,
    /// Discrete, integrated, virtual, CPU (software) or other.
    pub device_type: String,
    /// Driver name and version.
    pub driver: String,
    /// Largest storage binding the device accepts, in bytes (the biggest tensor).
    pub max_binding_bytes: u64,
    /// Storage buffers one kernel may bind (WebGPU guarantees 8); bounds how many optimizer
    /// updates one merged dispatch takes.
    pub max_storage_buffers_per_stage: u32,
    /// The device runs float16 arithmetic in kernels (WGSL `enable f16;`, wgpu's
    /// `SHADER_F16`).
    pub shader_f16: bool,
    /// The smallest and largest subgroup the device runs, when kernels may use subgroup
    /// operations (wgpu's `SUBGROUP`; native adapters only).
    pub subgroup_sizes: Option<(u32, u32)>,
    /// float16 matrix products run on cooperative matrices (tensor cores): the adapter has
    /// wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX` with a 16×16×16 f16 → f32 configuration and
    /// runs subgroups of 32 (native only).
    pub cooperative_matrix_f16: bool,
}

/// The optional features a device is opened with when its adapter has them: timestamps for
/// the profiler (free unless written), float16 arithmetic and subgroup operations (used only
/// by kernels that ask for them).
const OPTIONAL_FEATURES: wgpu::Features =
    wgpu::Features::TIMESTAMP_QUERY.union(wgpu::Features::SHADER_F16).union(wgpu::Features::SUBGROUP);

/// True when `adapter` has cooperative matrices in the one configuration the float16
/// products use: 16×16×16, f16 operands, f32 accumulators (NVIDIA's tensor cores under
/// Vulkan list it; native only).
fn cooperative_f16(adapter: &wgpu::Adapter) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use wgpu::CooperativeScalarType as T;
        adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && adapter
                .cooperative_matrix_properties()
                .iter()
                .any(|p| (p.m_size, p.n_size, p.k_size) == (16, 16, 16) && p.ab_type == T::F16 && p.cr_type == T::F32)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = adapter;
        false
    }
}

/// The host's cores (1 where unknown, as on wasm), read once: software adapters run one
/// thread per core.
fn host_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl Device {
    /// Opens `adapter` as `gpu:index`, capturing its uncaptured errors and its loss.
    pub(super) async fn open(index: usize, adapter: &wgpu::Adapter) -> Result<Device> {
        let info = adapter.get_info();
        let limits = adapter.limits();
        let mut features = adapter.features() & OPTIONAL_FEATURES;
        if cooperative_f16(adapter) {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let experimental = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            // SAFETY: wgpu's token for its experimental features; the one used, cooperative
            // matrices, runs only in `matmul_coop.wgsl`, on the configuration the adapter
            // reports, with every load and store of whole tiles inside the operands (its
            // dispatcher checks the shapes).
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("dygraph"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: experimental,
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| Error::Device(format!("cannot open {}: {e}", info.name)))?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let lost: Arc<Mutex<Option<String>>> = Arc::default();
        {
            let errors = errors.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                lock(&errors).push(e.to_string());
            }));
        }
        {
            let lost = lost.clone();
            device.set_device_lost_callback(move |reason, msg| {
                *lock(&lost) = Some(format!("{reason:?}: {msg}"));
            });
        }
        let unused = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dygraph-unused-binding"),
            size: 256,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        Ok(Device { index, device, queue, info, limits, features, dispatches: AtomicU64::new(0), unused, errors, lost })
    }

    pub fn gpu_info(&self) -> GpuInfo {
        GpuInfo {
            name: self.info.name.clone(),
            backend: format!("{:?}", self.info.backend),
            device_type: format!("{:?}", self.info.device_type),
            driver: format!("{} {}", self.info.driver, self.info.driver_info).trim().to_string(),
            max_binding_bytes: self.max_binding(),
            max_storage_buffers_per_stage: self.limits.max_storage_buffers_per_shader_stage,
            shader_f16: self.has_shader_f16(),
            subgroup_sizes: self.subgroup_sizes(),
            cooperative_matrix_f16: self.has_cooperative_f16(),
        }
    }

    /// True when float16 products may run on cooperative matrices (`matmul_coop.wgsl`).
    pub fn has_cooperative_f16(&self) -> bool {
        self.features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && self.features.contains(wgpu::Features::SHADER_F16)
            && self.subgroup_sizes() == Some((32, 32))
    }

    /// True when kernels may compute in float16 (`enable f16;`).
    pub fn has_shader_f16(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F16)
    }

    /// The (smallest, largest) subgroup size, when kernels may use subgroup operations.
    pub fn subgroup_sizes(&self) -> Option<(u32, u32)> {
        self.features
            .contains(wgpu::Features::SUBGROUP)
            .then_some((self.info.subgroup_min_size, self.info.subgroup_max_size))
    }

    /// True for CPU-emulated adapters (lavapipe, SwiftShader), whose workgroup barriers are
    /// costly: some kernels pick barrier-free variants there.
    pub fn is_software(&self) -> bool {
        matches!(self.info.device_type, wgpu::DeviceType::Cpu)
    }

    /// True when `rows` contiguous rows of `len` elements should take a row kernel's
    /// one-invocation-per-row entry rather than its workgroup-per-row one (`rows`). Software
    /// adapters emulate workgroup barriers slowly: on 2 cores, lavapipe ran the MNIST step's
    /// conv bias gradients (1280 rows of 576, 3200 of 64) in 1.3 ms against 36, and softmax
    /// over 1,024 rows of 1,024 in 4.4 ms against 13.9. Rows up to 4,096 keep each
    /// invocation's loop short.
    ///
    /// Such an adapter runs each 256-invocation workgroup on one of its threads (one per host
    /// core), so the barrier-free entry keeps `rows / 256` of them busy where the
    /// workgroup-per-row entry keeps all of them busy. It wins while the caller's measured
    /// per-row `gain` (36 / 1.3 for reductions, 13.9 / 4.4 for softmax) outweighs the idle
    /// threads: `gain · rows ≥ 256 · cores`, and never below one workgroup's worth (256
    /// rows). On 2 cores that is 256 rows for every caller; on many cores it is a model, not a
    /// measurement.
    pub fn rows_without_barriers(&self, rows: usize, len: usize, gain: usize) -> bool {
        self.is_software() && len <= 4096 && rows >= 256 && rows.saturating_mul(gain) >= 256 * host_cores()
    }

    /// Largest buffer a kernel can bind.
    pub fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)
    }

    /// Whether `source` compiles into a compute pipeline (entry `main`, layout from the
    /// shader) on this device: the error wgpu's validation gives when not.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn compiles(&self, source: &str) -> std::result::Result<(), String> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("dygraph-probe"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let _ = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("dygraph-probe"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        match pollster::block_on(scope.pop()) {
            Some(e) => Err(e.to_string()),
            None => Ok(()),
        }
    }

    /// The device-loss message, once the device is lost.
    pub(super) fn lost(&self) -> Option<String> {
        lock(&self.lost).clone()
    }

    /// Surfaces device loss and GPU errors captured since the last check.
    pub fn check(&self, op: &'static str) -> Result<()> {
        if let Some(msg) = lock(&self.lost).clone() {
            return Err(Error::DeviceLost(msg));
        }
        let mut errs = lock(&self.errors);
        if errs.is_empty() {
            return Ok(());
        }
        let msg = errs.drain(..).collect::<Vec<_>>().join("; ");
        Err(Error::Gpu { op, msg })
    }
}
