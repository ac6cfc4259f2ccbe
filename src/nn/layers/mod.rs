//! Built-in layers (`paddle.nn.*`).

mod activation;
mod container;
mod linear;

pub use activation::*;
pub use container::*;
pub use linear::*;
