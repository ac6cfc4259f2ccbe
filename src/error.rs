//! The library's one error type. Every variant names the op and the offending
//! shapes, dtypes, axes or places, so a message alone tells the user what to fix.

use crate::{DType, Place};

/// Result alias used by every fallible API of the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in dygraph.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two shapes that numpy broadcasting cannot reconcile.
    #[error("{op}: shapes {lhs:?} and {rhs:?} cannot be broadcast together")]
    Broadcast { op: &'static str, lhs: Vec<usize>, rhs: Vec<usize> },

    /// A shape that does not fit the op (matmul inner dims, conv channels, reshape sizes, ...).
    #[error("{op}: {msg}")]
    Shape { op: &'static str, msg: String },

    /// An axis outside `[-rank, rank)`.
    #[error("{op}: axis {axis} is out of range for a tensor of rank {rank} (shape {shape:?})")]
    Axis { op: &'static str, axis: isize, rank: usize, shape: Vec<usize> },

    /// Operands whose dtypes differ where the op needs them equal.
    #[error("{op}: dtype mismatch: {lhs} vs {rhs}")]
    DTypeMismatch { op: &'static str, lhs: DType, rhs: DType },

    /// A dtype the op (or the place) does not support.
    #[error("{op}: dtype {dtype} is not supported {context}")]
    UnsupportedDType { op: &'static str, dtype: DType, context: String },

    /// A NaN or infinity an op produced while `FLAGS_check_nan_inf` is on (`op` is
    /// `backward of <node>: <op>` inside a backward rule).
    #[error("check_nan_inf: {op}: {msg}")]
    NonFinite { op: String, msg: String },

    /// A GPU op whose results differ from the same op rerun on the CPU while CPU shadow mode
    /// is on (`DYGRAPH_SHADOW=cpu`); `msg` names the element and both values, `file` is the
    /// file that reproduces it (`dygraph::shadow::replay`), when it could be written.
    #[error("shadow: {op}: {msg}")]
    ShadowMismatch { op: String, msg: String, file: Option<std::path::PathBuf> },

    /// Operands on different places.
    #[error("{op}: tensors are on different places: {lhs} and {rhs}")]
    PlaceMismatch { op: &'static str, lhs: Place, rhs: Place },

    /// An argument out of its domain (negative dims, zero step, bad probability, ...).
    #[error("{op}: {msg}")]
    InvalidArgument { op: &'static str, msg: String },

    /// A request over one of the adapter's limits.
    #[error("{op}: {what} needs {requested} but the device limit {limit_name} is {limit}")]
    DeviceLimit { op: &'static str, what: String, requested: u64, limit_name: &'static str, limit: u64 },

    /// A collective or data-parallel step failed on this rank (ranks disagree on a tensor,
    /// a rank out of range, the process group not initialised).
    #[error("distributed {op} on rank {rank}: {msg}")]
    Distributed { op: &'static str, rank: usize, msg: String },

    /// No usable GPU adapter, or an unknown device string.
    #[error("device: {0}")]
    Device(String),

    /// The GPU device was lost (driver reset, unplugged, out of memory in a fatal way).
    #[error("GPU device lost: {0}")]
    DeviceLost(String),

    /// A GPU error reported by wgpu (validation, out of memory, internal).
    #[error("GPU error during {op}: {msg}")]
    Gpu { op: &'static str, msg: String },

    /// A blocking call where blocking is impossible (wasm's main thread).
    #[error("{op}: blocking readback is not available on this target; use the async form (to_vec_async().await)")]
    WouldBlock { op: &'static str },

    /// Misuse of the autograd engine.
    #[error("autograd: {0}")]
    Autograd(String),

    /// File or stream failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Matches `$e` against every variant that names an op, binding the name to `$op`.
macro_rules! named_op {
    ($e:expr, $op:ident => $named:expr, $other:expr) => {
        match $e {
            Error::Broadcast { op: $op, .. }
            | Error::Shape { op: $op, .. }
            | Error::Axis { op: $op, .. }
            | Error::DTypeMismatch { op: $op, .. }
            | Error::UnsupportedDType { op: $op, .. }
            | Error::PlaceMismatch { op: $op, .. }
            | Error::InvalidArgument { op: $op, .. }
            | Error::DeviceLimit { op: $op, .. }
            | Error::Gpu { op: $op, .. }
            | Error::WouldBlock { op: $op } => $named,
            _ => $other,
        }
    };
}

impl Error {
    /// A shape error of `op`.
    pub fn shape(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Shape { op, msg: msg.into() }
    }

    /// An invalid-argument error of `op`.
    pub fn invalid(op: &'static str, msg: impl Into<String>) -> Self {
        Error::InvalidArgument { op, msg: msg.into() }
    }

    /// An unsupported-dtype error of `op`.
    pub fn unsupported(op: &'static str, dtype: DType, context: impl Into<String>) -> Self {
        Error::UnsupportedDType { op, dtype, context: context.into() }
    }

    /// The op this error names.
    pub fn op(&self) -> Option<&'static str> {
        named_op!(self, op => Some(*op), None)
    }

    /// The error with `called` as its op where it names the registry op `entry`: a public
    /// function that runs a differently named registry entry (`rand` runs `uniform`)
    /// reports errors under its own name.
    pub(crate) fn called_as(mut self, entry: &str, called: &'static str) -> Self {
        if let Some(op) = named_op!(&mut self, op => Some(op), None)
            && *op == entry
        {
            *op = called;
        }
        self
    }
}
