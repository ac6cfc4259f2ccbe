//! Adapters, devices and the per-device context: limits, error capture, buffer allocation;
//! it owns the runtime's facets (pool, pipeline cache, recorder, capture, error flag). Hardware adapters come first in the registry, software ones (lavapipe,
//! SwiftShader) after them, so `gpu:0` is the best adapter present.

use std::sync::{Arc, Mutex, OnceLock};

use super::capture::PrivatePool;
pub(crate) use super::lock;
use super::pipeline::PipelineCache;
pub(crate) use super::pipeline::{Access, Pipeline};
use super::pool::{BufferPool, MemoryStats, size_class};
use super::recorder::Recorder;
use super::shader::Kernel;
use crate::{Error, Result};

/// One opened GPU device.
pub(crate) struct GpuContext {
    pub index: usize,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub(crate) recorder: Mutex<Recorder>,
    pub(crate) pool: Mutex<BufferPool>,
    pub(crate) error_flag: Mutex<super::error_flag::ErrorFlag>,
    pipelines: PipelineCache,
    /// The open plan capture, if any (see `capture.rs`), and a flag read without locking.
    pub(super) capture: Mutex<Option<super::capture::CaptureState>>,
    pub(super) capturing: std::sync::atomic::AtomicBool,
    /// Dispatches recorded so far.
    pub(super) dispatches: std::sync::atomic::AtomicU64,
    /// A small buffer bound where a kernel's optional input is absent (never read).
    pub(crate) unused: wgpu::Buffer,
    /// A host-mappable buffer for small readbacks (a loss, the index-error flag), taken by
    /// one readback at a time and put back unmapped, so a training loop's per-step reads
    /// create and destroy no buffer.
    pub(super) small_staging: Mutex<Option<wgpu::Buffer>>,
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
}

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

/// The host's cores (1 where unknown, as on wasm), read once: software adapters run one
/// thread per core.
fn host_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
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

impl GpuContext {
    async fn open(index: usize, adapter: &wgpu::Adapter) -> Result<GpuContext> {
        let info = adapter.get_info();
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("dygraph"),
                // Timestamps only for the profiler; they cost nothing unless written.
                required_features: adapter.features() & wgpu::Features::TIMESTAMP_QUERY,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
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
        let recorder = Recorder::new(&device, &limits);
        let unused = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("dygraph-unused-binding"),
            size: 256,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let error_flag = Mutex::new(super::error_flag::ErrorFlag::new(&device));
        Ok(GpuContext {
            index,
            device,
            queue,
            info,
            limits,
            recorder: Mutex::new(recorder),
            pool: Mutex::new(BufferPool::default()),
            error_flag,
            pipelines: PipelineCache::default(),
            capture: Mutex::new(None),
            capturing: Default::default(),
            dispatches: Default::default(),
            unused,
            small_staging: Mutex::new(None),
            errors,
            lost,
        })
    }

