//! Built-in layers (`paddle.nn.*`).

mod activation;
mod attention;
mod container;
mod conv;
mod linear;
mod misc;
mod norm;
mod pool;
mod rnn;
mod transformer;

pub use activation::*;
pub use attention::*;
pub use container::*;
pub use conv::*;
pub use linear::*;
pub use misc::*;
pub use norm::*;
pub use pool::*;
pub use rnn::*;
pub use transformer::*;
