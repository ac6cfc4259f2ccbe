//! Losses (`paddle.nn.*Loss` and their functional forms), written in differentiable tensor
//! ops so they run, and backpropagate, on the inputs' place.

use crate::{DType, Error, Result, Tensor};

/// How per-element losses are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Keep one loss per element.
    None,
    /// Average (the default).
    #[default]
    Mean,
    /// Sum.
    Sum,
    /// Sum divided by the batch size, the first dimension (Paddle's `kl_div` `'batchmean'`).
    BatchMean,
}

pub(crate) fn reduce(loss: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Mean => loss.mean(&[], false),
        Reduction::Sum => loss.sum(&[], false),
        Reduction::BatchMean => {
            let batch = loss.shape().first().copied().unwrap_or(1).max(1);
            loss.sum(&[], false)?.scale(1.0 / batch as f64, 0.0)
        }
    }
}

pub(crate) fn same_shape(op: &'static str, input: &Tensor, label: &Tensor) -> Result<()> {
    if input.shape() != label.shape() {
        return Err(Error::shape(
            op,
            format!("input {:?} and label {:?} must have the same shape", input.shape(), label.shape()),
        ));
    }
    Ok(())
}

/// Mean squared error `(input − label)²` (`F.mse_loss`).
pub fn mse_loss(input: &Tensor, label: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("mse_loss", input, label)?;
    reduce(input.sub(label)?.square()?, reduction)
}

/// Absolute error `|input − label|` (`F.l1_loss`).
pub fn l1_loss(input: &Tensor, label: &Tensor, reduction: Reduction) -> Result<Tensor> {
    same_shape("l1_loss", input, label)?;
    reduce(input.sub(label)?.abs()?, reduction)
}

/// Huber loss (`F.smooth_l1_loss`): `0.5·d²` where `|d| < delta`, else
/// `delta·|d| − 0.5·delta²`.
pub fn smooth_l1_loss(input: &Tensor, label: &Tensor, reduction: Reduction, delta: f64) -> Result<Tensor> {
    same_shape("smooth_l1_loss", input, label)?;
    let d = input.sub(label)?;
    let a = d.abs()?;
    let quad = d.square()?.scale(0.5, 0.0)?;
    let lin = a.scale(delta, -0.5 * delta * delta)?;
    reduce(crate::where_(&a.less_than_scalar(delta)?, &quad, &lin)?, reduction)
}

/// Options of `cross_entropy` (Paddle's keyword arguments).
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions {
    /// Per-class weights `[C]`.
    pub weight: Option<Tensor>,
    /// Hard labels equal to this are ignored (not counted in the mean).
    pub ignore_index: i64,
    /// How per-sample losses combine.
    pub reduction: Reduction,
    /// Labels are distributions over classes (same shape as the input).
    pub soft_label: bool,
    /// The class axis.
    pub axis: isize,
    /// `input` holds logits (softmax applied here) rather than probabilities.
    pub use_softmax: bool,
    /// Mixes ε of the uniform distribution into the labels.
    pub label_smoothing: f64,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            soft_label: false,
            axis: -1,
            use_softmax: true,
            label_smoothing: 0.0,
        }
    }
}

