//! The composed tensor ops (`roll`, `diff`, `meshgrid`, `unbind`, `repeat_interleave`,
//! `masked_fill`, `lerp`, `any`/`all`, `isclose`/`allclose`, `outer`, `kron`, `norm`)
//! against values written out in the test, on every place; their float64 gradchecks; the
//! registered scans and triangles in a static program against eager; typed errors.
//! (`cumsum`, `cumprod`, `tril`, `triu` are also in the registry sweep.)

use crate::common;

use common::{Rng, assert_close, check_exact, gradcheck, places, values};
use dygraph::static_::{self as st, Executor, Program, Scope};
use dygraph::{self as paddle, DType, Error, NormKind, Place, Tensor};

fn t(v: &[f64], shape: &[usize], place: Place) -> Tensor {
    common::tensor(v, shape, DType::Float32, place)
}

fn exact(what: &str, x: &Tensor, shape: &[usize], expected: &[f64]) {
    assert_eq!(x.shape(), shape, "{what}: shape");
    if let Err(m) = check_exact(what, &values(x), expected) {
        panic!("{m}");
    }
}

#[test]
fn roll_diff_meshgrid_unbind_match_hand_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = t(&[1., 2., 3., 4., 5., 6.], &[2, 3], place);
        exact("roll axis 1 by 1", &x.roll(&[1], &[1]).unwrap(), &[2, 3], &[3., 1., 2., 6., 4., 5.]);
        exact("roll axis 1 by -4", &x.roll(&[-4], &[-1]).unwrap(), &[2, 3], &[2., 3., 1., 5., 6., 4.]);
        exact("roll flat by 2", &x.roll(&[2], &[]).unwrap(), &[2, 3], &[5., 6., 1., 2., 3., 4.]);
        exact("roll both axes", &x.roll(&[1, 1], &[0, 1]).unwrap(), &[2, 3], &[6., 4., 5., 3., 1., 2.]);

        let v = t(&[1., 4., 9., 16.], &[4], place);
        exact("diff", &paddle::diff(&v, 1, 0, None, None).unwrap(), &[3], &[3., 5., 7.]);
        exact("diff n=2", &paddle::diff(&v, 2, 0, None, None).unwrap(), &[2], &[2., 2.]);
        let pre = t(&[0.], &[1], place);
        let app = t(&[20., 30.], &[2], place);
        let d = paddle::diff(&v, 1, -1, Some(&pre), Some(&app)).unwrap();
        exact("diff with prepend and append", &d, &[6], &[1., 3., 5., 7., 4., 10.]);
        exact("diff of 2-D along 0", &paddle::diff(&x, 1, 0, None, None).unwrap(), &[1, 3], &[3., 3., 3.]);
        exact("diff past the length", &paddle::diff(&v, 5, 0, None, None).unwrap(), &[0], &[]);
        let b = v.greater_than_scalar(3.0).unwrap();
        exact("diff of bool is xor", &paddle::diff(&b, 1, 0, None, None).unwrap(), &[3], &[1., 0., 0.]);

        let (a, c) = (t(&[1., 2.], &[2], place), t(&[10., 20., 30.], &[3], place));
        let g = paddle::meshgrid(&[a, c]).unwrap();
        exact("meshgrid 0", &g[0], &[2, 3], &[1., 1., 1., 2., 2., 2.]);
        exact("meshgrid 1", &g[1], &[2, 3], &[10., 20., 30., 10., 20., 30.]);

        let parts = x.unbind(1).unwrap();
        assert_eq!(parts.len(), 3);
        exact("unbind 1, part 2", &parts[2], &[2], &[3., 6.]);
        assert!(t(&[], &[0, 2], place).unbind(0).unwrap().is_empty());
    }
}

#[test]
fn repeat_interleave_masked_fill_lerp_match_hand_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = t(&[1., 2., 3., 4.], &[2, 2], place);
        exact(
            "repeat_interleave flat",
            &x.repeat_interleave(2, None).unwrap(),
            &[8],
            &[1., 1., 2., 2., 3., 3., 4., 4.],
        );
        exact(
            "repeat_interleave axis 0",
            &x.repeat_interleave(2, Some(0)).unwrap(),
            &[4, 2],
            &[1., 2., 1., 2., 3., 4., 3., 4.],
        );
        let counts = Tensor::from_vec_on(vec![0i64, 3], [2], place).unwrap();
        let r = paddle::repeat_interleave_by(&x, &counts, Some(1)).unwrap();
        exact("repeat_interleave by counts", &r, &[2, 3], &[2., 2., 2., 4., 4., 4.]);

        let mask = x.greater_than_scalar(2.5).unwrap();
        exact("masked_fill scalar", &x.masked_fill(&mask, -1.0).unwrap(), &[2, 2], &[1., 2., -1., -1.]);
        let row_mask = Tensor::from_vec_on(vec![true, false], [2], place).unwrap();
        exact("masked_fill broadcast mask", &x.masked_fill(&row_mask, 0.0).unwrap(), &[2, 2], &[0., 2., 0., 4.]);
        let causal = paddle::triu(&paddle::ones_on([3, 3], DType::Bool, place).unwrap(), 1).unwrap();
        let scores = t(&[1.; 9], &[3, 3], place);
        let masked = scores.masked_fill(&causal, f64::NEG_INFINITY).unwrap();
        let inf = f64::NEG_INFINITY;
        exact("causal mask from triu", &masked, &[3, 3], &[1., inf, inf, 1., 1., inf, 1., 1., 1.]);

        let y = t(&[3., 6., 5., 0.], &[2, 2], place);
        let l = x.lerp(&y, 0.25).unwrap();
        assert_close("lerp scalar weight", &values(&l), &[1.5, 3.0, 3.5, 3.0], 1e-6);
        let w = t(&[0., 1.], &[2], place);
        exact("lerp tensor weight", &x.lerp(&y, &w).unwrap(), &[2, 2], &[1., 6., 3., 0.]);
    }
}

