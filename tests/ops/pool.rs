//! max_pool2d / avg_pool2d / adaptive pooling: hand-computed values and indices (padding,
//! ceil_mode, exclusive, SAME/VALID, ties, NaN), hand-computed gradients, GPU against CPU
//! over a grid of configurations (forward, gradients and indices), float64 gradchecks,
//! double backward, determinism and errors.

use crate::common;

use dygraph::{self as paddle, DType, Error, Padding, Place, Pool2dOptions, Result, Tensor};

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    common::tensor(v, shape, DType::Float64, Place::Cpu)
}

fn seq(n: usize) -> Vec<f64> {
    (1..=n).map(|i| i as f64).collect()
}

fn vals(r: Result<Tensor>) -> (Vec<usize>, Vec<f64>) {
    let t = r.unwrap();
    (t.shape().to_vec(), common::values(&t))
}

#[test]
fn max_and_avg_hand_computed() {
    let _generator = common::generator_lock();
    let x = t64(&seq(16), &[1, 1, 4, 4]);
    let k2 = Pool2dOptions::new(2);
    assert_eq!(vals(paddle::max_pool2d(&x, &k2)), (vec![1, 1, 2, 2], vec![6.0, 8.0, 14.0, 16.0]));
    assert_eq!(vals(paddle::avg_pool2d(&x, &k2)).1, [3.5, 5.5, 11.5, 13.5]);
    let (out, idx) = paddle::max_pool2d_with_index(&x, &k2).unwrap();
    assert_eq!(common::values(&out), [6.0, 8.0, 14.0, 16.0]);
    assert_eq!(idx.dtype(), DType::Int64);
    assert_eq!(idx.shape(), [1, 1, 2, 2]);
    assert_eq!(idx.to_vec::<i64>().unwrap(), [5, 7, 13, 15]);

    // 3×3 windows, stride 2, padding 1: rows/cols [0,2) and [1,4).
    let o = Pool2dOptions::new(3).stride(2).padding(1);
    assert_eq!(vals(paddle::max_pool2d(&x, &o)), (vec![1, 1, 2, 2], vec![6.0, 8.0, 14.0, 16.0]));
    assert_eq!(vals(paddle::avg_pool2d(&x, &o)).1, [3.5, 5.0, 9.5, 11.0]);
    let inclusive = vals(paddle::avg_pool2d(&x, &o.clone().exclusive(false))).1;
    common::assert_close("non-exclusive", &inclusive, &[14.0 / 9.0, 30.0 / 9.0, 57.0 / 9.0, 11.0], 1e-15);

    // Asymmetric padding [top, bottom, left, right] = [0, 1, 0, 1] on a 3×3 image.
    let x3 = t64(&seq(9), &[1, 1, 3, 3]);
    let o = Pool2dOptions::new(2).padding([0, 1, 0, 1]);
    assert_eq!(vals(paddle::max_pool2d(&x3, &o)), (vec![1, 1, 2, 2], vec![5.0, 6.0, 8.0, 9.0]));
    assert_eq!(vals(paddle::avg_pool2d(&x3, &o)).1, [3.0, 4.5, 7.5, 9.0]);

    // SAME, 3×3 stride 2 on 5×5: output 3, padding 1 per side; VALID is no padding.
    let x5 = t64(&seq(25), &[1, 1, 5, 5]);
    let same = Pool2dOptions::new(3).stride(2).padding(Padding::Same);
    let (s, v) = vals(paddle::max_pool2d(&x5, &same));
    assert_eq!((s, v[0], v[4], v[8]), (vec![1, 1, 3, 3], 7.0, 19.0, 25.0));
    let valid = Pool2dOptions::new(3).stride(2).padding(Padding::Valid);
    assert_eq!(vals(paddle::max_pool2d(&x5, &valid)), (vec![1, 1, 2, 2], vec![13.0, 15.0, 23.0, 25.0]));

    // Rectangular window and stride.
    let o = Pool2dOptions::new([2, 1]).stride([2, 3]);
    assert_eq!(vals(paddle::max_pool2d(&x, &o)), (vec![1, 1, 2, 2], vec![5.0, 8.0, 13.0, 16.0]));
}

