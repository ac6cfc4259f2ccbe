//! Vision datasets, transforms and models (`paddle.vision`).

pub mod datasets;
pub mod models;
pub mod transforms;
