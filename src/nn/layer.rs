//! The `Layer` trait (Paddle's `paddle.nn.Layer`): a model is a plain struct of sublayers
//! and parameters; `#[derive(Layer)]` writes the visitors and the trait builds everything
//! else (parameter lists with dotted names, train/eval, state dicts, moving places).

use crate::tensor::StateDict;
use crate::{Error, Place, Result, Tensor};

/// The forward computation of a single-input layer.
pub trait Forward {
    /// Runs the layer on `x`.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") }
}

/// The `visit_*` methods and `is_training` of a wrapper layer, forwarded to the wrapped
/// layer in field `$inner` (its parameters keep their names: no wrapper prefix).
macro_rules! forward_layer_visitors {
    ($inner:ident) => {
        fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a $crate::Tensor)) {
            self.$inner.visit_parameters(f)
        }
        fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut $crate::Tensor)) {
            self.$inner.visit_parameters_mut(f)
        }
        fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a $crate::Tensor)) {
            self.$inner.visit_buffers(f)
        }
        fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&str, &mut $crate::Tensor)) {
            self.$inner.visit_buffers_mut(f)
        }
        fn visit_sublayers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn $crate::nn::Layer)) {
            self.$inner.visit_sublayers(f)
        }
        fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn $crate::nn::Layer)) {
            self.$inner.visit_sublayers_mut(f)
        }
        fn is_training(&self) -> bool {
            self.$inner.is_training()
        }
    };
}
pub(crate) use forward_layer_visitors;

/// A node of a model. Layers implement the `visit_*` methods (usually through
/// `#[derive(Layer)]`); everything else is provided.
pub trait Layer: Send + Sync {
    /// Calls `f` on each parameter owned directly by this layer.
    fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
        let _ = f;
    }

    /// Calls `f` on each directly owned parameter, mutably (to replace it).
    fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        let _ = f;
    }

    /// Calls `f` on each buffer (state saved with the model but not trained, such as batch
    /// norm's running statistics).
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor)) {
        let _ = f;
    }

    /// Calls `f` on each buffer, mutably.
    fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        let _ = f;
    }

    /// Calls `f` on each direct sublayer.
    fn visit_sublayers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Layer)) {
        let _ = f;
    }

    /// Calls `f` on each direct sublayer, mutably.
    fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Layer)) {
        let _ = f;
    }

    /// Whether the layer is in training mode. Layers whose behaviour depends on it (dropout,
    /// batch norm) keep their own flag; others report their first sublayer's.
    fn is_training(&self) -> bool {
        let mut t = None;
        self.visit_sublayers(&mut |_, l| {
            if t.is_none() {
                t = Some(l.is_training());
            }
        });
        t.unwrap_or(true)
    }

    /// Sets training mode on this layer and every sublayer.
    fn set_training(&mut self, training: bool) {
        self.visit_sublayers_mut(&mut |_, l| l.set_training(training));
    }

    /// Training mode (dropout active, batch norm uses batch statistics).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Inference mode.
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Every parameter with its dotted path (`"linear1.weight"`), depth first.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        collect_named(self, "", &mut out, false);
        out
    }

    /// Every parameter, depth first (what optimizers take).
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters().into_iter().map(|(_, t)| t).collect()
    }

    /// The dotted paths of every sublayer, depth first.
    fn named_sublayers(&self) -> Vec<String> {
        fn walk<L: Layer + ?Sized>(l: &L, prefix: &str, out: &mut Vec<String>) {
            l.visit_sublayers(&mut |name, s| {
                let path = join(prefix, name);
                out.push(path.clone());
                walk(s, &path, out);
            });
        }
        let mut out = Vec::new();
        walk(self, "", &mut out);
        out
    }

    /// Every parameter and buffer by dotted path: the tensors themselves, for code that
    /// updates them in place (what `state_dict` gives where no save dtype is set).
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        collect_named(self, "", &mut out, true);
        out
    }

    /// Parameters and buffers by dotted path (Paddle's `state_dict()`); a float tensor with a
    /// save dtype (`amp::decorate(..).save_dtype(..)`) comes cast to it, as a copy.
    fn state_dict(&self) -> StateDict {
        self.named_tensors().into_iter().map(|(name, t)| (name, saved_as(t))).collect()
    }

    /// Loads values from `state` into the parameters and buffers, in place (a tensor with a
    /// save dtype also takes a value of that dtype, cast to its own). Missing, unexpected
    /// and mis-shaped keys are one error listing all of them.
    fn set_state_dict(&mut self, state: &StateDict) -> Result<()> {
        let own: StateDict = self.named_tensors().into_iter().collect();
        let takes = |v: &Tensor, t: &Tensor| v.dtype() == t.dtype() || Some(v.dtype()) == t.save_dtype();
        let mut missing = Vec::new();
        let mut shape = Vec::new();
        for (name, t) in own.iter() {
            match state.get(name) {
                None => missing.push(name.to_string()),
                Some(v) if v.shape() != t.shape() || !takes(v, t) => shape.push(format!(
                    "{name}: checkpoint {:?} {} vs model {:?} {}",
                    v.shape(),
                    v.dtype(),
                    t.shape(),
                    t.dtype()
                )),
                Some(_) => {}
            }
        }
        let unexpected: Vec<String> = state.keys().into_iter().filter(|k| own.get(k).is_none()).collect();
        if !missing.is_empty() || !unexpected.is_empty() || !shape.is_empty() {
            return Err(Error::invalid(
                "set_state_dict",
                format!("missing keys {missing:?}; unexpected keys {unexpected:?}; mismatched {shape:?}"),
            ));
        }
        crate::no_grad(|| -> Result<()> {
            for (name, t) in own.iter() {
                let v = state.get(name).expect("checked above").to(t.place())?;
                t.assign_(&v.cast(t.dtype())?)?;
            }
            Ok(())
        })
    }

    /// Moves every parameter and buffer to `place` (optimizers must be created after).
    fn to(&mut self, place: Place) -> Result<()> {
        fn walk<L: Layer + ?Sized>(l: &mut L, place: Place, err: &mut Option<Error>) {
            let mut move_one = |_: &str, t: &mut Tensor| {
                if err.is_some() || t.place() == place {
                    return;
                }
                match t.detach().to(place) {
                    Ok(moved) => {
                        moved.set_stop_gradient(t.stop_gradient());
                        if let Some(n) = t.name() {
                            moved.set_name(n);
                        }
                        *t = moved;
                    }
                    Err(e) => *err = Some(e),
                }
            };
            l.visit_parameters_mut(&mut move_one);
            l.visit_buffers_mut(&mut move_one);
            l.visit_sublayers_mut(&mut |_, s| walk(s, place, err));
        }
        let mut err = None;
        walk(self, place, &mut err);
        err.map_or(Ok(()), Err)
    }

    /// The Rust type of the layer (`dygraph::nn::layers::linear::Linear`), for tools that
    /// treat layer kinds differently (the PyTorch weight map transposes `Linear` weights).
    fn type_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }

    /// Drops every parameter's gradient (`clear_gradients`).
    fn clear_gradients(&self) {
        for p in self.parameters() {
            p.clear_gradient();
        }
    }
}

