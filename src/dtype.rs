//! Element types and the Rust scalar types that map onto them.

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

use crate::host::CpuData;
use crate::{Error, Result};

/// The element type of a tensor. Names follow Paddle (`"float32"`, `"int64"`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `bool`: stored as one byte on the host, one `u32` word on the GPU.
    Bool,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer, exact on every place (two `u32` words on the GPU).
    Int64,
    /// IEEE half precision, packed two per word on the GPU; arithmetic runs in f32.
    Float16,
    /// IEEE single precision: the default dtype.
    Float32,
    /// IEEE double precision: CPU only (used by gradcheck).
    Float64,
    /// Brain floating point (float32's exponent, 8 bits of mantissa), packed two per word on the
    /// GPU; arithmetic runs in f32. Last, so the codes of the older dtypes stay as they were.
    BFloat16,
}

impl DType {
    /// Every dtype, for tests and tooling.
    pub const ALL: [DType; 7] =
        [DType::Bool, DType::Int32, DType::Int64, DType::Float16, DType::Float32, DType::Float64, DType::BFloat16];

    /// Paddle's name of the dtype.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Float16 => "float16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::BFloat16 => "bfloat16",
        }
    }

    /// Bytes per element on the host.
    pub fn size_of(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::Float16 | DType::BFloat16 => 2,
            DType::Int32 | DType::Float32 => 4,
            DType::Int64 | DType::Float64 => 8,
        }
    }

    /// True for float16/32/64 and bfloat16.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float16 | DType::Float32 | DType::Float64 | DType::BFloat16)
    }

    /// True for the 16-bit floats (float16, bfloat16): stored two per GPU word, computed in f32.
    pub fn is_half(self) -> bool {
        matches!(self, DType::Float16 | DType::BFloat16)
    }

    /// True for int32/int64.
    pub fn is_int(self) -> bool {
        matches!(self, DType::Int32 | DType::Int64)
    }

    /// A small code (the position in `ALL`), for kernel variant keys.
    pub(crate) fn code(self) -> u32 {
        self as u32
    }

    /// The dtype of `code` (codes outside `ALL` give float32).
    pub(crate) fn from_code(code: u32) -> DType {
        DType::ALL.get(code as usize).copied().unwrap_or(DType::Float32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "bool" => DType::Bool,
            "int32" => DType::Int32,
            "int64" => DType::Int64,
            "float16" => DType::Float16,
            "float32" => DType::Float32,
            "float64" => DType::Float64,
            "bfloat16" => DType::BFloat16,
            _ => {
                return Err(Error::invalid(
                    "dtype",
                    format!(
                        "unknown dtype {s:?}; expected one of bool, int32, int64, float16, bfloat16, float32, float64"
                    ),
                ));
            }
        })
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for bool {}
}

/// A Rust scalar type that can be the element of a tensor (`f32`, `f64`, `half::f16`,
/// `half::bf16`, `i32`, `i64`, `bool`). Conversions go through `f64`/`i64` like numpy's `astype`.
pub trait Element: sealed::Sealed + Copy + Send + Sync + fmt::Debug + PartialEq + 'static {
    /// The tensor dtype this Rust type maps onto.
    const DTYPE: DType;
    /// Value as f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Value as i64 (floats truncate toward zero, saturating).
    fn to_i64(self) -> i64;
    /// Nearest value of this type to `v` (ints truncate toward zero, bool is `v != 0`).
    fn from_f64(v: f64) -> Self;
    /// Exact conversion from an integer (wrapping for narrower ints).
    fn from_i64(v: i64) -> Self;
    #[doc(hidden)]
    fn into_data(v: Vec<Self>) -> CpuData;
    #[doc(hidden)]
    fn from_data(d: CpuData) -> std::result::Result<Vec<Self>, CpuData>;
}

macro_rules! data_variant {
    ($t:ty, $variant:ident) => {
        impl DataVariant for $t {
            fn wrap(v: Vec<Self>) -> CpuData {
                CpuData::$variant(v)
            }
            fn unwrap(d: CpuData) -> std::result::Result<Vec<Self>, CpuData> {
                match d {
                    CpuData::$variant(v) => Ok(v),
                    other => Err(other),
                }
            }
        }
    };
}

