//! Built-in layers (`paddle.nn.*`).

mod activation;
mod container;

pub use activation::*;
pub use container::*;