#[test]
fn any_all_isclose_allclose_match_hand_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let b = Tensor::from_vec_on(vec![true, false, false, false, false, false], [2, 3], place).unwrap();
        exact("any", &b.any(&[], false).unwrap(), &[], &[1.]);
        exact("all", &b.all(&[], false).unwrap(), &[], &[0.]);
        exact("any axis 1", &b.any(&[1], false).unwrap(), &[2], &[1., 0.]);
        exact("all axis 0 keepdim", &b.logical_not().unwrap().all(&[0], true).unwrap(), &[1, 3], &[0., 1., 1.]);
        let f = t(&[0., f64::NAN, 0.], &[3], place);
        exact("any of floats (NaN is true)", &f.any(&[], false).unwrap(), &[], &[1.]);
        let e = t(&[], &[0], place);
        exact("any of empty", &e.any(&[], false).unwrap(), &[], &[0.]);
        exact("all of empty", &e.all(&[], false).unwrap(), &[], &[1.]);

        let inf = f64::INFINITY;
        let x = t(&[1.0, 1.0, inf, inf, f64::NAN, 1.0, 100.0], &[7], place);
        let y = t(&[1.0, 1.01, inf, -inf, f64::NAN, inf, 100.5], &[7], place);
        let c = paddle::isclose(&x, &y, 1e-5, 1e-8, false).unwrap();
        exact("isclose", &c, &[7], &[1., 0., 1., 0., 0., 0., 0.]);
        let c = paddle::isclose(&x, &y, 1e-2, 0.0, true).unwrap();
        exact("isclose rtol 1e-2, equal_nan", &c, &[7], &[1., 1., 1., 0., 1., 0., 1.]);
        let xi = Tensor::from_vec_on(vec![1i64, 2, 3], [3], place).unwrap();
        let yi = Tensor::from_vec_on(vec![1i64, 2, 4], [3], place).unwrap();
        exact("isclose ints", &paddle::isclose(&xi, &yi, 1e-5, 1e-8, false).unwrap(), &[3], &[1., 1., 0.]);
        exact("allclose", &paddle::allclose(&xi, &xi, 1e-5, 1e-8, false).unwrap(), &[], &[1.]);
        exact("not allclose", &paddle::allclose(&xi, &yi, 1e-5, 1e-8, false).unwrap(), &[], &[0.]);
    }
}

#[test]
fn outer_kron_norm_match_hand_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let a = t(&[1., 2.], &[2], place);
        let b = t(&[3., 4., 5.], &[3], place);
        exact("outer", &paddle::outer(&a, &b).unwrap(), &[2, 3], &[3., 4., 5., 6., 8., 10.]);
        let m = t(&[1., 2., 3., 4.], &[2, 2], place);
        let e = t(&[0., 1., 1., 0.], &[2, 2], place);
        #[rustfmt::skip]
        let k = [0., 1., 0., 2.,  1., 0., 2., 0.,  0., 3., 0., 4.,  3., 0., 4., 0.];
        exact("kron 2x2", &paddle::kron(&m, &e).unwrap(), &[4, 4], &k);
        exact("kron vector by matrix", &paddle::kron(&a, &m).unwrap(), &[2, 4], &[1., 2., 2., 4., 3., 4., 6., 8.]);

        let x = t(&[3., -4., 0., 12.], &[2, 2], place);
        let close = |what: &str, got: Tensor, want: &[f64]| assert_close(what, &values(&got), want, 1e-6);
        close("fro", x.norm(NormKind::Fro, &[], false).unwrap(), &[13.0]);
        close("p=2 rows", x.norm(NormKind::P(2.0), &[1], false).unwrap(), &[5.0, 12.0]);
        close("p=1 cols", x.norm(NormKind::P(1.0), &[0], true).unwrap(), &[3.0, 16.0]);
        close("inf", x.norm(NormKind::Inf, &[], false).unwrap(), &[12.0]);
        close("-inf rows", x.norm(NormKind::NegInf, &[1], false).unwrap(), &[3.0, 0.0]);
        close("p=0", x.norm(NormKind::P(0.0), &[], false).unwrap(), &[3.0]);
        close("p=3", x.norm(NormKind::P(3.0), &[], false).unwrap(), &[(27f64 + 64.0 + 1728.0).cbrt()]);
        close("p=2 of zeros", t(&[0., 0.], &[2], place).norm(NormKind::P(2.0), &[], false).unwrap(), &[0.0]);
    }
}