trait DataVariant: Sized {
    fn wrap(v: Vec<Self>) -> CpuData;
    fn unwrap(d: CpuData) -> std::result::Result<Vec<Self>, CpuData>;
}
data_variant!(f32, F32);
data_variant!(f64, F64);
data_variant!(f16, F16);
data_variant!(bf16, BF16);
data_variant!(i32, I32);
data_variant!(i64, I64);
data_variant!(bool, Bool);

/// A scalar operand or fill value: keeps integers exact (no detour through f64).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A floating-point value.
    Float(f64),
    /// An integer value.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl Scalar {
    /// The value as f64.
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Float(v) => v,
            Scalar::Int(v) => v as f64,
            Scalar::Bool(b) => b as u8 as f64,
        }
    }

    /// The value as i64 (floats truncate).
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Float(v) => v as i64,
            Scalar::Int(v) => v,
            Scalar::Bool(b) => b as i64,
        }
    }

    /// True when the value has no fractional part (so it fits an integer tensor).
    pub fn is_integral(self) -> bool {
        match self {
            Scalar::Float(v) => v.fract() == 0.0 && v.is_finite(),
            _ => true,
        }
    }

    /// `n` copies of the value as host data of `dtype` (converted as `cast` converts: bool is
    /// `!= 0`, integers truncate).
    pub(crate) fn fill(self, dtype: DType, n: usize) -> CpuData {
        if dtype == DType::Bool {
            CpuData::Bool(vec![self.to_f64() != 0.0; n])
        } else if dtype.is_int() {
            CpuData::from_i64(dtype, std::iter::repeat_n(self.to_i64(), n))
        } else {
            CpuData::from_f64(dtype, std::iter::repeat_n(self.to_f64(), n))
        }
    }
}

macro_rules! scalar_from {
    ($variant:ident, $conv:ty: $($t:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Self {
                Scalar::$variant(v as $conv)
            }
        }
    )*};
}
scalar_from!(Float, f64: f32, f64);
scalar_from!(Int, i64: i8, i16, i32, i64, u8, u16, u32, isize, usize);

impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

impl From<f16> for Scalar {
    fn from(v: f16) -> Self {
        Scalar::Float(v.to_f64())
    }
}

impl From<bf16> for Scalar {
    fn from(v: bf16) -> Self {
        Scalar::Float(v.to_f64())
    }
}

macro_rules! float_element {
    ($t:ty, $d:expr, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn to_i64(self) -> i64 {
                $to(self) as i64
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            fn from_i64(v: i64) -> Self {
                $from(v as f64)
            }
            fn into_data(v: Vec<Self>) -> CpuData {
                <$t as DataVariant>::wrap(v)
            }
            fn from_data(d: CpuData) -> std::result::Result<Vec<Self>, CpuData> {
                <$t as DataVariant>::unwrap(d)
            }
        }
    };
}
float_element!(f32, DType::Float32, |x: f32| x as f64, |v: f64| v as f32);
float_element!(f64, DType::Float64, |x: f64| x, |v: f64| v);
float_element!(f16, DType::Float16, |x: f16| x.to_f64(), f16::from_f64);
float_element!(bf16, DType::BFloat16, |x: bf16| x.to_f64(), bf16::from_f64);

macro_rules! int_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn into_data(v: Vec<Self>) -> CpuData {
                <$t as DataVariant>::wrap(v)
            }
            fn from_data(d: CpuData) -> std::result::Result<Vec<Self>, CpuData> {
                <$t as DataVariant>::unwrap(d)
            }
        }
    };
}
int_element!(i32, DType::Int32);
int_element!(i64, DType::Int64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn into_data(v: Vec<Self>) -> CpuData {
        <bool as DataVariant>::wrap(v)
    }
    fn from_data(d: CpuData) -> std::result::Result<Vec<Self>, CpuData> {
        <bool as DataVariant>::unwrap(d)
    }
}
