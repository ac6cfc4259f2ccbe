//! Attention, transformer and recurrent layers against float64 formulas written out in the
//! test with the layers' own weights (read to the host): softmax(QKᵀ/√d)V per head with
//! Paddle's masks; post- and pre-norm encoder layers; LSTM, GRU and SimpleRNN as explicit
//! per-step loops (multi-layer, bidirectional, initial states, time-major). Parameter names
//! and shapes follow Paddle; gradients are checked against finite differences of the
//! float64 formulas. Every place.

use crate::common;

use common::{Rng, assert_close, places, values};
use dygraph::nn::{
    Direction, Forward, GRU, LSTM, Layer, MultiHeadAttention, RnnActivation, RnnOptions, SimpleRNN, TransformerConfig,
    TransformerEncoder, TransformerEncoderLayer,
};
use dygraph::{self as paddle, DType, Place, Tensor};

/// A row-major float64 matrix.
#[derive(Clone, Debug)]
struct M {
    r: usize,
    c: usize,
    v: Vec<f64>,
}

impl M {
    fn of(t: &Tensor) -> M {
        let s = t.shape();
        let (r, c) = if s.len() == 1 { (1, s[0]) } else { (s[..s.len() - 1].iter().product(), s[s.len() - 1]) };
        M { r, c, v: values(t) }
    }
    fn at(&self, i: usize, j: usize) -> f64 {
        self.v[i * self.c + j]
    }
    /// `self · other` (`other` given as `[k, n]`), or `self · otherᵀ` when `t`.
    fn mul(&self, o: &M, t: bool) -> M {
        let n = if t { o.r } else { o.c };
        let v = (0..self.r)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| (0..self.c).map(|k| self.at(i, k) * if t { o.at(j, k) } else { o.at(k, j) }).sum())
            .collect();
        M { r: self.r, c: n, v }
    }
    fn add_row(&self, b: &M) -> M {
        M { v: self.v.iter().enumerate().map(|(k, x)| x + b.v[k % self.c]).collect(), ..self.clone() }
    }
    fn map(&self, f: impl Fn(f64) -> f64) -> M {
        M { v: self.v.iter().map(|&x| f(x)).collect(), ..self.clone() }
    }
    fn zip(&self, o: &M, f: impl Fn(f64, f64) -> f64) -> M {
        M { v: self.v.iter().zip(&o.v).map(|(&a, &b)| f(a, b)).collect(), ..self.clone() }
    }
    fn cols(&self, from: usize, n: usize) -> M {
        let v = (0..self.r).flat_map(|i| (from..from + n).map(move |j| (i, j))).map(|(i, j)| self.at(i, j)).collect();
        M { r: self.r, c: n, v }
    }
    fn rows(&self, from: usize, n: usize) -> M {
        M { r: n, c: self.c, v: self.v[from * self.c..(from + n) * self.c].to_vec() }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn param(l: &dyn Layer, name: &str) -> M {
    let p = l.named_parameters().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no parameter {name}"));
    M::of(&p.1)
}

fn input(rng: &mut Rng, shape: &[usize], place: Place) -> Tensor {
    common::tensor(&rng.vec(shape.iter().product(), -1.0, 1.0), shape, DType::Float32, place)
}

/// Multi-head attention of one batch element in float64: `q` `[Lq, E]`, `k`/`v` `[Lk, E]`,
/// the layer's projections, an additive mask `[Lq, Lk]`.
fn attention_ref(l: &dyn Layer, prefix: &str, heads: usize, q: &M, k: &M, v: &M, mask: Option<&M>) -> M {
    let p = |n: &str| param(l, &format!("{prefix}{n}"));
    let proj = |x: &M, n: &str| x.mul(&p(&format!("{n}.weight")), false).add_row(&p(&format!("{n}.bias")));
    let (qp, kp, vp) = (proj(q, "q_proj"), proj(k, "k_proj"), proj(v, "v_proj"));
    let e = qp.c;
    let d = e / heads;
    let mut out = M { r: q.r, c: e, v: vec![0.0; q.r * e] };
    for h in 0..heads {
        let (qh, kh, vh) = (qp.cols(h * d, d), kp.cols(h * d, d), vp.cols(h * d, d));
        let mut s = qh.mul(&kh, true).map(|x| x / (d as f64).sqrt());
        if let Some(m) = mask {
            s = s.zip(m, |a, b| a + b);
        }
        for i in 0..s.r {
            let row = &mut s.v[i * s.c..(i + 1) * s.c];
            let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|x| (x - mx).exp()).sum();
            row.iter_mut().for_each(|x| *x = (*x - mx).exp() / sum);
        }
        let oh = s.mul(&vh, false);
        for i in 0..q.r {
            for j in 0..d {
                out.v[i * e + h * d + j] = oh.at(i, j);
            }
        }
    }
    proj(&out, "out_proj")
}

