//! Parameter initializers (`paddle.nn.initializer`) and `ParamAttr`, and the one function
//! every layer creates its parameters with.

use crate::{DType, Error, Place, Result, Tensor};

/// How a parameter's initial values are drawn. Fans follow Paddle: a 2-D `[in, out]` weight
/// has fan_in = in, fan_out = out; a conv weight `[out, in, kh, kw]` has
/// fan_in = in·kh·kw, fan_out = out·kh·kw.
#[derive(Clone, Debug)]
pub enum Initializer {
    /// Every element `value`.
    Constant(f64),
    /// N(mean, std²).
    Normal { mean: f64, std: f64 },
    /// N(mean, std²) redrawn outside `mean ± 2·std`.
    TruncatedNormal { mean: f64, std: f64 },
    /// U(low, high).
    Uniform { low: f64, high: f64 },
    /// N(0, 2/(fan_in + fan_out)), fans overridable.
    XavierNormal { fan_in: Option<usize>, fan_out: Option<usize> },
    /// U(±√(6/(fan_in + fan_out))), fans overridable.
    XavierUniform { fan_in: Option<usize>, fan_out: Option<usize> },
    /// N(0, gain²/fan_in) with gain √(2/(1+slope²)) (ReLU: √2).
    KaimingNormal { fan_in: Option<usize>, negative_slope: f64 },
    /// U(±gain·√(3/fan_in)).
    KaimingUniform { fan_in: Option<usize>, negative_slope: f64 },
    /// These exact values (row-major), e.g. from numpy.
    Assign(Vec<f64>),
}

impl Initializer {
    /// Paddle's `XavierUniform()`.
    pub fn xavier_uniform() -> Self {
        Initializer::XavierUniform { fan_in: None, fan_out: None }
    }

    /// Paddle's `XavierNormal()`.
    pub fn xavier_normal() -> Self {
        Initializer::XavierNormal { fan_in: None, fan_out: None }
    }

    /// Paddle's `KaimingNormal()` (ReLU gain).
    pub fn kaiming_normal() -> Self {
        Initializer::KaimingNormal { fan_in: None, negative_slope: 0.0 }
    }

    /// Paddle's `KaimingUniform()` (ReLU gain).
    pub fn kaiming_uniform() -> Self {
        Initializer::KaimingUniform { fan_in: None, negative_slope: 0.0 }
    }

    /// A tensor of `shape` initialised by this rule on `place`.
    pub fn init(&self, shape: &[usize], dtype: DType, place: Place) -> Result<Tensor> {
        const OP: &str = "initializer";
        let (fan_in, fan_out) = fans(shape);
        let gain = |slope: f64| (2.0 / (1.0 + slope * slope)).sqrt();
        let _g = crate::no_grad_guard();
        match self {
            Initializer::Constant(v) => crate::full_on(shape, *v, dtype, place),
            Initializer::Normal { mean, std } => crate::gaussian_on(shape, *mean, *std, dtype, place),
            Initializer::TruncatedNormal { mean, std } => {
                let mut x = crate::gaussian_on(shape, 0.0, 1.0, DType::Float32, place)?;
                // Redraw outliers a fixed number of rounds, then clip the (≈1e-11) rest:
                // deterministic for a seed and no host round trip.
                for _ in 0..8 {
                    let out = x.abs()?.greater_than_scalar(2.0)?;
                    let fresh = crate::gaussian_on(shape, 0.0, 1.0, DType::Float32, place)?;
                    x = crate::where_(&out, &fresh, &x)?;
                }
                x.clip(-2.0, 2.0)?.scale(*std, *mean)?.cast(dtype)
            }
            Initializer::Uniform { low, high } => crate::uniform_on(shape, dtype, *low, *high, place),
            Initializer::XavierNormal { fan_in: fi, fan_out: fo } => {
                let std = (2.0 / (fi.unwrap_or(fan_in) + fo.unwrap_or(fan_out)).max(1) as f64).sqrt();
                crate::gaussian_on(shape, 0.0, std, dtype, place)
            }
            Initializer::XavierUniform { fan_in: fi, fan_out: fo } => {
                let limit = (6.0 / (fi.unwrap_or(fan_in) + fo.unwrap_or(fan_out)).max(1) as f64).sqrt();
                crate::uniform_on(shape, dtype, -limit, limit, place)
            }
            Initializer::KaimingNormal { fan_in: fi, negative_slope } => {
                let std = gain(*negative_slope) / (fi.unwrap_or(fan_in).max(1) as f64).sqrt();
                crate::gaussian_on(shape, 0.0, std, dtype, place)
            }
            Initializer::KaimingUniform { fan_in: fi, negative_slope } => {
                let limit = gain(*negative_slope) * (3.0 / fi.unwrap_or(fan_in).max(1) as f64).sqrt();
                crate::uniform_on(shape, dtype, -limit, limit, place)
            }
            Initializer::Assign(values) => {
                let n: usize = shape.iter().product();
                if values.len() != n {
                    return Err(Error::shape(
                        OP,
                        format!("Assign holds {} values for a parameter of shape {shape:?}", values.len()),
                    ));
                }
                Tensor::from_vec_on(values.clone(), shape, place)?.cast(dtype)
            }
        }
    }
}

/// Paddle's fan computation.
pub(crate) fn fans(shape: &[usize]) -> (usize, usize) {
    match shape.len() {
        0 => (1, 1),
        1 => (shape[0], shape[0]),
        2 => (shape[0], shape[1]),
        _ => {
            let rf: usize = shape[2..].iter().product();
            (shape[1] * rf, shape[0] * rf)
        }
    }
}

