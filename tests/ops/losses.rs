//! Losses against values computed by hand, GPU against CPU, and float64 gradchecks.

use crate::common;

use dygraph::nn::functional as F;
use dygraph::nn::{CrossEntropyOptions, Reduction};
use dygraph::{DType, Place, Result, Tensor};

fn t(v: &[f64], shape: &[usize]) -> Tensor {
    common::tensor(v, shape, DType::Float64, Place::Cpu)
}

fn labels(v: &[i64], shape: &[usize], place: Place) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, place).unwrap()
}

fn scalar(x: &Tensor) -> f64 {
    common::values(x)[0]
}

fn log_softmax_row(row: &[f64]) -> Vec<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
    row.iter().map(|v| v - lse).collect()
}

#[test]
fn regression_losses_by_hand() {
    let _generator = common::generator_lock();
    let x = t(&[1.0, -2.0, 0.5, 3.0], &[4]);
    let y = t(&[0.0, -1.0, 0.5, 1.0], &[4]);
    assert!((scalar(&F::mse_loss(&x, &y, Reduction::Mean).unwrap()) - (1.0 + 1.0 + 0.0 + 4.0) / 4.0).abs() < 1e-12);
    assert!((scalar(&F::l1_loss(&x, &y, Reduction::Sum).unwrap()) - 4.0).abs() < 1e-12);
    // Huber with delta 1: d = [1, -1, 0, 2] → [0.5, 0.5, 0, 1.5].
    let h = F::smooth_l1_loss(&x, &y, Reduction::None, 1.0).unwrap();
    assert_eq!(common::values(&h), vec![0.5, 0.5, 0.0, 1.5]);
    assert!(F::mse_loss(&x, &t(&[1.0], &[1]), Reduction::Mean).is_err(), "shape mismatch is an error");
}

