//! The process group (`paddle.distributed.init_parallel_env`): MPI initialised once per
//! process, this rank's place, the watchdog that turns a hang into an exit, and the panic
//! hook that takes the whole job down instead of leaving the other ranks waiting.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use mpi::Threading;
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::{Error, Place, Result};

/// How long a blocking collective may wait before the watchdog ends the process
/// (`DYGRAPH_DIST_TIMEOUT`, seconds).
const DEFAULT_TIMEOUT_S: f64 = 300.0;

/// The exit status of a rank the watchdog ends.
pub const WATCHDOG_EXIT_CODE: i32 = 75;

/// MPI handles. MPI is initialised with `MPI_THREAD_SERIALIZED` and every call goes through
/// the mutex in `State`, so handing them between threads is sound.
pub(crate) struct Comm {
    pub world: SimpleCommunicator,
}

// SAFETY: see `Comm`: calls are serialised by a mutex and MPI was initialised for that.
unsafe impl Send for Comm {}

struct SendUniverse(#[allow(dead_code)] Universe);

// SAFETY: the universe is only dropped (MPI_Finalize) under the state's mutex.
unsafe impl Send for SendUniverse {}

pub(crate) struct State {
    comm: Mutex<Comm>,
    universe: Mutex<Option<SendUniverse>>,
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    pub local_size: usize,
    pub place: Place,
    /// The blocking calls in progress (one per waiting thread), each with when it began and
    /// a token its guard removes it by (read by the watchdog).
    inflight: Mutex<Vec<(u64, String, Instant)>>,
    timeout: Duration,
    guards: Mutex<usize>,
}

static STATE: OnceLock<State> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The process group, once `init_parallel_env` has run.
pub(crate) fn state(op: &'static str) -> Result<&'static State> {
    let s = STATE.get().ok_or_else(|| Error::Distributed {
        op,
        rank: 0,
        msg: "the parallel environment is not initialised; call distributed::init_parallel_env() first".into(),
    })?;
    if lock(&s.universe).is_none() {
        return Err(s.error(op, "MPI was finalised (every ParallelEnv was dropped)".into()));
    }
    Ok(s)
}

impl State {
    /// A typed error naming this rank.
    pub fn error(&self, op: &'static str, msg: String) -> Error {
        Error::Distributed { op, rank: self.rank, msg }
    }

    /// Runs `f` with the communicator, under the watchdog (armed before waiting for the
    /// communicator's lock): if it blocks longer than the timeout the process exits naming
    /// `what`.
    pub fn blocking<R>(&self, what: &str, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        let _watch = self.watch(what);
        let comm = lock(&self.comm);
        f(&comm.world)
    }

    /// Runs a call that returns at once (starting or testing a non-blocking operation), or
    /// a wait that the caller has put under `watch`.
    pub fn quick<R>(&self, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        let comm = lock(&self.comm);
        f(&comm.world)
    }

    /// Arms the watchdog for `what` until the returned guard is dropped.
    pub fn watch(&self, what: &str) -> Watch<'_> {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let token = TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.inflight).push((token, what.to_string(), Instant::now()));
        Watch { state: self, token }
    }

    /// True once MPI has been finalised: no MPI call may be made any more.
    pub fn finalized(&self) -> bool {
        lock(&self.universe).is_none()
    }
}

/// An armed watchdog entry (see `State::watch`).
pub(crate) struct Watch<'a> {
    state: &'a State,
    token: u64,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        lock(&self.state.inflight).retain(|(t, _, _)| *t != self.token);
    }
}

/// This rank's view of the process group (Paddle's `ParallelEnv`). Clones share one handle;
/// when the last is dropped MPI is finalised, so keep one alive until the end of `main`.
#[derive(Clone)]
pub struct ParallelEnv {
    _guard: Arc<EnvGuard>,
}

struct EnvGuard;