    pub fn gpu_info(&self) -> GpuInfo {
        GpuInfo {
            name: self.info.name.clone(),
            backend: format!("{:?}", self.info.backend),
            device_type: format!("{:?}", self.info.device_type),
            driver: format!("{} {}", self.info.driver, self.info.driver_info).trim().to_string(),
            max_binding_bytes: self.max_binding(),
            max_storage_buffers_per_stage: self.limits.max_storage_buffers_per_shader_stage,
        }
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

    /// A storage buffer of at least `bytes` bytes, from the pool when one is free.
    pub fn alloc(self: &Arc<Self>, op: &'static str, bytes: u64) -> Result<GpuBuffer> {
        let need = bytes.div_ceil(4).saturating_mul(4);
        let limit = self.max_binding();
        if need > limit {
            return Err(Error::DeviceLimit {
                op,
                what: format!("a tensor of {bytes} bytes"),
                requested: bytes,
                limit_name: "max_storage_buffer_binding_size",
                limit,
            });
        }
        let class = size_class(need).min(limit.max(need));
        let home = self.capture_pool();
        if let Some(home) = &home {
            let mut h = lock(home);
            if let Some((_, buffer)) = h.take(class) {
                let id = next_buffer_id();
                h.adopt(id, class, need, false);
                return Ok(GpuBuffer { ctx: self.clone(), buffer: Some(buffer), class, id, home: Some(home.clone()) });
            }
        }
        let pooled = lock(&self.pool).take(class);
        if let Some((id, buffer)) = pooled {
            home.iter().for_each(|h| lock(h).adopt(id, class, need, true));
            return Ok(GpuBuffer { ctx: self.clone(), buffer: Some(buffer), class, id, home });
        }
        if let Some(msg) = lock(&self.lost).clone() {
            return Err(Error::DeviceLost(msg));
        }
        self.within_memory_limit(op, class)?;
        let buffer = self.create_buffer(op, class)?;
        lock(&self.pool).note_created(class);
        let id = next_buffer_id();
        home.iter().for_each(|h| lock(h).adopt(id, class, need, true));
        Ok(GpuBuffer { ctx: self.clone(), buffer: Some(buffer), class, id, home })
    }

    /// `Ok` when `bytes` more stay within `set_memory_limit`'s cap, emptying the pool first
    /// when that makes room.
    pub(crate) fn within_memory_limit(&self, op: &'static str, bytes: u64) -> Result<()> {
        let (limit, held) = {
            let p = lock(&self.pool);
            (p.limit, p.stats.allocated + p.stats.pooled)
        };
        let Some(limit) = limit else { return Ok(()) };
        if held.saturating_add(bytes) <= limit {
            return Ok(());
        }
        // Recorded work may still use pooled buffers: submit it before they are destroyed.
        {
            let mut rec = lock(&self.recorder);
            rec.flush(self)?;
            rec.forget_bind_groups();
        }
        let mut pool = lock(&self.pool);
        pool.clear();
        let in_use = pool.stats.allocated;
        if in_use.saturating_add(bytes) > limit {
            return Err(Error::DeviceLimit {
                op,
                what: format!("a buffer of {bytes} bytes beside the {in_use} bytes in use"),
                requested: in_use.saturating_add(bytes),
                limit_name: "memory limit (set_memory_limit)",
                limit,
            });
        }
        Ok(())
    }

    fn create_buffer(&self, op: &'static str, size: u64) -> Result<wgpu::Buffer> {
        let desc = wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let buffer = self.device.create_buffer(&desc);
            if let Some(e) = pollster::block_on(scope.pop()) {
                // Give the pool's memory back and retry once before failing. Recorded work may
                // still use pooled buffers: submit it before they are destroyed.
                {
                    let mut rec = lock(&self.recorder);
                    rec.flush(self)?;
                    rec.forget_bind_groups();
                }
                lock(&self.pool).clear();
                let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
                let buffer = self.device.create_buffer(&desc);
                if pollster::block_on(scope.pop()).is_some() {
                    return Err(Error::Gpu { op, msg: format!("out of GPU memory allocating {size} bytes: {e}") });
                }
                return Ok(buffer);
            }
            Ok(buffer)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = op;
            Ok(self.device.create_buffer(&desc))
        }
    }

    /// The compiled pipeline of `kernel`'s variant `key` at `entry`, binding `access` buffers
    /// followed by the read-only params buffer.
    pub fn pipeline(&self, kernel: &Kernel, key: u32, entry: &'static str, access: &[Access]) -> Result<Arc<Pipeline>> {
        self.pipeline_in_place(kernel, key, entry, access, None)
    }

    /// `pipeline`, or with `in_place` = (output, input) the kernel's in-place form (see
    /// `in_place.rs`): binding `output` is left out and its values go to binding `input`.
    pub fn pipeline_in_place(
        &self,
        kernel: &Kernel,
        key: u32,
        entry: &'static str,
        access: &[Access],
        in_place: Option<(usize, usize)>,
    ) -> Result<Arc<Pipeline>> {
        self.pipelines.get(&self.device, kernel, key, entry, access, in_place)
    }

