//! Bad or edge-case calls: typed errors naming the op (never a panic, never a silent wrong
//! answer) on every place. Sizes past the address space, non-finite range bounds and fill
//! values, loss, optimizer and clip settings, corrupt data files, unusual checkpoint keys.

use crate::common;

use common::places;

use dygraph::nn::functional as F;
use dygraph::nn::{CrossEntropyOptions, StateDict};
use dygraph::optimizer::{Adam, GradClip, Momentum, Optimizer, RMSProp, SGD};
use dygraph::{self as paddle, DType, Place, Tensor};

/// Asserts `r` is an error of `op` (any variant but a panic), whose message holds `needles`.
#[track_caller]
fn fails<T: std::fmt::Debug>(what: &str, op: &str, r: paddle::Result<T>, needles: &[&str]) {
    let e = r.expect_err(what);
    assert_eq!(e.op(), Some(op), "{what}: {e}");
    for n in needles {
        assert!(e.to_string().contains(n), "{what}: {e} lacks {n:?}");
    }
}

#[test]
fn sizes_past_the_address_space_are_errors() {
    let _generator = common::generator_lock();
    let huge = 1usize << 62;
    for place in places() {
        let at = |s: &str| format!("{s} on {place}");
        fails(&at("zeros"), "zeros", paddle::zeros_on([huge], DType::Float32, place), &[]);
        fails(&at("full"), "full", paddle::full_on([huge, 4], 1.0, DType::Int64, place), &[]);
        let x = paddle::ones_on([2, 1], DType::Float32, place).unwrap();
        fails(&at("expand"), "broadcast_to", x.expand(&[2, huge as i64]), &[]);
        let labels = paddle::zeros_on([4], DType::Int64, place).unwrap();
        fails(&at("one_hot"), "one_hot", paddle::one_hot(&labels, huge), &[]);
        let e = paddle::guard(place, || paddle::eye(1 << 32, None, DType::Float32)).unwrap_err();
        assert_eq!(e.op(), Some("eye"), "{e}");
        let e = paddle::guard(place, || paddle::linspace(0.0, 1.0, huge, DType::Float32)).unwrap_err();
        assert_eq!(e.op(), Some("linspace"), "{e}");
        fails(&at("randperm"), "randperm", paddle::randperm_on(huge, DType::Int64, place), &[]);
        // Huge paddings: the size arithmetic is checked.
        let img = paddle::ones_on([1, 1, 4, 4], DType::Float32, place).unwrap();
        fails(&at("pad"), "pad", paddle::pad(&img, &[usize::MAX, 1], 0.0), &["overflows"]);
        let w = paddle::ones_on([1, 1, 3, 3], DType::Float32, place).unwrap();
        let o = paddle::nn::Conv2dOptions::new().padding([usize::MAX - 1, 0]);
        fails(&at("conv2d"), "conv2d", paddle::conv2d(&img, &w, None, &o), &["overflows"]);
        let o = paddle::nn::Pool2dOptions::new(2).padding(usize::MAX);
        fails(&at("max_pool2d"), "max_pool2d", paddle::max_pool2d(&img, &o), &["padding"]);
    }
}

#[test]
fn range_bounds_and_fill_values() {
    let _generator = common::generator_lock();
    for place in places() {
        let on = |f: &dyn Fn() -> paddle::Result<Tensor>| paddle::guard(place, f);
        for (s, e, st) in
            [(f64::NAN, 3.0, 1.0), (0.0, f64::INFINITY, 1.0), (0.0, 3.0, f64::NAN), (0.0, 3.0, f64::INFINITY)]
        {
            fails("arange float", "arange", on(&|| paddle::arange(s, e, st, DType::Float32)), &[]);
            fails("arange int", "arange", on(&|| paddle::arange(s, e, st, DType::Int64)), &[]);
        }
        // An int64 range whose length overflows, and one past int32's range.
        fails("arange long", "arange", on(&|| paddle::arange(i64::MIN, i64::MAX, 1i64, DType::Int64)), &[]);
        fails(
            "arange int32",
            "arange",
            on(&|| paddle::arange(0i64, 5_000_000_000i64, 1_000_000_000i64, DType::Int32)),
            &[],
        );
        for v in [f64::NAN, f64::INFINITY] {
            fails("full int", "full", paddle::full_on([2], v, DType::Int32, place), &["cannot be represented"]);
            let x = paddle::zeros_on([2], DType::Int64, place).unwrap();
            fails("full_like int", "full_like", paddle::full_like(&x, v), &["cannot be represented"]);
        }
        // NaN and ±∞ fill floats fine.
        let f = paddle::full_on([2], f64::NAN, DType::Float32, place).unwrap();
        assert!(common::values(&f).iter().all(|v| v.is_nan()));
    }
}

