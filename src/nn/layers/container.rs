//! Containers: `Sequential` (layers applied in order) and `LayerList` (a `Vec` of layers).

use crate::nn::{Forward, Layer};
use crate::{Result, Tensor};

/// A layer with a single-input forward: what `Sequential` holds.
pub trait Module: Layer + Forward {}

impl<T: Layer + Forward> Module for T {}

/// Layers applied in order (`paddle.nn.Sequential`); sublayers are named "0", "1", ...
pub struct Sequential {
    layers: Vec<Box<dyn Module>>,
    training: bool,
}

impl Default for Sequential {
    fn default() -> Self {
        Sequential { layers: Vec::new(), training: true }
    }
}

impl Sequential {
    /// An empty sequence.
    pub fn new() -> Self {
        Sequential::default()
    }

    /// Appends a layer (builder style).
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, layer: impl Module + 'static) -> Self {
        self.layers.push(Box::new(layer));
        self
    }

    /// Appends a layer.
    pub fn push(&mut self, layer: impl Module + 'static) {
        self.layers.push(Box::new(layer));
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Layer for Sequential {
    fn is_training(&self) -> bool {
        self.training
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
        for l in &mut self.layers {
            l.set_training(training);
        }
    }

    fn visit_sublayers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Layer)) {
        for (i, l) in self.layers.iter().enumerate() {
            f(&i.to_string(), l.as_ref() as &dyn Module as &dyn Layer);
        }
    }

    fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Layer)) {
        for (i, l) in self.layers.iter_mut().enumerate() {
            f(&i.to_string(), l.as_mut() as &mut dyn Module as &mut dyn Layer);
        }
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for l in &self.layers {
            y = l.forward(&y)?;
        }
        Ok(y)
    }
}

/// Paddle's `LayerList`: a `Vec` of layers is a layer whose sublayers are named by index.
pub type LayerList<T> = Vec<T>;