#[test]
fn ceil_mode() {
    let _generator = common::generator_lock();
    let x5 = t64(&seq(25), &[1, 1, 5, 5]);
    let o = Pool2dOptions::new(2).ceil_mode(true);
    assert_eq!(paddle::max_pool2d(&x5, &Pool2dOptions::new(2)).unwrap().shape(), [1, 1, 2, 2]);
    assert_eq!(
        vals(paddle::max_pool2d(&x5, &o)),
        (vec![1, 1, 3, 3], vec![7.0, 9.0, 10.0, 17.0, 19.0, 20.0, 22.0, 24.0, 25.0])
    );
    let (_, avg) = vals(paddle::avg_pool2d(&x5, &o));
    assert_eq!((avg[2], avg[6], avg[8]), (7.5, 21.5, 25.0));
    // A non-exclusive average divides by the window's part inside the padded input (Paddle
    // and PyTorch): the extra ceil_mode window past the edge counts only what it covers.
    let (_, avg) = vals(paddle::avg_pool2d(&x5, &o.clone().exclusive(false)));
    assert_eq!((avg[0], avg[2], avg[8]), (4.0, 7.5, 25.0));
    // With padding, the padded cells count: 5 wide, kernel 3, stride 2, padding 1.
    let o = Pool2dOptions::new(3).stride(2).padding(1).ceil_mode(true).exclusive(false);
    let (_, avg) = vals(paddle::avg_pool2d(&x5, &o));
    assert_eq!(avg[0], (1.0 + 2.0 + 6.0 + 7.0) / 9.0);
    // The last window must start inside the input or the left padding: 4 wide, kernel 2,
    // stride 3, padding 1 gives 2 windows, not 3.
    let x4 = t64(&seq(16), &[1, 1, 4, 4]);
    let o = Pool2dOptions::new(2).stride(3).padding(1).ceil_mode(true);
    assert_eq!(vals(paddle::max_pool2d(&x4, &o)), (vec![1, 1, 2, 2], vec![1.0, 4.0, 13.0, 16.0]));
}

#[test]
fn adaptive_hand_computed() {
    let _generator = common::generator_lock();
    // Paddle's bins for 5 -> 3: [0,2), [1,4), [3,5).
    let x = t64(&seq(5), &[1, 1, 1, 5]);
    assert_eq!(vals(paddle::adaptive_avg_pool2d(&x, [1, 3])), (vec![1, 1, 1, 3], vec![1.5, 3.0, 4.5]));
    assert_eq!(vals(paddle::adaptive_max_pool2d(&x, [1, 3])).1, [2.0, 4.0, 5.0]);
    let (_, idx) = paddle::adaptive_max_pool2d_with_index(&x, [1, 3]).unwrap();
    assert_eq!(idx.to_vec::<i64>().unwrap(), [1, 3, 4]);
    // Upsampling 2 -> 3: bins [0,1), [0,2), [1,2).
    let x2 = t64(&[2.0, 4.0], &[1, 1, 1, 2]);
    assert_eq!(vals(paddle::adaptive_avg_pool2d(&x2, [1, 3])).1, [2.0, 3.0, 4.0]);
    // Global pooling is adaptive pooling to 1×1, per channel.
    let xc = t64(&seq(18), &[1, 2, 3, 3]);
    assert_eq!(vals(paddle::adaptive_avg_pool2d(&xc, 1)), (vec![1, 2, 1, 1], vec![5.0, 14.0]));
    assert_eq!(vals(paddle::adaptive_max_pool2d(&xc, 1)).1, [9.0, 18.0]);
    // Adaptive with an output that divides the input is plain pooling.
    let x4 = t64(&seq(16), &[1, 1, 4, 4]);
    assert_eq!(vals(paddle::adaptive_avg_pool2d(&x4, 2)).1, [3.5, 5.5, 11.5, 13.5]);
}

