//! Layers, models, optimizers, checkpoints, peer weights and data. test.sh runs this binary
//! a second time with the GPU as the default place: a layer left on the default place beside
//! CPU data fails only then.

#[path = "../common/mod.rs"]
mod common;

mod amp;
mod checkpoint;
mod data;
mod nn_layers;
mod optimizer;
mod peer_weights;
mod rnn_sequence_length;
mod sequence_layers;
mod transforms;
mod vision_models;
