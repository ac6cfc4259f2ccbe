//! Test-only toy ops: a new op family written as a user of the registry would write one —
//! one folder, its declarations, kernels and facts, nothing anywhere else — proving that the
//! passes pick it up from its facts alone. `toy_leading_one` is a view (a leading 1 added,
//! declared `Fusion::View`): the fusion pass carries an elementwise chain through it.
//! `toy_drop` zeroes its input in training and declares its evaluation form (a scale by 1
//! or `1 − p` into a fresh variable, then a copy): `clone_program(for_test)` runs that form. Each has a
//! twin with the same kernels and no facts, which the passes must leave alone.

use crate::backend::cpu::{CpuData, float_kernel};
use crate::ops::nn::{DropoutMode, DropoutOptions};
use crate::ops::registry::op::{CpuCall, GpuCall, GradCall, Op, inputs};
use crate::ops::registry::{AttrMap, Attrs, EvalOp, EvalRewrite, EvalVar, Facts, Fusion, registry_entry};
use crate::tensor::TensorMeta;
use crate::{Error, Result, Tensor};

/// Declares a toy view op adding a leading 1 to its input's shape.
macro_rules! leading_one {
    ($stat:ident: $ty:ident = $name:literal, $facts:expr) => {
        registry_entry!($stat: $ty = $name, (), ());

        impl Op for $ty {
            fn infer(&self, x: &[&TensorMeta], _: &()) -> Result<(Vec<TensorMeta>, ())> {
                let [x] = inputs($name, x)?;
                Ok((vec![x.with_shape(std::iter::once(1).chain(x.dims().iter().copied()).collect::<Vec<usize>>())], ()))
            }

            fn cpu(&self, _: &mut CpuCall<'_>, _: &(), _: &()) -> Result<Vec<CpuData>> {
                Err(Error::invalid($name, "a view op runs no kernel"))
            }

            fn gpu(&self, _: &GpuCall<'_>, _: &(), _: &()) -> Result<()> {
                Err(Error::invalid($name, "a view op runs no kernel"))
            }

            fn view(&self) -> bool {
                true
            }

            fn facts(&self) -> Facts {
                $facts
            }

            fn differentiable(&self) -> bool {
                true
            }

            fn backward(&self, g: &GradCall<'_>, _: &(), _: &()) -> Result<Vec<Option<Tensor>>> {
                Ok(vec![g.grad_if(0, || g.g().reshape(g.x(0).shape()))?])
            }
        }
    };
}

leading_one!(TOY_LEADING_ONE: ToyLeadingOneOp = "toy_leading_one", Facts { fusion: Some(Fusion::View), ..Facts::NONE });
leading_one!(TOY_LEADING_ONE_PLAIN: ToyLeadingOnePlainOp = "toy_leading_one_plain", Facts::NONE);

/// Declares a toy op zeroing its input (a dropout that drops everything).
macro_rules! drop_all {
    ($stat:ident: $ty:ident = $name:literal, $facts:expr) => {
        registry_entry!($stat: $ty = $name, DropoutOptions, ());

        impl Op for $ty {
            fn infer(&self, x: &[&TensorMeta], _: &DropoutOptions) -> Result<(Vec<TensorMeta>, ())> {
                let [x] = inputs($name, x)?;
                x.expect_float($name, "the input")?;
                Ok((vec![(*x).clone()], ()))
            }

            fn cpu(&self, k: &mut CpuCall<'_>, _: &DropoutOptions, _: &()) -> Result<Vec<CpuData>> {
                Ok(vec![float_kernel!($name; x = k.x(0) => x.iter().map(|v| v * 0.0).collect())?])
            }

            fn gpu(&self, _: &GpuCall<'_>, _: &DropoutOptions, _: &()) -> Result<()> {
                Err(Error::invalid($name, "a test-only toy op runs on the CPU only"))
            }

            fn facts(&self) -> Facts {
                $facts
            }
        }
    };
}

/// `toy_drop` in evaluation: `t = scale(x, 1 or 1 − p)`, `y = assign(t)`.
fn toy_eval_form(attrs: &AttrMap) -> Option<Vec<EvalOp>> {
    let factor = DropoutOptions::from_map("toy_drop", attrs).ok()?.eval_scale();
    let t = EvalVar::Temp { id: 0, like: 0 };
    Some(vec![
        EvalOp {
            op_type: "scale",
            inputs: vec![EvalVar::Input(0)],
            outputs: vec![t],
            attrs: AttrMap::new().with("scale", factor).with("bias", 0.0),
        },
        EvalOp { op_type: "assign", inputs: vec![t], outputs: vec![EvalVar::Output(0)], attrs: AttrMap::new() },
    ])
}

