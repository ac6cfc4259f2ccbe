//! Vision datasets, transforms and models (`paddle.vision`).

mod cifar;
pub mod datasets;
pub mod models;
mod mobilenet;
mod resnet;
pub mod transforms;