#[test]
fn cross_entropy_hard_labels_weights_ignore_and_smoothing() {
    let _generator = common::generator_lock();
    let logits = [2.0, 1.0, 0.1, 0.5, 2.5, 0.3, -1.0, 0.0, 1.0];
    let x = t(&logits, &[3, 3]);
    let lab = [0i64, 1, 2];
    let rows: Vec<Vec<f64>> = logits.chunks(3).map(log_softmax_row).collect();
    let nll: Vec<f64> = (0..3).map(|i| -rows[i][lab[i] as usize]).collect();
    let opts = CrossEntropyOptions::default();
    let mean = F::cross_entropy(&x, &labels(&lab, &[3], Place::Cpu), &opts).unwrap();
    assert!((scalar(&mean) - nll.iter().sum::<f64>() / 3.0).abs() < 1e-12);
    // [N, 1] labels and reduction none keep the [N, 1] shape.
    let none = F::cross_entropy(
        &x,
        &labels(&lab, &[3, 1], Place::Cpu),
        &CrossEntropyOptions { reduction: Reduction::None, ..Default::default() },
    )
    .unwrap();
    assert_eq!(none.shape(), &[3, 1]);
    common::assert_close("per-sample", &common::values(&none), &nll, 1e-12);
    // Class weights: weighted mean divides by the sum of the samples' weights.
    let w = t(&[1.0, 2.0, 0.5], &[3]);
    let wm = F::cross_entropy(
        &x,
        &labels(&lab, &[3], Place::Cpu),
        &CrossEntropyOptions { weight: Some(w), ..Default::default() },
    )
    .unwrap();
    let e = (nll[0] * 1.0 + nll[1] * 2.0 + nll[2] * 0.5) / 3.5;
    assert!((scalar(&wm) - e).abs() < 1e-12);
    // ignore_index drops the sample from sum and count.
    let ig = F::cross_entropy(&x, &labels(&[0, -100, 2], &[3], Place::Cpu), &opts).unwrap();
    assert!((scalar(&ig) - (nll[0] + nll[2]) / 2.0).abs() < 1e-12);
    // Label smoothing ε: target (1−ε)·onehot + ε/C.
    let ls = F::cross_entropy(
        &x,
        &labels(&lab, &[3], Place::Cpu),
        &CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() },
    )
    .unwrap();
    let e: f64 = (0..3)
        .map(|i| -(0..3).map(|c| rows[i][c] * (if c == lab[i] as usize { 0.9 } else { 0.0 } + 0.1 / 3.0)).sum::<f64>())
        .sum::<f64>()
        / 3.0;
    assert!((scalar(&ls) - e).abs() < 1e-12);
    // Probabilities in (use_softmax=false) and soft labels.
    let probs = t(&[0.7, 0.2, 0.1], &[1, 3]);
    let p = F::cross_entropy(
        &probs,
        &labels(&[1], &[1], Place::Cpu),
        &CrossEntropyOptions { use_softmax: false, ..Default::default() },
    )
    .unwrap();
    assert!((scalar(&p) + 0.2f64.ln()).abs() < 1e-12);
    let soft = t(&[0.5, 0.5, 0.0], &[1, 3]);
    let s = F::cross_entropy(
        &x.slice(&[0], &[0], &[1]).unwrap(),
        &soft,
        &CrossEntropyOptions { soft_label: true, ..Default::default() },
    )
    .unwrap();
    assert!((scalar(&s) + 0.5 * (rows[0][0] + rows[0][1])).abs() < 1e-12);
    // Soft labels with class weights (Paddle): each sample weighs Σ_c label_c·w_c and the
    // mean divides by the sum of those weights.
    let w = [1.0, 2.0, 0.5];
    let soft3 = [0.5, 0.5, 0.0, 0.1, 0.2, 0.7, 0.0, 0.0, 1.0];
    let wsl = F::cross_entropy(
        &x,
        &t(&soft3, &[3, 3]),
        &CrossEntropyOptions { soft_label: true, weight: Some(t(&w, &[3])), ..Default::default() },
    )
    .unwrap();
    let sw: Vec<f64> = (0..3).map(|i| (0..3).map(|c| soft3[3 * i + c] * w[c]).sum()).collect();
    let per: Vec<f64> = (0..3).map(|i| -(0..3).map(|c| soft3[3 * i + c] * rows[i][c]).sum::<f64>() * sw[i]).collect();
    let e = per.iter().sum::<f64>() / sw.iter().sum::<f64>();
    assert!((scalar(&wsl) - e).abs() < 1e-12, "{} vs {e}", scalar(&wsl));
    // The same through label smoothing of hard labels: the smoothed label weighs the sample.
    let lsw = F::cross_entropy(
        &x,
        &labels(&lab, &[3], Place::Cpu),
        &CrossEntropyOptions { label_smoothing: 0.1, weight: Some(t(&w, &[3])), ..Default::default() },
    )
    .unwrap();
    let target = |i: usize, c: usize| if c == lab[i] as usize { 0.9 } else { 0.0 } + 0.1 / 3.0;
    let sw: Vec<f64> = (0..3).map(|i| (0..3).map(|c| target(i, c) * w[c]).sum()).collect();
    let per: Vec<f64> = (0..3).map(|i| -(0..3).map(|c| target(i, c) * rows[i][c]).sum::<f64>() * sw[i]).collect();
    let e = per.iter().sum::<f64>() / sw.iter().sum::<f64>();
    assert!((scalar(&lsw) - e).abs() < 1e-12, "{} vs {e}", scalar(&lsw));
    // Errors: float hard labels, wrong label shape.
    assert!(F::cross_entropy(&x, &t(&[0.0, 1.0, 2.0], &[3]), &opts).is_err());
    let e = F::cross_entropy(&x, &labels(&[0, 1], &[2], Place::Cpu), &opts).unwrap_err().to_string();
    assert!(e.contains("cross_entropy") && e.contains("[2]"), "{e}");
}