drop_all!(TOY_DROP: ToyDropOp = "toy_drop", Facts {
    eval: Some(EvalRewrite { running: 0, form: toy_eval_form }),
    ..Facts::NONE
});
drop_all!(TOY_DROP_PLAIN: ToyDropPlainOp = "toy_drop_plain", Facts::NONE);

/// This family's ops and GPU kernels, for the registry's catalog.
pub(crate) static FAMILY: crate::ops::registry::Family = crate::ops::registry::Family {
    ops: &[&TOY_LEADING_ONE, &TOY_LEADING_ONE_PLAIN, &TOY_DROP, &TOY_DROP_PLAIN],
    kernels: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::registry::apply::apply1;
    use crate::static_::{self as st, Executor, Program, Scope};
    use crate::{DType, Place};

    fn close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((*g as f64 - w).abs() <= 1e-6 + 1e-5 * w.abs(), "element {i}: {g} vs {w}");
        }
    }

    const X: [f32; 6] = [-1.5, -0.25, 0.0, 0.5, 1.0, 2.0];

    const B: [f32; 6] = [0.5, -1.0, 0.25, 2.0, -0.75, 0.0];

    /// `tanh(view(exp(x)) + b)` (`b` of shape `[1, 2, 3]`), fed `X` and `B`: the ops the
    /// fused executor runs and the values.
    fn chain_through(view: &'static impl Op<Attrs = ()>) -> (Vec<String>, Vec<f32>) {
        let (main, startup) = (Program::new(), Program::new());
        let y = st::program_guard(&main, &startup, || {
            let x = st::data("x", &[2, 3], DType::Float32).unwrap();
            let b = st::data("b", &[1, 2, 3], DType::Float32).unwrap();
            let h = x.exp().unwrap();
            apply1(view, &[&h], ()).unwrap().add(&b).unwrap().tanh().unwrap()
        });
        let exe = Executor::with_scope(Place::Cpu, Scope::new());
        let ops = exe.ops_to_run(&main).unwrap().into_iter().map(|o| o.op_type).collect();
        let x = Tensor::from_vec(X.to_vec(), [2, 3]).unwrap();
        let b = Tensor::from_vec(B.to_vec(), [1, 2, 3]).unwrap();
        let out = exe.run(&main, &[("x", &x), ("b", &b)], &[&y]).unwrap();
        assert_eq!(out[0].shape(), &[1, 2, 3]);
        (ops, out[0].to_vec::<f32>().unwrap())
    }

    #[test]
    fn a_new_view_declaring_its_fusion_fact_joins_a_chain() {
        let want: Vec<f64> = X.iter().zip(B).map(|(&x, b)| ((x as f64).exp() + b as f64).tanh()).collect();
        let (ops, got) = chain_through(&TOY_LEADING_ONE);
        assert_eq!(ops, ["fused_elementwise"], "exp → toy_leading_one → add → tanh is one chain");
        close(&got, &want);
        let (ops, got) = chain_through(&TOY_LEADING_ONE_PLAIN);
        assert!(ops.contains(&"toy_leading_one_plain".to_string()), "without the fact the view splits it: {ops:?}");
        close(&got, &want);
    }

    #[test]
    fn a_new_op_declaring_its_eval_rewrite_is_rewritten_for_test() {
        for (mode, scale) in [(DropoutMode::UpscaleInTrain, 1.0), (DropoutMode::DownscaleInInfer, 0.75)] {
            let options = DropoutOptions { p: 0.25, training: true, mode };
            let (main, startup) = (Program::new(), Program::new());
            let (y, y_plain) = st::program_guard(&main, &startup, || {
                let x = st::data("x", &[6], DType::Float32).unwrap();
                (apply1(&TOY_DROP, &[&x], options).unwrap(), apply1(&TOY_DROP_PLAIN, &[&x], options).unwrap())
            });
            let test = main.clone_program(true);
            let ops: Vec<String> = test.ops().into_iter().map(|o| o.op_type).collect();
            assert_eq!(ops, ["scale", "assign", "toy_drop_plain"], "the declared form replaces toy_drop only");
            let exe = Executor::with_scope(Place::Cpu, Scope::new());
            let x = Tensor::from_vec(X.to_vec(), [6]).unwrap();
            let train = exe.run(&main, &[("x", &x)], &[&y, &y_plain]).unwrap();
            let eval = exe.run(&test, &[("x", &x)], &[&y, &y_plain]).unwrap();
            close(&train[0].to_vec::<f32>().unwrap(), &[0.0; 6]);
            close(&train[1].to_vec::<f32>().unwrap(), &[0.0; 6]);
            let want: Vec<f64> = X.iter().map(|&v| v as f64 * scale).collect();
            close(&eval[0].to_vec::<f32>().unwrap(), &want);
            close(&eval[1].to_vec::<f32>().unwrap(), &[0.0; 6]);
        }
    }
}
