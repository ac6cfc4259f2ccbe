//! Vision datasets, transforms and models (`paddle.vision`).

pub mod datasets;
pub mod models;
mod resnet;
pub mod transforms;