#[test]
fn composed_ops_gradcheck_in_float64() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed());
    let mut failures = Vec::new();
    let mut check = |name: &str, f: &dyn Fn(&[Tensor]) -> paddle::Result<Tensor>, shapes: &[&[usize]]| {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec_away_from_zero(s.iter().product(), -2.0, 2.0, 0.1), s.to_vec())).collect();
        failures.extend(gradcheck(name, f, &inputs).err());
    };
    check("roll", &|x| x[0].roll(&[1, -2], &[0, 1]), &[&[3, 4]]);
    check("diff", &|x| paddle::diff(&x[0], 2, 1, Some(&x[1]), None), &[&[2, 5], &[2, 1]]);
    check("meshgrid", &|x| paddle::meshgrid(&[x[0].clone(), x[1].clone()])?[1].square(), &[&[2], &[3]]);
    check("unbind", &|x| x[0].unbind(0)?[1].exp(), &[&[3, 2]]);
    check("repeat_interleave", &|x| x[0].repeat_interleave(3, Some(1)), &[&[2, 2]]);
    check("masked_fill", &|x| x[0].masked_fill(&x[0].greater_than_scalar(0.0)?, 0.5), &[&[2, 3]]);
    check("lerp", &|x| x[0].lerp(&x[1], &x[2]), &[&[2, 3], &[2, 3], &[3]]);
    check("outer", &|x| paddle::outer(&x[0], &x[1]), &[&[3], &[2]]);
    check("kron", &|x| paddle::kron(&x[0], &x[1]), &[&[2, 2], &[3, 1]]);
    check("norm fro", &|x| x[0].norm(NormKind::Fro, &[1], false), &[&[3, 4]]);
    check("norm p=3", &|x| x[0].norm(NormKind::P(3.0), &[], true), &[&[2, 3]]);
    check("norm inf", &|x| x[0].norm(NormKind::Inf, &[0], false), &[&[3, 2]]);
    common::report("composed gradchecks", &failures);

    // The zero vector: the 2-norm's gradient is 0 there (a subgradient), not NaN.
    let z = Tensor::from_vec_on(vec![0.0f64, 0.0], [2], Place::Cpu).unwrap();
    z.set_stop_gradient(false);
    z.norm(NormKind::P(2.0), &[], false).unwrap().backward().unwrap();
    assert_eq!(values(&z.grad().unwrap()), vec![0.0, 0.0]);
}

/// `cumsum`, `cumprod`, `tril` and `norm` as a static program: the same values and input
/// gradients as eager on every place, for a batch size the program did not fix.
#[test]
fn scans_and_triangles_run_in_static_programs() {
    let _generator = common::generator_lock();
    for place in places() {
        let model = |x: &Tensor| -> paddle::Result<Tensor> {
            let c = paddle::cumsum(&paddle::tril(x, 0)?, Some(1))?;
            paddle::cumprod(&c.scale(0.1, 1.0)?, Some(-1))?.norm(NormKind::Fro, &[1], false)
        };
        let mut rng = Rng::new(common::run_seed() ^ 5);
        let x = t(&rng.vec(15, -1.0, 1.0), &[3, 5], place);
        x.set_stop_gradient(false);
        let eager = model(&x).unwrap();
        eager.sum(&[], false).unwrap().backward().unwrap();

        let (main, startup) = (Program::new(), Program::new());
        let (out, grads) = st::program_guard(&main, &startup, || {
            let xv = st::data("x", &[-1, 5], DType::Float32).unwrap();
            xv.set_stop_gradient(false);
            let out = model(&xv).unwrap();
            let grads = st::gradients(&[out.sum(&[], false).unwrap()], &[xv], None).unwrap();
            (out, grads)
        });
        let exe = Executor::with_scope(place, Scope::new());
        let fetch = [out.name().unwrap(), grads[0].as_ref().unwrap().name().unwrap()];
        let got = exe.run(&main, &[("x", &x.detach())], &fetch).unwrap();
        assert_close(&format!("static forward on {place}"), &values(&got[0]), &values(&eager), 1e-5);
        assert_close(&format!("static gradient on {place}"), &values(&got[1]), &values(&x.grad().unwrap()), 1e-5);
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let _generator = common::generator_lock();
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]).unwrap();
    let err = |r: paddle::Result<Tensor>| r.expect_err("expected an error");
    assert!(matches!(err(paddle::tril(&x, 0)), Error::Shape { op: "tril", .. }));
    assert!(matches!(
        err(paddle::cumsum(&x.greater_than_scalar(1).unwrap(), None)),
        Error::UnsupportedDType { op: "cumsum", .. }
    ));
    assert!(matches!(err(paddle::cumsum(&x, Some(1))), Error::Axis { op: "cumsum", .. }));
    assert!(matches!(err(x.roll(&[1, 2], &[0])), Error::InvalidArgument { op: "roll", .. }));
    assert!(matches!(err(x.roll(&[1, 2], &[])), Error::InvalidArgument { op: "roll", .. }));
    let m = Tensor::from_vec(vec![1.0f32; 4], [2, 2]).unwrap();
    assert!(matches!(paddle::meshgrid(std::slice::from_ref(&m)).unwrap_err(), Error::Shape { op: "meshgrid", .. }));
    let bad = Tensor::from_vec(vec![1i64, -1, 2], [3]).unwrap();
    assert!(matches!(err(paddle::repeat_interleave_by(&x, &bad, None)), Error::InvalidArgument { .. }));
    let ints = Tensor::from_vec(vec![1i64, 2], [2]).unwrap();
    assert!(matches!(err(ints.norm(NormKind::Fro, &[], false)), Error::UnsupportedDType { op: "norm", .. }));
    assert!(matches!(
        err(paddle::diff(&paddle::full([0usize; 0], 1.0, DType::Float32).unwrap(), 1, 0, None, None)),
        Error::Shape { .. }
    ));
    let mask = Tensor::from_vec(vec![1.0f32, 0.0, 1.0], [3]).unwrap();
    assert!(matches!(err(x.masked_fill(&mask, 0.0)), Error::UnsupportedDType { op: "where", .. }));
}

