//! The modes of this floor, each one slot of the dispatcher's walk (`dispatch.rs`): autograd
//! recording, meta tensors, the NaN/Inf check, the CPU shadow and the CPU profiler. The
//! static-building and tracing modes live with the programs they build (`crate::static_`).

pub(crate) mod check;
pub(crate) mod meta;
pub(crate) mod profile;
pub(crate) mod record;
pub(crate) mod shadow;