#[test]
fn ties_nan_and_indices() {
    let _generator = common::generator_lock();
    // Equal values: the first element of each window (row-major) wins.
    let x = t64(&[1.0; 16], &[1, 1, 4, 4]);
    let (_, idx) = paddle::max_pool2d_with_index(&x, &Pool2dOptions::new(2)).unwrap();
    assert_eq!(idx.to_vec::<i64>().unwrap(), [0, 2, 8, 10]);
    let (_, idx) = paddle::max_pool2d_with_index(&x, &Pool2dOptions::new(3).stride(1).padding(1)).unwrap();
    assert_eq!(idx.to_vec::<i64>().unwrap()[..5], [0, 0, 1, 2, 0]);
    // A NaN wins its window.
    let mut v = seq(16);
    v[6] = f64::NAN;
    let (out, idx) = paddle::max_pool2d_with_index(&t64(&v, &[1, 1, 4, 4]), &Pool2dOptions::new(2)).unwrap();
    let out = common::values(&out);
    assert!(out[1].is_nan() && out[0] == 6.0, "{out:?}");
    assert_eq!(idx.to_vec::<i64>().unwrap(), [5, 6, 13, 15]);
    // Padding never wins, even over negative values.
    let xn: Vec<f64> = seq(4).iter().map(|v| -v).collect();
    let (out, idx) =
        paddle::max_pool2d_with_index(&t64(&xn, &[1, 1, 2, 2]), &Pool2dOptions::new(2).padding(1)).unwrap();
    assert_eq!(common::values(&out), [-1.0, -2.0, -3.0, -4.0]);
    assert_eq!(idx.to_vec::<i64>().unwrap(), [0, 1, 2, 3]);
}

/// 2×2 stride-2 max pooling against a row-major scan written here, on values drawn from a
/// small set (so windows tie often and hold several NaNs, infinities and zeros of both signs),
/// odd and even plane sizes (the last row and column left out, or with `ceil_mode` pooled in
/// clipped windows, which the general scan handles), both float dtypes, both places: the
/// first maximum and the first NaN win, values and indices.
#[test]
fn max_pool_2x2_matches_a_row_major_scan() {
    let _generator = common::generator_lock();
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    let set = [-1.0, -0.0, 0.0, 1.0, 2.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    for place in common::places() {
        for (h, w) in [(4usize, 4usize), (5, 7), (24, 24), (9, 2)] {
            let dtypes = if place.is_gpu() { &[DType::Float32][..] } else { &[DType::Float32, DType::Float64] };
            for (&dtype, ceil) in dtypes.iter().flat_map(|d| [(d, false), (d, true)]) {
                let planes = 6;
                let x: Vec<f64> = (0..planes * h * w).map(|_| set[(rng.next_u64() % 8) as usize]).collect();
                let (oh, ow) = if ceil { (h.div_ceil(2), w.div_ceil(2)) } else { (h / 2, w / 2) };
                let (mut want, mut want_idx) = (Vec::new(), Vec::new());
                for p in 0..planes {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let mut at = 2 * oy * w + 2 * ox;
                            for iy in 2 * oy..(2 * oy + 2).min(h) {
                                for ix in 2 * ox..(2 * ox + 2).min(w) {
                                    let k = iy * w + ix;
                                    let (v, best) = (x[p * h * w + k], x[p * h * w + at]);
                                    if v > best || (v.is_nan() && !best.is_nan()) {
                                        at = k;
                                    }
                                }
                            }
                            want.push(x[p * h * w + at]);
                            want_idx.push(at as i64);
                        }
                    }
                }
                let xt = common::tensor(&x, &[2, 3, h, w], dtype, place);
                let (out, idx) = paddle::max_pool2d_with_index(&xt, &Pool2dOptions::new(2).ceil_mode(ceil)).unwrap();
                let case = format!("{h}x{w}, ceil_mode {ceil}, {dtype}, {place:?} (seed {seed})");
                let got = common::values(&out);
                let same = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits();
                for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                    assert!(same(g, e), "{case}: output {i}: {g} against {e}");
                }
                assert_eq!(idx.to_vec::<i64>().unwrap(), want_idx, "{case}: indices");
            }
        }
    }
}

