//! Samplers (`paddle.io.SequenceSampler`, `RandomSampler`, `WeightedRandomSampler`,
//! `BatchSampler`, `DistributedBatchSampler`): the order in which a `DataLoader` reads
//! samples and how it groups them into batches.

use crate::{Error, Result};

/// An order of sample indices for a dataset of `n` samples.
pub trait Sampler: Send + Sync {
    /// The indices to read, in order.
    fn indices(&self, n: usize) -> Vec<usize>;
    /// How many indices `indices(n)` gives (without drawing them).
    fn count(&self, n: usize) -> usize {
        n
    }
}

/// `0, 1, …, n − 1`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SequenceSampler;

impl Sampler for SequenceSampler {
    fn indices(&self, n: usize) -> Vec<usize> {
        (0..n).collect()
    }
}

/// A random permutation, or `num_samples` draws with replacement, from the global generator.
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomSampler {
    /// Draw with replacement (then `num_samples` draws; default `n`).
    pub replacement: bool,
    /// How many indices (with replacement only).
    pub num_samples: Option<usize>,
}

impl Sampler for RandomSampler {
    fn count(&self, n: usize) -> usize {
        if self.replacement { self.num_samples.unwrap_or(n) } else { n }
    }

    fn indices(&self, n: usize) -> Vec<usize> {
        if !self.replacement {
            return crate::random::permutation(n);
        }
        crate::random::host_uniform(self.count(n))
            .into_iter()
            .map(|u| ((u * n as f64) as usize).min(n.saturating_sub(1)))
            .collect()
    }
}

/// `num_samples` indices drawn in proportion to `weights` (one per sample), with or without
/// replacement.
#[derive(Clone, Debug)]
pub struct WeightedRandomSampler {
    weights: Vec<f64>,
    num_samples: usize,
    replacement: bool,
}

impl WeightedRandomSampler {
    /// Non-negative weights, not all zero; without replacement `num_samples` may not exceed
    /// the samples with a positive weight.
    pub fn new(weights: Vec<f64>, num_samples: usize, replacement: bool) -> Result<Self> {
        let positive = weights.iter().filter(|&&w| w > 0.0).count();
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0)
            || positive == 0
            || (!replacement && num_samples > positive)
        {
            return Err(Error::invalid(
                "WeightedRandomSampler",
                format!("weights must be finite, non-negative, not all zero, and cover {num_samples} draws"),
            ));
        }
        Ok(WeightedRandomSampler { weights, num_samples, replacement })
    }
}

impl Sampler for WeightedRandomSampler {
    fn count(&self, _n: usize) -> usize {
        self.num_samples
    }

    fn indices(&self, _n: usize) -> Vec<usize> {
        let mut weights = self.weights.clone();
        let mut out = Vec::with_capacity(self.num_samples);
        let draws = crate::random::host_uniform(self.num_samples);
        for u in draws {
            let total: f64 = weights.iter().sum();
            let mut target = u * total;
            let mut pick = weights.iter().rposition(|&w| w > 0.0).unwrap_or(0);
            for (i, &w) in weights.iter().enumerate() {
                if target < w {
                    pick = i;
                    break;
                }
                target -= w;
            }
            out.push(pick);
            if !self.replacement {
                weights[pick] = 0.0;
            }
        }
        out
    }
}

/// How a `DataLoader` groups indices into batches.
pub trait BatchSampling: Send + Sync {
    /// The batches of a dataset of `n` samples.
    fn batches(&self, n: usize) -> Vec<Vec<usize>>;
    /// How many batches `batches(n)` gives (without drawing them).
    fn num_batches(&self, n: usize) -> usize;
}

fn batch_count(samples: usize, batch: usize, drop_last: bool) -> usize {
    if drop_last { samples / batch } else { samples.div_ceil(batch) }
}