#[test]
fn nll_and_binary_losses_by_hand() {
    let _generator = common::generator_lock();
    let logp = t(&[-0.1, -2.5, -1.2, -0.4], &[2, 2]);
    let n = F::nll_loss(&logp, &labels(&[0, 1], &[2], Place::Cpu), None, -100, Reduction::Mean).unwrap();
    assert!((scalar(&n) - (0.1 + 0.4) / 2.0).abs() < 1e-12);
    let p = t(&[0.9, 0.2], &[2]);
    let y = t(&[1.0, 0.0], &[2]);
    let b = F::binary_cross_entropy(&p, &y, None, Reduction::Sum).unwrap();
    assert!((scalar(&b) + 0.9f64.ln() + 0.8f64.ln()).abs() < 1e-12);
    let z = t(&[2.0, -1.0], &[2]);
    let bl = F::binary_cross_entropy_with_logits(&z, &y, None, Reduction::None, None).unwrap();
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    common::assert_close("bce logits", &common::values(&bl), &[-sig(2.0).ln(), -(1.0 - sig(-1.0)).ln()], 1e-12);
    let pw = t(&[3.0, 3.0], &[2]);
    let bw = F::binary_cross_entropy_with_logits(&z, &y, None, Reduction::None, Some(&pw)).unwrap();
    common::assert_close("pos_weight", &common::values(&bw), &[-3.0 * sig(2.0).ln(), -(1.0 - sig(-1.0)).ln()], 1e-12);
    // Stable for large logits.
    let big =
        F::binary_cross_entropy_with_logits(&t(&[500.0], &[1]), &t(&[0.0], &[1]), None, Reduction::Sum, None).unwrap();
    assert!((scalar(&big) - 500.0).abs() < 1e-9);
}

#[test]
fn losses_gradcheck_and_gpu_matches_cpu() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(11);
    let x = rng.vec(12, -2.0, 2.0);
    let y = rng.vec(12, -2.0, 2.0);
    let probs = rng.vec(12, 0.05, 0.95);
    let bits: Vec<f64> = rng.vec(12, 0.0, 1.0).into_iter().map(|v| v.round()).collect();
    let lab: Vec<i64> = rng.ints(4, 0, 3);
    let lab2 = lab.clone();
    type Case = (&'static str, Box<dyn Fn(&[Tensor]) -> Result<Tensor>>, Vec<(Vec<f64>, Vec<usize>)>);
    let cases: Vec<Case> = vec![
        (
            "mse",
            Box::new(|v: &[Tensor]| F::mse_loss(&v[0], &v[1], Reduction::Mean)),
            vec![(x.clone(), vec![3, 4]), (y.clone(), vec![3, 4])],
        ),
        (
            "smooth_l1",
            Box::new(|v: &[Tensor]| F::smooth_l1_loss(&v[0], &v[1], Reduction::Sum, 0.7)),
            vec![(x.clone(), vec![12]), (y.clone(), vec![12])],
        ),
        (
            "cross_entropy",
            Box::new(move |v: &[Tensor]| {
                let l = Tensor::from_vec_on(lab.clone(), [4], v[0].place()).unwrap();
                F::cross_entropy(&v[0], &l, &CrossEntropyOptions { label_smoothing: 0.05, ..Default::default() })
            }),
            vec![(x.clone(), vec![4, 3])],
        ),
        (
            "cross_entropy_axis0",
            Box::new(move |v: &[Tensor]| {
                let l = Tensor::from_vec_on(lab2.clone(), [1, 4], v[0].place()).unwrap();
                F::cross_entropy(&v[0], &l, &CrossEntropyOptions { axis: 0, ..Default::default() })
            }),
            vec![(x.clone(), vec![3, 4])],
        ),
        (
            "bce",
            Box::new(|v: &[Tensor]| F::binary_cross_entropy(&v[0], &v[1], None, Reduction::Mean)),
            vec![(probs.clone(), vec![12]), (bits.clone(), vec![12])],
        ),
        (
            "bce_logits",
            Box::new(|v: &[Tensor]| F::binary_cross_entropy_with_logits(&v[0], &v[1], None, Reduction::Mean, None)),
            vec![(x.clone(), vec![12]), (bits.clone(), vec![12])],
        ),
    ];
    for (name, f, inputs) in &cases {
        common::gradcheck(name, f.as_ref(), inputs).unwrap();
        common::gpu_matches_cpu(name, f.as_ref(), inputs, true, 1e-5);
    }
}

