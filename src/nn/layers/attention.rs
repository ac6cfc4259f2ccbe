//! `MultiHeadAttention` (`paddle.nn.MultiHeadAttention`): batch-first inputs
//! `[batch, seq, embed]`, four `Linear` projections named as Paddle names them
//! (`q_proj`, `k_proj`, `v_proj`, `out_proj`, weights `[in, out]`), and Paddle's masks.

use crate::nn::{BiasAttr, Forward, Linear, ParamAttr};
use crate::ops::nn::DropoutOptions;
use crate::{DType, Error, Result, Tensor};

/// Multi-head scaled dot-product attention.
#[derive(crate::nn::Layer)]
pub struct MultiHeadAttention {
    /// Query projection `[embed_dim, embed_dim]`.
    pub q_proj: Linear,
    /// Key projection `[kdim, embed_dim]`.
    pub k_proj: Linear,
    /// Value projection `[vdim, embed_dim]`.
    pub v_proj: Linear,
    /// Output projection `[embed_dim, embed_dim]`.
    pub out_proj: Linear,
    /// Model width.
    #[layer(skip)]
    pub embed_dim: usize,
    /// Number of heads (`embed_dim` must divide evenly).
    #[layer(skip)]
    pub num_heads: usize,
    /// Dropout on the attention weights in training.
    #[layer(skip)]
    pub dropout: f64,
    /// Whether `forward_with_weights` is the intended call (Paddle's `need_weights`).
    #[layer(skip)]
    pub need_weights: bool,
    #[layer(training)]
    training: bool,
}

impl MultiHeadAttention {
    /// `num_heads` heads over `embed_dim` features, keys and values of width `embed_dim`.
    pub fn new(embed_dim: usize, num_heads: usize, dropout: f64) -> Result<Self> {
        MultiHeadAttention::with_dims(embed_dim, num_heads, dropout, None, None, ParamAttr::default(), true)
    }

    /// Explicit key and value widths (`kdim`, `vdim`) and parameter attributes.
    pub fn with_dims(
        embed_dim: usize,
        num_heads: usize,
        dropout: f64,
        kdim: Option<usize>,
        vdim: Option<usize>,
        weight_attr: ParamAttr,
        bias_attr: impl Into<BiasAttr>,
    ) -> Result<Self> {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(Error::invalid(
                "MultiHeadAttention",
                format!("embed_dim {embed_dim} must be a positive multiple of num_heads {num_heads}"),
            ));
        }
        let bias: BiasAttr = bias_attr.into();
        let proj = |d_in: usize| Linear::with_attrs(d_in, embed_dim, weight_attr.clone(), bias.clone());
        Ok(MultiHeadAttention {
            q_proj: proj(embed_dim)?,
            k_proj: proj(kdim.unwrap_or(embed_dim))?,
            v_proj: proj(vdim.unwrap_or(embed_dim))?,
            out_proj: proj(embed_dim)?,
            embed_dim,
            num_heads,
            dropout,
            need_weights: false,
            training: true,
        })
    }

    /// Attention of `query` over `key`/`value` (each `[batch, seq, features]`). `attn_mask`
    /// broadcasts to `[batch, heads, q_len, k_len]`: bool or int marks the positions to keep
    /// (true / nonzero; Paddle's convention, the opposite of PyTorch's), a float mask is
    /// added to the scores (`-inf` removes a position).
    pub fn forward(&self, query: &Tensor, key: &Tensor, value: &Tensor, attn_mask: Option<&Tensor>) -> Result<Tensor> {
        Ok(self.forward_with_weights(query, key, value, attn_mask)?.0)
    }

    /// `forward`, also returning the attention weights `[batch, heads, q_len, k_len]`.
    pub fn forward_with_weights(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        for (what, t) in [("query", query), ("key", key), ("value", value)] {
            if t.ndim() != 3 {
                return Err(Error::shape(
                    "MultiHeadAttention",
                    format!("{what} must be [batch, seq, features], got {:?}", t.shape()),
                ));
            }
        }
        let (h, d) = (self.num_heads, self.embed_dim / self.num_heads);
        // [batch, seq, embed] → [batch, heads, seq, head_dim].
        let heads =
            |t: Tensor| -> Result<Tensor> { crate::reshape(&t, &[0, 0, h as i64, d as i64])?.transpose(&[0, 2, 1, 3]) };
        let q = heads(self.q_proj.forward(query)?)?;
        let k = heads(self.k_proj.forward(key)?)?;
        let v = heads(self.v_proj.forward(value)?)?;
        let mut scores = crate::matmul(&q.scale((d as f64).powf(-0.5), 0.0)?, &k, false, true)?;
        if let Some(m) = attn_mask {
            scores = scores.add(&additive_mask(m, scores.dtype())?)?;
        }
        let weights = crate::softmax(&scores, -1)?;
        let dropped = if self.dropout > 0.0 {
            crate::dropout(&weights, DropoutOptions { p: self.dropout, training: self.training, ..Default::default() })?
        } else {
            weights.clone()
        };
        let out = crate::matmul(&dropped, &v, false, false)?.transpose(&[0, 2, 1, 3])?;
        let out = crate::reshape(&out, &[0, 0, self.embed_dim as i64])?;
        Ok((self.out_proj.forward(&out)?, weights))
    }
}

/// A mask as what is added to the attention scores: bool/int keep-masks become 0 where kept
/// and -1e9 elsewhere (Paddle's conversion); float masks are added as they are.
pub(crate) fn additive_mask(mask: &Tensor, dtype: DType) -> Result<Tensor> {
    if mask.dtype().is_float() {
        return mask.cast(dtype);
    }
    let keep = if mask.dtype() == DType::Bool { mask.clone() } else { mask.not_equal_scalar(0)? };
    keep.cast(dtype)?.scale(1e9, -1e9)
}
