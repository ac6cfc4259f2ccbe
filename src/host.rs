//! A tensor's elements on the host, typed ([`CpuData`]): what the CPU backend computes on,
//! what readbacks return and uploads send, and the GPU's byte layout of each dtype.

use half::{bf16, f16};

use crate::DType;

/// Host storage of one tensor. (Public only so the sealed `Element` trait can name it;
/// it is not reachable from outside the crate.)
#[derive(Clone, Debug, PartialEq)]
pub enum CpuData {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F16(Vec<f16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    BF16(Vec<bf16>),
}

/// Runs `$body` with `$v` bound to the typed vector inside a `CpuData`, whatever its dtype.
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::host::CpuData::Bool($v) => $body,
            $crate::host::CpuData::I32($v) => $body,
            $crate::host::CpuData::I64($v) => $body,
            $crate::host::CpuData::F16($v) => $body,
            $crate::host::CpuData::F32($v) => $body,
            $crate::host::CpuData::F64($v) => $body,
            $crate::host::CpuData::BF16($v) => $body,
        }
    };
}
pub(crate) use with_data;

/// Like `with_data!`, but also rebuilds a `CpuData` of the same dtype from `$body`'s Vec.
macro_rules! map_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::host::CpuData::Bool($v) => $crate::host::CpuData::Bool($body),
            $crate::host::CpuData::I32($v) => $crate::host::CpuData::I32($body),
            $crate::host::CpuData::I64($v) => $crate::host::CpuData::I64($body),
            $crate::host::CpuData::F16($v) => $crate::host::CpuData::F16($body),
            $crate::host::CpuData::F32($v) => $crate::host::CpuData::F32($body),
            $crate::host::CpuData::F64($v) => $crate::host::CpuData::F64($body),
            $crate::host::CpuData::BF16($v) => $crate::host::CpuData::BF16($body),
        }
    };
}
pub(crate) use map_data;

impl CpuData {
    pub fn dtype(&self) -> DType {
        match self {
            CpuData::Bool(_) => DType::Bool,
            CpuData::I32(_) => DType::Int32,
            CpuData::I64(_) => DType::Int64,
            CpuData::F16(_) => DType::Float16,
            CpuData::F32(_) => DType::Float32,
            CpuData::F64(_) => DType::Float64,
            CpuData::BF16(_) => DType::BFloat16,
        }
    }

    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// `n` zeros of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> Self {
        match dtype {
            DType::Bool => CpuData::Bool(vec![false; n]),
            DType::Int32 => CpuData::I32(vec![0; n]),
            DType::Int64 => CpuData::I64(vec![0; n]),
            DType::Float16 => CpuData::F16(vec![f16::ZERO; n]),
            DType::Float32 => CpuData::F32(vec![0.0; n]),
            DType::Float64 => CpuData::F64(vec![0.0; n]),
            DType::BFloat16 => CpuData::BF16(vec![bf16::ZERO; n]),
        }
    }

    /// Builds data of `dtype` from f64 values (ints truncate, bool is `!= 0`).
    pub fn from_f64(dtype: DType, values: impl Iterator<Item = f64>) -> Self {
        match dtype {
            DType::Bool => CpuData::Bool(values.map(|v| v != 0.0).collect()),
            DType::Int32 => CpuData::I32(values.map(|v| v as i32).collect()),
            DType::Int64 => CpuData::I64(values.map(|v| v as i64).collect()),
            DType::Float16 => CpuData::F16(values.map(f16::from_f64).collect()),
            DType::Float32 => CpuData::F32(values.map(|v| v as f32).collect()),
            DType::Float64 => CpuData::F64(values.collect()),
            DType::BFloat16 => CpuData::BF16(values.map(bf16::from_f64).collect()),
        }
    }

    /// Builds integer (or bool) data of `dtype` from exact i64 values (wrapping into i32).
    pub fn from_i64(dtype: DType, values: impl Iterator<Item = i64>) -> Self {
        match dtype {
            DType::Bool => CpuData::Bool(values.map(|v| v != 0).collect()),
            DType::Int32 => CpuData::I32(values.map(|v| v as i32).collect()),
            DType::Int64 => CpuData::I64(values.collect()),
            other => Self::from_f64(other, values.map(|v| v as f64)),
        }
    }

    /// Element `i` as f64.
    pub fn get_f64(&self, i: usize) -> f64 {
        use crate::dtype::Element;
        with_data!(self, v => v[i].to_f64())
    }

    /// Element `i` as i64 (exact for ints).
    pub fn get_i64(&self, i: usize) -> i64 {
        use crate::dtype::Element;
        with_data!(self, v => v[i].to_i64())
    }

    /// The bytes of the GPU layout of this data: f16 and bf16 packed two per word, i64 as two
    /// little-endian words, bool as one u32 per element.
    pub fn to_gpu_bytes(&self) -> Vec<u8> {
        match self {
            CpuData::Bool(v) => v.iter().flat_map(|&b| (b as u32).to_le_bytes()).collect(),
            CpuData::I32(v) => bytemuck::cast_slice(v).to_vec(),
            CpuData::I64(v) => bytemuck::cast_slice(v).to_vec(),
            CpuData::F16(v) => bytemuck::cast_slice(v).to_vec(),
            CpuData::F32(v) => bytemuck::cast_slice(v).to_vec(),
            CpuData::F64(v) => bytemuck::cast_slice(v).to_vec(),
            CpuData::BF16(v) => bytemuck::cast_slice(v).to_vec(),
        }
    }

    /// Inverse of `to_gpu_bytes` for `n` elements.
    pub fn from_gpu_bytes(dtype: DType, n: usize, bytes: &[u8]) -> Self {
        fn pod<T: bytemuck::Pod>(bytes: &[u8], n: usize) -> Vec<T> {
            let size = std::mem::size_of::<T>();
            bytes[..n * size].chunks_exact(size).map(bytemuck::pod_read_unaligned).collect()
        }
        match dtype {
            DType::Bool => CpuData::Bool(pod::<u32>(bytes, n).into_iter().map(|w| w != 0).collect()),
            DType::Int32 => CpuData::I32(pod(bytes, n)),
            DType::Int64 => CpuData::I64(pod(bytes, n)),
            DType::Float16 => CpuData::F16(pod(bytes, n)),
            DType::Float32 => CpuData::F32(pod(bytes, n)),
            DType::Float64 => CpuData::F64(pod(bytes, n)),
            DType::BFloat16 => CpuData::BF16(pod(bytes, n)),
        }
    }
}

/// The typed Vec inside `d` if its element type is `T`.
pub(crate) fn typed_ref<T: 'static>(d: &CpuData) -> Option<&Vec<T>> {
    with_data!(d, v => (v as &dyn std::any::Any).downcast_ref::<Vec<T>>())
}

/// Bytes a tensor of `dtype` and `n` elements occupies on the GPU.
/// Saturates instead of wrapping, so an absurd size fails the device-limit check.
pub(crate) fn gpu_bytes(dtype: DType, n: usize) -> u64 {
    let n = n as u64;
    match dtype {
        DType::Bool | DType::Int32 | DType::Float32 => n.saturating_mul(4),
        DType::Int64 | DType::Float64 => n.saturating_mul(8),
        DType::Float16 | DType::BFloat16 => n.saturating_mul(2),
    }
}
