//! `DataLoader` (`paddle.io.DataLoader`): batches of a dataset, optionally shuffled with the
//! global seed, stacked on background threads (natively: one by default, `num_workers` for
//! more, batches still in order) while the model trains, and uploaded to the place.

use std::sync::Arc;

use super::dataset::{Collate, Dataset};
use super::sampler::BatchSampling;
use crate::{Place, Result};

/// Batches over a dataset.
pub struct DataLoader<D: Dataset + 'static> {
    dataset: Arc<D>,
    /// Samples per batch.
    pub batch_size: usize,
    /// Draw a fresh order every epoch from the global generator (`dygraph::seed`).
    pub shuffle: bool,
    /// Drop the last, smaller batch.
    pub drop_last: bool,
    /// Where batches are uploaded (default: the current place when iterated).
    pub place: Option<Place>,
    /// Batches prepared ahead by each worker thread (0 with `num_workers == 0`: prepare on
    /// the caller's thread).
    pub prefetch: usize,
    /// Worker threads stacking batches (Paddle's `num_workers`); 0 keeps the single prefetch
    /// thread. Worker `k` stacks batches `k, k + n, ...`, and they come out in order.
    pub num_workers: usize,
    /// Overrides `batch_size`, `shuffle` and `drop_last` with its own batches.
    batch_sampler: Option<Arc<dyn BatchSampling>>,
}

impl<D: Dataset + 'static> DataLoader<D> {
    /// A loader of `batch_size` batches, in order, keeping the last partial batch.
    pub fn new(dataset: D, batch_size: usize) -> Self {
        DataLoader {
            dataset: Arc::new(dataset),
            batch_size: batch_size.max(1),
            shuffle: false,
            drop_last: false,
            place: None,
            prefetch: 2,
            num_workers: 0,
            batch_sampler: None,
        }
    }

    /// Reads the batches `sampler` gives (`DataLoader(batch_sampler=...)`).
    pub fn batch_sampler(mut self, sampler: impl BatchSampling + 'static) -> Self {
        self.batch_sampler = Some(Arc::new(sampler));
        self
    }

    setters! {
        /// Shuffle every epoch.
        shuffle: bool;
        /// Drop the last partial batch.
        drop_last: bool;
        /// Upload batches to `place`.
        place: Place => Some;
    }

    /// Batches prepared ahead on the worker thread.
    pub fn prefetch(mut self, batches: usize) -> Self {
        self.prefetch = batches;
        self
    }

    /// Stacks batches on `n` worker threads (on wasm, where the module has no threads, the
    /// caller's thread stacks them).
    pub fn num_workers(mut self, n: usize) -> Self {
        self.num_workers = n;
        self
    }

    /// The dataset.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// Batches per epoch.
    pub fn len(&self) -> usize {
        let n = self.dataset.len();
        if let Some(s) = &self.batch_sampler {
            return s.num_batches(n);
        }
        if self.drop_last { n / self.batch_size } else { n.div_ceil(self.batch_size) }
    }

    /// True when an epoch has no batches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One epoch of batches.
    pub fn iter(&self) -> Result<Batches<D>> {
        let place = match self.place {
            Some(p) => p,
            None => crate::current_place()?,
        };
        if let Some(s) = &self.batch_sampler {
            let n = self.dataset.len();
            let chunks = s.batches(n);
            if let Some(bad) = chunks.iter().flatten().find(|&&i| i >= n) {
                return Err(crate::Error::invalid(
                    "DataLoader",
                    format!("the batch sampler gave index {bad} for {n} samples"),
                ));
            }
            return Ok(Batches::start(self.dataset.clone(), chunks, place, self.prefetch, self.num_workers));
        }
        let order: Vec<usize> = if self.shuffle {
            crate::random::permutation(self.dataset.len())
        } else {
            (0..self.dataset.len()).collect()
        };
        let mut chunks: Vec<Vec<usize>> = order.chunks(self.batch_size).map(|c| c.to_vec()).collect();
        if self.drop_last && chunks.last().is_some_and(|c| c.len() < self.batch_size) {
            chunks.pop();
        }
        Ok(Batches::start(self.dataset.clone(), chunks, place, self.prefetch, self.num_workers))
    }
}

type Host<D> = <<D as Dataset>::Sample as Collate>::Host;

fn stack<D: Dataset>(dataset: &D, indices: &[usize]) -> Result<Host<D>> {
    let samples = indices.iter().map(|&i| dataset.get(i)).collect::<Result<Vec<_>>>()?;
    <D::Sample as Collate>::stack(samples)
}

enum Source<D: Dataset> {
    Inline {
        dataset: Arc<D>,
        chunks: std::vec::IntoIter<Vec<usize>>,
    },
    /// Batch `k` comes from `rxs[k % rxs.len()]`.
    #[cfg(not(target_arch = "wasm32"))]
    Workers {
        rxs: Vec<std::sync::mpsc::Receiver<Result<Host<D>>>>,
        next: usize,
        _handles: Vec<std::thread::JoinHandle<()>>,
    },
}

/// The batches of one epoch (an iterator of `Result<Batch>`).
pub struct Batches<D: Dataset> {
    source: Source<D>,
    place: Place,
    remaining: usize,
}

impl<D: Dataset + 'static> Batches<D> {
    fn start(dataset: Arc<D>, chunks: Vec<Vec<usize>>, place: Place, prefetch: usize, num_workers: usize) -> Self {
        let remaining = chunks.len();
        #[cfg(not(target_arch = "wasm32"))]
        {
            let workers =
                if num_workers > 0 { num_workers.min(chunks.len().max(1)) } else { usize::from(prefetch > 0) };
            if workers > 0 {
                let mut rxs = Vec::with_capacity(workers);
                let mut handles = Vec::with_capacity(workers);
                for k in 0..workers {
                    let (tx, rx) = std::sync::mpsc::sync_channel(prefetch.max(1));
                    let mine: Vec<Vec<usize>> = chunks.iter().skip(k).step_by(workers).cloned().collect();
                    let dataset = dataset.clone();
                    handles.push(std::thread::spawn(move || {
                        for c in mine {
                            // Stop quietly when the consumer is gone.
                            if tx.send(stack(&*dataset, &c)).is_err() {
                                return;
                            }
                        }
                    }));
                    rxs.push(rx);
                }
                return Batches { source: Source::Workers { rxs, next: 0, _handles: handles }, place, remaining };
            }
        }
        let _ = (prefetch, num_workers);
        Batches { source: Source::Inline { dataset, chunks: chunks.into_iter() }, place, remaining }
    }
}

impl<D: Dataset + 'static> Iterator for Batches<D> {
    type Item = Result<<D::Sample as Collate>::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let host = match &mut self.source {
            Source::Inline { dataset, chunks } => stack(&**dataset, &chunks.next()?),
            #[cfg(not(target_arch = "wasm32"))]
            Source::Workers { rxs, next, .. } => match rxs[*next % rxs.len()].recv() {
                Ok(h) => {
                    *next += 1;
                    h
                }
                Err(_) if self.remaining == 0 => return None,
                Err(_) => return Some(Err(crate::Error::invalid("DataLoader", "the loader thread stopped early"))),
            },
        };
        self.remaining = self.remaining.saturating_sub(1);
        Some(host.and_then(|h| <D::Sample as Collate>::upload(h, self.place)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}
