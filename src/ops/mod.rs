//! Every op, declared once: shape inference, the CPU kernel, the WGSL kernel and the
//! backward rule side by side. Ops pick their kernel with one `match` on the backend.

pub(crate) mod elementwise;
pub(crate) mod wgsl;

/// `opt!()` is `None`, `opt!(x)` is `Some(x)`: optional table fields in op macros.
macro_rules! opt {
    () => {
        None
    };
    ($($t:tt)+) => {
        Some($($t)+)
    };
}
pub(crate) use opt;
pub(crate) mod copy;
pub(crate) mod index;
pub(crate) mod matmul;
pub(crate) mod nn;
pub(crate) mod reduce;
pub mod registry;
pub(crate) mod shape;
