//! Built-in layers (`paddle.nn.*`).

mod activation;
mod container;
mod linear;
mod misc;
mod norm;

pub use activation::*;
pub use container::*;
pub use linear::*;
pub use misc::*;
pub use norm::*;