/// The default hard-label cross entropy runs as one fused op (`cross_entropy_with_softmax`)
/// with a fused gradient, on logits and, without softmax, on probabilities: float32 values
/// and gradients on both places against float64 formulas, with ignored labels, int32 labels,
/// the class axis in the middle and each reduction.
#[test]
fn fused_cross_entropy_matches_float64_formulas() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(41);
    let (n, c, inner) = (5usize, 4usize, 3usize);
    for place in common::places() {
        for use_softmax in [true, false] {
            for (reduction, middle) in [(Reduction::Mean, false), (Reduction::Sum, true), (Reduction::None, false)] {
                // [n, c] with the classes last, or [n, c, inner] with them on axis 1.
                let lines = if middle { n * inner } else { n };
                let numel = lines * c;
                let x: Vec<f64> = if use_softmax { rng.vec(numel, -3.0, 3.0) } else { rng.vec(numel, 0.05, 1.0) };
                let mut lab = rng.ints(lines, 0, c as i64);
                lab[1] = -100;
                // The flat index of class k on line `line`.
                let at = |line: usize, k: usize| {
                    if middle { ((line / inner) * c + k) * inner + line % inner } else { line * c + k }
                };
                let (shape, lshape, axis) =
                    if middle { (vec![n, c, inner], vec![n, inner], 1) } else { (vec![n, c], vec![n], -1) };
                let xt = common::tensor(&x, &shape, DType::Float32, place);
                xt.set_stop_gradient(false);
                let label = if middle {
                    Tensor::from_vec_on(lab.iter().map(|&v| v as i32).collect::<Vec<_>>(), lshape.as_slice(), place)
                } else {
                    Tensor::from_vec_on(lab.clone(), lshape.as_slice(), place)
                }
                .unwrap();
                let opts = CrossEntropyOptions { reduction, axis, use_softmax, ..Default::default() };
                let loss = F::cross_entropy(&xt, &label, &opts).unwrap();
                loss.sum(&[], false).unwrap().backward().unwrap();

                // float64: logp per line, the per-line loss, and d(reduced)/dx.
                let logp = |line: usize| -> Vec<f64> {
                    let row: Vec<f64> = (0..c).map(|k| x[at(line, k)]).collect();
                    if use_softmax { log_softmax_row(&row) } else { row.iter().map(|p| p.ln()).collect() }
                };
                let valid: Vec<bool> = lab.iter().map(|&l| l != -100).collect();
                let count = valid.iter().filter(|&&v| v).count() as f64;
                let per: Vec<f64> =
                    (0..lines).map(|i| if valid[i] { -logp(i)[lab[i] as usize] } else { 0.0 }).collect();
                let want: Vec<f64> = match reduction {
                    Reduction::Mean => vec![per.iter().sum::<f64>() / count],
                    Reduction::Sum => vec![per.iter().sum()],
                    _ => per.clone(),
                };
                let scale = if reduction == Reduction::Mean { 1.0 / count } else { 1.0 };
                let mut dx = vec![0.0; numel];
                for line in (0..lines).filter(|&i| valid[i]) {
                    let (lp, l) = (logp(line), lab[line] as usize);
                    for (k, lpk) in lp.iter().enumerate() {
                        let hit = if k == l { 1.0 } else { 0.0 };
                        dx[at(line, k)] = scale * if use_softmax { lpk.exp() - hit } else { -hit / x[at(line, k)] };
                    }
                }
                let what = format!("{place} softmax {use_softmax} {reduction:?} middle {middle}");
                common::assert_close(&format!("{what}: loss"), &common::values(&loss), &want, 1e-5);
                let grad = xt.grad().expect("x has a gradient");
                common::assert_close(&format!("{what}: dx"), &common::values(&grad), &dx, 1e-5);
            }
        }
    }
}