#[test]
fn loss_options_and_labels_are_checked() {
    let _generator = common::generator_lock();
    for place in places() {
        let logits = Tensor::from_vec_on(vec![0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3], place).unwrap();
        let labels = Tensor::from_vec_on(vec![0i64, 2], [2], place).unwrap();
        let w2 = Tensor::from_vec_on(vec![1.0f32, 2.0], [2], place).unwrap();
        let opts = CrossEntropyOptions { weight: Some(w2.clone()), ..Default::default() };
        fails("short weight", "cross_entropy", F::cross_entropy(&logits, &labels, &opts), &["weight", "[3]"]);
        let w4 = Tensor::from_vec_on(vec![1.0f32; 4], [4], place).unwrap();
        let opts = CrossEntropyOptions { weight: Some(w4), ..Default::default() };
        fails("long weight", "cross_entropy", F::cross_entropy(&logits, &labels, &opts), &["weight"]);
        let opts = CrossEntropyOptions { label_smoothing: 1.5, ..Default::default() };
        fails("smoothing", "cross_entropy", F::cross_entropy(&logits, &labels, &opts), &["label_smoothing"]);
    }
    // Label smoothing checks the label range too (on the GPU at the next readback: checked
    // in tests/gpu_index_errors.rs, whose binary holds no other GPU test).
    let logits = Tensor::from_vec_on(vec![0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3], Place::Cpu).unwrap();
    let bad = Tensor::from_vec_on(vec![0i64, 3], [2], Place::Cpu).unwrap();
    let opts = CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() };
    fails("smoothing, label 3", "take_along_axis", F::cross_entropy(&logits, &bad, &opts), &["index 3"]);
}

#[test]
fn optimizer_and_clip_settings_are_checked_before_any_update() {
    let _generator = common::generator_lock();
    for place in places() {
        let make = || {
            let p = Tensor::from_vec_on(vec![1.0f32, -2.0], [2], place).unwrap();
            p.set_stop_gradient(false);
            p.square().unwrap().sum(&[], false).unwrap().backward().unwrap();
            p
        };
        let check = |what: &str, op: &str, mut opt: Box<dyn Optimizer>, p: &Tensor| {
            let before = common::values(p);
            fails(what, op, opt.step(), &[]);
            assert_eq!(common::values(p), before, "{what} on {place}: the parameter moved");
        };
        let p = make();
        check("NaN lr", "sgd", Box::new(SGD::new(f64::NAN, vec![p.clone()])), &p);
        check("negative lr", "sgd", Box::new(SGD::new(-0.1, vec![p.clone()])), &p);
        check("negative decay", "sgd", Box::new(SGD::new(0.1, vec![p.clone()]).weight_decay(-1.0)), &p);
        check("beta1 = 1", "adam", Box::new(Adam::new(0.1, vec![p.clone()]).beta1(1.0)), &p);
        check("beta2 < 0", "adam", Box::new(Adam::new(0.1, vec![p.clone()]).beta2(-0.5)), &p);
        check("NaN epsilon", "adam", Box::new(Adam::new(0.1, vec![p.clone()]).epsilon(f64::NAN)), &p);
        check("negative momentum", "momentum", Box::new(Momentum::new(0.1, vec![p.clone()]).momentum(-0.9)), &p);
        check("rho = 1", "rmsprop", Box::new(RMSProp::new(0.1, vec![p.clone()]).rho(1.0)), &p);
        let clip = SGD::new(0.1, vec![p.clone()]).grad_clip(GradClip::by_value(-1.0, Some(1.0)));
        check("clip max <= min", "ClipGradByValue", Box::new(clip), &p);
        let clip = SGD::new(0.1, vec![p.clone()]).grad_clip(GradClip::ByGlobalNorm { clip_norm: f64::NAN });
        check("clip NaN norm", "ClipGradByNorm", Box::new(clip), &p);
    }
}

#[test]
fn corrupt_idx_files_are_errors() {
    let _generator = common::generator_lock();
    // A header whose dimension product wraps to 0 on 32-bit arithmetic and overflows usize
    // on 64-bit: an error, not a loader that accepts the file and panics later.
    let mut images = vec![0, 0, 8, 3];
    for d in [u32::MAX, u32::MAX, u32::MAX] {
        images.extend(d.to_be_bytes());
    }
    let mut labels = vec![0, 0, 8, 1];
    labels.extend(2u32.to_be_bytes());
    labels.extend([1, 2]);
    let e = paddle::vision::datasets::Mnist::from_idx_bytes(&images, &labels).unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
}

#[test]
fn checkpoint_keys_keep_their_order_whatever_they_hold() {
    let _generator = common::generator_lock();
    let mut sd = StateDict::new();
    for (i, k) in ["b", "", "line\nbreak", "back\\slash\\n", "a"].iter().enumerate() {
        sd.insert(*k, Tensor::from_vec_on(vec![i as f32], [1], Place::Cpu).unwrap());
    }
    let bytes = paddle::io::save_to_bytes(&sd).unwrap();
    let back = paddle::io::load_from_bytes(&bytes, Place::Cpu).unwrap();
    assert_eq!(back.keys(), sd.keys());
    for (k, t) in sd.iter() {
        assert_eq!(back.get(k).unwrap().to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap(), "{k:?}");
    }
}
