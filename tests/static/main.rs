//! Static mode: programs built by model code, the Executor, control flow, fusion and plans.

#[path = "../common/mod.rs"]
mod common;

mod fusion;
mod plans;
mod static_mode;
