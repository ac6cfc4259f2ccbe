//! The draw-a-digit classifier: the MNIST network with weights trained natively by the MNIST
//! example, loaded from the safetensors file the page fetches.

use dygraph::nn::{Forward, Layer};
use dygraph::vision::models::MnistNet;
use dygraph::{self as paddle, Place, Result, Tensor};

use crate::digit::SIDE;

/// A trained `MnistNet` on one place.
pub struct Classifier {
    model: MnistNet,
    place: Place,
}

impl Classifier {
    /// The network on `place` with the weights in `safetensors` (a checkpoint saved by
    /// `paddle::save(&model.state_dict(), ..)`); names or shapes that do not fit are an error.
    pub fn from_safetensors(safetensors: &[u8], place: Place) -> Result<Self> {
        let state = paddle::io::load_from_bytes(safetensors, place)?;
        let mut model = paddle::guard(place, MnistNet::new)?;
        model.set_state_dict(&state)?;
        model.eval();
        Ok(Classifier { model, place })
    }

    /// The ten class probabilities of one `[28 × 28]` input scaled to [−1, 1], still on the
    /// classifier's place (read them back with `to_vec_async`).
    pub fn probabilities(&self, input: &[f32]) -> Result<Tensor> {
        let x = Tensor::from_vec_on(input.to_vec(), [1, 1, SIDE, SIDE], self.place)?;
        paddle::no_grad(|| self.model.forward(&x))
    }
}
