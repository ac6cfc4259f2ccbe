//! Meta tensors (`Tensor::meta`, `Storage::Meta`): a call with a meta input returns meta
//! outputs from meta inference alone, with no kernel and no autograd node (`nn::summary`
//! runs a model's forward this way).

use super::{Call, Mode, Next};
use crate::{Result, Tensor};

pub(crate) struct Meta;

pub(crate) static META: Meta = Meta;

impl Mode for Meta {
    fn run(&self, call: &mut dyn Call, next: Next<'_>) -> Result<Vec<Tensor>> {
        if !call.inputs().iter().any(|t| t.is_meta()) {
            return next.run(call);
        }
        call.check_places()?;
        Ok(call.outs()?.iter().map(Tensor::from_meta).collect())
    }
}
