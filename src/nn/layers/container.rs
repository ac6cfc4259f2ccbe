//! Containers: `Sequential` (layers applied in order), `LayerList` (a `Vec` of layers),
//! `LayerDict` (named layers) and `ParameterList`.

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

/// Named sublayers in insertion order (`paddle.nn.LayerDict`); each is named by its key in
/// parameter paths and state dicts.
#[derive(Default)]
pub struct LayerDict {
    layers: Vec<(String, Box<dyn Module>)>,
}

impl LayerDict {
    /// An empty dictionary.
    pub fn new() -> Self {
        LayerDict::default()
    }

    /// Adds `layer` under `name`, replacing a layer of that name.
    pub fn insert(&mut self, name: impl Into<String>, layer: impl Module + 'static) {
        let name = name.into();
        match self.layers.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = Box::new(layer),
            None => self.layers.push((name, Box::new(layer))),
        }
    }

    /// The layer under `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Module> {
        self.layers.iter().find(|(n, _)| n == name).map(|(_, l)| l.as_ref())
    }

    /// The keys in order.
    pub fn keys(&self) -> Vec<&str> {
        self.layers.iter().map(|(n, _)| n.as_str()).collect()
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

impl Layer for LayerDict {
    fn visit_sublayers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Layer)) {
        for (n, l) in &self.layers {
            f(n, l.as_ref() as &dyn Module as &dyn Layer);
        }
    }

    fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Layer)) {
        for (n, l) in &mut self.layers {
            f(n, l.as_mut() as &mut dyn Module as &mut dyn Layer);
        }
    }
}

/// Parameters held as a list (`paddle.nn.ParameterList`), named "0", "1", ...
#[derive(Clone, Default)]
pub struct ParameterList {
    params: Vec<Tensor>,
}

impl ParameterList {
    /// A list of these parameters.
    pub fn new(params: Vec<Tensor>) -> Self {
        ParameterList { params }
    }

    /// Appends a parameter.
    pub fn push(&mut self, p: Tensor) {
        self.params.push(p);
    }

    /// Parameter `i`.
    pub fn get(&self, i: usize) -> Option<&Tensor> {
        self.params.get(i)
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }
}

impl Layer for ParameterList {
    fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
        for (i, p) in self.params.iter().enumerate() {
            f(&i.to_string(), p);
        }
    }

    fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        for (i, p) in self.params.iter_mut().enumerate() {
            f(&i.to_string(), p);
        }
    }
}