/// Where the composed ops made NaN from 0·∞ or 0/0, the fused op gives 0, as Paddle does: an
/// ignored row whose class-0 log-probability is −∞, and a zero probability off the label.
#[test]
fn fused_cross_entropy_edge_values_by_hand() {
    let _generator = common::generator_lock();
    for place in common::places() {
        let f = |v: &[f64], s: &[usize]| {
            let x = common::tensor(v, s, DType::Float32, place);
            x.set_stop_gradient(false);
            x
        };
        // Row 0 ignored, its class 0 at −∞; row 1: label 1 of [1, 2].
        let x = f(&[f64::NEG_INFINITY, 0.0, 1.0, 2.0], &[2, 2]);
        let loss = F::cross_entropy(&x, &labels(&[-100, 1], &[2], place), &Default::default()).unwrap();
        let want = (1.0f64 + 1.0f64.exp()).ln() + 1.0 - 2.0;
        common::assert_close(&format!("{place}: ignored −∞ row"), &common::values(&loss), &[want], 1e-6);
        loss.backward().unwrap();
        let p1 = 1.0 / (1.0 + 1.0f64.exp());
        let dx = [0.0, 0.0, p1, -p1];
        common::assert_close(&format!("{place}: its gradient"), &common::values(&x.grad().unwrap()), &dx, 1e-6);
        // Probabilities with a 0 off the label: loss −ln 1 = 0, gradient −1 at the label, 0 elsewhere.
        let p = f(&[0.0, 1.0], &[1, 2]);
        let opts = CrossEntropyOptions { use_softmax: false, ..Default::default() };
        let loss = F::cross_entropy(&p, &labels(&[1], &[1], place), &opts).unwrap();
        common::assert_close(&format!("{place}: p = [0, 1]"), &common::values(&loss), &[0.0], 1e-7);
        loss.backward().unwrap();
        common::assert_close(
            &format!("{place}: its gradient"),
            &common::values(&p.grad().unwrap()),
            &[0.0, -1.0],
            1e-7,
        );
        // The create_graph rule (ordinary ops) gives the same 0s, on the ignored row too.
        let q = f(&[0.0, 1.0, 0.0, 0.5], &[2, 2]);
        let loss = F::cross_entropy(&q, &labels(&[1, -100], &[2], place), &opts).unwrap();
        let g = dygraph::grad(&[loss], std::slice::from_ref(&q), None, false, true, false).unwrap().remove(0).unwrap();
        common::assert_close(&format!("{place}: create_graph"), &common::values(&g), &[0.0, -1.0, 0.0, 0.0], 1e-7);
    }
}

