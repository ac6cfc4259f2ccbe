//! Neural-network building blocks (Paddle's `paddle.nn`). `functional` holds the stateless
//! forms (`F::relu`, `F::conv2d`, ...).

pub mod functional;
