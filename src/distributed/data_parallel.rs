//! `DataParallel` (Paddle's `paddle.DataParallel`, PyTorch's DDP): wraps a layer so that
//! every rank trains the same model on its own shard of each batch. Parameters and buffers
//! are broadcast from rank 0 when it is built; during backward the gradients are averaged
//! across ranks by the reducer (`reducer.rs`), bucket by bucket, overlapping backward.

use std::sync::Arc;

use super::bucket::plan_buckets;
use super::collective::{agree_values, broadcast};
use super::env::state;
use super::reducer::{CommStats, Reducer};
use crate::nn::{Forward, Layer};
use crate::{DType, Result, Tensor};

/// How `DataParallel` groups and reduces gradients.
#[derive(Clone, Debug, PartialEq)]
pub struct DataParallelOptions {
    /// Largest bucket, in MiB (Paddle's `comm_buffer_size`, PyTorch's `bucket_cap_mb`): 25.
    pub bucket_cap_mb: f64,
    /// Largest first bucket, in MiB: 1, so that communication starts early in backward.
    pub first_bucket_mb: f64,
    /// Tolerate parameters that get no gradient in a step (their contribution is zero, and
    /// a parameter no rank used keeps no gradient). Without it such a step is an error.
    pub find_unused_parameters: bool,
}

impl Default for DataParallelOptions {
    fn default() -> Self {
        DataParallelOptions { bucket_cap_mb: 25.0, first_bucket_mb: 1.0, find_unused_parameters: false }
    }
}

/// A layer trained data-parallel across the ranks of `init_parallel_env`. Use it as the
/// layer itself: `forward` (or the inner layer's own methods, through `layers()`) runs
/// locally, `backward` averages the gradients across ranks, and `state_dict` has the inner
/// layer's keys (no wrapper prefix).
pub struct DataParallel<L: Layer> {
    layer: L,
    reducer: Arc<Reducer>,
}

impl<L: Layer> DataParallel<L> {
    /// Wraps `layer` with the default options.
    pub fn new(layer: L) -> Result<Self> {
        DataParallel::with_options(layer, DataParallelOptions::default())
    }

    /// Wraps `layer`: checks that every rank has the same parameters, broadcasts rank 0's
    /// parameters and buffers, and hooks the gradients.
    pub fn with_options(layer: L, options: DataParallelOptions) -> Result<Self> {
        const OP: &str = "DataParallel";
        let s = state(OP)?;
        let mb = |x: f64| (x.max(0.0) * 1024.0 * 1024.0) as usize;
        let (cap, first_cap) = (mb(options.bucket_cap_mb), mb(options.first_bucket_mb));
        // A parameter shared by two sublayers (tied weights) is one parameter.
        let mut seen = std::collections::HashSet::new();
        let trainable: Vec<(String, Tensor)> = layer
            .named_parameters()
            .into_iter()
            .filter(|(_, p)| !p.stop_gradient() && seen.insert(p.identity()))
            .collect();
        let sizes: Vec<(usize, DType, crate::Place)> =
            trainable.iter().map(|(_, p)| (p.numel() * p.dtype().size_of(), p.dtype(), p.place())).collect();
        let plan = plan_buckets(&sizes, cap, first_cap);
        // Every rank must bucket the same parameters the same way, or the all-reduces would
        // pair different buffers: checked before any of them runs.
        let state_dict: crate::nn::StateDict = layer.named_tensors().into_iter().collect();
        let layout_hash = |entries: &mut dyn Iterator<Item = (usize, DType, bool)>| -> i64 {
            entries.fold(17i64, |h, (n, d, t)| {
                h.wrapping_mul(1_000_003)
                    .wrapping_add(n as i64)
                    .wrapping_mul(31)
                    .wrapping_add(DType::ALL.iter().position(|&x| x == d).unwrap_or(0) as i64 * 2 + i64::from(t))
            })
        };
        let values = [
            state_dict.len() as i64,
            trainable.len() as i64,
            layout_hash(&mut state_dict.iter().map(|(_, t)| (t.numel(), t.dtype(), false))),
            // The bucket plan itself (places may differ between ranks; the plan may not).
            layout_hash(&mut plan.iter().map(|members| {
                let numel: usize = members.iter().map(|&i| trainable[i].1.numel()).sum();
                (numel, trainable[members[0]].1.dtype(), members.len() > 1)
            })),
            cap as i64,
            first_cap as i64,
            i64::from(options.find_unused_parameters),
        ];
        let fields = [
            "number of state-dict entries",
            "number of trainable parameters",
            "shapes and dtypes of the state dict (hashed)",
            "gradient buckets' sizes and dtypes (hashed)",
            "bucket_cap_mb (bytes)",
            "first_bucket_mb (bytes)",
            "find_unused_parameters",
        ];
        agree_values(s, OP, &fields, &values)?;
        for (_, t) in state_dict.iter() {
            broadcast(t, 0)?;
        }
        let reducer = Reducer::new(s, trainable, cap, first_cap, options.find_unused_parameters)?;
        Ok(DataParallel { layer, reducer })
    }

    /// The wrapped layer (Paddle's `_layers`).
    pub fn layers(&self) -> &L {
        &self.layer
    }

    /// The wrapped layer, mutably.
    pub fn layers_mut(&mut self) -> &mut L {
        &mut self.layer
    }

    /// Runs `f` without averaging gradients (PyTorch's `no_sync`): backward passes inside
    /// only accumulate locally; the first synchronised backward after them averages the
    /// accumulated gradients.
    pub fn no_sync<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore<'a>(&'a Reducer, bool);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.set_no_sync(self.1);
            }
        }
        let was = self.reducer.set_no_sync(true);
        let _restore = Restore(&self.reducer, was);
        f()
    }

    /// Bytes per step, bucket sizes and how much of the communication overlapped backward.
    pub fn comm_stats(&self) -> CommStats {
        self.reducer.stats()
    }
}

impl<L: Layer> Layer for DataParallel<L> {
    crate::nn::layer::forward_layer_visitors!(layer);

    fn set_training(&mut self, training: bool) {
        self.layer.set_training(training)
    }

    fn type_name(&self) -> &'static str {
        "DataParallel"
    }
}

impl<L: Layer + Forward> Forward for DataParallel<L> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.layer.forward(x)
    }
}

impl<L: Layer> std::fmt::Debug for DataParallel<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataParallel").field("reducer", &self.reducer).finish()
    }
}