/// A sampler's indices in batches of `batch_size` (`paddle.io.BatchSampler`).
pub struct BatchSampler {
    sampler: Box<dyn Sampler>,
    batch_size: usize,
    drop_last: bool,
}

impl BatchSampler {
    /// Batches of `batch_size` from `sampler`; `drop_last` drops a short last batch.
    pub fn new(sampler: impl Sampler + 'static, batch_size: usize, drop_last: bool) -> Self {
        BatchSampler { sampler: Box::new(sampler), batch_size: batch_size.max(1), drop_last }
    }
}

fn chunked(indices: Vec<usize>, batch: usize, drop_last: bool) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = indices.chunks(batch).map(<[usize]>::to_vec).collect();
    if drop_last && out.last().is_some_and(|b| b.len() < batch) {
        out.pop();
    }
    out
}

impl BatchSampling for BatchSampler {
    fn batches(&self, n: usize) -> Vec<Vec<usize>> {
        chunked(self.sampler.indices(n), self.batch_size, self.drop_last)
    }

    fn num_batches(&self, n: usize) -> usize {
        batch_count(self.sampler.count(n), self.batch_size, self.drop_last)
    }
}

/// One replica's share of the batches in data-parallel training
/// (`paddle.io.DistributedBatchSampler`): the indices (shuffled by the epoch when `shuffle`)
/// padded by repetition to a multiple of `num_replicas`, then replica `rank`'s share: the
/// replicas take batches in turn (Paddle's layout), so one step of all replicas reads one
/// contiguous global batch.
#[derive(Clone, Debug)]
pub struct DistributedBatchSampler {
    batch_size: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    drop_last: bool,
    epoch: u64,
}

impl DistributedBatchSampler {
    /// Replica `rank` of `num_replicas`.
    pub fn new(batch_size: usize, num_replicas: usize, rank: usize, shuffle: bool, drop_last: bool) -> Result<Self> {
        if num_replicas == 0 || rank >= num_replicas {
            return Err(Error::invalid("DistributedBatchSampler", format!("rank {rank} of {num_replicas} replicas")));
        }
        Ok(DistributedBatchSampler { batch_size: batch_size.max(1), num_replicas, rank, shuffle, drop_last, epoch: 0 })
    }

    /// Sets the epoch, which seeds the shuffle (every replica must use the same).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
}

impl BatchSampling for DistributedBatchSampler {
    fn num_batches(&self, n: usize) -> usize {
        batch_count(n.div_ceil(self.num_replicas), self.batch_size, self.drop_last)
    }

    fn batches(&self, n: usize) -> Vec<Vec<usize>> {
        let mut indices: Vec<usize> = (0..n).collect();
        if self.shuffle {
            // Fisher–Yates from a generator keyed by the epoch alone, so every replica
            // draws the same order.
            let mut state = self.epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
            for i in (1..n).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let j = ((state >> 33) % (i as u64 + 1)) as usize;
                indices.swap(i, j);
            }
        }
        let per = n.div_ceil(self.num_replicas);
        let total = per * self.num_replicas;
        let padding: Vec<usize> = indices.iter().copied().cycle().take(total - n).collect();
        indices.extend(padding);
        // Paddle's layout: the replicas take turns batch by batch, so step i's batches of
        // all replicas together are one contiguous global batch of the order (what a single
        // process with `num_replicas` times the batch size would read at step i); the tail
        // shorter than a global batch is split evenly.
        let global = self.batch_size * self.num_replicas;
        let tail = total % global;
        let mut share = Vec::with_capacity(per);
        for start in (self.rank * self.batch_size..total - tail).step_by(global) {
            share.extend_from_slice(&indices[start..start + self.batch_size]);
        }
        let local_tail = tail / self.num_replicas;
        let tail_start = total - tail + self.rank * local_tail;
        share.extend_from_slice(&indices[tail_start..tail_start + local_tail]);
        chunked(share, self.batch_size, self.drop_last)
    }
}
