//! `DataLoader` (`paddle.io.DataLoader`): batches of a dataset, optionally shuffled with the
//! global seed, stacked on a background thread (natively) while the model trains, and
//! uploaded to the place.

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
    /// Batches prepared ahead by the worker thread (0: prepare on the caller's thread).
    pub prefetch: usize,
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
            return Ok(Batches::start(self.dataset.clone(), chunks, place, self.prefetch));
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
        Ok(Batches::start(self.dataset.clone(), chunks, place, self.prefetch))
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
    #[cfg(not(target_arch = "wasm32"))]
    Worker {
        rx: std::sync::mpsc::Receiver<Result<Host<D>>>,
        _handle: std::thread::JoinHandle<()>,
    },
}

/// The batches of one epoch (an iterator of `Result<Batch>`).
pub struct Batches<D: Dataset> {
    source: Source<D>,
    place: Place,
    remaining: usize,
}

impl<D: Dataset + 'static> Batches<D> {
    fn start(dataset: Arc<D>, chunks: Vec<Vec<usize>>, place: Place, prefetch: usize) -> Self {
        let remaining = chunks.len();
        #[cfg(not(target_arch = "wasm32"))]
        if prefetch > 0 {
            let (tx, rx) = std::sync::mpsc::sync_channel(prefetch);
            let handle = std::thread::spawn(move || {
                for c in chunks {
                    // Stop quietly when the consumer is gone.
                    if tx.send(stack(&*dataset, &c)).is_err() {
                        return;
                    }
                }
            });
            return Batches { source: Source::Worker { rx, _handle: handle }, place, remaining };
        }
        let _ = prefetch;
        Batches { source: Source::Inline { dataset, chunks: chunks.into_iter() }, place, remaining }
    }
}

impl<D: Dataset + 'static> Iterator for Batches<D> {
    type Item = Result<<D::Sample as Collate>::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        let host = match &mut self.source {
            Source::Inline { dataset, chunks } => stack(&**dataset, &chunks.next()?),
            #[cfg(not(target_arch = "wasm32"))]
            Source::Worker { rx, .. } => match rx.recv() {
                Ok(h) => h,
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