/// Cross entropy (`F.cross_entropy`): hard int64 labels of shape `[N]` or `[N, 1]` (class
/// axis last), or soft labels; logits by default.
pub fn cross_entropy(input: &Tensor, label: &Tensor, options: &CrossEntropyOptions) -> Result<Tensor> {
    const OP: &str = "cross_entropy";
    input.expect_float(OP)?;
    let axis = input.shape_ref().axis(OP, options.axis)?;
    let plain = options.weight.is_none() && options.label_smoothing == 0.0 && !options.soft_label;
    if plain && label.dtype().is_int() {
        // The common cases as one op with a fused gradient (3 kernels, 2 without softmax,
        // where the composed form below takes 14): the same values, except 0 where the
        // composed ops made NaN from 0·∞ or 0/0 (as Paddle gives).
        let (idx, keep_last) = hard_index(OP, input, label, axis, true)?;
        let (per, valid) = crate::ops::nn::cross_entropy::cross_entropy_with_softmax(
            input,
            &idx,
            axis as isize,
            options.ignore_index,
            options.use_softmax,
        )?;
        let per = if keep_last { per } else { per.squeeze(&[axis as isize])? };
        return match options.reduction {
            Reduction::Mean => per.sum(&[], false)?.div(&valid.sum(&[], false)?),
            r => reduce(per, r),
        };
    }
    let logp = if options.use_softmax { crate::log_softmax(input, axis as isize)? } else { input.log()? };
    from_log_probs(OP, &logp, label, axis, options)
}

/// The cross entropy of log-probabilities `logp` (classes on `axis`) against `label`.
fn from_log_probs(
    op: &'static str,
    logp: &Tensor,
    label: &Tensor,
    axis: usize,
    options: &CrossEntropyOptions,
) -> Result<Tensor> {
    let input = logp;
    let classes = input.shape()[axis];
    let eps = options.label_smoothing;
    if !(0.0..=1.0).contains(&eps) {
        return Err(Error::invalid(op, format!("label_smoothing must be in [0, 1], got {eps}")));
    }
    let weights = options.weight.as_ref().map(|w| class_weights(op, w, input, axis)).transpose()?;
    if options.soft_label {
        if label.shape() != input.shape() {
            return Err(Error::shape(
                op,
                format!("soft labels {:?} must match the input {:?}", label.shape(), input.shape()),
            ));
        }
        let target = label.cast(input.dtype())?;
        let target = if eps > 0.0 { target.scale(1.0 - eps, eps / classes as f64)? } else { target };
        let loss = logp.mul(&target)?.sum(&[axis as isize], true)?.neg()?;
        let Some(w) = &weights else {
            return reduce(loss, options.reduction);
        };
        // As Paddle: each sample weighs Σ_c label_c·weight_c, and the mean divides by the
        // sum of those weights.
        let mut wshape = vec![1; input.ndim()];
        wshape[axis] = classes;
        let sample_w = target.mul(&w.reshape(wshape)?)?.sum(&[axis as isize], true)?;
        let loss = loss.mul(&sample_w)?;
        return match options.reduction {
            Reduction::Mean => loss.sum(&[], false)?.div(&sample_w.sum(&[], false)?),
            r => reduce(loss, r),
        };
    }
    // Hard labels, checked against the class range (take_along_axis errors on an index out
    // of range, on the GPU at the next readback). With smoothing ε the target is
    // (1 − ε)·onehot + ε/C, so the loss is (1 − ε)·(−logp[label]) + ε·mean_c(−logp), and a
    // sample weighs (1 − ε)·w[label] + ε·mean(w).
    let (idx, keep_last) = hard_index(op, input, label, axis, false)?;
    let valid = idx.not_equal_scalar(options.ignore_index)?;
    let safe = crate::where_(&valid, &idx, &idx.zeros_like()?)?;
    let mut per = crate::take_along_axis(logp, &safe, axis as isize)?.neg()?;
    if eps > 0.0 {
        let uniform = logp.mean(&[axis as isize], true)?.neg()?;
        per = per.scale(1.0 - eps, 0.0)?.add(&uniform.scale(eps, 0.0)?)?;
    }
    let mut mask = valid.cast(input.dtype())?;
    if let Some(w) = &weights {
        let mut wsel = crate::gather(w, &safe.flatten(0, -1)?, 0)?.reshape(safe.shape())?;
        if eps > 0.0 {
            wsel = wsel.scale(1.0 - eps, 0.0)?.add(&w.mean(&[], false)?.scale(eps, 0.0)?)?;
        }
        mask = mask.mul(&wsel)?;
    }
    let per = per.mul(&mask)?;
    let per = if keep_last { per } else { per.squeeze(&[axis as isize])? };
    match options.reduction {
        Reduction::Mean => per.sum(&[], false)?.div(&mask.sum(&[], false)?),
        r => reduce(per, r),
    }
}

