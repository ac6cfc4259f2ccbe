//! `paddle.static.amp` (here `amp::static_`, since programs sit below the optimizers and
//! AMP): mixed precision for programs. In Paddle 3.x's programs (PIR) the
//! casts come from building the forward under `paddle.amp.auto_cast`, and
//! `paddle.static.amp.decorate` wraps the optimizer so that `minimize` scales the loss and
//! appends the unscale, the non-finite check, the scale's update and the gated updates; so
//! here. [`OptimizerWithMixedPrecision::auto_cast`] gives the scope of the decorated level,
//! dtype and lists to build the forward under. Paddle's legacy programs instead rewrote a
//! finished float32 program (`cast_model_to_fp16`); a program here generates its backward
//! from the autograd records its build made, so its casts are made while it is built.

use super::{AutoCast, GradScaler, auto_cast};
use crate::optimizer::Optimizer;
use crate::{Error, Result, Tensor};

/// `paddle.static.amp.decorate(optimizer, amp_lists, level, dtype, master_weight,
/// init_loss_scaling, incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio,
/// use_dynamic_loss_scaling, use_promote)`, with Paddle 3.x's defaults: O1, float16, the
/// default lists, an initial scale of 2¹⁶ (×2 after 2000 good steps, ×0.5 after each bad
/// one), dynamic scaling for float16 and none for bfloat16, master weights at O2.
///
/// ```no_run
/// # use dygraph::{self as paddle, static_ as st, optimizer::Adam, vision::models::{MnistNet, mnist_loss}};
/// # use dygraph::nn::{Forward, Layer};
/// # fn demo() -> paddle::Result<()> {
/// let (main, startup) = (st::Program::new(), st::Program::new());
/// st::program_guard(&main, &startup, || -> paddle::Result<()> {
///     let img = st::data("pixel", &[-1, 1, 28, 28], paddle::DType::Float32)?;
///     let label = st::data("label", &[-1, 1], paddle::DType::Int64)?;
///     let net = MnistNet::new()?;
///     let mut opt = paddle::amp::static_::decorate(Box::new(Adam::new(1e-3, net.parameters())));
///     let loss = opt.auto_cast().scope(|| mnist_loss(&net.forward(&img)?, &label))??;
///     opt.minimize(&loss)
/// })?;
/// # Ok(()) }
/// ```
pub fn decorate(optimizer: Box<dyn Optimizer>) -> OptimizerWithMixedPrecision {
    OptimizerWithMixedPrecision {
        optimizer,
        white: Vec::new(),
        black: Vec::new(),
        level: "O1".into(),
        dtype: "float16".into(),
        master_weight: None,
        use_promote: false,
        init_loss_scaling: 65536.0,
        incr_every_n_steps: 2000,
        decr_every_n_nan_or_inf: 1,
        incr_ratio: 2.0,
        decr_ratio: 0.5,
        dynamic: None,
        scaler: None,
        scaled_loss: None,
    }
}

/// An optimizer that minimizes a program's loss under loss scaling (Paddle's static
/// `OptimizerWithMixedPrecision`).
pub struct OptimizerWithMixedPrecision {
    optimizer: Box<dyn Optimizer>,
    white: Vec<String>,
    black: Vec<String>,
    level: String,
    dtype: String,
    master_weight: Option<bool>,
    use_promote: bool,
    init_loss_scaling: f64,
    incr_every_n_steps: i64,
    decr_every_n_nan_or_inf: i64,
    incr_ratio: f64,
    decr_ratio: f64,
    dynamic: Option<bool>,
    scaler: Option<GradScaler>,
    scaled_loss: Option<Tensor>,
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $name(mut self, v: $ty) -> Self {
            self.$name = v.into();
            self
        }
    };
}

impl OptimizerWithMixedPrecision {
    setter!(
        /// `level`: O0, OD, O1 (the default) or O2.
        level: &str
    );
    setter!(
        /// `dtype`: float16 (the default) or bfloat16.
        dtype: &str
    );
    setter!(
        /// `use_promote` (Paddle's static default: off).
        use_promote: bool
    );
    setter!(
        /// `init_loss_scaling` (default 2¹⁶).
        init_loss_scaling: f64
    );
    setter!(
        /// `incr_every_n_steps` (default 2000).
        incr_every_n_steps: i64
    );
    setter!(
        /// `decr_every_n_nan_or_inf` (default 1).
        decr_every_n_nan_or_inf: i64
    );
    setter!(
        /// `incr_ratio` (default 2).
        incr_ratio: f64
    );
    setter!(
        /// `decr_ratio` (default 0.5).
        decr_ratio: f64
    );

