//! `paddle.jit`: [`to_static`] traces a dygraph Layer's `forward` into a static Program per
//! input signature and runs it through an Executor, with the parameters shared with the
//! layer; [`save`] writes the traced program as an inference model and [`load`] runs one
//! without the layer's code.
//!
//! Tracing calls `forward` once on a static variable; every eager tensor the forward reads
//! (parameters, constants) becomes a persistable variable bound to that same tensor, so an
//! optimizer updating the layer's parameters in place updates the program's. Training
//! works: the output records an autograd node whose backward runs the program's generated
//! gradient ops (recomputing the forward from the same random state, without repeating its
//! in-place updates: one forward and one forward+backward per step).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::nn::{Forward, Layer};
use crate::ops::registry::dispatch::autocast::{self, AmpState};
use crate::static_::trace::{TraceInput, capturing};
use crate::static_::{self as st, Executor, InferenceModel, Program, Scope};
use crate::{DType, Error, Place, Result, Tensor};

/// The signature of a traced input (`paddle.static.InputSpec`): `-1` marks a dim any size
/// may take (the batch).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InputSpec {
    /// Dimensions, `-1` where unknown.
    pub shape: Vec<i64>,
    /// Element type.
    pub dtype: DType,
    /// The feed name in a saved model.
    pub name: String,
}

impl InputSpec {
    /// A spec named `name`.
    pub fn new(shape: &[i64], dtype: DType, name: &str) -> Self {
        InputSpec { shape: shape.to_vec(), dtype, name: name.to_string() }
    }

    fn accepts(&self, x: &Tensor) -> bool {
        x.dtype() == self.dtype
            && x.ndim() == self.shape.len()
            && x.shape().iter().zip(&self.shape).all(|(&a, &d)| d < 0 || a as i64 == d)
    }
}

/// One traced signature.
struct Traced {
    spec: InputSpec,
    /// The `amp::auto_cast` settings it was traced under (its casts are in the program).
    amp: Option<AmpState>,
    /// The forward and gradient ops, without the forward's in-place updates (batch norm's
    /// running statistics), which the forward run already made.
    main: Program,
    /// The forward ops as built (training-mode layers stay in training mode).
    forward: Program,
    x: Tensor,
    out: Tensor,
    dout: Option<String>,
    captured: Vec<TraceInput>,
    /// Gradient variables of `[x, captured...]` (None where the output does not depend on it).
    grads: Vec<Option<String>>,
    scope: Scope,
    executors: Mutex<HashMap<String, Arc<Executor>>>,
}

impl Traced {
    fn executor(&self, place: Place) -> Arc<Executor> {
        let mut e = self.executors.lock().unwrap_or_else(|e| e.into_inner());
        e.entry(place.to_string()).or_insert_with(|| Arc::new(Executor::with_scope(place, self.scope.clone()))).clone()
    }
}

/// A layer whose `forward` runs as a traced static program (`paddle.jit.to_static`).
pub struct StaticLayer<L> {
    layer: L,
    spec: Option<InputSpec>,
    cache: Mutex<Vec<Arc<Traced>>>,
}

/// Traces `layer` on first call per input signature: with `input_spec`, one program serves
/// every input it accepts (`-1` dims any size); without, each new input shape is traced.
pub fn to_static<L: Forward>(layer: L, input_spec: Option<InputSpec>) -> StaticLayer<L> {
    StaticLayer { layer, spec: input_spec, cache: Mutex::new(Vec::new()) }
}

impl<L: Forward> StaticLayer<L> {
    /// The wrapped layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The wrapped layer, mutably (changing it does not retrace: call [`Self::clear_cache`]).
    pub fn layer_mut(&mut self) -> &mut L {
        &mut self.layer
    }

    /// Drops every traced program.
    pub fn clear_cache(&self) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The traced forward program for inputs like `x`.
    pub fn program(&self, x: &Tensor) -> Result<Program> {
        Ok(self.traced(x)?.forward.clone())
    }