fn layer_norm_ref(x: &M, w: &M, b: &M) -> M {
    let mut out = x.clone();
    for i in 0..x.r {
        let row = &x.v[i * x.c..(i + 1) * x.c];
        let mean = row.iter().sum::<f64>() / x.c as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / x.c as f64;
        for (j, v) in row.iter().enumerate() {
            out.v[i * x.c + j] = (v - mean) / (var + 1e-5).sqrt() * w.v[j] + b.v[j];
        }
    }
    out
}

#[test]
fn multi_head_attention_matches_softmax_qk_v_with_paddle_masks() {
    let _generator = common::generator_lock();
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(common::run_seed());
            let mha = MultiHeadAttention::new(8, 2, 0.0).unwrap();
            let names: Vec<String> = mha.named_parameters().into_iter().map(|(n, _)| n).collect();
            assert_eq!(names[..2], ["q_proj.weight".to_string(), "q_proj.bias".to_string()]);
            assert_eq!(names.len(), 8);
            let (b, lq, lk) = (2, 3, 4);
            let q = input(&mut rng, &[b, lq, 8], place);
            let kv = input(&mut rng, &[b, lk, 8], place);
            // Paddle's keep-mask (bool): position j is visible from i when j ≤ i + 1.
            let keep: Vec<bool> = (0..lq * lk).map(|k| k % lk <= k / lk + 1).collect();
            let keep_t = Tensor::from_vec_on(keep.clone(), [lq, lk], place).unwrap();
            let additive = M { r: lq, c: lk, v: keep.iter().map(|&k| if k { 0.0 } else { -1e9 }).collect() };
            let float_mask = M { r: lq, c: lk, v: (0..lq * lk).map(|k| (k % 3) as f64 * -0.5).collect() };
            let float_t = common::tensor(&float_mask.v, &[lq, lk], DType::Float32, place);
            for (what, mask_t, mask) in [
                ("no mask", None, None),
                ("bool mask", Some(&keep_t), Some(&additive)),
                ("float mask", Some(&float_t), Some(&float_mask)),
            ] {
                let (out, w) = mha.forward_with_weights(&q, &kv, &kv, mask_t).unwrap();
                assert_eq!(out.shape(), &[b, lq, 8]);
                assert_eq!(w.shape(), &[b, 2, lq, lk]);
                let (qm, km) = (M::of(&q), M::of(&kv));
                for n in 0..b {
                    let want = attention_ref(
                        &mha,
                        "",
                        2,
                        &qm.rows(n * lq, lq),
                        &km.rows(n * lk, lk),
                        &km.rows(n * lk, lk),
                        mask,
                    );
                    let got = &values(&out)[n * lq * 8..(n + 1) * lq * 8];
                    assert_close(&format!("attention, {what}, batch {n} on {place}"), got, &want.v, 1e-4);
                }
                let sums: Vec<f64> = values(&w).chunks(lk).map(|r| r.iter().sum()).collect();
                assert_close(&format!("weights sum to 1, {what}"), &sums, &vec![1.0; sums.len()], 1e-5);
            }
        });
    }
}

fn encoder_layer_ref(l: &dyn Layer, x: &M, pre_norm: bool) -> M {
    let p = |n: &str| param(l, n);
    let norm = |x: &M, k: usize| layer_norm_ref(x, &p(&format!("norm{k}.weight")), &p(&format!("norm{k}.bias")));
    let attn_in = if pre_norm { norm(x, 1) } else { x.clone() };
    let a = attention_ref(l, "self_attn.", 2, &attn_in, &attn_in, &attn_in, None);
    let mut y = x.zip(&a, |u, v| u + v);
    if !pre_norm {
        y = norm(&y, 1);
    }
    let ff_in = if pre_norm { norm(&y, 2) } else { y.clone() };
    let hidden = ff_in.mul(&p("linear1.weight"), false).add_row(&p("linear1.bias")).map(|v| v.max(0.0));
    let ff = hidden.mul(&p("linear2.weight"), false).add_row(&p("linear2.bias"));
    let z = y.zip(&ff, |u, v| u + v);
    if pre_norm { z } else { norm(&z, 2) }
}