    /// `master_weight`: at O2, whether the optimizer updates float32 master weights (the
    /// default, `None`, is on, as Paddle's).
    pub fn master_weight(mut self, on: bool) -> Self {
        self.master_weight = Some(on);
        self
    }

    /// `use_dynamic_loss_scaling` (default: on for float16, off for bfloat16).
    pub fn use_dynamic_loss_scaling(mut self, on: bool) -> Self {
        self.dynamic = Some(on);
        self
    }

    /// `amp_lists`' `custom_white_list` and `custom_black_list` (Paddle's or our op names).
    pub fn amp_lists<S: AsRef<str>>(
        mut self,
        white: impl IntoIterator<Item = S>,
        black: impl IntoIterator<Item = S>,
    ) -> Self {
        self.white = white.into_iter().map(|s| s.as_ref().to_string()).collect();
        self.black = black.into_iter().map(|s| s.as_ref().to_string()).collect();
        self
    }

    /// The `auto_cast` scope of these settings, to build the program's forward under.
    pub fn auto_cast(&self) -> AutoCast {
        auto_cast(self.level != "O0")
            .level(&self.level)
            .dtype(&self.dtype)
            .custom_white_list(&self.white)
            .custom_black_list(&self.black)
            .use_promote(self.use_promote)
    }

    /// The loss scaler of these settings: bfloat16 (float32's range) scales by 1 without
    /// dynamic scaling unless asked, as Paddle's, which is the plain minimize.
    fn make_scaler(&self) -> Result<GradScaler> {
        let bfloat16 = match self.dtype.to_ascii_lowercase().as_str() {
            "float16" | "fp16" => false,
            "bfloat16" | "bf16" => true,
            other => {
                return Err(Error::invalid("decorate", format!("dtype should be float16 or bfloat16, got {other:?}")));
            }
        };
        let dynamic = self.dynamic.unwrap_or(!bfloat16);
        let init = if bfloat16 && self.dynamic.is_none() { 1.0 } else { self.init_loss_scaling };
        // No scaling and no dynamics: the plain minimize, as Paddle's (no scale to keep).
        let plain = !dynamic && init == 1.0;
        Ok(GradScaler::new()
            .enable(!self.level.eq_ignore_ascii_case("O0") && !plain)
            .init_loss_scaling(init)
            .incr_every_n_steps(self.incr_every_n_steps)
            .decr_every_n_nan_or_inf(self.decr_every_n_nan_or_inf)
            .incr_ratio(self.incr_ratio)
            .decr_ratio(self.decr_ratio)
            .use_dynamic_loss_scaling(dynamic))
    }

    /// `minimize(loss)`: the scaled loss (in float32), its backward pass, the unscale and
    /// check of every gradient and the scale's update, and the optimizer's updates, skipped
    /// on a step whose gradients are not finite, appended to `loss`'s program.
    pub fn minimize(&mut self, loss: &Tensor) -> Result<()> {
        if !loss.is_static_var() {
            return Err(Error::invalid(
                "OptimizerWithMixedPrecision.minimize",
                "the loss is not a program's variable (eager code uses amp::GradScaler)",
            ));
        }
        if self.level.eq_ignore_ascii_case("O2") {
            self.optimizer.set_multi_precision(self.master_weight.unwrap_or(true));
        }
        let mut scaler = self.make_scaler()?;
        let scaled = scaler.scale(loss)?;
        scaler.minimize(self.optimizer.as_mut(), &scaled)?;
        self.scaled_loss = Some(scaled);
        self.scaler = Some(scaler);
        Ok(())
    }

    /// `get_loss_scaling()`: the program's persistable scale (fetch it to read it), after
    /// `minimize` (none where nothing is scaled: O0, or bfloat16's defaults).
    pub fn get_loss_scaling(&self) -> Result<Tensor> {
        self.scaler.as_ref().and_then(|s| s.scale_var()).ok_or_else(|| {
            Error::invalid("get_loss_scaling", "call minimize() first: the scale is made with the program's loss")
        })
    }

    /// `get_scaled_loss()`: the scaled loss `minimize` ran backward from.
    pub fn get_scaled_loss(&self) -> Option<&Tensor> {
        self.scaled_loss.as_ref()
    }

    /// The decorated optimizer.
    pub fn inner(&self) -> &dyn Optimizer {
        self.optimizer.as_ref()
    }
}
