//! Transformer layers (`paddle.nn.TransformerEncoderLayer`, `TransformerEncoder`,
//! `TransformerDecoderLayer`, `TransformerDecoder`, `Transformer`), batch-first, with
//! Paddle's sublayer names (`self_attn`, `linear1`, `norm1`, `dropout1`, ...) and its
//! post-norm default (`normalize_before = false`).

use crate::nn::{Dropout, Forward, LayerNorm, Linear, MultiHeadAttention};
use crate::{Error, Result, Tensor};

/// The feed-forward activation of a transformer layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformerActivation {
    /// `max(x, 0)` (Paddle's default).
    Relu,
    /// GELU with the exact erf.
    Gelu,
}

/// The hyper-parameters of one encoder or decoder layer (what Paddle's `_config` keeps, so
/// that `TransformerEncoder` can build its other layers alike).
#[derive(Clone, Debug)]
pub struct TransformerConfig {
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub nhead: usize,
    /// Width of the feed-forward hidden layer.
    pub dim_feedforward: usize,
    /// Dropout after attention and feed-forward blocks.
    pub dropout: f64,
    /// The feed-forward activation.
    pub activation: TransformerActivation,
    /// Dropout on the attention weights (defaults to `dropout`).
    pub attn_dropout: Option<f64>,
    /// Dropout after the activation (defaults to `dropout`).
    pub act_dropout: Option<f64>,
    /// Layer norm before each block (pre-norm) instead of after (Paddle's default).
    pub normalize_before: bool,
}

impl TransformerConfig {
    /// Paddle's defaults: dropout 0.1, relu, post-norm.
    pub fn new(d_model: usize, nhead: usize, dim_feedforward: usize) -> Self {
        TransformerConfig {
            d_model,
            nhead,
            dim_feedforward,
            dropout: 0.1,
            activation: TransformerActivation::Relu,
            attn_dropout: None,
            act_dropout: None,
            normalize_before: false,
        }
    }

    /// With this dropout.
    pub fn dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }

    /// With this activation.
    pub fn activation(mut self, a: TransformerActivation) -> Self {
        self.activation = a;
        self
    }

    /// Pre-norm (`true`) or post-norm.
    pub fn normalize_before(mut self, on: bool) -> Self {
        self.normalize_before = on;
        self
    }

    fn activate(&self, x: &Tensor) -> Result<Tensor> {
        match self.activation {
            TransformerActivation::Relu => x.relu(),
            TransformerActivation::Gelu => x.gelu_erf(),
        }
    }
}

/// The feed-forward block's layers.
fn feed_forward(c: &TransformerConfig) -> Result<(Linear, Dropout, Linear)> {
    Ok((
        Linear::new(c.d_model, c.dim_feedforward)?,
        Dropout::new(c.act_dropout.unwrap_or(c.dropout)),
        Linear::new(c.dim_feedforward, c.d_model)?,
    ))
}

/// `residual + dropout(block(norm?(x)))`, normalised before or after as configured.
fn sublayer(
    c: &TransformerConfig,
    x: &Tensor,
    norm: &LayerNorm,
    dropout: &Dropout,
    block: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let input = if c.normalize_before { norm.forward(x)? } else { x.clone() };
    let y = x.add(&dropout.forward(&block(&input)?)?)?;
    if c.normalize_before { Ok(y) } else { norm.forward(&y) }
}

/// `first`, then `n − 1` layers built afresh from `config` (Paddle copies a layer's
/// configuration into the others, not its weights).
fn stack<L>(
    name: &'static str,
    first: L,
    n: usize,
    config: TransformerConfig,
    make: fn(TransformerConfig) -> Result<L>,
) -> Result<Vec<L>> {
    if n == 0 {
        return Err(Error::invalid(name, "num_layers must be at least 1"));
    }
    let mut layers = vec![first];
    for _ in 1..n {
        layers.push(make(config.clone())?);
    }
    Ok(layers)
}

/// `x` through the optional final norm of a stack.
fn final_norm(norm: &Option<LayerNorm>, x: Tensor) -> Result<Tensor> {
    match norm {
        Some(n) => n.forward(&x),
        None => Ok(x),
    }
}

/// Self-attention then a feed-forward block, each with a residual connection and a layer
/// norm.
#[derive(crate::nn::Layer)]
pub struct TransformerEncoderLayer {
    /// The self-attention.
    pub self_attn: MultiHeadAttention,
    /// `d_model → dim_feedforward`.
    pub linear1: Linear,
    /// Dropout after the activation.
    pub dropout: Dropout,
    /// `dim_feedforward → d_model`.
    pub linear2: Linear,
    /// The attention block's norm.
    pub norm1: LayerNorm,
    /// The feed-forward block's norm.
    pub norm2: LayerNorm,
    /// Dropout on the attention block's output.
    pub dropout1: Dropout,
    /// Dropout on the feed-forward block's output.
    pub dropout2: Dropout,
    /// The hyper-parameters.
    #[layer(skip)]
    pub config: TransformerConfig,
}

