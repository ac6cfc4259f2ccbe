//! Losses over pairs and triplets of inputs and over distributions (`paddle.nn`'s
//! `MarginRankingLoss`, `HingeEmbeddingLoss`, `CosineEmbeddingLoss`, `TripletMarginLoss`,
//! `KLDivLoss`, `MultiLabelSoftMarginLoss` and their functional forms), in tensor ops.

use crate::nn::loss::{Reduction, reduce, same_shape};
use crate::{NormKind, Result, Tensor};

/// `max(0, −label·(input − other) + margin)` (`F.margin_ranking_loss`): `label` is 1 where
/// `input` should rank higher, −1 where `other` should.
pub fn margin_ranking_loss(
    input: &Tensor,
    other: &Tensor,
    label: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    let d = input.subtract(other)?;
    reduce(label.neg()?.mul(&d)?.add_scalar(margin)?.relu()?, reduction)
}

/// `input` where `label` is 1 and `max(0, margin − input)` where it is −1
/// (`F.hinge_embedding_loss`; other labels contribute 0).
pub fn hinge_embedding_loss(input: &Tensor, label: &Tensor, margin: f64, reduction: Reduction) -> Result<Tensor> {
    same_shape("hinge_embedding_loss", input, label)?;
    let zero = input.zeros_like()?;
    let pos = crate::where_(&label.equal_scalar(1)?, input, &zero)?;
    let neg = crate::where_(&label.equal_scalar(-1)?, &input.scale(-1.0, margin)?.relu()?, &zero)?;
    reduce(pos.add(&neg)?, reduction)
}

/// `1 − cos(x1, x2)` where `label` is 1 and `max(0, cos(x1, x2) − margin)` where it is −1
/// (`F.cosine_embedding_loss`), the cosine over the last axis of `[N, D]` (or `[D]`) inputs.
pub fn cosine_embedding_loss(
    input1: &Tensor,
    input2: &Tensor,
    label: &Tensor,
    margin: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    same_shape("cosine_embedding_loss", input1, input2)?;
    let dot = input1.mul(input2)?.sum(&[-1], false)?;
    let norms = input1.square()?.sum(&[-1], false)?.mul(&input2.square()?.sum(&[-1], false)?)?.sqrt()?;
    let cos = dot.divide(&norms)?;
    let zero = cos.zeros_like()?;
    let pos = crate::where_(&label.equal_scalar(1)?, &cos.scale(-1.0, 1.0)?, &zero)?;
    let neg = crate::where_(&label.equal_scalar(-1)?, &cos.add_scalar(-margin)?.relu()?, &zero)?;
    reduce(pos.add(&neg)?, reduction)
}

/// Options of `triplet_margin_loss` (Paddle's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct TripletOptions {
    /// Required gap between the negative and the positive distance (1.0).
    pub margin: f64,
    /// The norm's order (2.0).
    pub p: f64,
    /// Added to the differences before the norm (1e-6).
    pub epsilon: f64,
    /// Use the positive–negative distance when it is smaller (false).
    pub swap: bool,
    /// How per-sample losses combine.
    pub reduction: Reduction,
}

impl Default for TripletOptions {
    fn default() -> Self {
        TripletOptions { margin: 1.0, p: 2.0, epsilon: 1e-6, swap: false, reduction: Reduction::Mean }
    }
}

/// `max(d(a, p) − d(a, n) + margin, 0)` with `d(x, y) = ‖x − y + ε‖_p` over the last axis
/// (`F.triplet_margin_loss`).
pub fn triplet_margin_loss(input: &Tensor, positive: &Tensor, negative: &Tensor, o: &TripletOptions) -> Result<Tensor> {
    let dist = |a: &Tensor, b: &Tensor| a.subtract(b)?.add_scalar(o.epsilon)?.norm(NormKind::P(o.p), &[-1], false);
    let d_pos = dist(input, positive)?;
    let mut d_neg = dist(input, negative)?;
    if o.swap {
        d_neg = d_neg.minimum(&dist(positive, negative)?)?;
    }
    reduce(d_pos.subtract(&d_neg)?.add_scalar(o.margin)?.relu()?, o.reduction)
}