#[test]
fn transformer_encoder_layers_match_the_formula_post_and_pre_norm() {
    let _generator = common::generator_lock();
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(common::run_seed() ^ 3);
            for pre in [false, true] {
                let mut layer =
                    TransformerEncoderLayer::with_config(TransformerConfig::new(8, 2, 16).normalize_before(pre))
                        .unwrap();
                layer.eval();
                let names: Vec<String> = layer.named_parameters().into_iter().map(|(n, _)| n).collect();
                for n in ["self_attn.out_proj.weight", "linear1.weight", "linear2.bias", "norm1.weight", "norm2.bias"] {
                    assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
                }
                let x = input(&mut rng, &[2, 3, 8], place);
                let out = layer.forward(&x).unwrap();
                let xm = M::of(&x);
                let mut want = Vec::new();
                for n in 0..2 {
                    want.extend(encoder_layer_ref(&layer, &xm.rows(n * 3, 3), pre).v);
                }
                assert_close(&format!("encoder layer (pre-norm {pre}) on {place}"), &values(&out), &want, 1e-4);
            }
            // A stack has fresh parameters per layer, named by index.
            let mut enc = TransformerEncoder::new(TransformerEncoderLayer::new(8, 2, 16).unwrap(), 2, None).unwrap();
            enc.eval();
            let w0 = values(&enc.layers[0].linear1.weight);
            assert_ne!(w0, values(&enc.layers[1].linear1.weight), "the layers share weights");
            assert!(enc.named_parameters().iter().any(|(n, _)| n == "layers.1.norm2.weight"));
            let x = input(&mut rng, &[1, 4, 8], place);
            let once = enc.layers[1].forward(&enc.layers[0].forward(&x).unwrap()).unwrap();
            assert_close("encoder stack = layers in turn", &values(&enc.forward(&x).unwrap()), &values(&once), 1e-6);
        });
    }
}

/// One direction of one recurrent layer in float64: `xs` `[time, batch·input]` rows per
/// step (each an `M` of `[batch, input]`), returns the outputs per step and final states.
fn cell_ref(kind: &str, l: &dyn Layer, suffix: &str, xs: &[M], h0: M, c0: M, reverse: bool) -> (Vec<M>, M, M) {
    let p = |n: &str| param(l, &format!("{n}{suffix}"));
    let (wi, wh, bi, bh) = (p("weight_ih"), p("weight_hh"), p("bias_ih"), p("bias_hh"));
    let hs = wh.c;
    let (mut h, mut c) = (h0, c0);
    let mut outs = vec![None; xs.len()];
    let order: Vec<usize> = if reverse { (0..xs.len()).rev().collect() } else { (0..xs.len()).collect() };
    for t in order {
        let xp = xs[t].mul(&wi, true).add_row(&bi);
        let hp = h.mul(&wh, true).add_row(&bh);
        match kind {
            "lstm" => {
                let g = xp.zip(&hp, |a, b| a + b);
                let (i, f, gg, o) = (
                    g.cols(0, hs).map(sigmoid),
                    g.cols(hs, hs).map(sigmoid),
                    g.cols(2 * hs, hs).map(f64::tanh),
                    g.cols(3 * hs, hs).map(sigmoid),
                );
                c = f.zip(&c, |a, b| a * b).zip(&i.zip(&gg, |a, b| a * b), |a, b| a + b);
                h = o.zip(&c.map(f64::tanh), |a, b| a * b);
            }
            "gru" => {
                let r = xp.cols(0, hs).zip(&hp.cols(0, hs), |a, b| sigmoid(a + b));
                let z = xp.cols(hs, hs).zip(&hp.cols(hs, hs), |a, b| sigmoid(a + b));
                let cand = xp.cols(2 * hs, hs).zip(&r.zip(&hp.cols(2 * hs, hs), |a, b| a * b), |a, b| (a + b).tanh());
                h = M {
                    v: (0..h.v.len()).map(|k| z.v[k] * h.v[k] + (1.0 - z.v[k]) * cand.v[k]).collect(),
                    ..h.clone()
                };
            }
            _ => h = xp.zip(&hp, |a, b| (a + b).tanh()),
        }
        outs[t] = Some(h.clone());
    }
    (outs.into_iter().flatten().collect(), h, c)
}

