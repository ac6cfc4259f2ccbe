//! A small Vision Transformer on MNIST: a convolutional patch embedding (two 3×3 stride-2
//! convolutions with a batch norm and ReLU between them: "early convolutions", which let a
//! small ViT learn in one epoch what plain patches need several for; plain 7×7 patches
//! reached 92–96% here), so 7×7 = 49 patch tokens of width 64; a class token and
//! learned position embeddings; a pre-norm `TransformerEncoder` (2 layers, 4 heads, GELU);
//! a linear head on the class token. One epoch of Adam (batch 32, a one-cycle schedule
//! peaking at 7e-3) reaches 97%+ test accuracy (97.84% with the default seed).
//! `--static` trains the `jit::to_static` program of the same model.
//!
//! ```text
//! cargo run --release --example vit_mnist [-- --place cpu|gpu] [--epochs N] [--steps N] [--static]
//!     [--amp O1|O2] [--amp-dtype float16|bfloat16]
//! ```

#[path = "common/mod.rs"]
pub mod common;

use common::classifier::{RunConfig, RunReport, train_classifier};
use dygraph::nn::{
    BatchNorm, Conv2D, Conv2dOptions, Forward, Initializer, LayerNorm, Linear, ParamAttr, TransformerActivation,
    TransformerConfig, TransformerEncoder, TransformerEncoderLayer, create_parameter,
};
use dygraph::{DType, Result, Tensor};

/// ViT hyper-parameters.
#[derive(Clone, Copy, Debug)]
pub struct VitConfig {
    pub width: usize,
    pub depth: usize,
    pub heads: usize,
    pub mlp: usize,
}

impl Default for VitConfig {
    fn default() -> Self {
        VitConfig { width: 64, depth: 2, heads: 4, mlp: 128 }
    }
}

#[derive(dygraph::nn::Layer)]
pub struct Vit {
    pub stem: Conv2D,
    pub stem_norm: BatchNorm,
    pub patch_embed: Conv2D,
    #[layer(param)]
    pub cls_token: Tensor,
    #[layer(param)]
    pub pos_embed: Tensor,
    pub encoder: TransformerEncoder,
    pub norm: LayerNorm,
    pub head: Linear,
}

impl Vit {
    pub fn new(c: VitConfig) -> Result<Self> {
        let tokens = 7 * 7 + 1;
        let small = ParamAttr::with_initializer(Initializer::TruncatedNormal { mean: 0.0, std: 0.02 });
        let options = Conv2dOptions { stride: 2.into(), padding: 1.into(), ..Default::default() };
        let layer = TransformerEncoderLayer::with_config(
            TransformerConfig::new(c.width, c.heads, c.mlp)
                .dropout(0.0)
                .activation(TransformerActivation::Gelu)
                .normalize_before(true),
        )?;
        Ok(Vit {
            stem: Conv2D::with_options(1, c.width / 2, 3, options.clone(), ParamAttr::default(), true)?,
            stem_norm: BatchNorm::new(c.width / 2)?,
            patch_embed: Conv2D::with_options(c.width / 2, c.width, 3, options, ParamAttr::default(), true)?,
            cls_token: create_parameter(&[1, 1, c.width], DType::Float32, &small, &Initializer::Constant(0.0))?,
            pos_embed: create_parameter(&[1, tokens, c.width], DType::Float32, &small, &Initializer::Constant(0.0))?,
            encoder: TransformerEncoder::new(layer, c.depth, None)?,
            norm: LayerNorm::new(&[c.width])?,
            head: Linear::new(c.width, 10)?,
        })
    }
}

impl Forward for Vit {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // [b, 1, 28, 28] → [b, width, 7, 7] → [b, 49, width]
        let stem = self.stem_norm.forward(&self.stem.forward(x)?)?.relu()?;
        let patches = self.patch_embed.forward(&stem)?.flatten(2, -1)?.transpose(&[0, 2, 1])?;
        // The class token for every image, shaped from the data (any batch size).
        let cls = dygraph::expand_as(&self.cls_token, &patches.slice(&[1], &[0], &[1])?)?;
        let tokens = dygraph::concat(&[cls, patches], 1)?.add(&self.pos_embed)?;
        let encoded = self.norm.forward(&self.encoder.forward(&tokens)?)?;
        self.head.forward(&encoded.slice(&[1], &[0], &[1])?.squeeze(&[1])?)
    }
}

/// The example's hyper-parameters (the command line may override them).
pub fn defaults() -> RunConfig {
    RunConfig { learning_rate: 7e-3, one_cycle: true, batch_size: 32, ..Default::default() }
}

/// Trains and evaluates as configured.
pub fn run(config: &RunConfig) -> Result<RunReport> {
    train_classifier(config, || Vit::new(VitConfig::default()))
}

fn main() -> Result<()> {
    let config = RunConfig::from_args(defaults())?;
    let r = run(&config)?;
    common::classifier::print_report("vit_mnist", &config, &r);
    Ok(())
}
