//! Neural-network building blocks (Paddle's `paddle.nn`): the `Layer` trait and its derive,
//! and `functional` with the stateless forms (`F::relu`, `F::conv2d`, ...).

pub mod functional;
mod layer;
mod layers;

pub use dygraph_derive::Layer;
pub use layer::{Forward, Layer, StateDict};
pub use layers::*;