#[test]
fn pair_triplet_and_divergence_losses_match_hand_values() {
    let _generator = common::generator_lock();
    use dygraph::nn::TripletOptions;
    for place in common::places() {
        let f = |v: &[f64], s: &[usize]| common::tensor(v, s, DType::Float32, place);
        let close = |what: &str, got: Tensor, want: &[f64]| {
            common::assert_close(&format!("{what} on {place}"), &common::values(&got), want, 1e-5)
        };
        let (a, b) = (f(&[1.0, 2.0, 0.5], &[3]), f(&[0.5, 3.0, 0.5], &[3]));
        let y = f(&[1.0, -1.0, 1.0], &[3]);
        // max(0, −y·(a − b) + 0.2): 0, 0, 0.2 → mean 0.2/3.
        close("margin_ranking", F::margin_ranking_loss(&a, &b, &y, 0.2, Reduction::None).unwrap(), &[0.0, 0.0, 0.2]);
        close("margin_ranking mean", F::margin_ranking_loss(&a, &b, &y, 0.2, Reduction::Mean).unwrap(), &[0.2 / 3.0]);
        // label 1 → x; −1 → max(0, 1 − x).
        close("hinge_embedding", F::hinge_embedding_loss(&a, &y, 1.0, Reduction::None).unwrap(), &[1.0, 0.0, 0.5]);
        let x1 = f(&[1.0, 0.0, 1.0, 1.0], &[2, 2]);
        let x2 = f(&[0.0, 1.0, 1.0, 1.0], &[2, 2]);
        let lab = f(&[-1.0, 1.0], &[2]);
        // cos = 0 and 1: label −1 → max(0, 0 − (−0.5)) = 0.5; label 1 → 1 − 1 = 0.
        close(
            "cosine_embedding",
            F::cosine_embedding_loss(&x1, &x2, &lab, -0.5, Reduction::None).unwrap(),
            &[0.5, 0.0],
        );
        let anchor = f(&[0.0, 0.0], &[1, 2]);
        let pos = f(&[3.0, 4.0], &[1, 2]);
        let neg = f(&[1.0, 0.0], &[1, 2]);
        let o = TripletOptions { epsilon: 0.0, reduction: Reduction::None, ..Default::default() };
        // d(a, p) = 5, d(a, n) = 1: max(5 − 1 + 1, 0) = 5; with swap, d(p, n) = √20 > 1 keeps 1.
        close("triplet", F::triplet_margin_loss(&anchor, &pos, &neg, &o).unwrap(), &[5.0]);
        close(
            "triplet swap",
            F::triplet_margin_loss(&anchor, &pos, &neg, &TripletOptions { swap: true, ..o }).unwrap(),
            &[5.0],
        );
        let o1 = TripletOptions { p: 1.0, ..o };
        close("triplet p=1", F::triplet_margin_loss(&anchor, &pos, &neg, &o1).unwrap(), &[7.0]);
        let logp = f(&[(0.25f64).ln(), (0.75f64).ln()], &[1, 2]);
        let target = f(&[0.5, 0.5], &[1, 2]);
        let kl = 0.5 * (0.5f64.ln() - 0.25f64.ln()) + 0.5 * (0.5f64.ln() - 0.75f64.ln());
        close("kl_div sum", F::kl_div(&logp, &target, Reduction::Sum, false).unwrap(), &[kl]);
        close("kl_div batchmean", F::kl_div(&logp, &target, Reduction::BatchMean, false).unwrap(), &[kl]);
        let zero_target = f(&[0.0, 1.0], &[1, 2]);
        close(
            "kl_div with a zero label",
            F::kl_div(&logp, &zero_target, Reduction::None, false).unwrap(),
            &[0.0, -(0.75f64).ln()],
        );
        let log_target = f(&[0.5f64.ln(), 0.5f64.ln()], &[1, 2]);
        close("kl_div log_target", F::kl_div(&logp, &log_target, Reduction::Sum, true).unwrap(), &[kl]);
        let logits = f(&[0.0, 2.0, -1.0, 0.5], &[2, 2]);
        let targets = f(&[1.0, 0.0, 0.0, 1.0], &[2, 2]);
        let ls = |x: f64| -(1.0 + (-x).exp()).ln();
        let per = [-(ls(0.0) + ls(-2.0)) / 2.0, -(ls(1.0) + ls(0.5)) / 2.0];
        close(
            "multi_label_soft_margin",
            F::multi_label_soft_margin_loss(&logits, &targets, None, Reduction::None).unwrap(),
            &per,
        );
    }
    // Gradients: float64 finite differences.
    let mut failures = Vec::new();
    let mut rng = common::Rng::new(common::run_seed() ^ 21);
    let mut check = |name: &str, f: &dyn Fn(&[Tensor]) -> Result<Tensor>, shapes: &[&[usize]]| {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec_away_from_zero(s.iter().product(), -2.0, 2.0, 0.2), s.to_vec())).collect();
        failures.extend(common::gradcheck(name, f, &inputs).err());
    };
    let pm = t(&[1.0, -1.0, 1.0, -1.0], &[4]);
    check("margin_ranking", &|x| F::margin_ranking_loss(&x[0], &x[1], &pm, 0.1, Reduction::Sum), &[&[4], &[4]]);
    check(
        "cosine_embedding",
        &|x| F::cosine_embedding_loss(&x[0], &x[1], &t(&[1.0, -1.0], &[2]), -2.0, Reduction::Sum),
        &[&[2, 3], &[2, 3]],
    );
    check(
        "triplet",
        &|x| F::triplet_margin_loss(&x[0], &x[1], &x[2], &Default::default()),
        &[&[2, 3], &[2, 3], &[2, 3]],
    );
    check("kl_div", &|x| F::kl_div(&x[0], &t(&[0.2, 0.8, 0.5, 0.5], &[2, 2]), Reduction::Mean, false), &[&[2, 2]]);
    check(
        "multi_label_soft_margin",
        &|x| F::multi_label_soft_margin_loss(&x[0], &t(&[1.0, 0.0, 0.0, 1.0], &[2, 2]), None, Reduction::Mean),
        &[&[2, 2]],
    );
    common::report("loss gradchecks", &failures);
}

