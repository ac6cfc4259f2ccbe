//! In-place ops (Paddle's `add_`, `subtract_`, `multiply_`, `divide_`, `scale_`, `clip_`,
//! `zero_`, `fill_`, `uniform_`, `normal_`) and the `+=`, `-=`, `*=`, `/=` operators. Each
//! computes the new value out of place and writes it into the tensor's memory, which every
//! view of that memory sees, and bumps the memory's version counter.
//!
//! Autograd: a tensor that requires a gradient and is a leaf (a parameter) cannot be written
//! while gradients are recorded (as in PyTorch; update parameters under `no_grad`). Any
//! other tensor in the graph becomes the result of the op: its gradient flows through the op
//! to the tensor's previous value (the op reads a copy of it, so its own gradient is exact).
//! An earlier op that saved the tensor for its gradient and reads it there makes `backward()`
//! an error naming that op, never a gradient computed from the new values.

use std::ops::{AddAssign, DivAssign, MulAssign, SubAssign};

use crate::tensor::grad_mode::is_grad_enabled;
use crate::{Error, Result, Scalar, Tensor};

impl Tensor {
    /// Writes `f(self)` into this tensor: `f` gets the current value (a graph-connected copy
    /// when gradients are recorded through it).
    pub(crate) fn write_in_place(&self, op: &'static str, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<&Self> {
        let tracking = is_grad_enabled() && self.requires_grad();
        if tracking && self.is_leaf() {
            return Err(Error::Autograd(format!(
                "{op}: a leaf tensor that requires a gradient (shape {:?}, a parameter) cannot be modified in \
                 place while gradients are recorded; update it under `no_grad`",
                self.shape()
            )));
        }
        let value = if is_grad_enabled() { f(&self.clone_data()?)? } else { f(self)? };
        if value.shape() != self.shape() || value.dtype() != self.dtype() {
            return Err(Error::invalid(
                op,
                format!(
                    "the result ({:?}, {}) must keep the tensor's shape {:?} and dtype {} to be written in place",
                    value.shape(),
                    value.dtype(),
                    self.shape(),
                    self.dtype()
                ),
            ));
        }
        crate::tensor::grad_mode::no_grad(|| self.assign_(&value))?;
        if value.requires_grad() {
            let mut m = self.grad_meta();
            m.grad_fn = value.grad_fn();
            m.stop_gradient = false;
            // The op's node holds its output weakly; this tensor now stands for it.
            m.inplace_results.push(value.clone());
        } else if tracking {
            // Overwritten with values that depend on nothing that needs a gradient.
            let mut m = self.grad_meta();
            m.grad_fn = None;
            m.stop_gradient = true;
        }
        Ok(self)
    }

    /// `self += y` in place (`paddle.Tensor.add_`); `y` broadcasts into `self`'s shape.
    pub fn add_(&self, y: &Tensor) -> Result<&Self> {
        self.write_in_place("add_", |x| x.add(y))
    }

    /// `self -= y` in place (`subtract_`).
    pub fn subtract_(&self, y: &Tensor) -> Result<&Self> {
        self.write_in_place("subtract_", |x| x.subtract(y))
    }

    /// `self *= y` in place (`multiply_`).
    pub fn multiply_(&self, y: &Tensor) -> Result<&Self> {
        self.write_in_place("multiply_", |x| x.multiply(y))
    }

    /// `self /= y` in place (`divide_`).
    pub fn divide_(&self, y: &Tensor) -> Result<&Self> {
        self.write_in_place("divide_", |x| x.divide(y))
    }

    /// `self = self · scale + bias` in place (`scale_`).
    pub fn scale_(&self, scale: f64, bias: f64) -> Result<&Self> {
        self.write_in_place("scale_", |x| x.scale(scale, bias))
    }

    /// Clamps to `[min, max]` in place (`clip_`).
    pub fn clip_(&self, min: f64, max: f64) -> Result<&Self> {
        self.write_in_place("clip_", |x| x.clip(min, max))
    }

    /// Sets every element to 0 (`zero_`).
    pub fn zero_(&self) -> Result<&Self> {
        self.fill_(0)
    }

    /// Sets every element to `value` (`fill_`).
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<&Self> {
        let v = value.into();
        self.write_in_place("fill_", |x| crate::full_like(&x.detach(), v))
    }

    /// Redraws every element from U(min, max) with the global generator (`uniform_`).
    pub fn uniform_(&self, min: f64, max: f64) -> Result<&Self> {
        self.write_in_place("uniform_", |x| crate::uniform_on(x.shape(), x.dtype(), min, max, x.place()))
    }

    /// Redraws every element from N(mean, std²) with the global generator (`normal_`).
    pub fn normal_(&self, mean: f64, std: f64) -> Result<&Self> {
        self.write_in_place("normal_", |x| crate::gaussian_on(x.shape(), mean, std, x.dtype(), x.place()))
    }
}

/// `x op= y` for tensors and scalars: the in-place methods, panicking on bad input as the
/// other operators do (use the methods for a `Result`).
macro_rules! assign_operators {
    ($($trait:ident $method:ident => $inplace:ident, $scalar:ident;)*) => {$(
        impl $trait<&Tensor> for Tensor {
            fn $method(&mut self, rhs: &Tensor) {
                if let Err(e) = self.$inplace(rhs) {
                    panic!("{e}");
                }
            }
        }

        impl $trait<Tensor> for Tensor {
            fn $method(&mut self, rhs: Tensor) {
                <Tensor as $trait<&Tensor>>::$method(self, &rhs);
            }
        }

        impl $trait<f64> for Tensor {
            fn $method(&mut self, rhs: f64) {
                if let Err(e) = self.write_in_place(stringify!($inplace), |x| x.$scalar(rhs)) {
                    panic!("{e}");
                }
            }
        }
    )*};
}

assign_operators! {
    AddAssign add_assign => add_, add_scalar;
    SubAssign sub_assign => subtract_, sub_scalar;
    MulAssign mul_assign => multiply_, mul_scalar;
    DivAssign div_assign => divide_, div_scalar;
}
