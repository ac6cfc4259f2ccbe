//! Stateful metrics (`paddle.metric.Accuracy`, `Precision`, `Recall`, `Auc`) that
//! `Model` updates batch by batch and accumulates over an epoch: `update` reads a batch's
//! predictions and labels (one readback), `accumulate` gives the values, `reset` clears.

use crate::{DType, Error, Result, Tensor};

/// A metric accumulated over batches.
pub trait Metric: Send {
    /// The names of the values `accumulate` returns (`"acc"`, `"acc_top5"`, ...).
    fn names(&self) -> Vec<String>;
    /// Adds one batch: `pred` the network's output, `label` the batch's labels.
    fn update(&mut self, pred: &Tensor, label: &Tensor) -> Result<()>;
    /// The values so far, one per name.
    fn accumulate(&self) -> Vec<f64>;
    /// Starts over.
    fn reset(&mut self);
}

/// Labels as a flat `Vec<i64>` of `n` entries (`[N]` or `[N, 1]`).
fn flat_labels(op: &'static str, label: &Tensor, n: usize) -> Result<Vec<i64>> {
    if label.numel() != n || !(label.dtype().is_int() || label.dtype() == DType::Bool || label.dtype().is_float()) {
        return Err(Error::shape(op, format!("labels {:?} do not fit {n} predictions", label.shape())));
    }
    label.cast(DType::Int64)?.to_vec::<i64>()
}

/// Top-k accuracy of class scores `[N, C]` (`paddle.metric.Accuracy(topk=(1,))`).
pub struct Accuracy {
    topk: Vec<usize>,
    correct: Vec<usize>,
    total: usize,
}

impl Accuracy {
    /// Top-1 accuracy.
    pub fn new() -> Self {
        Accuracy::topk(&[1])
    }

    /// Accuracy within each of the top `ks` classes.
    pub fn topk(ks: &[usize]) -> Self {
        Accuracy { topk: ks.to_vec(), correct: vec![0; ks.len()], total: 0 }
    }
}

impl Default for Accuracy {
    fn default() -> Self {
        Accuracy::new()
    }
}

impl Metric for Accuracy {
    fn names(&self) -> Vec<String> {
        self.topk.iter().map(|&k| if k == 1 { "acc".to_string() } else { format!("acc_top{k}") }).collect()
    }

    fn update(&mut self, pred: &Tensor, label: &Tensor) -> Result<()> {
        if pred.ndim() != 2 {
            return Err(Error::shape("Accuracy", format!("predictions must be [N, C], got {:?}", pred.shape())));
        }
        let (n, c) = (pred.shape()[0], pred.shape()[1]);
        let labels = flat_labels("Accuracy", label, n)?;
        let kmax = self.topk.iter().copied().max().unwrap_or(1).min(c);
        let (_, idx) = crate::topk(pred, kmax, 1, true)?;
        let idx = idx.to_vec::<i64>()?;
        for (slot, &k) in self.topk.iter().enumerate() {
            let k = k.min(kmax);
            self.correct[slot] += (0..n).filter(|&r| idx[r * kmax..r * kmax + k].contains(&labels[r])).count();
        }
        self.total += n;
        Ok(())
    }

    fn accumulate(&self) -> Vec<f64> {
        self.correct.iter().map(|&c| c as f64 / self.total.max(1) as f64).collect()
    }

    fn reset(&mut self) {
        self.correct.iter_mut().for_each(|c| *c = 0);
        self.total = 0;
    }
}

/// Positive predictions of a binary classifier: `pred` holds probabilities `[N]` or
/// `[N, 1]`, positive above 0.5.
fn binary_predictions(op: &'static str, pred: &Tensor, label: &Tensor) -> Result<(Vec<bool>, Vec<bool>)> {
    let n = pred.numel();
    if pred.ndim() > 2 || (pred.ndim() == 2 && pred.shape()[1] != 1) {
        return Err(Error::shape(
            op,
            format!("predictions must be [N] or [N, 1] probabilities, got {:?}", pred.shape()),
        ));
    }
    let p = pred.to_f64_vec()?;
    let l = flat_labels(op, label, n)?;
    Ok((p.iter().map(|&v| v > 0.5).collect(), l.iter().map(|&v| v != 0).collect()))
}

/// `true positives / predicted positives` (`paddle.metric.Precision`).
#[derive(Default)]
pub struct Precision {
    tp: usize,
    fp: usize,
}

