//! The autograd engine: accumulation, shared weights, higher order, retain_graph, no_grad,
//! hooks, stop_gradient pruning, grad() and its errors — on both places.

use crate::common;

use common::places;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dygraph::{self as paddle, DType, Error, GradOptions, Place, Tensor};

fn leaf(v: &[f32], shape: &[usize], place: Place) -> Tensor {
    let t = Tensor::from_vec_on(v.to_vec(), shape, place).unwrap();
    t.set_stop_gradient(false);
    t
}

fn grad_of(t: &Tensor) -> Vec<f64> {
    common::values(&t.grad().expect("gradient present"))
}

#[test]
fn gradients_accumulate_where_a_tensor_is_used_twice() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = leaf(&[1.0, 2.0, 3.0], &[3], place);
        // y = x·x + 3x  →  dy/dx = 2x + 3
        let y = x.mul(&x).unwrap().add(&x.mul_scalar(3.0).unwrap()).unwrap();
        y.sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![5.0, 7.0, 9.0], "{place}");
        // A second backward accumulates into .grad.
        let y = x.mul_scalar(2.0).unwrap().sum(&[], false).unwrap();
        y.backward().unwrap();
        assert_eq!(grad_of(&x), vec![7.0, 9.0, 11.0], "{place}");
        x.clear_gradient();
        assert!(x.grad().is_none());
    }
}

#[test]
fn shared_weight_used_in_two_matmuls() {
    let _generator = common::generator_lock();
    // The seed's autoencoder: hidden = x·w, out = hidden·wᵀ, so dL/dw sums two paths.
    for place in places() {
        let mut rng = common::Rng::new(1);
        let (xv, wv) = (rng.vec(12, -1.0, 1.0), rng.vec(6, -1.0, 1.0));
        let run = |place: Place| {
            let x = common::tensor(&xv, &[4, 3], DType::Float64.min_for(place), place);
            let w = common::tensor(&wv, &[3, 2], DType::Float64.min_for(place), place);
            w.set_stop_gradient(false);
            let hidden = paddle::matmul(&x, &w, false, false).unwrap();
            let out = paddle::matmul(&hidden, &w, false, true).unwrap();
            out.sub(&x).unwrap().square().unwrap().mean(&[], false).unwrap().backward().unwrap();
            grad_of(&w)
        };
        let got = run(place);
        // Reference: the same loss with the weight duplicated into two independent leaves.
        let x = common::tensor(&xv, &[4, 3], DType::Float64, Place::Cpu);
        let w1 = common::tensor(&wv, &[3, 2], DType::Float64, Place::Cpu);
        let w2 = common::tensor(&wv, &[3, 2], DType::Float64, Place::Cpu);
        w1.set_stop_gradient(false);
        w2.set_stop_gradient(false);
        let out = paddle::matmul(&paddle::matmul(&x, &w1, false, false).unwrap(), &w2, false, true).unwrap();
        out.sub(&x).unwrap().square().unwrap().mean(&[], false).unwrap().backward().unwrap();
        let expected: Vec<f64> = grad_of(&w1).iter().zip(grad_of(&w2)).map(|(a, b)| a + b).collect();
        common::assert_close(&format!("shared weight gradient on {place}"), &got, &expected, 1e-5);
    }
}

trait MinFor {
    fn min_for(self, place: Place) -> DType;
}

impl MinFor for DType {
    /// float64 on the CPU, float32 on a GPU.
    fn min_for(self, place: Place) -> DType {
        if place.is_gpu() { DType::Float32 } else { self }
    }
}

#[test]
fn second_order_gradient_of_cube_is_6x() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = leaf(&[0.5, -1.0, 2.0], &[3], place);
        let y = x.pow(3).unwrap().sum(&[], false).unwrap();
        let dx = paddle::grad(&[y], std::slice::from_ref(&x), None, false, true, false).unwrap().remove(0).unwrap();
        common::assert_close("d(x³)/dx", &common::values(&dx), &[0.75, 3.0, 12.0], 1e-6);
        let d2 = paddle::grad(&[dx.sum(&[], false).unwrap()], std::slice::from_ref(&x), None, false, false, false)
            .unwrap()
            .remove(0)
            .unwrap();
        common::assert_close("d²(x³)/dx²", &common::values(&d2), &[3.0, -6.0, 12.0], 1e-6);
        assert!(x.grad().is_none(), "grad() must not touch .grad");
    }
}