/// `t` in its save dtype, if it has one: a detached copy (float64 on the CPU, the only place
/// that has it). A cast that fails (a lost device) leaves `t`, whose save then fails reading it.
fn saved_as(t: Tensor) -> Tensor {
    match t.save_dtype() {
        Some(dtype) if t.dtype().is_float() && t.dtype() != dtype => {
            let place = if dtype == crate::DType::Float64 { Place::Cpu } else { t.place() };
            crate::no_grad(|| t.detach().to(place).and_then(|c| c.cast(dtype))).unwrap_or(t)
        }
        _ => t,
    }
}

fn collect_named<L: Layer + ?Sized>(l: &L, prefix: &str, out: &mut Vec<(String, Tensor)>, buffers: bool) {
    l.visit_parameters(&mut |name, t| out.push((join(prefix, name), t.clone())));
    if buffers {
        l.visit_buffers(&mut |name, t| out.push((join(prefix, name), t.clone())));
    }
    l.visit_sublayers(&mut |name, s| collect_named(s, &join(prefix, name), out, buffers));
}

/// A list of layers (Paddle's `LayerList`): sublayers named "0", "1", ...
impl<T: Layer> Layer for Vec<T> {
    fn visit_sublayers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Layer)) {
        for (i, l) in self.iter().enumerate() {
            f(&i.to_string(), l);
        }
    }

    fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Layer)) {
        for (i, l) in self.iter_mut().enumerate() {
            f(&i.to_string(), l);
        }
    }
}

/// Visitors of `Option<L>` that visit the inner layer when there is one.
macro_rules! visit_some {
    ($(fn $name:ident<$lt:lifetime>(&$a:lifetime self, f: $f:ty);)*) => {$(
        fn $name<$lt>(&$a self, f: $f) {
            if let Some(l) = self {
                l.$name(f);
            }
        }
    )*};
    ($(fn $name:ident(&mut self, f: $f:ty);)*) => {$(
        fn $name(&mut self, f: $f) {
            if let Some(l) = self {
                l.$name(f);
            }
        }
    )*};
}

/// An optional sublayer is transparent: `Some(l)` contributes `l`'s parameters under the
/// field's own name.
impl<T: Layer> Layer for Option<T> {
    visit_some! {
        fn visit_parameters<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor));
        fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a Tensor));
        fn visit_sublayers<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Layer));
    }
    visit_some! {
        fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor));
        fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor));
        fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Layer));
    }

    fn is_training(&self) -> bool {
        self.as_ref().is_none_or(|l| l.is_training())
    }

    fn set_training(&mut self, training: bool) {
        if let Some(l) = self {
            l.set_training(training);
        }
    }

    fn type_name(&self) -> &'static str {
        self.as_ref().map_or(std::any::type_name::<Self>(), |l| l.type_name())
    }
}
