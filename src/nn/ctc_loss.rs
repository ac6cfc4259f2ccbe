//! The connectionist temporal classification loss (`paddle.nn.functional.ctc_loss`,
//! `paddle.nn.CTCLoss`): the forward algorithm over the blank-extended labels, in log space,
//! written in tensor ops (one step of a few ops per time step), so its gradient comes from
//! autograd and it runs on both places.

use crate::nn::loss::Reduction;
use crate::{DType, Error, Result, Tensor};

/// Stands for log 0: finite, so gradients through unreachable states stay 0, not NaN.
const LOG_ZERO: f64 = -1e30;

/// The CTC loss of `logits` `[T, N, C]` (unnormalised: a log-softmax over the classes is
/// applied, as Paddle's warp-ctc does) against `labels` `[N, S]` (padded), with each sample's
/// `input_lengths` and `label_lengths`. `Mean` divides each loss by its label length, then
/// averages (Paddle's rule); `Sum` adds; `None` keeps `[N]`. Labels and lengths are read
/// back (eager only).
pub fn ctc_loss(
    logits: &Tensor,
    labels: &Tensor,
    input_lengths: &Tensor,
    label_lengths: &Tensor,
    blank: usize,
    reduction: Reduction,
) -> Result<Tensor> {
    const OP: &str = "ctc_loss";
    if logits.ndim() != 3 || labels.ndim() != 2 {
        return Err(Error::shape(
            OP,
            format!("logits must be [T, N, C] and labels [N, S], got {:?} and {:?}", logits.shape(), labels.shape()),
        ));
    }
    let (t_max, n, c) = (logits.shape()[0], logits.shape()[1], logits.shape()[2]);
    let s_max = labels.shape()[1];
    if labels.shape()[0] != n || input_lengths.numel() != n || label_lengths.numel() != n || blank >= c {
        return Err(Error::shape(
            OP,
            format!("labels {:?}, lengths and blank {blank} do not fit logits {:?}", labels.shape(), logits.shape()),
        ));
    }
    let lab = labels.cast(DType::Int64)?.to_vec::<i64>()?;
    let in_len = input_lengths.cast(DType::Int64)?.to_vec::<i64>()?;
    let lab_len = label_lengths.cast(DType::Int64)?.to_vec::<i64>()?;
    for b in 0..n {
        let (tl, ll) = (in_len[b], lab_len[b]);
        if tl < 1 || tl as usize > t_max || ll < 0 || ll as usize > s_max {
            return Err(Error::invalid(
                OP,
                format!("sample {b}: input length {tl} (max {t_max}), label length {ll} (max {s_max})"),
            ));
        }
        if let Some(&bad) =
            lab[b * s_max..b * s_max + ll as usize].iter().find(|&&v| v < 0 || v as usize >= c || v as usize == blank)
        {
            return Err(Error::invalid(OP, format!("sample {b}: label {bad} is the blank or outside the {c} classes")));
        }
    }
    // The blank-extended labels (blank, l1, blank, l2, …, blank), the transitions that may
    // skip a blank, and each sample's two final states.
    let l = 2 * s_max + 1;
    let mut ext = vec![blank as i64; n * l];
    let mut skip = vec![LOG_ZERO; n * l];
    let mut finals = vec![0i64; n * 2];
    for b in 0..n {
        for s in 0..lab_len[b] as usize {
            ext[b * l + 2 * s + 1] = lab[b * s_max + s];
            if s > 0 && lab[b * s_max + s] != lab[b * s_max + s - 1] {
                skip[b * l + 2 * s + 1] = 0.0;
            }
        }
        let last = 2 * lab_len[b] as usize;
        finals[b * 2] = last as i64;
        finals[b * 2 + 1] = last.saturating_sub(1) as i64;
    }
    let place = logits.place();
    let dtype = logits.dtype();
    // Host constants in the logits' dtype (built as float32 where float64 cannot live).
    let host = |v: Vec<f64>, shape: &[usize]| -> Result<Tensor> {
        if dtype == DType::Float64 {
            Tensor::from_vec_on(v, shape, place)
        } else {
            Tensor::from_vec_on(v.into_iter().map(|x| x as f32).collect::<Vec<_>>(), shape, place)?.cast(dtype)
        }
    };
    let ext = Tensor::from_vec_on(ext, [n, l], place)?;
    let skip = host(skip, &[n, l])?;
    let log_probs = crate::log_softmax(logits, -1)?;
    let emit = |t: usize| -> Result<Tensor> {
        crate::take_along_axis(&log_probs.slice(&[0], &[t as i64], &[t as i64 + 1])?.squeeze(&[0])?, &ext, 1)
    };
    // alpha_0: the first blank and the first label.
    let start: Vec<f64> = (0..n * l).map(|k| if k % l < 2 { 0.0 } else { LOG_ZERO }).collect();
    let mut alpha = emit(0)?.add(&host(start, &[n, l])?)?;
    let pad1 = host(vec![LOG_ZERO; n], &[n, 1])?;
    let pad2 = host(vec![LOG_ZERO; 2 * n], &[n, 2])?;
    for t in 1..t_max {
        let prev1 = crate::concat(&[pad1.clone(), alpha.slice(&[1], &[0], &[l as i64 - 1])?], 1)?;
        let prev2 = crate::concat(&[pad2.clone(), alpha.slice(&[1], &[0], &[l as i64 - 2])?], 1)?.add(&skip)?;
        let step = crate::logsumexp(&crate::stack(&[alpha.clone(), prev1, prev2], 0)?, &[0], false)?.add(&emit(t)?)?;
        // Samples whose input ended keep their last alpha.
        let running: Vec<bool> = in_len.iter().map(|&len| (t as i64) < len).collect();
        let running = Tensor::from_vec_on(running, [n, 1], place)?;
        alpha = crate::where_(&running, &step, &alpha)?;
    }
    let ends = crate::take_along_axis(&alpha, &Tensor::from_vec_on(finals, [n, 2], place)?, 1)?;
    // A label of length 0 has one final state (the all-blank path): count it once.
    let single: Vec<f64> = lab_len.iter().flat_map(|&ll| [0.0, if ll == 0 { LOG_ZERO } else { 0.0 }]).collect();
    let loss = crate::logsumexp(&ends.add(&host(single, &[n, 2])?)?, &[1], false)?.neg()?;
    match reduction {
        Reduction::Mean => {
            let lens = host(lab_len.iter().map(|&v| v.max(1) as f64).collect(), &[n])?;
            loss.divide(&lens)?.mean(&[], false)
        }
        other => crate::nn::loss::reduce(loss, other),
    }
}

/// `paddle.nn.CTCLoss(blank=0, reduction='mean')`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CTCLoss {
    /// The blank class.
    pub blank: usize,
    /// How per-sample losses combine.
    pub reduction: Reduction,
}

impl crate::nn::Layer for CTCLoss {}

impl CTCLoss {
    /// The loss of `logits` `[T, N, C]` against padded `labels` `[N, S]`.
    pub fn forward(
        &self,
        logits: &Tensor,
        labels: &Tensor,
        input_lengths: &Tensor,
        label_lengths: &Tensor,
    ) -> Result<Tensor> {
        ctc_loss(logits, labels, input_lengths, label_lengths, self.blank, self.reduction)
    }
}
