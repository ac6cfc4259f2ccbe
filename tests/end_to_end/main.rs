//! Whole runs: the examples on their outcomes, training to an accuracy, the loader fuzzers
//! and checkpoints under faults. Training draws from the process-wide generator, so those
//! tests hold its lock and run one at a time.

#![allow(clippy::duplicate_mod)] // test modules include the examples (and their shared module) they run
#![allow(clippy::module_inception)] // a test module named after the example it includes

#[path = "../common/mod.rs"]
mod common;

mod checkpoint_faults;
mod classifier_examples;
mod examples;
mod fuzz_loaders;
mod mnist;
mod model_api;
mod static_mnist;
