//! Datasets built from other data (`paddle.io.TensorDataset`, `Subset`, `random_split`,
//! `ComposeDataset`).

use std::sync::Arc;

use super::dataset::Dataset;
use crate::{DType, Error, NdArray, Result, Tensor};

/// (input, label) samples read from two tensors (`paddle.io.TensorDataset`): row `i` of
/// `inputs` `[N, ...]` (float32) with label `i` of `labels` `[N]` or `[N, 1]` (integers).
/// The data is copied to the host once, when the dataset is made.
pub struct TensorDataset {
    inputs: Vec<f32>,
    sample_shape: Vec<usize>,
    labels: Vec<i64>,
}

impl TensorDataset {
    /// Pairs the rows of `inputs` with `labels`.
    pub fn new(inputs: &Tensor, labels: &Tensor) -> Result<Self> {
        let n = inputs.shape().first().copied().unwrap_or(0);
        if inputs.ndim() == 0 || labels.numel() != n || !labels.dtype().is_int() {
            return Err(Error::shape(
                "TensorDataset",
                format!(
                    "inputs {:?} need one integer label per row; labels {:?} {}",
                    inputs.shape(),
                    labels.shape(),
                    labels.dtype()
                ),
            ));
        }
        Ok(TensorDataset {
            inputs: inputs.cast(DType::Float32)?.to_vec::<f32>()?,
            sample_shape: inputs.shape()[1..].to_vec(),
            labels: labels.cast(DType::Int64)?.to_vec::<i64>()?,
        })
    }
}

impl Dataset for TensorDataset {
    type Sample = (NdArray<f32>, i64);

    fn len(&self) -> usize {
        self.labels.len()
    }

    fn get(&self, index: usize) -> Result<Self::Sample> {
        let size: usize = self.sample_shape.iter().product();
        let label = *self.labels.get(index).ok_or_else(|| {
            Error::invalid("TensorDataset", format!("index {index} out of range for {} samples", self.labels.len()))
        })?;
        let data = self.inputs[index * size..(index + 1) * size].to_vec();
        Ok((NdArray { data, shape: self.sample_shape.clone() }, label))
    }
}

/// The samples of `dataset` at `indices`, in that order (`paddle.io.Subset`).
pub struct Subset<D: Dataset> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// A view of `dataset` at `indices` (each checked against its length).
    pub fn new(dataset: Arc<D>, indices: Vec<usize>) -> Result<Self> {
        if let Some(&i) = indices.iter().find(|&&i| i >= dataset.len()) {
            return Err(Error::invalid("Subset", format!("index {i} out of range for {} samples", dataset.len())));
        }
        Ok(Subset { dataset, indices })
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    type Sample = D::Sample;

    fn len(&self) -> usize {
        self.indices.len()
    }

    fn get(&self, index: usize) -> Result<Self::Sample> {
        let i = *self.indices.get(index).ok_or_else(|| {
            Error::invalid("Subset", format!("index {index} out of range for {} samples", self.indices.len()))
        })?;
        self.dataset.get(i)
    }
}

/// Splits `dataset` into random, disjoint subsets of the given `lengths` (summing to its
/// length), drawn with the global generator (`paddle.io.random_split`).
pub fn random_split<D: Dataset>(dataset: D, lengths: &[usize]) -> Result<Vec<Subset<D>>> {
    let n = dataset.len();
    if lengths.iter().sum::<usize>() != n {
        return Err(Error::invalid("random_split", format!("lengths {lengths:?} do not sum to the {n} samples")));
    }
    let order = crate::random::permutation(n);
    let dataset = Arc::new(dataset);
    let mut start = 0;
    lengths
        .iter()
        .map(|&len| {
            let s = Subset::new(dataset.clone(), order[start..start + len].to_vec());
            start += len;
            s
        })
        .collect()
}

/// Two datasets of equal length side by side (`paddle.io.ComposeDataset`): sample `i` is
/// `(a[i], b[i])`, and a batch is the pair of the two batches. Nest it for more fields.
pub struct ComposeDataset<A: Dataset, B: Dataset> {
    a: A,
    b: B,
}

impl<A: Dataset, B: Dataset> ComposeDataset<A, B> {
    /// Pairs `a` and `b`, which must have the same length.
    pub fn new(a: A, b: B) -> Result<Self> {
        if a.len() != b.len() {
            return Err(Error::invalid(
                "ComposeDataset",
                format!("the datasets have {} and {} samples; they must be equal", a.len(), b.len()),
            ));
        }
        Ok(ComposeDataset { a, b })
    }
}

impl<A: Dataset, B: Dataset> Dataset for ComposeDataset<A, B> {
    type Sample = (A::Sample, B::Sample);

    fn len(&self) -> usize {
        self.a.len()
    }

    fn get(&self, index: usize) -> Result<Self::Sample> {
        Ok((self.a.get(index)?, self.b.get(index)?))
    }
}
