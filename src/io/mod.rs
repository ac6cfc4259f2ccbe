//! Input and output (`paddle.io`, `paddle.save` / `paddle.load`): datasets, data loaders and
//! checkpoints, and weights saved by Paddle and PyTorch.

mod dataloader;
mod dataset;
mod datasets;
pub(crate) mod peer_weights;
pub(crate) mod pickle;
mod sampler;

pub use crate::tensor::checkpoint::{load, load_from_bytes, save, save_to_bytes};
pub use dataloader::{Batches, DataLoader};
pub use dataset::{Collate, Dataset};
pub use datasets::{ComposeDataset, Subset, TensorDataset, random_split};
pub use peer_weights::{from_torch, load_paddle, load_paddle_from_bytes, load_torch, load_torch_from_bytes};
pub use sampler::{
    BatchSampler, BatchSampling, DistributedBatchSampler, RandomSampler, Sampler, SequenceSampler,
    WeightedRandomSampler,
};
