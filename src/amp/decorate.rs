//! `paddle.amp.decorate`: at level O2 a model's float32 parameters and buffers are cast to
//! float16 (or bfloat16), except the norm layers' (batch norm always; layer and instance norm for
//! float16), and the optimizer updates float32 master weights (`multi_precision`). At O1 it
//! changes nothing, as in Paddle.

use super::AmpLevel;
use crate::nn::Layer;
use crate::optimizer::Optimizer;
use crate::{DType, Error, Result, Tensor};

/// The settings of [`decorate`], with Paddle's defaults: float16, master weights at O2.
#[derive(Clone, Debug)]
pub struct Decorate {
    level: String,
    dtype: String,
    master_weight: Option<bool>,
    excluded: Vec<String>,
    save_dtype: Option<String>,
}

/// `paddle.amp.decorate(models, optimizers, level, dtype, master_weight, save_dtype,
/// excluded_layers)`: applied by [`Decorate::apply`].
///
/// ```no_run
/// # use dygraph::{self as paddle, amp, nn, optimizer::{self, Optimizer}};
/// # fn demo() -> paddle::Result<()> {
/// let mut net = nn::Linear::new(4, 2)?;
/// let mut opt = optimizer::Adam::new(1e-3, nn::Layer::parameters(&net));
/// amp::decorate("O2").apply(&mut net, Some(&mut opt))?;
/// assert_eq!(net.weight.dtype(), paddle::DType::Float16);
/// # Ok(()) }
/// ```
pub fn decorate(level: &str) -> Decorate {
    Decorate {
        level: level.to_string(),
        dtype: "float16".into(),
        master_weight: None,
        excluded: Vec::new(),
        save_dtype: None,
    }
}

impl Decorate {
    /// `"float16"` (default) or `"bfloat16"`.
    pub fn dtype(mut self, dtype: &str) -> Self {
        self.dtype = dtype.to_string();
        self
    }

    /// Whether the optimizer keeps float32 master weights (default: yes at O2). Without
    /// them a 16-bit parameter cannot be updated (the update kernels write float32), so
    /// `false` is refused at O2.
    pub fn master_weight(mut self, on: bool) -> Self {
        self.master_weight = Some(on);
        self
    }

    /// The dtype the model's `state_dict` gives its float parameters and buffers in
    /// (`"float16"`, `"bfloat16"`, `"float32"` or `"float64"`; default: each its own), so an
    /// O2 model saves a checkpoint a float32 model loads. At O1 it changes nothing, as
    /// `decorate` itself (Paddle's order).
    pub fn save_dtype(mut self, dtype: &str) -> Self {
        self.save_dtype = Some(dtype.to_string());
        self
    }

    /// Sublayers (by their dotted path in the model, as `named_sublayers` gives them, or
    /// `""` for the model) whose parameters stay float32 (`excluded_layers`).
    pub fn excluded_layers<S: AsRef<str>>(mut self, paths: impl IntoIterator<Item = S>) -> Self {
        self.excluded = paths.into_iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// Casts `model` (and points `optimizer` at the cast parameters, with master weights).
    pub fn apply(&self, model: &mut dyn Layer, optimizer: Option<&mut dyn Optimizer>) -> Result<()> {
        const OP: &str = "amp.decorate";
        let level: AmpLevel = self.level.parse()?;
        let low = match self.dtype.to_ascii_lowercase().as_str() {
            "float16" => DType::Float16,
            "bfloat16" => DType::BFloat16,
            other => return Err(Error::invalid(OP, format!("dtype should be 'float16' or 'bfloat16', got {other:?}"))),
        };
        let save = match self.save_dtype.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None => None,
            Some("float16") => Some(DType::Float16),
            Some("bfloat16") => Some(DType::BFloat16),
            Some("float32") => Some(DType::Float32),
            Some("float64") => Some(DType::Float64),
            Some(other) => {
                return Err(Error::invalid(
                    OP,
                    format!("save_dtype should be 'float16', 'bfloat16', 'float32' or 'float64', got {other:?}"),
                ));
            }
        };
        if level != AmpLevel::O2 {
            return Ok(());
        }
        if self.master_weight == Some(false) {
            return Err(Error::invalid(
                OP,
                "master_weight=false at O2: 16-bit parameters are updated through float32 master weights here",
            ));
        }
        let known = model.named_sublayers();
        if let Some(missing) = self.excluded.iter().find(|p| !p.is_empty() && !known.contains(p)) {
            return Err(Error::invalid(OP, format!("excluded_layers names {missing:?}, which is not a sublayer")));
        }
        let mut pairs = Vec::new();
        cast_layer(model, "", low, &self.excluded, &mut pairs)?;
        if save.is_some() {
            for (_, t) in model.named_tensors() {
                t.set_save_dtype(save);
            }
        }
        if let Some(opt) = optimizer {
            opt.set_multi_precision(true);
            opt.replace_parameters(&pairs);
        }
        Ok(())
    }
}

/// True for the layers whose parameters stay float32 (Paddle's `need_keep_fp32`).
fn keeps_float32(layer: &dyn Layer, low: DType) -> bool {
    let kind = layer.type_name().rsplit("::").next().unwrap_or("");
    kind == "BatchNorm" || (low == DType::Float16 && (kind == "LayerNorm" || kind == "InstanceNorm"))
}

/// Casts `layer`'s own float32 parameters and buffers to `low` and walks its sublayers,
/// collecting `(old, new)` parameter pairs.
fn cast_layer(
    layer: &mut dyn Layer,
    path: &str,
    low: DType,
    excluded: &[String],
    pairs: &mut Vec<(Tensor, Tensor)>,
) -> Result<()> {
    if excluded.iter().any(|e| e == path) {
        return Ok(());
    }
    let mut err = None;
    if !keeps_float32(layer, low) {
        let mut cast_one = |t: &mut Tensor, param: bool| {
            if err.is_some() || t.dtype() != DType::Float32 {
                return;
            }
            match t.detach().cast(low) {
                Ok(cast) => {
                    cast.set_stop_gradient(t.stop_gradient());
                    cast.set_learning_rate_multiplier(t.learning_rate_multiplier());
                    if let Some(n) = t.name() {
                        cast.set_name(&n);
                    }
                    if param {
                        pairs.push((t.clone(), cast.clone()));
                    }
                    *t = cast;
                }
                Err(e) => err = Some(e),
            }
        };
        layer.visit_parameters_mut(&mut |_, t| cast_one(t, true));
        layer.visit_buffers_mut(&mut |_, t| cast_one(t, false));
    }
    if let Some(e) = err {
        return Err(e);
    }
    let mut result = Ok(());
    layer.visit_sublayers_mut(&mut |name, sub| {
        if result.is_ok() {
            let child = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
            result = cast_layer(sub, &child, low, excluded, pairs);
        }
    });
    result
}
