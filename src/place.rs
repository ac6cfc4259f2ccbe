//! Where tensors live: `Place::Cpu` or `Place::Gpu(n)` (the default place is `device.rs`'s).

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// A device on which tensors live and ops run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// The CPU backend: the reference every GPU kernel is tested against.
    Cpu,
    /// The n-th GPU adapter (hardware adapters first, then software ones such as lavapipe).
    Gpu(usize),
}

impl Place {
    /// True for `Place::Gpu(_)`.
    pub fn is_gpu(self) -> bool {
        matches!(self, Place::Gpu(_))
    }
}

impl fmt::Display for Place {
    /// Paddle's spelling: `CPUPlace`, `GPUPlace(0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Cpu => f.write_str("CPUPlace"),
            Place::Gpu(i) => write!(f, "GPUPlace({i})"),
        }
    }
}

impl FromStr for Place {
    type Err = Error;
    /// Parses `"cpu"`, `"gpu"` (= `"gpu:0"`) or `"gpu:N"`.
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "cpu" => Ok(Place::Cpu),
            "gpu" => Ok(Place::Gpu(0)),
            _ => {
                s.strip_prefix("gpu:").and_then(|n| n.parse().ok()).map(Place::Gpu).ok_or_else(|| {
                    Error::Device(format!("unknown device {s:?}; expected \"cpu\", \"gpu\" or \"gpu:N\""))
                })
            }
        }
    }
}
