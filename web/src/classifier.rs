//! The draw-a-digit classifier: the MNIST inference model saved by the static MNIST example
//! (`save_inference_model`), loaded with `load_inference_model` from the two files the page
//! fetches. The page holds no network code: the program and its parameters come from the
//! files.

use dygraph::static_::{Executor, InferenceModel, PlanInfo, Scope, load_inference_model_from_bytes};
use dygraph::{Error, Place, Result, Tensor};

use crate::digit::SIDE;

/// A loaded inference model and the executor that runs it on one place.
pub struct Classifier {
    model: InferenceModel,
    exe: Executor,
}

impl Classifier {
    /// The model in `pdmodel` (the program) and `pdiparams` (its parameters, safetensors) on
    /// `place`; a corrupt or mismatched pair is an error.
    pub fn from_inference_model(pdmodel: &[u8], pdiparams: &[u8], place: Place) -> Result<Self> {
        let exe = Executor::with_scope(place, Scope::new());
        let model = load_inference_model_from_bytes(pdmodel, pdiparams, &exe)?;
        if model.feed_names.len() != 1 || model.fetch_names.len() != 1 {
            return Err(Error::invalid("load_classifier", "expected a model with one feed and one fetch"));
        }
        Ok(Classifier { model, exe })
    }

    /// The ten class probabilities of one `[28 × 28]` input scaled to [−1, 1], still on the
    /// classifier's place (read them back with `to_vec_async`).
    pub fn probabilities(&self, input: &[f32]) -> Result<Tensor> {
        let x = Tensor::from_vec_on(input.to_vec(), [1, 1, SIDE, SIDE], self.exe.place())?;
        let feed = &self.model.feed_names[0];
        Ok(self.exe.run(&self.model.program, &[(feed, &x)], &self.model.fetch_names)?.remove(0))
    }

    /// The execution plan the last prediction replayed (on WebGPU), or None where it was
    /// interpreted (the CPU place).
    pub fn last_plan(&self) -> Option<PlanInfo> {
        self.exe.last_plan()
    }
}