#[test]
fn scatters_match_hand_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = t(&[1., 2., 3., 4., 5., 6.], &[3, 2], place);
        let i64s = |v: &[i64], shape: &[usize]| Tensor::from_vec_on(v.to_vec(), shape, place).unwrap();
        let idx = i64s(&[2, 0, 2], &[3]);
        let up = t(&[10., 11., 20., 21., 30., 31.], &[3, 2], place);
        exact("scatter overwrite", &x.scatter(&idx, &up, true).unwrap(), &[3, 2], &[20., 21., 3., 4., 30., 31.]);
        exact("scatter sum", &x.scatter(&idx, &up, false).unwrap(), &[3, 2], &[20., 21., 3., 4., 40., 42.]);
        let cols = t(&[1., 1., 1., 2., 2., 2.], &[3, 2], place);
        let ia = x.index_add(&i64s(&[1, 1], &[2]), 1, &cols).unwrap();
        exact("index_add along axis 1", &ia, &[3, 2], &[1., 4., 3., 7., 5., 10.]);

        let along = i64s(&[0, 2], &[1, 2]);
        let p = x.put_along_axis(&along, &t(&[9.], &[1], place), 0, "assign").unwrap();
        exact("put_along_axis assign, broadcast value", &p, &[3, 2], &[9., 2., 3., 4., 5., 9.]);
        let p = x.put_along_axis(&along, &t(&[9., 7.], &[1, 2], place), 0, "add").unwrap();
        exact("put_along_axis add", &p, &[3, 2], &[10., 2., 3., 4., 5., 13.]);

        let nd = i64s(&[0, 1, 2, 0, 0, 1], &[3, 2]);
        let r = paddle::scatter_nd_add(&x, &nd, &t(&[1., 2., 3.], &[3], place)).unwrap();
        exact("scatter_nd_add, full coordinates, a duplicate", &r, &[3, 2], &[1., 6., 3., 4., 7., 6.]);
        let r = paddle::scatter_nd_add(&x, &i64s(&[2, 2], &[2, 1]), &t(&[1., 1., 2., 2.], &[2, 2], place)).unwrap();
        exact("scatter_nd_add, row coordinates", &r, &[3, 2], &[1., 2., 3., 4., 8., 9.]);
        let r = paddle::scatter_nd(&i64s(&[1, 3], &[2, 1]), &t(&[5., 6.], &[2], place), &[4]).unwrap();
        exact("scatter_nd", &r, &[4], &[0., 5., 0., 6.]);
        let ints = Tensor::from_vec_on(vec![1i64, 2, 3], [3], place).unwrap();
        let r = ints.scatter(&i64s(&[1], &[1]), &i64s(&[-5], &[1]), true).unwrap();
        exact("scatter int64", &r, &[3], &[1., -5., 3.]);
    }
}

#[test]
fn scatters_gradcheck_and_reject_bad_indices() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 9);
    let mut failures = Vec::new();
    let mut check = |name: &str, f: &dyn Fn(&[Tensor]) -> paddle::Result<Tensor>, shapes: &[&[usize]]| {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec(s.iter().product(), -2.0, 2.0), s.to_vec())).collect();
        failures.extend(gradcheck(name, f, &inputs).err());
    };
    let ix = |v: &[i64], s: &[usize]| Tensor::from_vec_on(v.to_vec(), s, Place::Cpu).unwrap();
    check("scatter overwrite", &|x| x[0].scatter(&ix(&[2, 0], &[2]), &x[1], true), &[&[3, 2], &[2, 2]]);
    check("scatter sum", &|x| x[0].scatter(&ix(&[2, 0], &[2]), &x[1], false), &[&[3, 2], &[2, 2]]);
    check("index_add", &|x| x[0].index_add(&ix(&[1, 1], &[2]), 1, &x[1]), &[&[3, 2], &[3, 2]]);
    check("put_along_axis", &|x| x[0].put_along_axis(&ix(&[1, 0], &[1, 2]), &x[1], 0, "assign"), &[&[3, 2], &[1, 2]]);
    check("scatter_nd_add", &|x| paddle::scatter_nd_add(&x[0], &ix(&[0, 1, 2, 0], &[2, 2]), &x[1]), &[&[3, 2], &[2]]);
    common::report("scatter gradchecks", &failures);

    // The error checks on the CPU whatever the default place (the GPU's are in gpu_index_errors.rs).
    paddle::guard(Place::Cpu, || {
        let x = Tensor::from_vec(vec![1.0f32; 6], [3, 2]).unwrap();
        let up = Tensor::from_vec(vec![1.0f32; 4], [2, 2]).unwrap();
        let bad = Tensor::from_vec(vec![0i64, 3], [2]).unwrap();
        let e = x.to(Place::Cpu).unwrap().scatter(&bad, &up, true).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument { op: "scatter_axis", .. }) && e.to_string().contains("index 3"),
            "{e}"
        );
        let wrong = Tensor::from_vec(vec![1.0f32; 6], [2, 3]).unwrap();
        assert!(matches!(x.scatter(&ix(&[0, 1], &[2]), &wrong, true).unwrap_err(), Error::Shape { .. }));
        assert!(matches!(x.put_along_axis(&ix(&[0], &[1]), &up, 0, "mul").unwrap_err(), Error::InvalidArgument { .. }));
        let nd = ix(&[0, 2], &[1, 2]);
        let e = paddle::scatter_nd_add(&x.to(Place::Cpu).unwrap(), &nd, &Tensor::from_vec(vec![1.0f32], [1]).unwrap());
        assert!(matches!(e, Err(Error::InvalidArgument { op: "scatter_axis", .. })), "{e:?}");
    });
}

