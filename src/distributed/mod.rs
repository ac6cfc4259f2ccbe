//! Data-parallel training over MPI (`paddle.distributed`, cargo feature `mpi`): launch N
//! processes with `mpirun -np N`, call `init_parallel_env()` in each, wrap the model in
//! `DataParallel`, and give each rank its shard of the data with
//! `io::DistributedBatchSampler`. Collectives work on tensors of either place; GPU tensors
//! travel through host memory.
//!
//! Failure: a rank that panics aborts the whole job (`MPI_Abort`), `ParallelEnv::abort`
//! does the same for an error, `mpirun` ends the job when a rank dies, and a watchdog
//! ends a rank whose blocking collective waits longer than `DYGRAPH_DIST_TIMEOUT` seconds
//! (300 by default). `save` writes a checkpoint from rank 0 only, atomically.

mod bucket;
mod collective;
mod data_parallel;
mod env;
mod reducer;

pub use collective::{ReduceOp, all_gather, all_reduce, barrier, broadcast, reduce, scatter};
pub use data_parallel::{DataParallel, DataParallelOptions};
pub use env::{ParallelEnv, WATCHDOG_EXIT_CODE, get_rank, get_world_size, init_parallel_env, is_initialized};
pub use reducer::CommStats;

/// Saves `state` to `path` from rank 0 only (atomically, as `io::save` always does), then
/// waits until it is written, so that no rank reads a checkpoint before it exists.
pub fn save(state: &crate::nn::StateDict, path: impl AsRef<std::path::Path>) -> crate::Result<()> {
    let written = if get_rank() == 0 { crate::io::save(state, path) } else { Ok(()) };
    barrier()?;
    written
}