fn grad_of(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Vec<f64> {
    let x = x.detach();
    x.set_stop_gradient(false);
    f(&x).unwrap().sum(&[], false).unwrap().backward().unwrap();
    common::values(&x.grad().unwrap())
}

#[test]
fn hand_computed_gradients() {
    let _generator = common::generator_lock();
    // Max: the gradient goes to the argmax; overlapping windows sharing it add up.
    let x = t64(&[0.0, 1.0, 0.0, 2.0, 9.0, 3.0, 0.0, 4.0, 0.0], &[1, 1, 3, 3]);
    let g = grad_of(&x, |x| paddle::max_pool2d(x, &Pool2dOptions::new(2).stride(1)));
    assert_eq!(g, [0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0]);
    let x4 = t64(&seq(16), &[1, 1, 4, 4]);
    let g = grad_of(&x4, |x| paddle::max_pool2d(x, &Pool2dOptions::new(2)));
    assert_eq!(g, [0., 0., 0., 0., 0., 1., 0., 1., 0., 0., 0., 0., 0., 1., 0., 1.]);
    // Exclusive average with padding: each input collects 1/count of every window covering it.
    let g = grad_of(&x4, |x| paddle::avg_pool2d(x, &Pool2dOptions::new(3).stride(2).padding(1)));
    let (a, b, c) = (1.0 / 4.0, 1.0 / 6.0, 1.0 / 9.0);
    let expect = [a, a + b, b, b, a + b, a + 2.0 * b + c, b + c, b + c, b, b + c, c, c, b, b + c, c, c];
    common::assert_close("avg grad", &g, &expect, 1e-15);
    // Non-exclusive: every window divides by 9.
    let g = grad_of(&x4, |x| paddle::avg_pool2d(x, &Pool2dOptions::new(3).stride(2).padding(1).exclusive(false)));
    let counts = [1.0, 2.0, 1.0, 1.0, 2.0, 4.0, 2.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0];
    common::assert_close("avg grad non-exclusive", &g, &counts.map(|k| k / 9.0), 1e-15);
    // Adaptive 5 -> 3 along a row: bins [0,2), [1,4), [3,5).
    let x5 = t64(&seq(5), &[1, 1, 1, 5]);
    let g = grad_of(&x5, |x| paddle::adaptive_avg_pool2d(x, [1, 3]));
    common::assert_close("adaptive avg grad", &g, &[0.5, 0.5 + 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0 + 0.5, 0.5], 1e-15);
}

/// A pooling configuration of the test grids.
#[derive(Clone)]
struct Cfg {
    name: &'static str,
    x: [usize; 4],
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Max(Pool2dOptions),
    Avg(Pool2dOptions),
    AdaptiveAvg([usize; 2]),
    AdaptiveMax([usize; 2]),
}

impl Cfg {
    fn run(&self, x: &Tensor) -> Result<Tensor> {
        match &self.kind {
            Kind::Max(o) => paddle::max_pool2d(x, o),
            Kind::Avg(o) => paddle::avg_pool2d(x, o),
            Kind::AdaptiveAvg(s) => paddle::adaptive_avg_pool2d(x, *s),
            Kind::AdaptiveMax(s) => paddle::adaptive_max_pool2d(x, *s),
        }
    }
    fn indices(&self, x: &Tensor) -> Option<Vec<i64>> {
        let r = match &self.kind {
            Kind::Max(o) => paddle::max_pool2d_with_index(x, o),
            Kind::AdaptiveMax(s) => paddle::adaptive_max_pool2d_with_index(x, *s),
            _ => return None,
        };
        Some(r.unwrap().1.to_vec::<i64>().unwrap())
    }
}

fn grid() -> Vec<Cfg> {
    let p = Pool2dOptions::new;
    let c = |name, x, kind| Cfg { name, x, kind };
    vec![
        c("max_k2", [2, 3, 8, 8], Kind::Max(p(2))),
        c("max_k3_s2_p1", [2, 3, 9, 7], Kind::Max(p(3).stride(2).padding(1))),
        c("max_k3_s1_overlap", [1, 2, 6, 6], Kind::Max(p(3).stride(1))),
        c("max_ceil", [2, 2, 7, 7], Kind::Max(p(2).ceil_mode(true))),
        c("max_ceil_pad", [2, 2, 6, 7], Kind::Max(p(3).stride(2).padding(1).ceil_mode(true))),
        c("max_same", [2, 2, 7, 6], Kind::Max(p(3).stride(2).padding(Padding::Same))),
        c("max_valid", [2, 2, 7, 6], Kind::Max(p(3).stride(2).padding(Padding::Valid))),
        c("max_asym", [2, 2, 5, 6], Kind::Max(Pool2dOptions::new([3, 2]).stride([2, 1]).padding([1, 0, 0, 1]))),
        c("avg_k2", [2, 3, 8, 8], Kind::Avg(p(2))),
        c("avg_k3_s2_p1", [2, 3, 9, 7], Kind::Avg(p(3).stride(2).padding(1))),
        c("avg_k3_s2_p1_inclusive", [2, 3, 9, 7], Kind::Avg(p(3).stride(2).padding(1).exclusive(false))),
        c("avg_ceil", [2, 2, 7, 7], Kind::Avg(p(2).ceil_mode(true))),
        c("avg_ceil_inclusive", [2, 2, 7, 7], Kind::Avg(p(2).ceil_mode(true).exclusive(false))),
        c("avg_same", [2, 2, 7, 6], Kind::Avg(p(3).stride(2).padding(Padding::Same))),
        c("avg_asym", [2, 2, 5, 6], Kind::Avg(Pool2dOptions::new([3, 2]).stride([2, 1]).padding([1, 0, 0, 1]))),
        c("adaptive_avg_5x7_to_3x4", [2, 3, 5, 7], Kind::AdaptiveAvg([3, 4])),
        c("adaptive_avg_up", [2, 2, 3, 2], Kind::AdaptiveAvg([5, 4])),
        c("adaptive_avg_global", [2, 3, 6, 5], Kind::AdaptiveAvg([1, 1])),
        c("adaptive_max_5x7_to_3x4", [2, 3, 5, 7], Kind::AdaptiveMax([3, 4])),
        c("adaptive_max_up", [2, 2, 3, 2], Kind::AdaptiveMax([5, 4])),
        c("mnist_pool", [4, 20, 24, 24], Kind::Max(p(2))),
    ]
}

#[test]
fn gpu_matches_cpu_forward_gradients_and_indices() {
    let _generator = common::generator_lock();
    let Some(gpu) = common::gpu_or_skip() else { return };
    let mut rng = common::Rng::new(11);
    let mut failures = Vec::new();
    for c in grid() {
        let n: usize = c.x.iter().product();
        let inputs = vec![(rng.vec(n, -1.0, 1.0), c.x.to_vec())];
        let f = |t: &[Tensor]| c.run(&t[0]);
        if let Some(m) = common::catch(c.name, || common::gpu_matches_cpu(c.name, &f, &inputs, true, 1e-5)) {
            failures.push(m);
        }
        let on = |place| common::tensor(&inputs[0].0, &c.x, DType::Float32, place);
        if let Some(ci) = c.indices(&on(Place::Cpu)) {
            let gi = c.indices(&on(gpu)).unwrap();
            if ci != gi {
                failures.push(format!("{}: indices differ between CPU and GPU", c.name));
            }
        }
    }
    common::report("pooling GPU vs CPU", &failures);
}

/// `n` distinct values at least 0.05 apart, shuffled (no near-ties for max pooling).
fn distinct(n: usize, rng: &mut common::Rng) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 * 0.05 - 1.0).collect();
    for i in (1..n).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn gradcheck_float64() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(12);
    let mut failures = Vec::new();
    for c in grid().into_iter().filter(|c| c.x.iter().product::<usize>() <= 400) {
        let n: usize = c.x.iter().product();
        let inputs = vec![(distinct(n, &mut rng), c.x.to_vec())];
        if let Err(m) = common::gradcheck(c.name, &|t| c.run(&t[0]), &inputs) {
            failures.push(m);
        }
    }
    common::report("pooling gradcheck", &failures);
}