fn f32s(v: &[f64], place: Place) -> Tensor {
    common::tensor(v, &[v.len()], DType::Float32, place)
}

fn bools(t: &Tensor) -> Vec<bool> {
    assert_eq!(t.dtype(), DType::Bool);
    t.to_vec::<bool>().unwrap()
}

#[test]
fn rust_operators() {
    let _generator = common::generator_lock();
    for place in places() {
        let a = f32s(&[1.0, 2.0, 4.0], place);
        let b = f32s(&[2.0, 8.0, 3.0], place);
        let v = |t: Tensor| values(&t);
        assert_eq!(v(&a + &b), [3.0, 10.0, 7.0], "a + b on {place}");
        assert_eq!(v(&a - &b), [-1.0, -6.0, 1.0]);
        assert_eq!(v(&a * &b), [2.0, 16.0, 12.0]);
        assert_eq!(v(&a / &b), [0.5, 0.25, (4.0f32 / 3.0) as f64]);
        assert_eq!(v(&b % &a), [0.0, 0.0, 3.0]);
        assert_eq!(v(a.clone() + b.clone()), [3.0, 10.0, 7.0]);
        assert_eq!(v(a.clone() * &b), [2.0, 16.0, 12.0]);
        assert_eq!(v(&a * 2.0), [2.0, 4.0, 8.0]);
        assert_eq!(v(2.0 * &a), [2.0, 4.0, 8.0]);
        assert_eq!(v(2.0 - &a), [1.0, 0.0, -2.0]);
        assert_eq!(v(&a - 2.0), [-1.0, 0.0, 2.0]);
        assert_eq!(v(&a + 0.5), [1.5, 2.5, 4.5]);
        assert_eq!(v(&a / 2.0), [0.5, 1.0, 2.0]);
        assert_eq!(v(8.0 / &a), [8.0, 4.0, 2.0]);
        assert_eq!(v(-&a), [-1.0, -2.0, -4.0]);
        assert_eq!(v(-(a.clone())), [-1.0, -2.0, -4.0]);
        assert_eq!((&a * 2.0).place(), place);

        let i = paddle::to_tensor_on([1i64, -7, 9], place).unwrap();
        let r = &i + 1;
        assert_eq!(r.dtype(), DType::Int64, "int + int literal stays int64");
        assert_eq!(r.to_vec::<i64>().unwrap(), [2, -6, 10]);
        assert_eq!((&i * 3).to_vec::<i64>().unwrap(), [3, -21, 27]);
        assert_eq!((&i - 1).to_vec::<i64>().unwrap(), [0, -8, 8]);
        assert_eq!((10 - &i).to_vec::<i64>().unwrap(), [9, 17, 1]);
        assert_eq!(values(&(&i / 2)), [0.5, -3.5, 4.5], "int64 / 2 divides truly into float32 (Paddle 3.x)");
        assert_eq!((&i / 2).dtype(), DType::Float32);
        assert_eq!(
            paddle::floor_divide(&i, &paddle::full_like(&i, 2).unwrap()).unwrap().to_vec::<i64>().unwrap(),
            [0, -4, 4]
        );
        assert_eq!((&i % 4).to_vec::<i64>().unwrap(), [1, 1, 1], "int64 % 4 has the divisor's sign");
        assert_eq!((-&i).to_vec::<i64>().unwrap(), [-1, 7, -9]);
        let f = &i + 0.5;
        assert_eq!(f.dtype(), DType::Float32, "int + fractional float promotes to float32");
        assert_eq!(values(&f), [1.5, -6.5, 9.5]);
        let i32t = paddle::to_tensor_on([5i32, -5], place).unwrap();
        assert_eq!((&i32t + 1).to_vec::<i32>().unwrap(), [6, -4]);
        assert_eq!((&i32t * 2).dtype(), DType::Int32);
        assert_eq!(values(&(&i32t / 2)), [2.5, -2.5]);

        // Operators panic with the fallible method's message.
        let c = f32s(&[1.0, 2.0], place);
        let msg = common::catch("a + c", || drop(&a + &c)).expect("adding [3] and [2] must panic");
        assert!(msg.contains("add") && msg.contains("[3]") && msg.contains("[2]"), "{msg}");
    }
}