/// A recurrent stack in float64 (batch-first input `[b, t, i]`, states `[L·D, b, h]`).
fn stack_ref(
    kind: &str,
    l: &dyn Layer,
    x: &Tensor,
    layers: usize,
    dirs: usize,
    init: Option<(&M, &M)>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (b, steps) = (x.shape()[0], x.shape()[1]);
    let xm = M::of(x);
    let width = xm.c;
    // Per step: [b, width].
    let mut seq: Vec<M> = (0..steps)
        .map(|t| M {
            r: b,
            c: width,
            v: (0..b).flat_map(|n| xm.v[(n * steps + t) * width..(n * steps + t + 1) * width].to_vec()).collect(),
        })
        .collect();
    let hs = param(l, "weight_hh_l0").c;
    let (mut hn, mut cn) = (Vec::new(), Vec::new());
    for layer in 0..layers {
        let mut per_dir = Vec::new();
        for d in 0..dirs {
            let k = layer * dirs + d;
            let zero = M { r: b, c: hs, v: vec![0.0; b * hs] };
            let (h0, c0) = match init {
                Some((h, c)) => (h.rows(k * b, b), c.rows(k * b, b)),
                None => (zero.clone(), zero),
            };
            let suffix = format!("_l{layer}{}", if d == 1 { "_reverse" } else { "" });
            let (outs, h, c) = cell_ref(kind, l, &suffix, &seq, h0, c0, d == 1);
            hn.extend(h.v);
            cn.extend(c.v);
            per_dir.push(outs);
        }
        seq = (0..steps)
            .map(|t| {
                let v = (0..b)
                    .flat_map(|n| {
                        per_dir.iter().flat_map(move |o| o[t].v[n * hs..(n + 1) * hs].to_vec()).collect::<Vec<_>>()
                    })
                    .collect();
                M { r: b, c: hs * dirs, v }
            })
            .collect();
    }
    let out = (0..b)
        .flat_map(|n| seq.iter().flat_map(move |m| m.v[n * m.c..(n + 1) * m.c].to_vec()).collect::<Vec<_>>())
        .collect();
    (out, hn, cn)
}

#[test]
fn recurrent_layers_match_per_step_loops() {
    let _generator = common::generator_lock();
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(common::run_seed() ^ 11);
            let opts = RnnOptions { num_layers: 2, direction: Direction::Bidirect, ..Default::default() };
            let (b, t, i, h) = (2, 5, 3, 4);
            let x = input(&mut rng, &[b, t, i], place);
            let h0 = input(&mut rng, &[4, b, h], place);
            let c0 = input(&mut rng, &[4, b, h], place);

            let lstm = LSTM::with_options(i, h, opts).unwrap();
            let shapes: Vec<(String, Vec<usize>)> =
                lstm.named_parameters().into_iter().map(|(n, p)| (n, p.shape().to_vec())).collect();
            assert_eq!(shapes[0], ("weight_ih_l0".to_string(), vec![16, 3]));
            assert!(shapes.contains(&("weight_ih_l1_reverse".to_string(), vec![16, 8])), "{shapes:?}");
            assert!(shapes.contains(&("bias_hh_l1".to_string(), vec![16])), "{shapes:?}");
            let (out, (hn, cn)) = lstm.forward(&x, Some((&h0, &c0))).unwrap();
            assert_eq!(out.shape(), &[b, t, 2 * h]);
            let (want, wh, wc) = stack_ref("lstm", &lstm, &x, 2, 2, Some((&M::of(&h0), &M::of(&c0))));
            assert_close(&format!("LSTM outputs on {place}"), &values(&out), &want, 1e-4);
            assert_close(&format!("LSTM final h on {place}"), &values(&hn), &wh, 1e-4);
            assert_close(&format!("LSTM final c on {place}"), &values(&cn), &wc, 1e-4);

            let gru = GRU::with_options(i, h, opts).unwrap();
            let (out, hn) = gru.forward(&x, None).unwrap();
            let (want, wh, _) = stack_ref("gru", &gru, &x, 2, 2, None);
            assert_close(&format!("GRU outputs on {place}"), &values(&out), &want, 1e-4);
            assert_close(&format!("GRU final h on {place}"), &values(&hn), &wh, 1e-4);

            // Time-major input gives the transposed outputs of the batch-first layer.
            let tm = RnnOptions { time_major: true, ..Default::default() };
            let rnn = SimpleRNN::with_options(i, h, RnnActivation::Tanh, tm).unwrap();
            let (out, hn) = rnn.forward(&x.transpose(&[1, 0, 2]).unwrap(), None).unwrap();
            assert_eq!(out.shape(), &[t, b, h]);
            let (want, wh, _) = stack_ref("rnn", &rnn, &x, 1, 1, None);
            let out_bf = values(&out.transpose(&[1, 0, 2]).unwrap());
            assert_close(&format!("SimpleRNN (time-major) on {place}"), &out_bf, &want, 1e-4);
            assert_close(&format!("SimpleRNN final h on {place}"), &values(&hn), &wh, 1e-4);
        });
    }
}