#[test]
fn retain_graph_allows_a_second_backward_and_a_freed_graph_errors() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = leaf(&[1.0, 2.0], &[2], place);
        let y = x.exp().unwrap().sum(&[], false).unwrap();
        y.backward_with(GradOptions { grad_tensor: None, retain_graph: true }).unwrap();
        y.backward().unwrap();
        let e: Vec<f64> = [1.0f64, 2.0].iter().map(|v| 2.0 * v.exp()).collect();
        common::assert_close("twice-accumulated gradient", &grad_of(&x), &e, 1e-6);
        let err = y.backward().unwrap_err();
        assert!(matches!(err, Error::Autograd(_)), "{err}");
        assert!(err.to_string().contains("second time"), "{err}");
    }
}

#[test]
fn no_grad_closure_and_guard_record_nothing() {
    let _generator = common::generator_lock();
    let x = leaf(&[1.0, 2.0], &[2], Place::Cpu);
    let y = paddle::no_grad(|| x.mul_scalar(2.0)).unwrap();
    assert!(y.stop_gradient() && y.is_leaf());
    {
        let _g = paddle::no_grad_guard();
        assert!(!paddle::is_grad_enabled());
        let z = x.exp().unwrap();
        assert!(z.stop_gradient());
        {
            let _e = paddle::enable_grad();
            assert!(!x.exp().unwrap().stop_gradient());
        }
    }
    assert!(paddle::is_grad_enabled());
    assert!(!x.exp().unwrap().stop_gradient());
}

#[test]
fn hooks_see_and_may_replace_gradients() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = leaf(&[1.0, 2.0, 3.0], &[3], place);
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        x.register_hook(move |g| {
            s.fetch_add(1, Ordering::SeqCst);
            Some(g.mul_scalar(10.0).unwrap())
        })
        .unwrap();
        let h = x.mul_scalar(2.0).unwrap();
        // A hook on a non-leaf replaces the gradient flowing further back.
        h.register_hook(|g| Some(g.add_scalar(1.0).unwrap())).unwrap();
        h.sum(&[], false).unwrap().backward().unwrap();
        // dL/dh = 1 → hook → 2; dL/dx = 2·2 = 4 → leaf hook → 40.
        assert_eq!(grad_of(&x), vec![40.0; 3], "{place}");
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn stop_gradient_prunes_and_detach_cuts() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = leaf(&[1.0, 2.0], &[2], place);
        let c = Tensor::from_vec_on(vec![3.0f32, 4.0], [2], place).unwrap();
        assert!(c.stop_gradient(), "to_tensor gives stop_gradient=True");
        let y = x.mul(&c).unwrap().add(&x.detach().mul_scalar(100.0).unwrap()).unwrap();
        y.sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), vec![3.0, 4.0], "{place}");
        assert!(c.grad().is_none());
        let z = c.mul_scalar(2.0).unwrap();
        assert!(z.stop_gradient(), "ops on stop_gradient inputs record nothing");
    }
}

#[test]
fn retain_grads_keeps_an_intermediate_gradient() {
    let _generator = common::generator_lock();
    // Seed 002's MyLayer: relu → elementwise_mul(x, x) → reduce_sum, and the gradient of the
    // relu output: d(Σ h²)/dh = 2h.
    for place in places() {
        let inp = leaf(&[1.0, 2.0, -1.0], &[3], place);
        let h = paddle::relu(&inp).unwrap();
        h.retain_grads().unwrap();
        let out = h.mul(&h).unwrap().sum(&[], false).unwrap();
        out.backward().unwrap();
        assert_eq!(h.gradient::<f32>().unwrap().unwrap().data, vec![2.0, 4.0, 0.0], "{place}");
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![5.0]);
    }
}

