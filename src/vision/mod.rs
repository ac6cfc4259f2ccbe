//! Vision datasets and transforms (`paddle.vision`).

pub mod datasets;
pub mod transforms;