#[test]
fn second_order_gradients() {
    let _generator = common::generator_lock();
    // d/dx of ∂/∂x Σ pool(x)²: through the backward ops' own backward rules.
    let mut rng = common::Rng::new(13);
    let x = [2, 2, 5, 6];
    let kinds = [
        ("max", Kind::Max(Pool2dOptions::new(3).stride(2).padding(1))),
        ("avg", Kind::Avg(Pool2dOptions::new(3).stride(2).padding(1))),
        ("adaptive_max", Kind::AdaptiveMax([3, 4])),
    ];
    let mut failures = Vec::new();
    for (name, kind) in kinds {
        let c = Cfg { name, x, kind };
        let f = |t: &[Tensor]| -> Result<Tensor> {
            let _g = paddle::enable_grad();
            let y = c.run(&t[0])?;
            let l = y.mul(&y)?.sum(&[], false)?;
            Ok(paddle::grad(&[l], &[t[0].clone()], None, true, true, false)?[0].clone().unwrap())
        };
        let inputs = vec![(distinct(120, &mut rng), x.to_vec())];
        if let Err(m) = common::gradcheck(name, &f, &inputs) {
            failures.push(m);
        }
    }
    common::report("pooling double backward", &failures);
}

#[test]
fn float16_and_determinism() {
    let _generator = common::generator_lock();
    let x = common::tensor(&seq(16), &[1, 1, 4, 4], DType::Float16, Place::Cpu);
    let y = paddle::max_pool2d(&x, &Pool2dOptions::new(2)).unwrap();
    assert_eq!((y.dtype(), common::values(&y)), (DType::Float16, vec![6.0, 8.0, 14.0, 16.0]));
    let y = paddle::avg_pool2d(&x, &Pool2dOptions::new(2)).unwrap();
    assert_eq!((y.dtype(), common::values(&y)), (DType::Float16, vec![3.5, 5.5, 11.5, 13.5]));

    let mut rng = common::Rng::new(14);
    let v = rng.vec(2 * 3 * 9 * 9, -1.0, 1.0);
    let mut places = vec![Place::Cpu];
    places.extend(common::gpu_or_skip());
    for place in places {
        let run = || {
            let x = common::tensor(&v, &[2, 3, 9, 9], DType::Float32, place);
            x.set_stop_gradient(false);
            let o = Pool2dOptions::new(3).stride(2).padding(1);
            let y = paddle::max_pool2d(&x, &o).unwrap().add(&paddle::avg_pool2d(&x, &o).unwrap()).unwrap();
            y.mul(&y).unwrap().sum(&[], false).unwrap().backward().unwrap();
            common::values(&x.grad().unwrap())
        };
        assert_eq!(run(), run(), "gradients differ between two runs on {place}");
    }
}