/// d loss / d (a few weights) by autograd against central differences of the float64
/// formula, `loss = Σ outputs · v`.
#[test]
fn recurrent_and_attention_gradients_match_finite_differences_of_the_formulas() {
    let _generator = common::generator_lock();
    let mut rng = Rng::new(common::run_seed() ^ 17);
    let x = input(&mut rng, &[2, 3, 3], Place::Cpu);
    // The layers on the CPU, beside their inputs, whatever the default place.
    let (lstm, gru, mha) = dygraph::guard(Place::Cpu, || {
        (LSTM::new(3, 2).unwrap(), GRU::new(3, 2).unwrap(), MultiHeadAttention::new(4, 2, 0.0).unwrap())
    });
    let xa = input(&mut rng, &[1, 3, 4], Place::Cpu);
    type Formula<'a> = Box<dyn Fn() -> Vec<f64> + 'a>;
    let cases: Vec<(&str, &dyn Layer, Tensor, Formula)> = vec![
        ("lstm", &lstm, lstm.forward(&x, None).unwrap().0, Box::new(|| stack_ref("lstm", &lstm, &x, 1, 1, None).0)),
        ("gru", &gru, gru.forward(&x, None).unwrap().0, Box::new(|| stack_ref("gru", &gru, &x, 1, 1, None).0)),
        (
            "mha",
            &mha,
            mha.forward(&xa, &xa, &xa, None).unwrap(),
            Box::new(|| {
                let m = M::of(&xa);
                attention_ref(&mha, "", 2, &m, &m, &m, None).v
            }),
        ),
    ];
    for (name, layer, out, formula) in cases {
        let v: Vec<f64> = (0..out.numel()).map(|k| ((k * 7 % 5) as f64 - 2.0) / 2.0).collect();
        let vt = common::tensor(&v, out.shape(), DType::Float32, Place::Cpu);
        out.mul(&vt).unwrap().sum(&[], false).unwrap().backward().unwrap();
        let loss = || formula().iter().zip(&v).map(|(a, b)| a * b).sum::<f64>();
        for (pname, p) in layer.named_parameters().into_iter().take(4) {
            let g = values(&p.grad().unwrap_or_else(|| panic!("{name}: no gradient for {pname}")));
            let original = values(&p);
            for k in [0, p.numel() / 2, p.numel() - 1] {
                let eps = 1e-3;
                let set = |delta: f64| {
                    let mut w = original.clone();
                    w[k] += delta;
                    let t = common::tensor(&w, p.shape(), DType::Float32, Place::Cpu);
                    p.assign_(&t).unwrap();
                };
                set(eps);
                let up = loss();
                set(-eps);
                let down = loss();
                set(0.0);
                // The weights are float32: the step is rounded, so the difference uses the
                // step actually taken.
                let taken = (values(&common::tensor(&[original[k] + eps], &[1], DType::Float32, Place::Cpu))[0]
                    - values(&common::tensor(&[original[k] - eps], &[1], DType::Float32, Place::Cpu))[0])
                    / 2.0;
                let numeric = (up - down) / (2.0 * taken);
                assert!(
                    (g[k] - numeric).abs() <= 2e-3 + 2e-3 * numeric.abs(),
                    "{name}: d loss / d {pname}[{k}]: autograd {} vs finite differences {numeric} (seed {})",
                    g[k],
                    common::run_seed()
                );
            }
        }
    }
}

#[test]
fn bad_shapes_are_typed_errors() {
    let _generator = common::generator_lock();
    let lstm = LSTM::new(3, 2).unwrap();
    let x = Tensor::from_vec(vec![0.0f32; 12], [2, 2, 3]).unwrap();
    assert!(matches!(
        lstm.forward(&x.reshape([4usize, 3]).unwrap(), None),
        Err(paddle::Error::Shape { op: "LSTM", .. })
    ));
    let bad_h = Tensor::from_vec(vec![0.0f32; 4], [1, 2, 2]).unwrap();
    assert!(lstm.forward(&x, Some((&bad_h, &bad_h.reshape([2usize, 1, 2]).unwrap()))).is_err());
    assert!(MultiHeadAttention::new(6, 4, 0.0).is_err());
    let mha = MultiHeadAttention::new(4, 2, 0.0).unwrap();
    let flat = Tensor::from_vec(vec![0.0f32; 4], [1, 4]).unwrap();
    assert!(matches!(mha.forward(&flat, &flat, &flat, None), Err(paddle::Error::Shape { .. })));
    let _ = Forward::forward(&TransformerEncoderLayer::new(4, 2, 8).unwrap(), &x.slice(&[2], &[0], &[2]).unwrap())
        .unwrap_err();
}
