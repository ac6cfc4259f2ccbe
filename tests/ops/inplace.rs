//! In-place ops and the version counter: values on every place (views see the write),
//! gradients through in-place ops on non-leaf tensors against hand values, the typed errors
//! for a leaf that requires a gradient and for a tensor saved for backward and modified
//! afterwards (also through a view), and no error where the saved value is not read.

use crate::common;

use common::{assert_close, places, values};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

fn f32s(v: &[f32], shape: &[usize], place: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, place).unwrap()
}

#[test]
fn in_place_ops_write_the_memory_every_view_sees() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = f32s(&[1., 2., 3., 4.], &[2, 2], place);
        let view = x.reshape([4usize]).unwrap();
        assert_eq!(x.inplace_version(), 0);
        x.add_(&f32s(&[10., 20.], &[2], place)).unwrap();
        assert_eq!(values(&view), [11., 22., 13., 24.], "the view sees the write on {place}");
        assert_eq!((x.inplace_version(), view.inplace_version()), (1, 1), "views share one counter");
        view.scale_(0.5, 1.0).unwrap();
        assert_eq!(values(&x), [6.5, 12., 7.5, 13.]);
        x.subtract_(&f32s(&[0.5], &[1], place)).unwrap().multiply_(&f32s(&[2., 1.], &[2], place)).unwrap();
        assert_eq!(values(&x), [12., 11.5, 14., 12.5]);
        x.divide_(&f32s(&[4.], &[], place)).unwrap().clip_(3.0, 3.5).unwrap();
        assert_eq!(values(&x), [3., 3., 3.5, 3.125]);
        let mut y = x.clone();
        y += &f32s(&[1., 1., 1., 1.], &[2, 2], place);
        y *= 2.0;
        y -= 1.0;
        y /= &f32s(&[2.], &[1], place);
        assert_eq!(values(&x), [3.5, 3.5, 4.0, 3.625], "x and its handle clone are one tensor");
        x.fill_(7).unwrap();
        assert_eq!(values(&view), [7.; 4]);
        x.zero_().unwrap();
        assert_eq!(values(&x), [0.; 4]);
        let before = x.inplace_version();
        assert!(x.add_(&f32s(&[1., 2., 3.], &[3], place)).is_err(), "a shape that does not broadcast");
        assert!(x.add_(&f32s(&[1.; 8], &[2, 2, 2], place)).is_err(), "a result larger than the tensor");
        let ints = Tensor::from_vec_on(vec![1i64, 2], [2], place).unwrap();
        assert!(ints.multiply_(&f32s(&[0.5, 0.5], &[2], place)).is_err(), "int64 cannot hold the float result");
        assert_eq!(x.inplace_version(), before, "failed in-place ops write nothing");
    }
}

#[test]
fn uniform_and_normal_redraw_in_place() {
    let _g = common::generator_lock();
    for place in places() {
        let x = paddle::zeros_on([1000usize], DType::Float32, place).unwrap();
        x.uniform_(-2.0, 3.0).unwrap();
        let v = values(&x);
        assert!(v.iter().all(|&a| (-2.0..=3.0).contains(&a)), "uniform_ on {place}");
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 0.5).abs() < 0.2, "uniform_ mean {mean} on {place}");
        x.normal_(5.0, 0.1).unwrap();
        let mean = values(&x).iter().sum::<f64>() / 1000.0;
        assert!((mean - 5.0).abs() < 0.05, "normal_ mean {mean} on {place}");
    }
}