/// How a layer creates one parameter (`paddle.ParamAttr`).
#[derive(Clone, Debug)]
pub struct ParamAttr {
    /// Name given to the parameter tensor (else its dotted path in the model).
    pub name: Option<String>,
    /// The initializer (else the layer's default).
    pub initializer: Option<Initializer>,
    /// Multiplier on the optimizer's learning rate for this parameter.
    pub learning_rate: f64,
    /// False freezes the parameter (`stop_gradient=True`).
    pub trainable: bool,
}

impl Default for ParamAttr {
    fn default() -> Self {
        ParamAttr { name: None, initializer: None, learning_rate: 1.0, trainable: true }
    }
}

impl ParamAttr {
    /// A ParamAttr with this initializer.
    pub fn with_initializer(initializer: Initializer) -> Self {
        ParamAttr { initializer: Some(initializer), ..Default::default() }
    }
}

impl From<Initializer> for ParamAttr {
    fn from(i: Initializer) -> Self {
        ParamAttr::with_initializer(i)
    }
}

/// Whether a layer has a bias, and how it is created (Paddle's `bias_attr`, where `False`
/// means none).
#[derive(Clone, Debug)]
pub enum BiasAttr {
    /// No bias.
    None,
    /// A bias created with this attribute.
    Attr(ParamAttr),
}

impl Default for BiasAttr {
    fn default() -> Self {
        BiasAttr::Attr(ParamAttr::default())
    }
}

impl BiasAttr {
    /// The float32 bias of `shape` on the current place (zeros unless the attribute names
    /// an initializer), or none.
    pub fn create(&self, shape: &[usize]) -> Result<Option<Tensor>> {
        match self {
            BiasAttr::None => Ok(None),
            BiasAttr::Attr(a) => create_parameter(shape, DType::Float32, a, &Initializer::Constant(0.0)).map(Some),
        }
    }
}

impl From<bool> for BiasAttr {
    fn from(on: bool) -> Self {
        if on { BiasAttr::default() } else { BiasAttr::None }
    }
}

impl From<ParamAttr> for BiasAttr {
    fn from(a: ParamAttr) -> Self {
        BiasAttr::Attr(a)
    }
}

/// A unique name `{prefix}_{k}`, one counter per prefix in the process (Paddle's
/// `unique_name.generate`): layers name themselves `linear_0`, `conv2d_1`, ...
pub fn unique_name(prefix: &str) -> String {
    static COUNTERS: std::sync::Mutex<Option<std::collections::HashMap<String, usize>>> = std::sync::Mutex::new(None);
    let mut c = COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    let k = c.get_or_insert_with(Default::default).entry(prefix.to_string()).or_insert(0);
    let name = format!("{prefix}_{k}");
    *k += 1;
    name
}

/// Paddle's generated names for one layer's parameters: `{layer}_{k}.w_0` and
/// `{layer}_{k}.b_0`, unless the attribute names the parameter.
pub(crate) struct ParamNames(String);

impl ParamNames {
    /// Names for a new layer of type `prefix` (`"linear"`, `"conv2d"`).
    pub fn new(prefix: &str) -> Self {
        ParamNames(unique_name(prefix))
    }

    /// `attr`, named `{layer}.w_0` unless it has a name.
    pub fn weight(&self, attr: &ParamAttr) -> ParamAttr {
        let mut a = attr.clone();
        a.name.get_or_insert_with(|| format!("{}.w_0", self.0));
        a
    }

    /// A layer's non-trained state `{layer}.w_{k}` (Paddle names batch norm's running mean
    /// `w_1` and variance `w_2`): `value` everywhere, on the current place; in static mode a
    /// persistable variable initialised by the startup program.
    pub fn buffer(&self, k: usize, shape: &[usize], value: f64) -> Result<Tensor> {
        let name = format!("{}.w_{k}", self.0);
        if crate::static_::in_static_mode() {
            let init = || crate::full(shape, value, DType::Float32);
            return crate::static_::create_persistable(
                &name,
                shape,
                DType::Float32,
                crate::static_::VarKind::Plain,
                init,
            );
        }
        let t = crate::full_on(shape, value, DType::Float32, crate::current_place()?)?;
        t.set_name(name);
        Ok(t)
    }

    /// `attr`, naming the bias `{layer}.b_0` unless it has a name.
    pub fn bias(&self, attr: BiasAttr) -> BiasAttr {
        match attr {
            BiasAttr::Attr(mut a) => {
                a.name.get_or_insert_with(|| format!("{}.b_0", self.0));
                BiasAttr::Attr(a)
            }
            none => none,
        }
    }
}

/// A parameter of `shape` on the current place, initialised by `attr`'s initializer or
/// `default`, trainable unless `attr` says otherwise (Paddle's `create_parameter`). In
/// static mode it is a persistable variable of the current main program whose initialiser
/// ops go into the current startup program.
pub fn create_parameter(shape: &[usize], dtype: DType, attr: &ParamAttr, default: &Initializer) -> Result<Tensor> {
    let init = attr.initializer.as_ref().unwrap_or(default);
    if crate::static_::in_static_mode() {
        let spec = crate::static_::ParamSpec {
            name: attr.name.clone().unwrap_or_else(|| format!("{}.w_0", unique_name("create_parameter"))),
            trainable: attr.trainable,
            learning_rate: attr.learning_rate,
            init: &|place| init.init(shape, dtype, place),
        };
        return crate::static_::create_parameter(shape, dtype, spec);
    }
    let place = crate::current_place()?;
    let t = init.init(shape, dtype, place)?;
    t.set_stop_gradient(!attr.trainable);
    t.set_learning_rate_multiplier(attr.learning_rate);
    if let Some(n) = &attr.name {
        t.set_name(n.clone());
    }
    Ok(t)
}