impl Precision {
    /// An empty count.
    pub fn new() -> Self {
        Precision::default()
    }
}

impl Metric for Precision {
    fn names(&self) -> Vec<String> {
        vec!["precision".into()]
    }
    fn update(&mut self, pred: &Tensor, label: &Tensor) -> Result<()> {
        let (p, l) = binary_predictions("Precision", pred, label)?;
        for (p, l) in p.into_iter().zip(l) {
            self.tp += (p && l) as usize;
            self.fp += (p && !l) as usize;
        }
        Ok(())
    }
    fn accumulate(&self) -> Vec<f64> {
        let d = self.tp + self.fp;
        vec![if d == 0 { 0.0 } else { self.tp as f64 / d as f64 }]
    }
    fn reset(&mut self) {
        *self = Precision::default();
    }
}

/// `true positives / actual positives` (`paddle.metric.Recall`).
#[derive(Default)]
pub struct Recall {
    tp: usize,
    fn_: usize,
}

impl Recall {
    /// An empty count.
    pub fn new() -> Self {
        Recall::default()
    }
}

impl Metric for Recall {
    fn names(&self) -> Vec<String> {
        vec!["recall".into()]
    }
    fn update(&mut self, pred: &Tensor, label: &Tensor) -> Result<()> {
        let (p, l) = binary_predictions("Recall", pred, label)?;
        for (p, l) in p.into_iter().zip(l) {
            self.tp += (p && l) as usize;
            self.fn_ += (!p && l) as usize;
        }
        Ok(())
    }
    fn accumulate(&self) -> Vec<f64> {
        let d = self.tp + self.fn_;
        vec![if d == 0 { 0.0 } else { self.tp as f64 / d as f64 }]
    }
    fn reset(&mut self) {
        *self = Recall::default();
    }
}

/// Area under the ROC curve from bucketed scores (`paddle.metric.Auc(num_thresholds=4095)`):
/// `pred` is `[N, 2]` class probabilities (column 1 the positive class) or `[N]`/`[N, 1]`
/// positive probabilities.
pub struct Auc {
    num_thresholds: usize,
    pos: Vec<u64>,
    neg: Vec<u64>,
}

impl Auc {
    /// Paddle's default of 4095 thresholds.
    pub fn new() -> Self {
        Auc::with_thresholds(4095)
    }

    /// `num_thresholds` buckets of the score.
    pub fn with_thresholds(num_thresholds: usize) -> Self {
        let n = num_thresholds.max(1) + 1;
        Auc { num_thresholds: num_thresholds.max(1), pos: vec![0; n], neg: vec![0; n] }
    }
}

impl Default for Auc {
    fn default() -> Self {
        Auc::new()
    }
}

impl Metric for Auc {
    fn names(&self) -> Vec<String> {
        vec!["auc".into()]
    }

    fn update(&mut self, pred: &Tensor, label: &Tensor) -> Result<()> {
        let scores = match pred.shape() {
            [_, 2] => pred.slice(&[1], &[1], &[2])?,
            [_] | [_, 1] => pred.clone(),
            s => return Err(Error::shape("Auc", format!("predictions must be [N, 2], [N, 1] or [N], got {s:?}"))),
        };
        let p = scores.to_f64_vec()?;
        let l = flat_labels("Auc", label, p.len())?;
        for (s, l) in p.into_iter().zip(l) {
            let bucket = ((s.clamp(0.0, 1.0) * self.num_thresholds as f64) as usize).min(self.num_thresholds);
            if l != 0 {
                self.pos[bucket] += 1;
            } else {
                self.neg[bucket] += 1;
            }
        }
        Ok(())
    }

    fn accumulate(&self) -> Vec<f64> {
        // Walk the thresholds from the top, adding trapezoids of (FP, TP) steps.
        let (mut tp, mut fp, mut area) = (0u64, 0u64, 0.0f64);
        for b in (0..=self.num_thresholds).rev() {
            let (tp0, fp0) = (tp, fp);
            tp += self.pos[b];
            fp += self.neg[b];
            area += (fp - fp0) as f64 * (tp + tp0) as f64 / 2.0;
        }
        vec![if tp == 0 || fp == 0 { 0.0 } else { area / (tp as f64 * fp as f64) }]
    }

    fn reset(&mut self) {
        self.pos.iter_mut().for_each(|v| *v = 0);
        self.neg.iter_mut().for_each(|v| *v = 0);
    }
}