/// The class weights as a `[C]` tensor of the input's dtype.
fn class_weights(op: &'static str, w: &Tensor, input: &Tensor, axis: usize) -> Result<Tensor> {
    let classes = input.shape()[axis];
    if w.shape() != [classes] {
        return Err(Error::shape(
            op,
            format!("weight {:?} must hold one value per class: [{classes}] for input {:?}", w.shape(), input.shape()),
        ));
    }
    w.cast(input.dtype())
}

/// Hard labels as an index tensor with a size-1 class axis at `axis` (int64, or int32 kept
/// with `keep_int`); also whether the caller passed that axis.
fn hard_index(op: &'static str, input: &Tensor, label: &Tensor, axis: usize, keep_int: bool) -> Result<(Tensor, bool)> {
    if label.dtype().is_float() {
        return Err(Error::unsupported(
            op,
            label.dtype(),
            "for hard labels (expected int64; use soft_label for probabilities)",
        ));
    }
    let as_index = || if keep_int && label.dtype().is_int() { Ok(label.clone()) } else { label.cast(DType::Int64) };
    let mut expect: Vec<usize> = input.shape().to_vec();
    expect[axis] = 1;
    if label.shape() == expect.as_slice() {
        return Ok((as_index()?, true));
    }
    let mut squeezed = input.shape().to_vec();
    squeezed.remove(axis);
    if label.shape() == squeezed.as_slice() {
        return Ok((as_index()?.unsqueeze(&[axis as isize])?, false));
    }
    Err(Error::shape(
        op,
        format!(
            "labels {:?} do not fit input {:?} (expected {squeezed:?} or {expect:?})",
            label.shape(),
            input.shape()
        ),
    ))
}

/// Negative log-likelihood of log-probabilities (`F.nll_loss`), classes on axis 1.
pub fn nll_loss(
    input: &Tensor,
    label: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    reduction: Reduction,
) -> Result<Tensor> {
    input.expect_float("nll_loss")?;
    let opts = CrossEntropyOptions { weight: weight.cloned(), ignore_index, reduction, ..Default::default() };
    let axis = if input.ndim() > 1 { 1 } else { 0 };
    from_log_probs("nll_loss", input, label, axis, &opts)
}

/// Binary cross entropy of probabilities (`F.binary_cross_entropy`); logs clamp at −100.
pub fn binary_cross_entropy(
    input: &Tensor,
    label: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    same_shape("binary_cross_entropy", input, label)?;
    let lp = input.log()?.maximum_scalar(-100.0)?;
    let lq = input.rsub_scalar(1.0)?.log()?.maximum_scalar(-100.0)?;
    let mut loss = label.mul(&lp)?.add(&label.rsub_scalar(1.0)?.mul(&lq)?)?.neg()?;
    if let Some(w) = weight {
        loss = loss.mul(w)?;
    }
    reduce(loss, reduction)
}

/// Binary cross entropy on logits, computed stably (`F.binary_cross_entropy_with_logits`).
pub fn binary_cross_entropy_with_logits(
    logit: &Tensor,
    label: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
    pos_weight: Option<&Tensor>,
) -> Result<Tensor> {
    same_shape("binary_cross_entropy_with_logits", logit, label)?;
    // log(1 + e^-|x|) + max(−x, 0) is −log σ(x) without overflow.
    let softplus_neg = logit.abs()?.neg()?.exp()?.log1p()?.add(&logit.neg()?.relu()?)?;
    let mut loss = match pos_weight {
        Some(pw) => {
            let coef = pw.scale(1.0, -1.0)?.mul(label)?.scale(1.0, 1.0)?;
            coef.mul(&softplus_neg)?.add(&label.rsub_scalar(1.0)?.mul(logit)?)?
        }
        None => label.rsub_scalar(1.0)?.mul(logit)?.add(&softplus_neg)?,
    };
    if let Some(w) = weight {
        loss = loss.mul(w)?;
    }
    reduce(loss, reduction)
}