/// The public functions' dtype rules (the registry sweep runs each entry on one dtype) and
/// integer results only exact int64 arithmetic gives, read back as integers.
#[test]
fn dtype_rules_and_exact_int64_edges() {
    let _generator = common::generator_lock();
    for place in places() {
        let at = |s: &str| format!("{s} on {place}");
        // Integer operands divide truly into float32 (Paddle 3.x), x / 0 included.
        for dt in [DType::Int32, DType::Int64] {
            let a = common::tensor(&[7.0, -7.0, 5.0, 0.0], &[4], dt, place);
            let b = common::tensor(&[2.0, 2.0, 0.0, 3.0], &[4], dt, place);
            let q = a.divide(&b).unwrap();
            assert_eq!(q.dtype(), DType::Float32, "{}", at(&format!("{dt} divide")));
            assert_eq!(values(&q), [3.5, -3.5, f64::INFINITY, 0.0], "{}", at(&format!("{dt} divide")));
        }
        // Integer powers stay integer and exact; a fractional exponent promotes.
        let a = paddle::to_tensor_on([1i64, 2, 3], place).unwrap();
        assert_eq!(a.pow(9).unwrap().to_vec::<i64>().unwrap(), [1, 512, 19683], "{}", at("int64 pow 9"));
        assert_eq!(a.pow(9).unwrap().dtype(), DType::Int64);
        let big = paddle::to_tensor_on([3i64, -2, 10], place).unwrap().pow(39).unwrap();
        let wrapped = [3i64.wrapping_pow(39), (-2i64).wrapping_pow(39), 10i64.wrapping_pow(39)];
        assert_eq!(wrapped[0], 4052555153018976267);
        assert_eq!(big.to_vec::<i64>().unwrap(), wrapped, "{}", at("int64 pow 39 (3^39 exact, wrapping past 2^63)"));
        let i32p = paddle::to_tensor_on([3i32, -3], place).unwrap().pow(19).unwrap();
        assert_eq!(i32p.to_vec::<i32>().unwrap(), [1162261467, -1162261467], "{}", at("int32 pow 19"));
        let fp = paddle::to_tensor_on([4.0f32, -8.0], place).unwrap();
        assert_eq!(fp.pow(2.5f64).unwrap().dtype(), DType::Float32);
        let h = a.pow(0.5f64).unwrap();
        assert_eq!(h.dtype(), DType::Float32, "int tensor ^ float exponent promotes");
        assert_close(&at("int64 ^ 0.5"), &values(&h), &[1.0, 2f64.sqrt(), 3f64.sqrt()], 1e-6);

        // int64 beyond 32 bits stays exact, to the last bit.
        let l = paddle::to_tensor_on([(1i64 << 40) + 1, -3_000_000_000, i64::MAX], place).unwrap();
        let m = paddle::to_tensor_on([1i64 << 40, 3, 0], place).unwrap();
        assert_eq!(l.add(&m).unwrap().to_vec::<i64>().unwrap(), [(1 << 41) + 1, -2_999_999_997, i64::MAX]);
        assert_eq!(
            l.multiply(&m).unwrap().to_vec::<i64>().unwrap(),
            [(1i64 << 40).wrapping_mul((1 << 40) + 1), -9_000_000_000, 0],
            "{}",
            at("int64 multiply")
        );
        assert_eq!(bools(&l.greater_than(&m).unwrap()), [true, false, true], "{}", at("int64 >"));
        assert_eq!(l.maximum(&m).unwrap().to_vec::<i64>().unwrap(), [(1 << 40) + 1, 3, i64::MAX]);
        let edge = paddle::to_tensor_on([i64::MAX, i64::MIN, i64::MAX - 1], place).unwrap();
        let one = paddle::to_tensor_on([1i64, -1, 1], place).unwrap();
        assert_eq!(
            edge.add(&one).unwrap().to_vec::<i64>().unwrap(),
            [i64::MIN, i64::MAX, i64::MAX],
            "{}",
            at("int64 add wraps at the edges")
        );
        assert_eq!(
            bools(&edge.equal(&paddle::to_tensor_on([i64::MAX, i64::MIN, i64::MAX], place).unwrap()).unwrap()),
            [true, true, false]
        );

        // Logical ops take integers (non-zero is true) and give bool.
        let i = common::tensor(&[0.0, 1.0, 2.0], &[3], DType::Int32, place);
        let j = common::tensor(&[1.0, 1.0, 0.0], &[3], DType::Int32, place);
        assert_eq!(bools(&i.logical_and(&j).unwrap()), [false, true, false], "{}", at("logical_and"));
        assert_eq!(bools(&i.logical_or(&j).unwrap()), [true, true, true], "{}", at("logical_or"));
        assert_eq!(bools(&i.logical_xor(&j).unwrap()), [true, false, true], "{}", at("logical_xor"));
        assert_eq!(bools(&i.logical_not().unwrap()), [true, false, false], "{}", at("logical_not"));
    }
}

/// A composed op of one input.
type Composite = Box<dyn Fn(&[Tensor]) -> paddle::Result<Tensor>>;