    /// Submits everything recorded so far, waits for the device to finish it (natively, as
    /// `paddle.device.synchronize`), and surfaces GPU errors and an out-of-range index a
    /// kernel met (in the browser, where nothing may block, the next async readback reports
    /// them).
    pub fn sync(&self) -> Result<()> {
        // When a checking kernel ran, reading its flag back submits the pending work in the
        // same batch and waits for it: one submission per sync either way.
        #[cfg(not(target_arch = "wasm32"))]
        pollster::block_on(self.check_indices("sync"))?;
        lock(&self.recorder).flush(self)?;
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu { op: "sync", msg: e.to_string() })?;
        self.check("sync")
    }
}

/// A pooled GPU storage buffer; returns to the pool when dropped.
pub(crate) struct GpuBuffer {
    pub ctx: Arc<GpuContext>,
    buffer: Option<wgpu::Buffer>,
    class: u64,
    /// Identifies the device buffer for the bind-group cache (kept through the pool).
    pub id: u64,
    /// The plan's private pool this buffer returns to (allocated during a plan capture).
    home: Option<Arc<Mutex<PrivatePool>>>,
}

/// Ids of device buffers; those below 16 name the recorder's own (the index-error flag, the
/// stand-in for an absent input, the parameter and upload arena).
fn next_buffer_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(16);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The device's error flag (`error_flag.rs`): codes for the kernels that bind it, and the
/// error its words hold at a readback.
impl GpuContext {
    /// The flag buffer for a kernel of `op` that checks its indices, and `op`'s code.
    pub fn index_flag(&self, op: &'static str) -> (u32, wgpu::Buffer) {
        lock(&self.error_flag).index_code(op)
    }

    /// The flag buffer and code for the deferred NaN/Inf check of what `op` wrote (`what`:
    /// "output 0", ...) of `shape` and `dtype`: reported by the next readback.
    pub(crate) fn non_finite_flag(
        &self,
        op: String,
        what: &str,
        shape: &[usize],
        dtype: crate::DType,
    ) -> (u32, wgpu::Buffer) {
        lock(&self.error_flag).non_finite_code(op, what, shape, dtype)
    }

    /// Notes that a checking kernel was recorded (a replayed plan's).
    pub(super) fn arm_index_flag(&self) {
        lock(&self.error_flag).arm();
    }

    /// The flag buffer when a checking kernel ran since it was last read (and disarms it).
    pub(super) fn take_index_flag(&self) -> Option<wgpu::Buffer> {
        lock(&self.error_flag).take()
    }

    /// The error recorded in the flag's `words`, if any.
    pub(super) fn index_error(&self, words: &[u8]) -> Result<()> {
        lock(&self.error_flag).error(words)
    }
}

/// Kernel timing (`profile.rs`), for `dygraph::profiler`.
impl GpuContext {
    /// Turns kernel timing on, after finishing the work recorded so far (so none of it is
    /// counted); an error when a profiler is already on for this device.
    pub(crate) fn start_profiling(&self) -> Result<()> {
        self.sync()?;
        let mut rec = lock(&self.recorder);
        if rec.profiling.is_some() {
            return Err(Error::invalid("profiler", format!("a profiler is already on for gpu:{}", self.index)));
        }
        rec.profiling = Some(super::profile::Profiling::new(
            &self.device,
            &self.queue,
            &format!("{} ({:?})", self.info.name, self.info.backend),
        )?);
        Ok(())
    }

    /// Finishes the recorded work and turns kernel timing off: each kernel's calls and
    /// device time, in the order the kernels first ran.
    pub(crate) fn stop_profiling(&self) -> Result<Vec<(super::profile::KernelLabel, super::profile::KernelTotal)>> {
        let flushed = self.sync();
        let taken = lock(&self.recorder).profiling.take();
        flushed?;
        Ok(taken.map(|p| p.totals).unwrap_or_default())
    }
}

impl GpuBuffer {
    pub fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("GpuBuffer used after drop")
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            match &self.home {
                Some(home) => {
                    let back = lock(home).give_back(self.class, self.id, b);
                    if let Some(b) = back {
                        lock(&self.ctx.pool).give_back(self.class, self.id, b);
                    }
                }
                None => lock(&self.ctx.pool).give_back(self.class, self.id, b),
            }
        }
    }
}