macro_rules! loss_layer {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name {
            /// How per-element losses combine.
            pub reduction: Reduction,
        }

        impl $name {
            /// With the given reduction.
            pub fn new(reduction: Reduction) -> Self {
                $name { reduction }
            }
        }

        impl crate::nn::Layer for $name {}
    };
}

loss_layer!(
    /// `paddle.nn.MSELoss`.
    MSELoss
);
loss_layer!(
    /// `paddle.nn.L1Loss`.
    L1Loss
);

impl MSELoss {
    /// The loss of `input` against `label`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        mse_loss(input, label, self.reduction)
    }
}

impl L1Loss {
    /// The loss of `input` against `label`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        l1_loss(input, label, self.reduction)
    }
}

/// `paddle.nn.SmoothL1Loss`.
#[derive(Clone, Copy, Debug)]
pub struct SmoothL1Loss {
    /// How per-element losses combine.
    pub reduction: Reduction,
    /// Where the loss turns from quadratic to linear.
    pub delta: f64,
}

impl Default for SmoothL1Loss {
    fn default() -> Self {
        SmoothL1Loss { reduction: Reduction::Mean, delta: 1.0 }
    }
}

impl SmoothL1Loss {
    /// The loss of `input` against `label`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        smooth_l1_loss(input, label, self.reduction, self.delta)
    }
}

/// `paddle.nn.CrossEntropyLoss`.
#[derive(Clone, Debug, Default)]
pub struct CrossEntropyLoss {
    /// The options (`Default` is Paddle's).
    pub options: CrossEntropyOptions,
}

impl CrossEntropyLoss {
    /// With the given options.
    pub fn new(options: CrossEntropyOptions) -> Self {
        CrossEntropyLoss { options }
    }

    /// The loss of `input` against `label`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        cross_entropy(input, label, &self.options)
    }
}

/// `paddle.nn.NLLLoss`.
#[derive(Clone, Debug)]
pub struct NLLLoss {
    /// Per-class weights.
    pub weight: Option<Tensor>,
    /// Ignored label.
    pub ignore_index: i64,
    /// How per-sample losses combine.
    pub reduction: Reduction,
}

impl Default for NLLLoss {
    fn default() -> Self {
        NLLLoss { weight: None, ignore_index: -100, reduction: Reduction::Mean }
    }
}

impl NLLLoss {
    /// The loss of log-probabilities `input` against `label`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        nll_loss(input, label, self.weight.as_ref(), self.ignore_index, self.reduction)
    }
}

/// `paddle.nn.BCELoss`.
#[derive(Clone, Debug, Default)]
pub struct BCELoss {
    /// Per-element weights.
    pub weight: Option<Tensor>,
    /// How per-element losses combine.
    pub reduction: Reduction,
}

impl BCELoss {
    /// The loss of probabilities `input` against `label`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        binary_cross_entropy(input, label, self.weight.as_ref(), self.reduction)
    }
}

/// `paddle.nn.BCEWithLogitsLoss`.
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// Per-element weights.
    pub weight: Option<Tensor>,
    /// How per-element losses combine.
    pub reduction: Reduction,
    /// Weight of positive examples.
    pub pos_weight: Option<Tensor>,
}

impl BCEWithLogitsLoss {
    /// The loss of `logit` against `label`.
    pub fn forward(&self, logit: &Tensor, label: &Tensor) -> Result<Tensor> {
        binary_cross_entropy_with_logits(logit, label, self.weight.as_ref(), self.reduction, self.pos_weight.as_ref())
    }
}
