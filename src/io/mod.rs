//! Input and output (`paddle.io` and `paddle.save` / `paddle.load`): checkpoints now,
//! datasets and loaders next.

mod checkpoint;

pub use checkpoint::{load, load_from_bytes, save, save_to_bytes};