impl TransformerEncoderLayer {
    /// A layer with Paddle's defaults (dropout 0.1, relu, post-norm).
    pub fn new(d_model: usize, nhead: usize, dim_feedforward: usize) -> Result<Self> {
        TransformerEncoderLayer::with_config(TransformerConfig::new(d_model, nhead, dim_feedforward))
    }

    /// A layer with explicit hyper-parameters.
    pub fn with_config(c: TransformerConfig) -> Result<Self> {
        let (linear1, dropout, linear2) = feed_forward(&c)?;
        Ok(TransformerEncoderLayer {
            self_attn: MultiHeadAttention::new(c.d_model, c.nhead, c.attn_dropout.unwrap_or(c.dropout))?,
            linear1,
            dropout,
            linear2,
            norm1: LayerNorm::new(&[c.d_model])?,
            norm2: LayerNorm::new(&[c.d_model])?,
            dropout1: Dropout::new(c.dropout),
            dropout2: Dropout::new(c.dropout),
            config: c,
        })
    }

    /// Runs the layer on `src` `[batch, seq, d_model]`; `src_mask` as in
    /// [`MultiHeadAttention::forward`].
    pub fn forward_masked(&self, src: &Tensor, src_mask: Option<&Tensor>) -> Result<Tensor> {
        let c = &self.config;
        let x = sublayer(c, src, &self.norm1, &self.dropout1, |x| self.self_attn.forward(x, x, x, src_mask))?;
        sublayer(c, &x, &self.norm2, &self.dropout2, |x| {
            self.linear2.forward(&self.dropout.forward(&c.activate(&self.linear1.forward(x)?)?)?)
        })
    }
}

impl Forward for TransformerEncoderLayer {
    fn forward(&self, src: &Tensor) -> Result<Tensor> {
        self.forward_masked(src, None)
    }
}

/// `num_layers` encoder layers in sequence (fresh parameters each, configured like the
/// given layer), then an optional final norm (Paddle's `TransformerEncoder`).
#[derive(crate::nn::Layer)]
pub struct TransformerEncoder {
    /// The layers, named "0", "1", ...
    pub layers: Vec<TransformerEncoderLayer>,
    /// The final norm (pre-norm models use one).
    pub norm: Option<LayerNorm>,
}

impl TransformerEncoder {
    /// `encoder_layer` first, then `num_layers − 1` new layers with its configuration.
    pub fn new(encoder_layer: TransformerEncoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<Self> {
        let config = encoder_layer.config.clone();
        let layers =
            stack("TransformerEncoder", encoder_layer, num_layers, config, TransformerEncoderLayer::with_config)?;
        Ok(TransformerEncoder { layers, norm })
    }

    /// Runs every layer on `src` with the same `src_mask`.
    pub fn forward_masked(&self, src: &Tensor, src_mask: Option<&Tensor>) -> Result<Tensor> {
        let mut x = src.clone();
        for l in &self.layers {
            x = l.forward_masked(&x, src_mask)?;
        }
        final_norm(&self.norm, x)
    }
}

impl Forward for TransformerEncoder {
    fn forward(&self, src: &Tensor) -> Result<Tensor> {
        self.forward_masked(src, None)
    }
}

/// Self-attention, attention over the encoder's output (`memory`), then a feed-forward
/// block, each with a residual connection and a layer norm.
#[derive(crate::nn::Layer)]
pub struct TransformerDecoderLayer {
    /// The self-attention.
    pub self_attn: MultiHeadAttention,
    /// The attention over `memory`.
    pub cross_attn: MultiHeadAttention,
    /// `d_model → dim_feedforward`.
    pub linear1: Linear,
    /// Dropout after the activation.
    pub dropout: Dropout,
    /// `dim_feedforward → d_model`.
    pub linear2: Linear,
    /// Norms of the three blocks.
    pub norm1: LayerNorm,
    /// The cross-attention block's norm.
    pub norm2: LayerNorm,
    /// The feed-forward block's norm.
    pub norm3: LayerNorm,
    /// Dropouts on the three blocks' outputs.
    pub dropout1: Dropout,
    /// The cross-attention block's dropout.
    pub dropout2: Dropout,
    /// The feed-forward block's dropout.
    pub dropout3: Dropout,
    /// The hyper-parameters.
    #[layer(skip)]
    pub config: TransformerConfig,
}

impl TransformerDecoderLayer {
    /// A layer with Paddle's defaults.
    pub fn new(d_model: usize, nhead: usize, dim_feedforward: usize) -> Result<Self> {
        TransformerDecoderLayer::with_config(TransformerConfig::new(d_model, nhead, dim_feedforward))
    }