fn err(r: Result<Tensor>) -> Error {
    match r {
        Ok(t) => panic!("expected an error, got a tensor of shape {:?}", t.shape()),
        Err(e) => e,
    }
}

#[test]
fn errors_are_typed_and_name_the_op() {
    let _generator = common::generator_lock();
    let x = t64(&[0.0; 2 * 3 * 5 * 5], &[2, 3, 5, 5]);
    let p = Pool2dOptions::new;
    let check = |e: Error, op: &str, shape: bool| {
        let m = e.to_string();
        if shape {
            assert!(matches!(e, Error::Shape { .. }), "{m}");
        } else {
            assert!(matches!(e, Error::InvalidArgument { .. }), "{m}");
        }
        assert!(m.contains(op), "{m} (wanted {op})");
    };
    check(err(paddle::max_pool2d(&t64(&[0.0; 75], &[3, 5, 5]), &p(2))), "max_pool2d", true);
    check(err(paddle::avg_pool2d(&t64(&[0.0; 75], &[3, 5, 5]), &p(2))), "avg_pool2d", true);
    check(err(paddle::max_pool2d(&x, &p(6))), "max_pool2d", true);
    check(err(paddle::adaptive_avg_pool2d(&t64(&[0.0; 5], &[5]), 2)), "adaptive_avg_pool2d", true);
    check(err(paddle::max_pool2d(&x, &p(0))), "max_pool2d", false);
    check(err(paddle::max_pool2d(&x, &p(2).stride(0))), "max_pool2d", false);
    check(err(paddle::avg_pool2d(&x, &p(2).padding(2))), "avg_pool2d", false);
    check(err(paddle::max_pool2d(&x, &p(2).padding(Padding::Valid).ceil_mode(true))), "max_pool2d", false);
    check(err(paddle::adaptive_max_pool2d(&x, [0, 2])), "adaptive_max_pool2d", false);
    let nhwc = Pool2dOptions { data_format: "NHWC".into(), ..p(2) };
    check(err(paddle::max_pool2d(&x, &nhwc)), "max_pool2d", false);
    let e = paddle::max_pool2d_with_index(&t64(&[0.0; 75], &[3, 5, 5]), &p(2)).unwrap_err();
    check(e, "max_pool2d_with_index", true);

    let xi = common::tensor(&[0.0; 16], &[1, 1, 4, 4], DType::Int32, Place::Cpu);
    let e = err(paddle::max_pool2d(&xi, &p(2)));
    assert!(matches!(e, Error::UnsupportedDType { op: "max_pool2d", .. }), "{e}");
}

#[test]
fn empty_batch() {
    let _generator = common::generator_lock();
    let mut places = vec![Place::Cpu];
    places.extend(common::gpu_or_skip());
    for place in places {
        let x = common::tensor(&[], &[0, 2, 4, 4], DType::Float32, place);
        x.set_stop_gradient(false);
        let o = Pool2dOptions::new(2);
        let (y, idx) = paddle::max_pool2d_with_index(&x, &o).unwrap();
        assert_eq!((y.shape(), idx.shape()), ([0, 2, 2, 2].as_slice(), [0, 2, 2, 2].as_slice()));
        let z = paddle::avg_pool2d(&x, &o).unwrap();
        y.add(&z).unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(x.grad().unwrap().shape(), [0, 2, 4, 4], "on {place}");
    }
}
