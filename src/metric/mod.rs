//! `paddle.metric`: the top-k accuracy of a batch, as ops (so it works on either place and
//! inside a static program), and the stateful metrics `Model` accumulates over an epoch.

mod classes;

pub use classes::{Accuracy, Auc, Metric, Precision, Recall};

use crate::{DType, Error, Result, Tensor};

/// The fraction of rows of `input` (`[N, C]` scores) whose `label` (`[N]` or `[N, 1]`,
/// integer) is among the `k` highest scores, as a float32 tensor of shape `[1]`
/// (`paddle.metric.accuracy`).
pub fn accuracy(input: &Tensor, label: &Tensor, k: usize) -> Result<Tensor> {
    const OP: &str = "accuracy";
    if input.ndim() != 2 {
        return Err(Error::shape(OP, format!("input must be [N, C], got {:?}", input.shape())));
    }
    let n = input.shape()[0];
    let label = match label.shape() {
        [m] if *m == n => label.unsqueeze(&[1])?,
        [m, 1] if *m == n => label.clone(),
        s => return Err(Error::shape(OP, format!("label {s:?} does not fit input {:?}", input.shape()))),
    };
    if !label.dtype().is_int() {
        return Err(Error::unsupported(OP, label.dtype(), "for labels (expected int32 or int64)"));
    }
    let (_, idx) = crate::topk(input, k, 1, true)?;
    let hit = idx.equal(&label.cast(DType::Int64)?)?.cast(DType::Float32)?.sum(&[1], false)?;
    crate::reshape(&hit.mean(&[], false)?, &[1])
}