#[test]
fn gradients_flow_through_in_place_ops_on_non_leaf_tensors() {
    let _generator = common::generator_lock();
    for place in places() {
        let w = f32s(&[1., 2., 3.], &[3], place);
        w.set_stop_gradient(false);
        let y = f32s(&[4., 5., 6.], &[3], place);
        y.set_stop_gradient(false);
        // h = w·2; h *= y; h += 1; loss = Σ h². d/dw = 2h·2y, d/dy = 2h·2w.
        let h = w.scale(2.0, 0.0).unwrap();
        h.multiply_(&y).unwrap();
        h.add_(&f32s(&[1.], &[1], place)).unwrap();
        assert!(!h.is_leaf());
        h.square().unwrap().sum(&[], false).unwrap().backward().unwrap();
        let hv: Vec<f64> = [1., 2., 3.].iter().zip([4., 5., 6.]).map(|(a, b)| 2.0 * a * b + 1.0).collect();
        let dw: Vec<f64> = hv.iter().zip([4., 5., 6.]).map(|(h, b)| 2.0 * h * 2.0 * b).collect();
        let dy: Vec<f64> = hv.iter().zip([1., 2., 3.]).map(|(h, a)| 2.0 * h * 2.0 * a).collect();
        assert_close(&format!("dw on {place}"), &values(&w.grad().unwrap()), &dw, 1e-5);
        assert_close(&format!("dy on {place}"), &values(&y.grad().unwrap()), &dy, 1e-5);

        // A tensor that did not need a gradient joins the graph when an operand does.
        let data = f32s(&[1., 1., 1.], &[3], place);
        let p = f32s(&[0.5, 0.5, 0.5], &[3], place);
        p.set_stop_gradient(false);
        data.multiply_(&p).unwrap();
        data.sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(values(&p.grad().unwrap()), [1., 1., 1.]);

        // Filling cuts the tensor from the graph.
        let q = w.scale(3.0, 0.0).unwrap();
        q.fill_(1.0).unwrap();
        assert!(q.stop_gradient());
    }
}

#[test]
fn modifying_a_saved_tensor_makes_backward_an_error() {
    let _generator = common::generator_lock();
    for place in places() {
        let w = f32s(&[1., 2.], &[2], place);
        w.set_stop_gradient(false);
        // A parameter cannot be written while gradients are recorded; under no_grad it can.
        let e = w.add_(&f32s(&[1., 1.], &[2], place)).unwrap_err();
        assert!(matches!(e, Error::Autograd(ref m) if m.contains("leaf")), "{e}");
        paddle::no_grad(|| w.add_(&f32s(&[0., 0.], &[2], place)).map(|_| ())).unwrap();

        // multiply saves x to compute w's gradient: writing x afterwards is an error.
        let x = f32s(&[3., 4.], &[2], place);
        let out = w.multiply(&x).unwrap().sum(&[], false).unwrap();
        x.add_(&f32s(&[1., 1.], &[2], place)).unwrap();
        let e = out.backward().unwrap_err();
        assert!(matches!(&e, Error::Autograd(m) if m.contains("multiply") && m.contains("in-place")), "{e}");

        // Through a view of the saved tensor, too.
        let x = f32s(&[3., 4.], &[2], place);
        let out = w.multiply(&x).unwrap().sum(&[], false).unwrap();
        x.reshape([1usize, 2]).unwrap().scale_(2.0, 0.0).unwrap();
        assert!(out.backward().is_err(), "a write through a view on {place}");

        // An op's own output read by its gradient (exp) and modified afterwards.
        let y = w.exp().unwrap();
        let z = y.sum(&[], false).unwrap();
        paddle::no_grad(|| y.scale_(2.0, 0.0).map(|_| ())).unwrap();
        let e = z.backward().unwrap_err();
        assert!(matches!(&e, Error::Autograd(m) if m.contains("exp")), "{e}");

        // add's gradient does not read its operands: writing one afterwards is fine.
        w.clear_gradient();
        let x = f32s(&[3., 4.], &[2], place);
        let out = w.add(&x).unwrap().sum(&[], false).unwrap();
        x.add_(&f32s(&[1., 1.], &[2], place)).unwrap();
        out.backward().unwrap();
        assert_eq!(values(&w.grad().unwrap()), [1., 1.]);
    }
}