#[test]
fn engine_runs_each_shared_subgraph_once() {
    let _generator = common::generator_lock();
    // A diamond: s feeds two branches that meet again; its backward must run once with the
    // sum of both branches' gradients.
    let x = leaf(&[2.0], &[1], Place::Cpu);
    let s = x.square().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    s.register_hook(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        None
    })
    .unwrap();
    let y = s.mul_scalar(3.0).unwrap().add(&s.exp().unwrap()).unwrap();
    y.sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let expected = (3.0 + 4f64.exp()) * 4.0;
    common::assert_close("diamond", &grad_of(&x), &[expected], 1e-6);
}

#[test]
fn bad_backward_and_grad_calls_are_clear_errors() {
    let _generator = common::generator_lock();
    let x = leaf(&[1.0, 2.0], &[2], Place::Cpu);
    let y = x.mul_scalar(2.0).unwrap();
    let e = y.backward().unwrap_err();
    assert!(e.to_string().contains("non-scalar") && e.to_string().contains("[2]"), "{e}");

    let unused = leaf(&[1.0], &[1], Place::Cpu);
    let s = y.sum(&[], false).unwrap();
    let e =
        paddle::grad(std::slice::from_ref(&s), std::slice::from_ref(&unused), None, true, false, false).unwrap_err();
    assert!(e.to_string().contains("not reachable"), "{e}");
    let g = paddle::grad(std::slice::from_ref(&s), &[x.clone(), unused], None, true, false, true).unwrap();
    assert!(g[0].is_some() && g[1].is_none());

    let wrong = Tensor::from_vec_on(vec![1.0f32; 3], [3], Place::Cpu).unwrap();
    let e = paddle::grad(std::slice::from_ref(&y), std::slice::from_ref(&x), Some(&[wrong]), true, false, false)
        .unwrap_err();
    assert!(e.to_string().contains("grad_outputs[0]") && e.to_string().contains("[3]"), "{e}");

    let frozen = Tensor::from_vec_on(vec![1.0f32], [1], Place::Cpu).unwrap();
    assert!(frozen.sum(&[], false).unwrap().backward().is_err());
}

#[test]
fn backward_with_an_explicit_gradient_tensor() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = leaf(&[1.0, 2.0, 3.0], &[3], place);
        let y = x.square().unwrap();
        let g = Tensor::from_vec_on(vec![1.0f32, 0.5, 0.0], [3], place).unwrap();
        y.backward_with(GradOptions { grad_tensor: Some(g), retain_graph: false }).unwrap();
        assert_eq!(grad_of(&x), vec![2.0, 2.0, 0.0], "{place}");
    }
}

/// A gradient hook, shared between the leaf and intermediate checks.
type GradHook = Arc<dyn Fn(&Tensor) -> Option<Tensor> + Send + Sync>;

/// A PyLayer `2·x` that counts its backward calls.
static DOUBLED_BACKWARDS: AtomicUsize = AtomicUsize::new(0);

struct Doubled;

impl paddle::autograd::PyLayer for Doubled {
    fn forward(_: &mut paddle::autograd::PyLayerContext, inputs: &[Tensor]) -> paddle::Result<Vec<Tensor>> {
        Ok(vec![inputs[0].scale(2.0, 0.0)?])
    }
    fn backward(_: &paddle::autograd::PyLayerContext, grads: &[Tensor]) -> paddle::Result<Vec<Option<Tensor>>> {
        DOUBLED_BACKWARDS.fetch_add(1, Ordering::SeqCst);
        Ok(vec![Some(grads[0].scale(2.0, 0.0)?)])
    }
}