impl Drop for EnvGuard {
    fn drop(&mut self) {
        let Some(s) = STATE.get() else { return };
        let mut guards = lock(&s.guards);
        *guards -= 1;
        if *guards > 0 {
            return;
        }
        if std::thread::panicking() {
            abort_job(s.rank, s.size, "panicked");
        }
        // MPI_Finalize waits for the other ranks: under the watchdog, so that a rank that
        // never arrives cannot hang this one.
        let _watch = s.watch("MPI_Finalize");
        let _comm = lock(&s.comm);
        lock(&s.universe).take();
    }
}

impl ParallelEnv {
    fn state(&self) -> &'static State {
        STATE.get().expect("a ParallelEnv exists only after initialisation")
    }

    /// This process's rank, 0-based.
    pub fn rank(&self) -> usize {
        self.state().rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.state().size
    }

    /// Paddle's other name for `world_size`.
    pub fn nranks(&self) -> usize {
        self.world_size()
    }

    /// This process's rank among the ranks on its machine.
    pub fn local_rank(&self) -> usize {
        self.state().local_rank
    }

    /// How many ranks run on this machine.
    pub fn local_size(&self) -> usize {
        self.state().local_size
    }

    /// Where this rank's tensors live by default (also set as the default place).
    pub fn place(&self) -> Place {
        self.state().place
    }

    /// The GPU index of this rank's place (Paddle's `device_id`); `None` on the CPU.
    pub fn device_id(&self) -> Option<usize> {
        match self.place() {
            Place::Gpu(i) => Some(i),
            Place::Cpu => None,
        }
    }

    /// Ends every rank of the job after printing `err` with this rank's number
    /// (`MPI_Abort`): what a rank that fails should do, so that the others do not wait on it.
    pub fn abort(&self, err: &dyn std::fmt::Display) -> ! {
        let s = self.state();
        say(&format!("dygraph.distributed: rank {} of {}: {err}", s.rank, s.size));
        abort_job(s.rank, s.size, "failed")
    }
}

/// Writes `line` to stderr in one call, so that `mpirun`, which forwards every rank's output,
/// does not interleave it with other text.
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(format!("{line}\n").as_bytes());
}

fn abort_job(rank: usize, size: usize, why: &str) -> ! {
    say(&format!("dygraph.distributed: rank {rank} {why}; aborting all {size} ranks"));
    // SAFETY: MPI_Abort may be called from any thread once MPI is initialised; it does not
    // return.
    unsafe {
        mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 1);
    }
    std::process::exit(1)
}

fn timeout_from_env() -> Result<Duration> {
    match std::env::var("DYGRAPH_DIST_TIMEOUT") {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<f64>() {
            Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
            _ => Err(Error::Distributed {
                op: "init_parallel_env",
                rank: 0,
                msg: format!("DYGRAPH_DIST_TIMEOUT={v:?} is not a positive number of seconds"),
            }),
        },
        _ => Ok(Duration::from_secs_f64(DEFAULT_TIMEOUT_S)),
    }
}

/// One GPU per local rank when the machine has a hardware adapter for each, the CPU
/// otherwise; `DYGRAPH_DEVICE=cpu|gpu` overrides (`gpu` shares adapters round-robin).
fn choose_place(local_rank: usize, local_size: usize) -> Result<Place> {
    // Adapters are enumerated only when a GPU may be used (it takes a while).
    let gpus = || crate::backend::gpu::gpu_count();
    match std::env::var("DYGRAPH_DEVICE").ok().map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("cpu") => Ok(Place::Cpu),
        Some(d) if d.starts_with("gpu") => {
            let gpus = gpus();
            if gpus == 0 {
                return Err(Error::Device(format!("DYGRAPH_DEVICE={d} but no GPU adapter is visible")));
            }
            Ok(Place::Gpu(local_rank % gpus))
        }
        Some(d) if !d.is_empty() => Err(Error::Device(format!("unknown DYGRAPH_DEVICE {d:?}"))),
        _ => {
            let hardware = crate::backend::gpu::hardware_adapter_count();
            Ok(if hardware >= local_size { Place::Gpu(local_rank) } else { Place::Cpu })
        }
    }
}