    /// The execution plan that the last run for inputs like `x` (on `x`'s place, forward or
    /// gradient) replayed: None where it was interpreted op by op (the CPU place, a program
    /// that cannot be replayed) or nothing has run there yet. An input of a signature not
    /// seen before is traced first.
    pub fn last_plan(&self, x: &Tensor) -> Result<Option<st::PlanInfo>> {
        Ok(self.traced(x)?.executor(x.place()).last_plan())
    }

    /// How many signatures have been traced.
    pub fn num_traced(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn traced(&self, x: &Tensor) -> Result<Arc<Traced>> {
        const OP: &str = "to_static";
        let spec = match &self.spec {
            Some(s) if s.accepts(x) => s.clone(),
            Some(s) => {
                return Err(Error::invalid(
                    OP,
                    format!("input {} {:?} does not fit the InputSpec {} {:?}", x.dtype(), x.shape(), s.dtype, s.shape),
                ));
            }
            None => InputSpec::new(&x.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(), x.dtype(), "x"),
        };
        self.traced_for(spec)
    }

    fn traced_for(&self, spec: InputSpec) -> Result<Arc<Traced>> {
        let amp = autocast::current();
        if let Some(t) =
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|t| t.spec == spec && t.amp == amp)
        {
            return Ok(t.clone());
        }
        let t = Arc::new(self.trace(spec, amp)?);
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).push(t.clone());
        Ok(t)
    }

    fn trace(&self, spec: InputSpec, amp: Option<AmpState>) -> Result<Traced> {
        const OP: &str = "to_static";
        let (main, startup) = (Program::new(), Program::new());
        let (traced, captured) = capturing(Vec::new(), || {
            st::program_guard(&main, &startup, || -> Result<(Tensor, Tensor)> {
                let x = st::data(&spec.name, &spec.shape, spec.dtype)?;
                if spec.dtype.is_float() {
                    x.set_stop_gradient(false);
                }
                let out = self.layer.forward(&x)?;
                Ok((x, out))
            })
        });
        let (x, out) = traced?;
        if !startup.ops().is_empty() {
            return Err(Error::invalid(OP, "forward created parameters; create them in the layer's constructor"));
        }
        let out_name = match out.var_ref() {
            Some(v) if v.program.same_program(&main) => v.program.var_name(v.id),
            _ => return Err(Error::invalid(OP, "forward returned a tensor that does not depend on its input")),
        };
        let forward = main.filtered(|o| o.role == st::OpRole::Forward);
        // The backward part: gradients of the output (fed as `dout`) for the input and every
        // captured tensor that needs one.
        let mut targets = vec![x.clone()];
        targets.extend(captured.iter().map(|c| c.eager.clone()));
        let wanted: Vec<bool> = targets.iter().map(|t| t.requires_grad()).collect();
        let (mut dout, mut grads) = (None, vec![None; targets.len()]);
        let captured = if out.requires_grad() && out.dtype().is_float() {
            let d = st::program_guard(&main, &startup, || {
                st::data(&format!("{out_name}@GRAD_IN"), &out.var_shape().unwrap_or_default(), out.dtype())
            })?;
            let live: Vec<Tensor> = targets.iter().zip(&wanted).filter(|(_, w)| **w).map(|(t, _)| t.clone()).collect();
            let (found, captured) = capturing(captured, || {
                st::gradients(std::slice::from_ref(&out), &live, Some(std::slice::from_ref(&d)))
            });
            let mut found = found?.into_iter();
            for (slot, &w) in grads.iter_mut().zip(&wanted) {
                if w {
                    *slot = found.next().flatten().and_then(|g| g.name());
                }
            }
            dout = d.name();
            captured
        } else {
            captured
        };
        let scope = Scope::new();
        for c in &captured {
            scope.set_var(&c.name, c.eager.clone());
        }
        let updates_in_place = |o: &st::OpDesc| {
            o.role == st::OpRole::Forward
                && crate::ops::registry::find_op(&o.op_type).is_ok_and(|r| !r.inplace(o.inputs.len()).is_empty())
        };
        let main = main.filtered(|o| !updates_in_place(o));
        let executors = Mutex::new(HashMap::new());
        Ok(Traced { spec, amp, main, forward, x, out, dout, captured, grads, scope, executors })
    }
}