/// Kullback–Leibler divergence of `label` from the log-probabilities `input`
/// (`F.kl_div`): `label·(log label − input)`, 0 where `label` is 0; with `log_target`,
/// `label` holds log-probabilities and the loss is `e^label·(label − input)`.
pub fn kl_div(input: &Tensor, label: &Tensor, reduction: Reduction, log_target: bool) -> Result<Tensor> {
    same_shape("kl_div", input, label)?;
    let loss = if log_target {
        label.exp()?.mul(&label.subtract(input)?)?
    } else {
        // log of 1 where the label is 0, so neither value nor gradient meets log 0.
        let positive = label.greater_than_scalar(0)?;
        let safe = crate::where_(&positive, label, &crate::ones_like(label)?)?;
        let terms = label.mul(&safe.log()?.subtract(input)?)?;
        crate::where_(&positive, &terms, &terms.zeros_like()?)?
    };
    reduce(loss, reduction)
}

/// `−mean_c(label·log σ(x) + (1 − label)·log σ(−x))` per sample over the last axis of
/// `[N, C]` logits (`F.multi_label_soft_margin_loss`), with optional per-class `weight`.
pub fn multi_label_soft_margin_loss(
    input: &Tensor,
    label: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    same_shape("multi_label_soft_margin_loss", input, label)?;
    // log σ(x) = −softplus(−x), stable for large |x|.
    let log_sig = input.neg()?.softplus(1.0, 20.0)?.neg()?;
    let log_sig_neg = input.softplus(1.0, 20.0)?.neg()?;
    let mut loss = label.mul(&log_sig)?.add(&label.scale(-1.0, 1.0)?.mul(&log_sig_neg)?)?.neg()?;
    if let Some(w) = weight {
        loss = loss.mul(w)?;
    }
    reduce(loss.mean(&[-1], false)?, reduction)
}

/// A loss layer: its settings as public fields, `forward` calls the functional form.
macro_rules! pair_loss_layer {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty = $default:expr),* }) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
            /// How per-sample losses combine.
            pub reduction: Reduction,
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* reduction: Reduction::Mean }
            }
        }

        impl crate::nn::Layer for $name {}
    };
}

pair_loss_layer!(
    /// `paddle.nn.MarginRankingLoss(margin=0)`.
    MarginRankingLoss { /// The required margin.
    margin: f64 = 0.0 }
);
pair_loss_layer!(
    /// `paddle.nn.HingeEmbeddingLoss(margin=1)`.
    HingeEmbeddingLoss { /// The margin for label −1.
    margin: f64 = 1.0 }
);
pair_loss_layer!(
    /// `paddle.nn.CosineEmbeddingLoss(margin=0)`.
    CosineEmbeddingLoss { /// The margin for label −1.
    margin: f64 = 0.0 }
);
pair_loss_layer!(
    /// `paddle.nn.KLDivLoss(reduction='mean', log_target=False)`.
    KLDivLoss { /// The label holds log-probabilities.
    log_target: bool = false }
);
pair_loss_layer!(
    /// `paddle.nn.MultiLabelSoftMarginLoss(weight=None)`.
    MultiLabelSoftMarginLoss { /// Per-class weights.
    weight: Option<Tensor> = None }
);

impl MarginRankingLoss {
    /// The loss of `input` ranked against `other`.
    pub fn forward(&self, input: &Tensor, other: &Tensor, label: &Tensor) -> Result<Tensor> {
        margin_ranking_loss(input, other, label, self.margin, self.reduction)
    }
}

impl HingeEmbeddingLoss {
    /// The loss of `input` against ±1 labels.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        hinge_embedding_loss(input, label, self.margin, self.reduction)
    }
}

impl CosineEmbeddingLoss {
    /// The loss of the pair against ±1 labels.
    pub fn forward(&self, input1: &Tensor, input2: &Tensor, label: &Tensor) -> Result<Tensor> {
        cosine_embedding_loss(input1, input2, label, self.margin, self.reduction)
    }
}

impl KLDivLoss {
    /// The divergence of `label` from `input`.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        kl_div(input, label, self.reduction, self.log_target)
    }
}

impl MultiLabelSoftMarginLoss {
    /// The loss of the logits against 0/1 labels.
    pub fn forward(&self, input: &Tensor, label: &Tensor) -> Result<Tensor> {
        multi_label_soft_margin_loss(input, label, self.weight.as_ref(), self.reduction)
    }
}

/// `paddle.nn.TripletMarginLoss`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TripletMarginLoss {
    /// Margin, norm, epsilon, swap and reduction.
    pub options: TripletOptions,
}

impl crate::nn::Layer for TripletMarginLoss {}

impl TripletMarginLoss {
    /// The loss of anchors `input` against their positives and negatives.
    pub fn forward(&self, input: &Tensor, positive: &Tensor, negative: &Tensor) -> Result<Tensor> {
        triplet_margin_loss(input, positive, negative, &self.options)
    }
}