    /// A layer with explicit hyper-parameters.
    pub fn with_config(c: TransformerConfig) -> Result<Self> {
        let (linear1, dropout, linear2) = feed_forward(&c)?;
        let attn = || MultiHeadAttention::new(c.d_model, c.nhead, c.attn_dropout.unwrap_or(c.dropout));
        Ok(TransformerDecoderLayer {
            self_attn: attn()?,
            cross_attn: attn()?,
            linear1,
            dropout,
            linear2,
            norm1: LayerNorm::new(&[c.d_model])?,
            norm2: LayerNorm::new(&[c.d_model])?,
            norm3: LayerNorm::new(&[c.d_model])?,
            dropout1: Dropout::new(c.dropout),
            dropout2: Dropout::new(c.dropout),
            dropout3: Dropout::new(c.dropout),
            config: c,
        })
    }

    /// Runs the layer on `tgt` `[batch, tgt_len, d_model]` attending to `memory`
    /// `[batch, src_len, d_model]`.
    pub fn forward(
        &self,
        tgt: &Tensor,
        memory: &Tensor,
        tgt_mask: Option<&Tensor>,
        memory_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let c = &self.config;
        let x = sublayer(c, tgt, &self.norm1, &self.dropout1, |x| self.self_attn.forward(x, x, x, tgt_mask))?;
        let x =
            sublayer(c, &x, &self.norm2, &self.dropout2, |x| self.cross_attn.forward(x, memory, memory, memory_mask))?;
        sublayer(c, &x, &self.norm3, &self.dropout3, |x| {
            self.linear2.forward(&self.dropout.forward(&c.activate(&self.linear1.forward(x)?)?)?)
        })
    }
}

/// `num_layers` decoder layers in sequence, then an optional final norm.
#[derive(crate::nn::Layer)]
pub struct TransformerDecoder {
    /// The layers, named "0", "1", ...
    pub layers: Vec<TransformerDecoderLayer>,
    /// The final norm.
    pub norm: Option<LayerNorm>,
}

impl TransformerDecoder {
    /// `decoder_layer` first, then `num_layers − 1` new layers with its configuration.
    pub fn new(decoder_layer: TransformerDecoderLayer, num_layers: usize, norm: Option<LayerNorm>) -> Result<Self> {
        let config = decoder_layer.config.clone();
        let layers =
            stack("TransformerDecoder", decoder_layer, num_layers, config, TransformerDecoderLayer::with_config)?;
        Ok(TransformerDecoder { layers, norm })
    }

    /// Runs every layer.
    pub fn forward(
        &self,
        tgt: &Tensor,
        memory: &Tensor,
        tgt_mask: Option<&Tensor>,
        memory_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let mut x = tgt.clone();
        for l in &self.layers {
            x = l.forward(&x, memory, tgt_mask, memory_mask)?;
        }
        final_norm(&self.norm, x)
    }
}

/// An encoder–decoder transformer (`paddle.nn.Transformer`): both stacks end in a layer
/// norm, as Paddle builds them.
#[derive(crate::nn::Layer)]
pub struct Transformer {
    /// The encoder stack.
    pub encoder: TransformerEncoder,
    /// The decoder stack.
    pub decoder: TransformerDecoder,
}

impl Transformer {
    /// `num_encoder_layers` and `num_decoder_layers` layers configured by `config`.
    pub fn new(config: TransformerConfig, num_encoder_layers: usize, num_decoder_layers: usize) -> Result<Self> {
        let d = config.d_model;
        let encoder = TransformerEncoder::new(
            TransformerEncoderLayer::with_config(config.clone())?,
            num_encoder_layers,
            Some(LayerNorm::new(&[d])?),
        )?;
        let decoder = TransformerDecoder::new(
            TransformerDecoderLayer::with_config(config)?,
            num_decoder_layers,
            Some(LayerNorm::new(&[d])?),
        )?;
        Ok(Transformer { encoder, decoder })
    }

    /// Encodes `src`, then decodes `tgt` against it.
    pub fn forward(
        &self,
        src: &Tensor,
        tgt: &Tensor,
        src_mask: Option<&Tensor>,
        tgt_mask: Option<&Tensor>,
        memory_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        let memory = self.encoder.forward_masked(src, src_mask)?;
        self.decoder.forward(tgt, &memory, tgt_mask, memory_mask)
    }

    /// A causal mask `[length, length]` for `tgt_mask`: position `i` sees `j ≤ i`, float
    /// (0 where kept, `-inf` elsewhere), as Paddle's `generate_square_subsequent_mask`.
    pub fn generate_square_subsequent_mask(length: usize) -> Result<Tensor> {
        let future = crate::triu(&crate::ones([length, length], crate::DType::Bool)?, 1)?;
        crate::zeros([length, length], crate::DType::Float32)?.masked_fill(&future, f64::NEG_INFINITY)
    }
}