/// `logsumexp`, `var`, `std`, `add_n`, `sums`: built from registered ops, so outside the
/// sweep. Hand values on every place, float64 gradchecks, and the GPU against the CPU with
/// gradients.
#[test]
fn composite_reductions_match_hand_values_gradcheck_and_the_gpu() {
    let _generator = common::generator_lock();
    for place in places() {
        let v = |r: paddle::Result<Tensor>| values(&r.unwrap());
        let y = t(&[1.0, 2.0, 3.0, 4.0], &[4], place);
        assert_close("var unbiased", &v(y.var(&[], true, false)), &[5.0 / 3.0], 1e-7);
        assert_close("var biased", &v(y.var(&[], false, false)), &[1.25], 1e-7);
        assert_close("std unbiased", &v(y.std(&[], true, false)), &[(5.0f64 / 3.0).sqrt()], 1e-7);
        assert_close("std biased", &v(y.std(&[0], false, true)), &[1.25f64.sqrt()], 1e-7);
        assert_eq!(y.std(&[0], false, true).unwrap().shape(), [1]);
        let z = t(&[1.0, 3.0, 2.0, 6.0], &[2, 2], place);
        assert_close("var axis 1", &v(z.var(&[1], true, false)), &[2.0, 8.0], 1e-7);

        let l = t(&[0.0, 0.0, 1000.0, 1000.0, f64::NEG_INFINITY, f64::NEG_INFINITY], &[3, 2], place);
        let r = v(l.logsumexp(&[1], false));
        assert_close(&format!("logsumexp on {place}"), &r[..2], &[2f64.ln(), 1000.0 + 2f64.ln()], 1e-7);
        assert_eq!(r[2], f64::NEG_INFINITY, "logsumexp of a row of -inf on {place}");
        assert_eq!(l.logsumexp(&[1], true).unwrap().shape(), [3, 1]);
        let top = l.slice(&[0], &[0], &[2]).unwrap();
        assert_close("logsumexp all", &v(top.logsumexp(&[], false)), &[1000.0 + 2f64.ln()], 1e-7);

        let a = t(&[1.0, 2.0], &[2], place);
        let b = t(&[10.0, 20.0], &[2], place);
        let c = t(&[100.0, 200.0], &[2], place);
        exact("add_n", &paddle::add_n(&[a.clone(), b.clone(), c]).unwrap(), &[2], &[111.0, 222.0]);
        exact("sums", &paddle::sums(&[a.clone(), b]).unwrap(), &[2], &[11.0, 22.0]);
        exact("add_n of one", &paddle::add_n(std::slice::from_ref(&a)).unwrap(), &[2], &[1.0, 2.0]);
    }

    let fs: Vec<(&str, Composite)> = vec![
        ("logsumexp all", Box::new(|x: &[Tensor]| x[0].logsumexp(&[], false))),
        ("logsumexp [1]", Box::new(|x: &[Tensor]| x[0].logsumexp(&[1], false))),
        ("logsumexp [0, 2] keepdim", Box::new(|x: &[Tensor]| x[0].logsumexp(&[0, 2], true))),
        ("var [1] unbiased", Box::new(|x: &[Tensor]| x[0].var(&[1], true, false))),
        ("var [0, 1] biased keepdim", Box::new(|x: &[Tensor]| x[0].var(&[0, 1], false, true))),
        ("std [0, 2]", Box::new(|x: &[Tensor]| x[0].std(&[0, 2], true, true))),
        ("std [-1] biased", Box::new(|x: &[Tensor]| x[0].std(&[-1], false, false))),
        ("add_n", Box::new(|x: &[Tensor]| paddle::add_n(&[x[0].clone(), x[0].square()?, x[0].scale(2.0, 1.0)?]))),
    ];
    let mut rng = Rng::new(700);
    let small = [(rng.vec(24, -2.0, 2.0), vec![3usize, 4, 2])];
    let large = [(rng.vec(4 * 5 * 6, -2.0, 2.0), vec![4usize, 5, 6])];
    let mut failures = Vec::new();
    for (name, f) in &fs {
        failures.extend(gradcheck(name, f.as_ref(), &small).err());
        failures.extend(common::catch(name, || common::gpu_matches_cpu(name, f.as_ref(), &large, true, 1e-5)));
    }
    common::report("composite reductions", &failures);
}

