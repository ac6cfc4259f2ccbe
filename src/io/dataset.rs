//! `Dataset` (`paddle.io.Dataset`) and how samples become batches (`Collate`).

use crate::{DType, Error, NdArray, Place, Result, Tensor};

/// A map-style dataset: `len()` samples, each fetched by index.
pub trait Dataset: Send + Sync {
    /// One sample (e.g. an image array and its label).
    type Sample: Collate + Send;

    /// Number of samples.
    fn len(&self) -> usize;

    /// True when there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `index` (`0..len()`).
    fn get(&self, index: usize) -> Result<Self::Sample>;
}

/// Stacks samples into a batch of tensors on a place.
pub trait Collate: Sized {
    /// The batch, usually a tuple of tensors.
    type Batch: Send;

    /// Host-side stacking, done on the loader's worker thread.
    type Host: Send;

    /// Stacks `samples` on the host.
    fn stack(samples: Vec<Self>) -> Result<Self::Host>;

    /// Moves a stacked batch to `place`.
    fn upload(host: Self::Host, place: Place) -> Result<Self::Batch>;
}

fn stack_arrays(samples: &[NdArray<f32>]) -> Result<NdArray<f32>> {
    let shape = samples.first().map(|s| s.shape.clone()).unwrap_or_default();
    let mut data = Vec::with_capacity(samples.len() * shape.iter().product::<usize>());
    for (i, s) in samples.iter().enumerate() {
        if s.shape != shape {
            return Err(Error::shape(
                "collate",
                format!("sample {i} has shape {:?} but sample 0 has {shape:?}", s.shape),
            ));
        }
        data.extend_from_slice(&s.data);
    }
    let mut full = vec![samples.len()];
    full.extend(shape);
    Ok(NdArray { data, shape: full })
}

/// (image, label) samples become an image batch `[B, ...]` (float32) and labels `[B, 1]`
/// (int64), as Paddle's MNIST reader gives them.
impl Collate for (NdArray<f32>, i64) {
    type Batch = (Tensor, Tensor);
    type Host = (NdArray<f32>, Vec<i64>);

    fn stack(samples: Vec<Self>) -> Result<Self::Host> {
        let (images, labels): (Vec<NdArray<f32>>, Vec<i64>) = samples.into_iter().unzip();
        Ok((stack_arrays(&images)?, labels))
    }

    fn upload((images, labels): Self::Host, place: Place) -> Result<Self::Batch> {
        let n = labels.len();
        let x = Tensor::from_vec_on(images.data, images.shape, place)?;
        let y = Tensor::from_vec_on(labels, [n, 1], place)?;
        debug_assert_eq!(y.dtype(), DType::Int64);
        Ok((x, y))
    }
}

/// Pairs of collatable samples (`ComposeDataset`) become pairs of batches.
impl<A: Collate + Send, B: Collate + Send> Collate for (A, B) {
    type Batch = (A::Batch, B::Batch);
    type Host = (A::Host, B::Host);

    fn stack(samples: Vec<Self>) -> Result<Self::Host> {
        let (a, b): (Vec<A>, Vec<B>) = samples.into_iter().unzip();
        Ok((A::stack(a)?, B::stack(b)?))
    }

    fn upload((a, b): Self::Host, place: Place) -> Result<Self::Batch> {
        Ok((A::upload(a, place)?, B::upload(b, place)?))
    }
}

/// Plain arrays become one stacked float32 tensor.
impl Collate for NdArray<f32> {
    type Batch = Tensor;
    type Host = NdArray<f32>;

    fn stack(samples: Vec<Self>) -> Result<Self::Host> {
        stack_arrays(&samples)
    }

    fn upload(host: Self::Host, place: Place) -> Result<Self::Batch> {
        Tensor::from_vec_on(host.data, host.shape, place)
    }
}
