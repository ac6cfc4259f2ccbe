//! Built-in layers (`paddle.nn.*`).

mod activation;
mod container;
mod conv;
mod linear;
mod misc;
mod norm;
mod pool;

pub use activation::*;
pub use container::*;
pub use conv::*;
pub use linear::*;
pub use misc::*;
pub use norm::*;
pub use pool::*;
