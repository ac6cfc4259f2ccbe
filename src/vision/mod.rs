//! Vision datasets, transforms and models (`paddle.vision`).

mod cifar;
pub mod datasets;
mod mobilenet;
pub mod models;
mod resnet;
pub mod transforms;
