//! Neural-network building blocks (Paddle's `paddle.nn`): the `Layer` trait and its derive,
//! and `functional` with the stateless forms (`F::relu`, `F::conv2d`, ...).

mod ctc_loss;
pub mod functional;
pub mod init;
pub(crate) mod layer;
mod layers;
pub mod loss;
mod pair_loss;
mod summary;

pub use crate::ops::nn::{
    Conv1dOptions, Conv2dOptions, Conv3dOptions, ConvTranspose2dOptions, InterpolateMode, Padding, Pair, Pool2dOptions,
};
pub use crate::tensor::StateDict;
pub use ctc_loss::CTCLoss;
pub use dygraph_derive::Layer;
pub use init::{BiasAttr, Initializer, ParamAttr, create_parameter, unique_name};
pub use layer::{Forward, Layer};
pub use layers::*;
pub use loss::{
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, CrossEntropyOptions, L1Loss, MSELoss, NLLLoss, Reduction,
    SmoothL1Loss,
};
pub use pair_loss::{
    CosineEmbeddingLoss, HingeEmbeddingLoss, KLDivLoss, MarginRankingLoss, MultiLabelSoftMarginLoss, TripletMarginLoss,
    TripletOptions,
};
pub use summary::{Summary, SummaryRow, summarize, summarize_with, summary};