/// CTC's forward algorithm in float64 on the host (log space with true −∞), per sample.
fn ctc_reference(
    logits: &[f64],
    (n, c): (usize, usize),
    labels: &[Vec<i64>],
    lens: &[usize],
    blank: usize,
) -> Vec<f64> {
    let lse = |a: f64, b: f64| {
        if a == f64::NEG_INFINITY && b == f64::NEG_INFINITY {
            f64::NEG_INFINITY
        } else {
            a.max(b) + (-(a - b).abs()).exp().ln_1p()
        }
    };
    (0..n)
        .map(|b| {
            let lp = |t: usize, k: usize| {
                let row = &logits[(t * n + b) * c..(t * n + b + 1) * c];
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                row[k] - (m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln())
            };
            let mut ext = vec![blank as i64];
            for &l in &labels[b] {
                ext.extend([l, blank as i64]);
            }
            let l = ext.len();
            let mut alpha = vec![f64::NEG_INFINITY; l];
            alpha[0] = lp(0, ext[0] as usize);
            if l > 1 {
                alpha[1] = lp(0, ext[1] as usize);
            }
            for t in 1..lens[b] {
                let prev = alpha.clone();
                for s in 0..l {
                    let mut a = prev[s];
                    if s >= 1 {
                        a = lse(a, prev[s - 1]);
                    }
                    if s >= 2 && ext[s] != blank as i64 && ext[s] != ext[s - 2] {
                        a = lse(a, prev[s - 2]);
                    }
                    alpha[s] = a + lp(t, ext[s] as usize);
                }
            }
            -(if l > 1 { lse(alpha[l - 1], alpha[l - 2]) } else { alpha[0] })
        })
        .collect()
}

#[test]
fn ctc_loss_matches_the_forward_algorithm() {
    let _generator = common::generator_lock();
    let mut rng = common::Rng::new(common::run_seed() ^ 81);
    let (t_max, n, c) = (6, 3, 5);
    let logits = rng.vec(t_max * n * c, -2.0, 2.0);
    let labels = vec![vec![1i64, 2, 2], vec![3], vec![]];
    let padded: Vec<i64> = labels.iter().flat_map(|l| l.iter().copied().chain(std::iter::repeat(0)).take(3)).collect();
    let lens = vec![6usize, 4, 2];
    let want = ctc_reference(&logits, (n, c), &labels, &lens, 0);
    for place in common::places() {
        let x = common::tensor(&logits, &[t_max, n, c], DType::Float32, place);
        let lab = Tensor::from_vec_on(padded.clone(), [n, 3], place).unwrap();
        let il = Tensor::from_vec_on(lens.iter().map(|&v| v as i64).collect::<Vec<_>>(), [n], place).unwrap();
        let ll = Tensor::from_vec_on(labels.iter().map(|l| l.len() as i64).collect::<Vec<_>>(), [n], place).unwrap();
        let per = F::ctc_loss(&x, &lab, &il, &ll, 0, Reduction::None).unwrap();
        common::assert_close(&format!("ctc per sample on {place}"), &common::values(&per), &want, 1e-4);
        let mean = F::ctc_loss(&x, &lab, &il, &ll, 0, Reduction::Mean).unwrap();
        let want_mean = (want[0] / 3.0 + want[1] / 1.0 + want[2] / 1.0) / 3.0;
        common::assert_close(&format!("ctc mean on {place}"), &common::values(&mean), &[want_mean], 1e-4);
        let bad = Tensor::from_vec_on(vec![0i64, 1, 1, 3, 0, 0, 0, 0, 0], [n, 3], place).unwrap();
        assert!(F::ctc_loss(&x, &bad, &il, &ll, 0, Reduction::None).is_err(), "a blank inside a label");
    }
    let (t_max, n, c) = (4, 2, 4);
    let inputs = vec![(rng.vec(t_max * n * c, -1.0, 1.0), vec![t_max, n, c])];
    let f = |t: &[Tensor]| {
        let lab = Tensor::from_vec(vec![1i64, 2, 3, 0], [2, 2])?;
        let il = Tensor::from_vec(vec![4i64, 3], [2])?;
        let ll = Tensor::from_vec(vec![2i64, 1], [2])?;
        F::ctc_loss(&t[0], &lab, &il, &ll, 0, Reduction::None)
    };
    if let Err(m) = common::gradcheck("ctc_loss", &f, &inputs) {
        panic!("{m}");
    }
}