#[test]
fn grad_runs_only_the_nodes_that_lead_to_its_inputs() {
    let _generator = common::generator_lock();
    use paddle::autograd::PyLayer;
    for place in places() {
        let a = leaf(&[1.0, 2.0], &[2], place);
        let c = leaf(&[3.0, 4.0], &[2], place);
        // y = a·a + Doubled(c): the Doubled branch leads to c only.
        let d = Doubled::apply(std::slice::from_ref(&c)).unwrap().remove(0);
        let y = a.mul(&a).unwrap().add(&d).unwrap().sum(&[], false).unwrap();
        let before = DOUBLED_BACKWARDS.load(Ordering::SeqCst);
        let g = paddle::grad(std::slice::from_ref(&y), std::slice::from_ref(&a), None, true, false, false).unwrap();
        assert_eq!(common::values(g[0].as_ref().unwrap()), [2.0, 4.0], "{place}");
        assert_eq!(DOUBLED_BACKWARDS.load(Ordering::SeqCst), before, "the branch to c ran for grad(y, a) on {place}");
        let g = paddle::grad(&[y], std::slice::from_ref(&c), None, false, false, false).unwrap();
        assert_eq!(common::values(g[0].as_ref().unwrap()), [2.0, 2.0], "{place}");
        assert_eq!(DOUBLED_BACKWARDS.load(Ordering::SeqCst), before + 1, "{place}");
        // No .grad was touched by either call.
        assert!(a.grad().is_none() && c.grad().is_none());
    }
}

#[test]
fn a_hook_that_changes_the_gradients_shape_dtype_or_place_is_an_error() {
    let _generator = common::generator_lock();
    for place in places() {
        let other = if place == Place::Cpu { common::gpu_or_skip() } else { Some(Place::Cpu) };
        let mut bad: Vec<(&str, GradHook)> = vec![
            ("shape", Arc::new(|g: &Tensor| Some(g.sum(&[], false).unwrap()))),
            ("dtype", Arc::new(|g: &Tensor| Some(g.cast(DType::Float16).unwrap()))),
        ];
        if let Some(other) = other {
            bad.push(("place", Arc::new(move |g: &Tensor| Some(g.to(other).unwrap()))));
        }
        for (what, hook) in bad {
            // On a leaf.
            let x = leaf(&[1.0, 2.0, 3.0], &[3], place);
            let h = hook.clone();
            x.register_hook(move |g| h(g)).unwrap();
            let e = x.square().unwrap().sum(&[], false).unwrap().backward().unwrap_err();
            assert!(matches!(e, Error::Autograd(_)), "{what} on {place}: {e}");
            assert!(e.to_string().contains("hook"), "{what} on {place}: {e}");
            // On an intermediate tensor.
            let x = leaf(&[1.0, 2.0, 3.0], &[3], place);
            let y = x.square().unwrap();
            y.register_hook(move |g| hook(g)).unwrap();
            let e = y.sum(&[], false).unwrap().backward().unwrap_err();
            assert!(matches!(e, Error::Autograd(_)), "intermediate, {what} on {place}: {e}");
        }
    }
}