/// Joins the process group of an `mpirun` launch (`paddle.distributed.init_parallel_env`):
/// initialises MPI, picks this rank's place (`gpu:{local_rank}` when the machine has a
/// hardware GPU per local rank, else the CPU) and makes it the default place, starts the
/// watchdog, and makes a panic on any rank abort the whole job. A second call returns the
/// same environment. Run without `mpirun` it is a world of one.
pub fn init_parallel_env() -> Result<ParallelEnv> {
    if let Some(s) = STATE.get() {
        if lock(&s.universe).is_none() {
            return Err(s.error("init_parallel_env", "MPI was already finalised; it cannot be restarted".into()));
        }
        *lock(&s.guards) += 1;
        crate::device::set_place(s.place)?;
        return Ok(ParallelEnv { _guard: Arc::new(EnvGuard) });
    }
    let timeout = timeout_from_env()?;
    let (universe, provided) = mpi::initialize_with_threading(Threading::Serialized).ok_or_else(|| {
        Error::Distributed { op: "init_parallel_env", rank: 0, msg: "MPI was initialised outside dygraph".into() }
    })?;
    if matches!(provided, Threading::Single | Threading::Funneled) {
        // Backward (and so the reducer's MPI calls) may run on any thread.
        return Err(Error::Distributed {
            op: "init_parallel_env",
            rank: 0,
            msg: format!("the MPI library provides only {provided:?} threading; dygraph needs MPI_THREAD_SERIALIZED"),
        });
    }
    let world = universe.world();
    let rank = world.rank() as usize;
    let size = world.size() as usize;
    let local = world.split_shared(world.rank());
    let (local_rank, local_size) = (local.rank() as usize, local.size() as usize);
    drop(local);
    let place = choose_place(local_rank, local_size)?;
    let state = State {
        comm: Mutex::new(Comm { world }),
        universe: Mutex::new(Some(SendUniverse(universe))),
        rank,
        size,
        local_rank,
        local_size,
        place,
        inflight: Mutex::new(Vec::new()),
        timeout,
        guards: Mutex::new(1),
    };
    if STATE.set(state).is_err() {
        return Err(Error::Distributed { op: "init_parallel_env", rank, msg: "initialised twice at once".into() });
    }
    crate::device::set_place(place)?;
    start_watchdog();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        abort_job(rank, size, "panicked");
    }));
    Ok(ParallelEnv { _guard: Arc::new(EnvGuard) })
}

fn start_watchdog() {
    std::thread::Builder::new()
        .name("dygraph-dist-watchdog".into())
        .spawn(|| {
            let Some(s) = STATE.get() else { return };
            let tick = (s.timeout / 10).clamp(Duration::from_millis(50), Duration::from_secs(1));
            loop {
                std::thread::sleep(tick);
                let late = lock(&s.inflight).iter().find(|(_, _, t)| t.elapsed() > s.timeout).map(|e| e.1.clone());
                if let Some(what) = late {
                    say(&format!(
                        "dygraph.distributed: rank {} of {}: {what} did not complete within {:.0} s: another rank \
                         died, failed or stopped calling collectives (DYGRAPH_DIST_TIMEOUT sets the limit); exiting",
                        s.rank,
                        s.size,
                        s.timeout.as_secs_f64()
                    ));
                    std::process::exit(WATCHDOG_EXIT_CODE);
                }
            }
        })
        .expect("spawning the watchdog thread");
}

/// This process's rank (0 before `init_parallel_env`).
pub fn get_rank() -> usize {
    STATE.get().map_or(0, |s| s.rank)
}

/// The number of ranks (1 before `init_parallel_env`).
pub fn get_world_size() -> usize {
    STATE.get().map_or(1, |s| s.size)
}

/// True once `init_parallel_env` has run (and MPI is not yet finalised).
pub fn is_initialized() -> bool {
    STATE.get().is_some_and(|s| lock(&s.universe).is_some())
}
