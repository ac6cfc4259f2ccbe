//! Rust operators on tensors and scalars. Like Rust's own indexing, an operator panics on
//! bad input (with the same message the fallible method returns); use `a.add(&b)?` and
//! friends to get a `Result`.

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use crate::{DType, Result, Scalar, Tensor};

/// Exponents `pow` accepts: a scalar or a tensor.
pub trait PowArg {
    /// `x ^ self`.
    fn pow_of(self, x: &Tensor) -> Result<Tensor>;
}

impl PowArg for &Tensor {
    fn pow_of(self, x: &Tensor) -> Result<Tensor> {
        x.pow_tensor(self)
    }
}

macro_rules! pow_scalar_arg {
    ($($t:ty),*) => {$(
        impl PowArg for $t {
            fn pow_of(self, x: &Tensor) -> Result<Tensor> {
                let s: Scalar = self.into();
                let x = if !x.dtype().is_float() && !s.is_integral() { x.cast(DType::Float32)? } else { x.clone() };
                x.pow_scalar(s.to_f64())
            }
        }
    )*};
}
pow_scalar_arg!(f32, f64, i32, i64, u32, usize);

/// `x^y` elementwise (`paddle.pow`): `y` is a scalar or a tensor; exact for integers.
pub fn pow(x: &Tensor, y: impl PowArg) -> Result<Tensor> {
    y.pow_of(x)
}

fn is_arith_float(x: &Tensor) -> bool {
    x.dtype().is_float()
}

impl Tensor {
    /// `x^y` (see `pow`).
    pub fn pow(&self, y: impl PowArg) -> Result<Tensor> {
        y.pow_of(self)
    }

    /// `self + v`.
    pub fn add_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        let v = v.into();
        if is_arith_float(self) || (v.is_integral() && self.dtype().is_int()) {
            return self.scale(1.0, v.to_f64());
        }
        self.with_scalar(crate::add, v)
    }

    /// `self - v`.
    pub fn sub_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        let v = v.into();
        if is_arith_float(self) || (v.is_integral() && self.dtype().is_int()) {
            return self.scale(1.0, -v.to_f64());
        }
        self.with_scalar(crate::subtract, v)
    }

    /// `v - self`.
    pub fn rsub_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        let v = v.into();
        if is_arith_float(self) || (v.is_integral() && self.dtype().is_int()) {
            return self.scale(-1.0, v.to_f64());
        }
        let (a, s) = self.scalar_operand(v)?;
        crate::subtract(&s, &a)
    }

    /// `self · v`.
    pub fn mul_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        let v = v.into();
        if is_arith_float(self) || (v.is_integral() && self.dtype().is_int()) {
            return self.scale(v.to_f64(), 0.0);
        }
        self.with_scalar(crate::multiply, v)
    }

    /// `self / v` (integers truncate).
    pub fn div_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        let v = v.into();
        if is_arith_float(self) {
            return self.scale(1.0 / v.to_f64(), 0.0);
        }
        self.with_scalar(crate::divide, v)
    }

    /// `v / self`.
    pub fn rdiv_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        let (a, s) = self.scalar_operand(v.into())?;
        crate::divide(&s, &a)
    }

    /// `self % v` (sign of the divisor).
    pub fn rem_scalar(&self, v: impl Into<Scalar>) -> Result<Tensor> {
        self.with_scalar(crate::remainder, v.into())
    }
}

fn ok(r: Result<Tensor>) -> Tensor {
    r.unwrap_or_else(|e| panic!("{e}"))
}

macro_rules! tensor_ops {
    ($($tr:ident $m:ident $f:ident;)*) => {$(
        impl $tr<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $m(self, rhs: &Tensor) -> Tensor {
                ok(crate::$f(&self, rhs))
            }
        }
        impl $tr<Tensor> for &Tensor {
            type Output = Tensor;
            fn $m(self, rhs: Tensor) -> Tensor {
                ok(crate::$f(&self, &rhs))
            }
        }
        impl $tr<&Tensor> for Tensor {
            type Output = Tensor;
            fn $m(self, rhs: &Tensor) -> Tensor {
                ok(crate::$f(&self, rhs))
            }
        }
        impl $tr<Tensor> for Tensor {
            type Output = Tensor;
            fn $m(self, rhs: Tensor) -> Tensor {
                ok(crate::$f(&self, &rhs))
            }
        }
    )*};
}
tensor_ops! {
    Add add add;
    Sub sub subtract;
    Mul mul multiply;
    Div div divide;
    Rem rem remainder;
}

macro_rules! scalar_ops {
    ($($t:ty),*) => {$(
        impl Add<$t> for &Tensor { type Output = Tensor; fn add(self, v: $t) -> Tensor { ok(self.add_scalar(v)) } }
        impl Add<$t> for Tensor { type Output = Tensor; fn add(self, v: $t) -> Tensor { ok(self.add_scalar(v)) } }
        impl Sub<$t> for &Tensor { type Output = Tensor; fn sub(self, v: $t) -> Tensor { ok(self.sub_scalar(v)) } }
        impl Sub<$t> for Tensor { type Output = Tensor; fn sub(self, v: $t) -> Tensor { ok(self.sub_scalar(v)) } }
        impl Mul<$t> for &Tensor { type Output = Tensor; fn mul(self, v: $t) -> Tensor { ok(self.mul_scalar(v)) } }
        impl Mul<$t> for Tensor { type Output = Tensor; fn mul(self, v: $t) -> Tensor { ok(self.mul_scalar(v)) } }
        impl Div<$t> for &Tensor { type Output = Tensor; fn div(self, v: $t) -> Tensor { ok(self.div_scalar(v)) } }
        impl Div<$t> for Tensor { type Output = Tensor; fn div(self, v: $t) -> Tensor { ok(self.div_scalar(v)) } }
        impl Rem<$t> for &Tensor { type Output = Tensor; fn rem(self, v: $t) -> Tensor { ok(self.rem_scalar(v)) } }
        impl Add<&Tensor> for $t { type Output = Tensor; fn add(self, x: &Tensor) -> Tensor { ok(x.add_scalar(self)) } }
        impl Add<Tensor> for $t { type Output = Tensor; fn add(self, x: Tensor) -> Tensor { ok(x.add_scalar(self)) } }
        impl Sub<&Tensor> for $t { type Output = Tensor; fn sub(self, x: &Tensor) -> Tensor { ok(x.rsub_scalar(self)) } }
        impl Sub<Tensor> for $t { type Output = Tensor; fn sub(self, x: Tensor) -> Tensor { ok(x.rsub_scalar(self)) } }
        impl Mul<&Tensor> for $t { type Output = Tensor; fn mul(self, x: &Tensor) -> Tensor { ok(x.mul_scalar(self)) } }
        impl Mul<Tensor> for $t { type Output = Tensor; fn mul(self, x: Tensor) -> Tensor { ok(x.mul_scalar(self)) } }
        impl Div<&Tensor> for $t { type Output = Tensor; fn div(self, x: &Tensor) -> Tensor { ok(x.rdiv_scalar(self)) } }
        impl Div<Tensor> for $t { type Output = Tensor; fn div(self, x: Tensor) -> Tensor { ok(x.rdiv_scalar(self)) } }
    )*};
}
scalar_ops!(f64, i64);

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        ok(crate::neg(self))
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        ok(crate::neg(&self))
    }
}
