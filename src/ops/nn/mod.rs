//! Neural-network kernels: convolution, pooling, softmax, normalisation, dropout.

pub(crate) mod compose;
pub(crate) mod conv;
pub(crate) mod cross_entropy;
pub(crate) mod dropout;
pub(crate) mod norm;
pub(crate) mod pool;
pub(crate) mod softmax;
pub(crate) mod window;

pub use compose::*;
pub use conv::*;
pub use dropout::*;
pub use norm::*;
pub use pool::*;
pub use softmax::*;
pub use window::{Padding, Pair};