#[test]
fn post_accumulate_hooks_run_once_per_pass_with_the_complete_gradient_then_callbacks() {
    let _generator = common::generator_lock();
    for place in places() {
        // w reaches the loss along three paths, one through an op whose input gradient is
        // never produced (`detach`), and u is unused: w's hook runs once, after all of its
        // contributions (2 + 3 = 5 per element), u's never.
        let w = leaf(&[1.0, 2.0], &[2], place);
        let u = leaf(&[1.0, 2.0], &[2], place);
        let seen: Arc<std::sync::Mutex<Vec<Vec<f64>>>> = Arc::default();
        let order: Arc<std::sync::Mutex<Vec<&str>>> = Arc::default();
        let (s, o) = (seen.clone(), order.clone());
        w.register_post_accumulate_grad_hook(move |t| {
            s.lock().unwrap().push(grad_of(t));
            let o2 = o.clone();
            o.lock().unwrap().push("hook");
            paddle::autograd::queue_callback(move || {
                o2.lock().unwrap().push("callback");
                Ok(())
            })
        })
        .unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        u.register_post_accumulate_grad_hook(move |_| {
            h.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        let loss = (&w.mul_scalar(2.0).unwrap() + &w.mul_scalar(3.0).unwrap()).sum(&[], false).unwrap();
        let loss = &loss + &w.detach().sum(&[], false).unwrap();
        loss.backward().unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![vec![5.0, 5.0]], "{place}");
        assert_eq!(*order.lock().unwrap(), vec!["hook", "callback"], "{place}");
        assert_eq!(hits.load(Ordering::Relaxed), 0, "u got no gradient: its hook must not run");
        // A second pass runs the hook again, on the accumulated gradient.
        let loss = w.mul_scalar(1.0).unwrap().sum(&[], false).unwrap();
        loss.backward().unwrap();
        assert_eq!(seen.lock().unwrap()[1], vec![6.0, 6.0], "{place}");
        // paddle.grad does not accumulate into .grad, so no hook runs.
        let y = w.mul_scalar(2.0).unwrap().sum(&[], false).unwrap();
        paddle::grad(&[y], std::slice::from_ref(&w), None, false, false, false).unwrap();
        assert_eq!(seen.lock().unwrap().len(), 2);
    }
}

#[test]
fn a_failing_post_accumulate_hook_fails_backward_and_drops_the_queued_callbacks() {
    let _generator = common::generator_lock();
    let w = leaf(&[1.0], &[1], Place::Cpu);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    w.register_post_accumulate_grad_hook(move |_| {
        let r2 = r.clone();
        paddle::autograd::queue_callback(move || {
            r2.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })?;
        Err(Error::invalid("hook", "injected".to_string()))
    })
    .unwrap();
    let err = w.mul_scalar(2.0).unwrap().sum(&[], false).unwrap().backward().unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert_eq!(ran.load(Ordering::Relaxed), 0, "callbacks of a failed pass do not run");
    // Outside a backward pass, queueing is an error; a non-leaf cannot take the hook.
    assert!(paddle::autograd::queue_callback(|| Ok(())).is_err());
    let y = w.mul_scalar(2.0).unwrap();
    assert!(y.register_post_accumulate_grad_hook(|_| Ok(())).is_err());
}

#[test]
fn maximum_and_minimum_split_the_gradient_at_ties() {
    let _generator = common::generator_lock();
    for place in places() {
        let a = leaf(&[1.0, 2.0, 3.0], &[3], place);
        let b = leaf(&[1.0, 5.0, 0.0], &[3], place);
        a.maximum(&b).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(grad_of(&a), [0.5, 0.0, 1.0], "maximum, a, on {place}");
        assert_eq!(grad_of(&b), [0.5, 1.0, 0.0], "maximum, b, on {place}");
        a.clear_gradient();
        b.clear_gradient();
        a.minimum(&b).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(grad_of(&a), [0.5, 1.0, 0.0], "minimum, a, on {place}");
        assert_eq!(grad_of(&b), [0.5, 0.0, 1.0], "minimum, b, on {place}");
    }
}

#[test]
fn max_and_min_gradients_split_evenly_among_tied_elements() {
    let _generator = common::generator_lock();
    // Paddle 3.x divides the gradient by the number of tied extrema.
    for place in places() {
        let x = leaf(&[1.0, 3.0, 3.0, 2.0, 0.0, 0.0], &[2, 3], place);
        x.max(&[], false).unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), [0.0, 0.5, 0.5, 0.0, 0.0, 0.0], "max over all on {place}");
        x.clear_gradient();
        x.min(&[1], false).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(grad_of(&x), [1.0, 0.0, 0.0, 0.0, 0.5, 0.5], "min over axis 1 on {place}");
    }
}

#[test]
fn overlapping_pool_gradients_are_the_same_on_every_run() {
    let _generator = common::generator_lock();
    // 3x3 windows at stride 2 overlap: their gradients add into shared inputs, in an order
    // that must not change the result.
    let v = common::Rng::new(14).vec(2 * 3 * 9 * 9, -1.0, 1.0);
    for place in places() {
        let run = || {
            let x = common::tensor(&v, &[2, 3, 9, 9], DType::Float32, place);
            x.set_stop_gradient(false);
            let o = paddle::Pool2dOptions::new(3).stride(2).padding(1);
            let y = paddle::max_pool2d(&x, &o).unwrap().add(&paddle::avg_pool2d(&x, &o).unwrap()).unwrap();
            y.mul(&y).unwrap().sum(&[], false).unwrap().backward().unwrap();
            grad_of(&x)
        };
        assert_eq!(run(), run(), "gradients differ between two runs on {place}");
    }
}