/// The shape composites built from registered ops (`t`, `stack`, `split`, `chunk`,
/// `expand`, `tile`, `linear`, `dot`, `Tensor::matmul`) against values written out, on
/// every place, and their float64 gradchecks.
#[test]
fn shape_composites_match_hand_values() {
    let _generator = common::generator_lock();
    let iota = |n: usize| (0..n).map(|i| i as f64).collect::<Vec<f64>>();
    for place in places() {
        let w = |s: &str| format!("{s} on {place}");
        exact(&w("t"), &t(&iota(6), &[2, 3], place).t().unwrap(), &[3, 2], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);

        let p = t(&[1.0, 2.0], &[2], place);
        let q = t(&[3.0, 4.0], &[2], place);
        exact(&w("stack 0"), &paddle::stack(&[p.clone(), q.clone()], 0).unwrap(), &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        exact(&w("stack 1"), &paddle::stack(&[p.clone(), q.clone()], 1).unwrap(), &[2, 2], &[1.0, 3.0, 2.0, 4.0]);
        let s = paddle::stack(&[p.clone(), q.clone(), p.clone()], -1).unwrap();
        exact(&w("stack -1"), &s, &[2, 3], &[1.0, 3.0, 1.0, 2.0, 4.0, 2.0]);
        let a = t(&iota(6), &[2, 3], place);
        let a3 = paddle::stack(&[a.clone(), a.clone()], 1).unwrap();
        exact(&w("stack 2-D"), &a3, &[2, 2, 3], &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);

        let x = t(&iota(12), &[2, 6], place);
        let parts = x.split(3, 1).unwrap();
        assert_eq!(parts.len(), 3);
        exact(&w("split 3 [0]"), &parts[0], &[2, 2], &[0.0, 1.0, 6.0, 7.0]);
        exact(&w("split 3 [2]"), &parts[2], &[2, 2], &[4.0, 5.0, 10.0, 11.0]);
        let parts = paddle::split(&x, [1, -1, 2], -1).unwrap();
        assert_eq!(parts.iter().map(|p| p.shape()[1]).collect::<Vec<_>>(), [1, 3, 2]);
        exact(&w("split sizes [1]"), &parts[1], &[2, 3], &[1.0, 2.0, 3.0, 7.0, 8.0, 9.0]);
        let parts = paddle::split(&x, paddle::Sections::Sizes(vec![6, 0]), 1).unwrap();
        assert_eq!(parts[1].shape(), [2, 0]);
        let parts = x.split(&[1i64, 1][..], 0).unwrap();
        exact(&w("split axis 0"), &parts[1], &[1, 6], &iota(12)[6..]);
        let chunks = x.chunk(2, 1).unwrap();
        exact(&w("chunk"), &chunks[1], &[2, 3], &[3.0, 4.0, 5.0, 9.0, 10.0, 11.0]);

        let r = t(&[1.0, 2.0, 3.0], &[3], place);
        exact(&w("expand, -1 keeps"), &r.expand(&[2, -1]).unwrap(), &[2, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let col = t(&[1.0, 2.0], &[2, 1], place);
        exact(&w("expand col"), &col.expand(&[2, 3]).unwrap(), &[2, 3], &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        exact(&w("expand to 0"), &r.expand(&[0, 3]).unwrap(), &[0, 3], &[]);
        exact(&w("broadcast_to the same shape"), &r.broadcast_to(&[3]).unwrap(), &[3], &[1.0, 2.0, 3.0]);

        for (reps, out, expected) in [
            (vec![2usize], vec![2usize, 6], vec![0., 1., 2., 0., 1., 2., 3., 4., 5., 3., 4., 5.]),
            (vec![2, 1], vec![4, 3], vec![0., 1., 2., 3., 4., 5., 0., 1., 2., 3., 4., 5.]),
            (vec![1, 1], vec![2, 3], iota(6)),
        ] {
            exact(&w(&format!("tile {reps:?}")), &a.tile(&reps).unwrap(), &out, &expected);
        }
        let tiled = a.tile(&[2, 1, 2]).unwrap();
        assert_eq!(tiled.shape(), [2, 2, 6], "{}", w("tile to a higher rank"));
        assert_eq!(values(&tiled)[..12], [0., 1., 2., 0., 1., 2., 3., 4., 5., 3., 4., 5.]);

        let m = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], place);
        let wt = t(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2], place);
        let b = t(&[10.0, 20.0], &[2], place);
        exact(&w("linear"), &paddle::linear(&m, &wt, Some(&b)).unwrap(), &[2, 2], &[14.0, 25.0, 20.0, 31.0]);
        exact(&w("linear, no bias"), &paddle::linear(&m, &wt, None).unwrap(), &[2, 2], &[4.0, 5.0, 10.0, 11.0]);
        exact(&w("dot"), &paddle::dot(&r, &r).unwrap(), &[], &[14.0]);
        exact(&w("row-wise dot"), &paddle::dot(&m, &m).unwrap(), &[2], &[14.0, 77.0]);
        exact(&w("x.matmul(vector)"), &m.matmul(&r).unwrap(), &[2], &[14.0, 32.0]);
    }

    let cases: Vec<(&str, Composite, Vec<Vec<usize>>)> = vec![
        ("stack", Box::new(|x: &[Tensor]| paddle::stack(&[x[0].clone(), x[1].square()?], -1)), vec![vec![2, 3]; 2]),
        (
            "split",
            Box::new(|x: &[Tensor]| {
                let p = paddle::split(&x[0], [1, -1], 1)?;
                p[0].square()?.add(&p[1].sum(&[1], true)?)
            }),
            vec![vec![2, 4]],
        ),
        ("chunk", Box::new(|x: &[Tensor]| x[0].chunk(2, 0).and_then(|p| p[0].mul(&p[1]))), vec![vec![4, 3]]),
        ("expand", Box::new(|x: &[Tensor]| x[0].expand(&[3, -1, 2])?.square()), vec![vec![2, 1]]),
        ("tile", Box::new(|x: &[Tensor]| x[0].tile(&[2, 1, 3])?.square()), vec![vec![2, 2]]),
        (
            "linear",
            Box::new(|x: &[Tensor]| paddle::linear(&x[0], &x[1], Some(&x[2]))),
            vec![vec![3, 4], vec![4, 2], vec![2]],
        ),
        ("dot", Box::new(|x: &[Tensor]| paddle::dot(&x[0], &x[1])), vec![vec![3, 4], vec![3, 4]]),
    ];
    let mut rng = Rng::new(300);
    let mut failures = Vec::new();
    for (name, f, shapes) in cases {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.into_iter().map(|s| (rng.vec(s.iter().product(), -2.0, 2.0), s)).collect();
        failures.extend(gradcheck(name, f.as_ref(), &inputs).err());
    }
    common::report("shape composite gradchecks", &failures);
}

/// The public `*_with_index` pools give int64 indices (the registered ops' int32 argmax is
/// in the sweep) of the output's shape, positions in each plane.
#[test]
fn pools_with_index_give_int64_plane_positions() {
    let _generator = common::generator_lock();
    let seq = |n: usize| (1..=n).map(|i| i as f64).collect::<Vec<f64>>();
    for place in places() {
        let x = t(&seq(32), &[1, 2, 4, 4], place);
        let (out, idx) = paddle::max_pool2d_with_index(&x, &paddle::Pool2dOptions::new(2)).unwrap();
        exact(
            &format!("max_pool2d_with_index on {place}"),
            &out,
            &[1, 2, 2, 2],
            &[6.0, 8.0, 14.0, 16.0, 22.0, 24.0, 30.0, 32.0],
        );
        assert_eq!((idx.dtype(), idx.shape()), (DType::Int64, &[1usize, 2, 2, 2][..]), "on {place}");
        assert_eq!(idx.to_vec::<i64>().unwrap(), [5, 7, 13, 15, 5, 7, 13, 15], "on {place}");
        let (out, idx) = paddle::adaptive_max_pool2d_with_index(&t(&seq(5), &[1, 1, 1, 5], place), [1, 3]).unwrap();
        exact(&format!("adaptive_max_pool2d_with_index on {place}"), &out, &[1, 1, 1, 3], &[2.0, 4.0, 5.0]);
        assert_eq!((idx.dtype(), idx.to_vec::<i64>().unwrap()), (DType::Int64, vec![1, 3, 4]), "on {place}");
    }
}