impl<L: Forward> Forward for StaticLayer<L> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.is_static_var() || x.is_meta() {
            // Inside another program, or computing shapes only (`summary`): trace through.
            return self.layer.forward(x);
        }
        let t = self.traced(x)?;
        let exe = t.executor(x.place());
        // The backward run recomputes the forward: it replays the same random numbers
        // (dropout masks) from this state.
        let rng = crate::get_seed_offset();
        let out = exe.run(&t.forward, &[(&t.spec.name, x)], &[&t.out])?.remove(0);
        let mut inputs: Vec<&Tensor> = vec![x];
        inputs.extend(t.captured.iter().map(|c| &c.eager));
        if crate::is_grad_enabled() && t.dout.is_some() && inputs.iter().any(|i| i.requires_grad()) {
            let (t2, x2) = (t.clone(), x.clone());
            crate::autograd::record("to_static", &inputs, &[&out], move |ctx| {
                let dout = t2.dout.clone().unwrap_or_default();
                let fetch: Vec<(usize, String)> = t2
                    .grads
                    .iter()
                    .enumerate()
                    .filter(|(i, g)| g.is_some() && ctx.needs.get(*i).copied().unwrap_or(false))
                    .map(|(i, g)| (i, g.clone().unwrap_or_default()))
                    .collect();
                let names: Vec<&str> = fetch.iter().map(|(_, n)| n.as_str()).collect();
                let exe = t2.executor(x2.place());
                let now = crate::get_seed_offset();
                crate::set_seed_offset(rng.0, rng.1);
                let got = exe.run(&t2.main, &[(&t2.spec.name, &x2), (&dout, &ctx.grads[0])], &names);
                crate::set_seed_offset(now.0, now.1);
                let got = got?;
                let mut out = vec![None; t2.grads.len()];
                for ((i, _), g) in fetch.into_iter().zip(got) {
                    out[i] = Some(g);
                }
                Ok(out)
            });
        }
        Ok(out)
    }
}

impl<L: Layer> Layer for StaticLayer<L> {
    crate::nn::layer::forward_layer_visitors!(layer);

    fn set_training(&mut self, training: bool) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.layer.set_training(training)
    }
}

/// Saves `layer`'s forward for `input_spec` as an inference model (`paddle.jit.save`):
/// `{path_prefix}.pdmodel` and `{path_prefix}.pdiparams`.
pub fn save<L: Forward>(layer: &StaticLayer<L>, path_prefix: impl AsRef<Path>, input_spec: &InputSpec) -> Result<()> {
    let t = layer.traced_for(input_spec.clone())?;
    let exe = Executor::with_scope(Place::Cpu, t.scope.clone());
    st::save_inference_model(path_prefix, &[&t.x], &[&t.out], &exe, &t.main)
}

/// A model loaded by [`load`]: runs the saved program (`paddle.jit.TranslatedLayer`).
pub struct TranslatedLayer {
    model: InferenceModel,
    exe: Executor,
}

/// Loads a model saved by [`save`] (or `save_inference_model`) onto `place`.
pub fn load(path_prefix: impl AsRef<Path>, place: Place) -> Result<TranslatedLayer> {
    let exe = Executor::with_scope(place, Scope::new());
    let model = st::load_inference_model(path_prefix, &exe)?;
    Ok(TranslatedLayer { model, exe })
}

impl TranslatedLayer {
    /// The loaded program and its feed and fetch names.
    pub fn model(&self) -> &InferenceModel {
        &self.model
    }
}

impl Forward for TranslatedLayer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let feed = self.model.feed_names.first().ok_or_else(|| Error::invalid("jit.load", "the model has no feed"))?;
        let x = if x.place() == self.exe.place() { x.clone() } else { x.to(self.exe.place())? };
        Ok(self.exe.run(&self.model.program, &[(feed, &x)], &self.model.fetch_names)?.remove(0))
    }
}
