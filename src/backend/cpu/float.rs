//! [`WinFloat`]: the float types the CPU window kernels (convolution, pooling, scans) run
//! in, f32 and f64 (for gradchecks).

use std::ops::{Add, AddAssign, Mul};

use super::workers::CachedScratch;

/// The float types the CPU window kernels run in (f32, and f64 for gradchecks).
pub(crate) trait WinFloat:
    Copy
    + Send
    + Sync
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + CachedScratch
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    fn from_usize(v: usize) -> Self;
    fn div(self, d: Self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! win_float {
    ($t:ty) => {
        impl WinFloat for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn from_usize(v: usize) -> Self {
                v as $t
            }
            fn div(self, d: Self) -> Self {
                self / d
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}
win_float!(f32);
win_float!(f64);
