//! Paddle's `sequence_length` on `SimpleRNN`, `LSTM` and `GRU` (`forward_with_lengths`):
//! outputs and final states against an independent float64 reference that runs each
//! sequence alone over its valid steps only (the reverse direction from `length − 1` down to
//! 0), with zero outputs past the length; multi-layer, bidirectional, initial states,
//! time-major, a zero length. Full lengths equal `forward`; gradients of a masked batch equal
//! those of each truncated sequence run alone, and float64 finite differences; bad lengths
//! are typed errors. Every place.

use crate::common;

use std::collections::HashMap;

use common::{Rng, assert_close, places, values};
use dygraph::nn::{Direction, GRU, LSTM, Layer, RnnActivation, RnnOptions, SimpleRNN};
use dygraph::{self as paddle, DType, Error, Place, Tensor};

/// One of the three layers.
enum Net {
    Lstm(LSTM),
    Gru(GRU),
    Rnn(SimpleRNN),
}

impl Net {
    fn new(kind: &str, input: usize, hidden: usize, opts: RnnOptions) -> Net {
        match kind {
            "lstm" => Net::Lstm(LSTM::with_options(input, hidden, opts).unwrap()),
            "gru" => Net::Gru(GRU::with_options(input, hidden, opts).unwrap()),
            _ => Net::Rnn(SimpleRNN::with_options(input, hidden, RnnActivation::Tanh, opts).unwrap()),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Net::Lstm(_) => "lstm",
            Net::Gru(_) => "gru",
            Net::Rnn(_) => "rnn",
        }
    }

    fn layer(&self) -> &dyn Layer {
        match self {
            Net::Lstm(l) => l,
            Net::Gru(l) => l,
            Net::Rnn(l) => l,
        }
    }

    fn layer_mut(&mut self) -> &mut dyn Layer {
        match self {
            Net::Lstm(l) => l,
            Net::Gru(l) => l,
            Net::Rnn(l) => l,
        }
    }

    /// The outputs, final `h` and (LSTM only) final `c`; `init` is `(h0, c0)` (`c0` unused
    /// but by the LSTM).
    fn run(
        &self,
        x: &Tensor,
        init: Option<(&Tensor, &Tensor)>,
        lengths: Option<&Tensor>,
    ) -> paddle::Result<(Tensor, Tensor, Option<Tensor>)> {
        match self {
            Net::Lstm(l) => l.forward_with_lengths(x, init, lengths).map(|(o, (h, c))| (o, h, Some(c))),
            Net::Gru(l) => l.forward_with_lengths(x, init.map(|i| i.0), lengths).map(|(o, h)| (o, h, None)),
            Net::Rnn(l) => l.forward_with_lengths(x, init.map(|i| i.0), lengths).map(|(o, h)| (o, h, None)),
        }
    }

    /// `forward` without lengths.
    fn run_plain(&self, x: &Tensor, init: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor, Option<Tensor>) {
        match self {
            Net::Lstm(l) => l.forward(x, init).map(|(o, (h, c))| (o, h, Some(c))),
            Net::Gru(l) => l.forward(x, init.map(|i| i.0)).map(|(o, h)| (o, h, None)),
            Net::Rnn(l) => l.forward(x, init.map(|i| i.0)).map(|(o, h)| (o, h, None)),
        }
        .unwrap()
    }
}

/// A row-major float64 matrix read from a parameter.
struct M {
    c: usize,
    v: Vec<f64>,
}

impl M {
    /// `self · x + b` for a vector `x`.
    fn affine(&self, x: &[f64], b: &M) -> Vec<f64> {
        assert_eq!(x.len(), self.c);
        (0..self.v.len() / self.c)
            .map(|r| self.v[r * self.c..(r + 1) * self.c].iter().zip(x).map(|(w, x)| w * x).sum::<f64>() + b.v[r])
            .collect()
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// One step of one sequence in float64: the new `(h, c)`.
fn cell_step(
    kind: &str,
    p: &HashMap<String, M>,
    suffix: &str,
    x: &[f64],
    h: &[f64],
    c: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let w = |n: &str| &p[&format!("{n}{suffix}")];
    let xp = w("weight_ih").affine(x, w("bias_ih"));
    let hp = w("weight_hh").affine(h, w("bias_hh"));
    let hs = h.len();
    match kind {
        "lstm" => {
            let g: Vec<f64> = xp.iter().zip(&hp).map(|(a, b)| a + b).collect();
            let c2: Vec<f64> =
                (0..hs).map(|j| sigmoid(g[hs + j]) * c[j] + sigmoid(g[j]) * g[2 * hs + j].tanh()).collect();
            let h2 = (0..hs).map(|j| sigmoid(g[3 * hs + j]) * c2[j].tanh()).collect();
            (h2, c2)
        }
        "gru" => {
            let h2 = (0..hs)
                .map(|j| {
                    let r = sigmoid(xp[j] + hp[j]);
                    let z = sigmoid(xp[hs + j] + hp[hs + j]);
                    let cand = (xp[2 * hs + j] + r * hp[2 * hs + j]).tanh();
                    z * h[j] + (1.0 - z) * cand
                })
                .collect();
            (h2, c.to_vec())
        }
        _ => (xp.iter().zip(&hp).map(|(a, b)| (a + b).tanh()).collect(), c.to_vec()),
    }
}

/// The reference: each sequence `n` alone, over its first `lengths[n]` steps only (forward
/// `0..len`, reverse `len−1..=0`), zero outputs past them. `x` is batch-first `[b, t, i]`
/// values; `init` holds `(h0, c0)` values `[L·D, b, h]`. Returns the outputs `[b, t, D·h]`
/// and the final `h` and `c`, `[L·D, b, h]`.
#[allow(clippy::too_many_arguments)]
fn reference(
    net: &Net,
    x: &[f64],
    (b, t, i): (usize, usize, usize),
    layers: usize,
    dirs: usize,
    lengths: &[usize],
    init: Option<(&[f64], &[f64])>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let p: HashMap<String, M> = net
        .layer()
        .named_parameters()
        .into_iter()
        .map(|(n, t)| {
            let c = *t.shape().last().unwrap();
            (n, M { c, v: values(&t) })
        })
        .collect();
    let hs = p["weight_hh_l0"].c;
    let mut out = vec![0.0; b * t * dirs * hs];
    let mut hn = vec![0.0; layers * dirs * b * hs];
    let mut cn = hn.clone();
    for (n, &len) in lengths.iter().enumerate().take(b) {
        let mut seq: Vec<Vec<f64>> = (0..t).map(|s| x[(n * t + s) * i..(n * t + s + 1) * i].to_vec()).collect();
        for layer in 0..layers {
            let mut next = vec![Vec::new(); t];
            for d in 0..dirs {
                let k = layer * dirs + d;
                let at = (k * b + n) * hs;
                let (mut h, mut c) = match init {
                    Some((h0, c0)) => (h0[at..at + hs].to_vec(), c0[at..at + hs].to_vec()),
                    None => (vec![0.0; hs], vec![0.0; hs]),
                };
                let suffix = format!("_l{layer}{}", if d == 1 { "_reverse" } else { "" });
                let mut outs = vec![vec![0.0; hs]; t];
                let order: Vec<usize> = if d == 1 { (0..len).rev().collect() } else { (0..len).collect() };
                for s in order {
                    (h, c) = cell_step(net.kind(), &p, &suffix, &seq[s], &h, &c);
                    outs[s] = h.clone();
                }
                hn[at..at + hs].copy_from_slice(&h);
                cn[at..at + hs].copy_from_slice(&c);
                for (nx, o) in next.iter_mut().zip(&outs) {
                    nx.extend_from_slice(o);
                }
            }
            seq = next;
        }
        let w = dirs * hs;
        for (s, row) in seq.iter().enumerate() {
            out[(n * t + s) * w..(n * t + s + 1) * w].copy_from_slice(row);
        }
    }
    (out, hn, cn)
}

fn input(rng: &mut Rng, shape: &[usize], place: Place) -> Tensor {
    common::tensor(&rng.vec(shape.iter().product(), -1.0, 1.0), shape, DType::Float32, place)
}

/// Lengths as an int64 (or int32) tensor on `place`.
fn lengths_tensor(lengths: &[usize], int32: bool, place: Place) -> Tensor {
    if int32 {
        Tensor::from_vec_on(lengths.iter().map(|&l| l as i32).collect::<Vec<_>>(), [lengths.len()], place).unwrap()
    } else {
        Tensor::from_vec_on(lengths.iter().map(|&l| l as i64).collect::<Vec<_>>(), [lengths.len()], place).unwrap()
    }
}

fn options(layers: usize, dirs: usize, time_major: bool) -> RnnOptions {
    let direction = if dirs == 2 { Direction::Bidirect } else { Direction::Forward };
    RnnOptions { num_layers: layers, direction, time_major, ..Default::default() }
}

/// kind, layers, directions, lengths, initial states, time-major, int32 lengths.
type Case = (&'static str, usize, usize, [usize; 3], bool, bool, bool);

#[test]
fn masked_runs_match_per_sequence_loops_over_the_valid_steps() {
    let _generator = common::generator_lock();
    // (kind, layers, dirs, lengths, initial states, time-major, int32 lengths)
    let cases: [Case; 7] = [
        ("lstm", 1, 1, [5, 3, 1], false, false, false),
        ("lstm", 1, 2, [5, 3, 1], false, false, true),
        ("lstm", 2, 2, [5, 3, 1], true, false, false),
        ("gru", 1, 2, [5, 3, 1], false, false, false),
        ("gru", 2, 1, [2, 5, 0], true, true, true),
        ("rnn", 1, 2, [5, 3, 1], true, false, false),
        ("rnn", 2, 2, [1, 5, 4], false, true, true),
    ];
    let (b, t, i, h) = (3, 5, 3, 4);
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(0x5E9);
            for (kind, layers, dirs, lengths, with_init, time_major, int32) in cases {
                let what = format!(
                    "{kind}, {layers} layer(s), {dirs} direction(s), lengths {lengths:?}, initial states {with_init}, \
                     time-major {time_major} on {place}"
                );
                let net = Net::new(kind, i, h, options(layers, dirs, time_major));
                let x = input(&mut rng, &[b, t, i], place);
                let h0 = input(&mut rng, &[layers * dirs, b, h], place);
                let c0 = input(&mut rng, &[layers * dirs, b, h], place);
                let init = with_init.then_some((&h0, &c0));
                // The lengths live on the CPU for the int32 cases (moved to the input's place).
                let lens = lengths_tensor(&lengths, int32, if int32 { Place::Cpu } else { place });
                let xin = if time_major { x.transpose(&[1, 0, 2]).unwrap() } else { x.clone() };
                let (out, hn, cn) = net.run(&xin, init, Some(&lens)).unwrap_or_else(|e| panic!("{what}: {e}"));
                let out = if time_major { out.transpose(&[1, 0, 2]).unwrap() } else { out };
                assert_eq!(out.shape(), &[b, t, dirs * h], "{what}");
                assert_eq!(hn.shape(), &[layers * dirs, b, h], "{what}");
                let (hv, cv) = (values(&h0), values(&c0));
                let (want, wh, wc) =
                    reference(&net, &values(&x), (b, t, i), layers, dirs, &lengths, with_init.then_some((&hv, &cv)));
                let got = values(&out);
                assert_close(&format!("outputs, {what}"), &got, &want, 1e-4);
                assert_close(&format!("final h, {what}"), &values(&hn), &wh, 1e-4);
                if let Some(cn) = cn {
                    assert_close(&format!("final c, {what}"), &values(&cn), &wc, 1e-4);
                }
                // Past each length the outputs are exactly zero, both directions.
                for n in 0..b {
                    for s in lengths[n]..t {
                        let row = &got[(n * t + s) * dirs * h..(n * t + s + 1) * dirs * h];
                        assert!(row.iter().all(|&v| v == 0.0), "{what}: output [{n}, {s}] is {row:?}, not zeros");
                    }
                }
            }
        });
    }
}

#[test]
fn full_lengths_give_exactly_forward() {
    let _generator = common::generator_lock();
    let (b, t, i, h) = (3, 5, 3, 4);
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(0xF011);
            for kind in ["lstm", "gru", "rnn"] {
                for with_init in [false, true] {
                    let what = format!("{kind}, 2 layers bidirectional, initial states {with_init} on {place}");
                    let net = Net::new(kind, i, h, options(2, 2, false));
                    let x = input(&mut rng, &[b, t, i], place);
                    let h0 = input(&mut rng, &[4, b, h], place);
                    let c0 = input(&mut rng, &[4, b, h], place);
                    let init = with_init.then_some((&h0, &c0));
                    let lens = lengths_tensor(&[t; 3], false, place);
                    let (out, hn, cn) = net.run(&x, init, Some(&lens)).unwrap();
                    let (out0, hn0, cn0) = net.run_plain(&x, init);
                    // The mask multiplies by exactly 1 and adds exactly 0.
                    assert_close(&format!("outputs, {what}"), &values(&out), &values(&out0), 1e-7);
                    assert_close(&format!("final h, {what}"), &values(&hn), &values(&hn0), 1e-7);
                    assert_eq!(cn.is_some(), cn0.is_some());
                    if let (Some(c), Some(c0)) = (cn, cn0) {
                        assert_close(&format!("final c, {what}"), &values(&c), &values(&c0), 1e-7);
                    }
                    // `None` lengths is `forward` itself.
                    let (out1, hn1, _) = net.run(&x, init, None).unwrap();
                    assert_eq!(values(&out1), values(&out0), "{what}: None lengths differ from forward");
                    assert_eq!(values(&hn1), values(&hn0), "{what}: None lengths differ from forward");
                }
            }
        });
    }
}

/// The gradients of `Σ out·v + Σ h_n·u (+ Σ c_n·w)` over a masked batch equal the sums of the
/// same losses over each sequence truncated to its length and run alone (parameters), and
/// each sequence's own gradients (input, initial states); padded inputs get zero gradient.
#[test]
fn masked_gradients_equal_those_of_each_truncated_sequence_alone() {
    let _generator = common::generator_lock();
    let (b, t, i, h) = (3, 5, 3, 4);
    let lengths = [5usize, 3, 1];
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(0x6AD);
            for (kind, layers, dirs) in [("lstm", 2, 2), ("gru", 1, 2), ("rnn", 1, 1), ("gru", 2, 1)] {
                let what = format!("{kind}, {layers} layer(s), {dirs} direction(s) on {place}");
                let ld = layers * dirs;
                let net = Net::new(kind, i, h, options(layers, dirs, false));
                let (xv, h0v, c0v) =
                    (rng.vec(b * t * i, -1.0, 1.0), rng.vec(ld * b * h, -1.0, 1.0), rng.vec(ld * b * h, -1.0, 1.0));
                let (vv, uv, wv) = (
                    rng.vec(b * t * dirs * h, -1.0, 1.0),
                    rng.vec(ld * b * h, -1.0, 1.0),
                    rng.vec(ld * b * h, -1.0, 1.0),
                );
                let leaf = |v: &[f64], shape: &[usize]| {
                    let x = common::tensor(v, shape, DType::Float32, place);
                    x.set_stop_gradient(false);
                    x
                };
                let konst = |v: &[f64], shape: &[usize]| common::tensor(v, shape, DType::Float32, place);
                let loss = |out: &Tensor, hn: &Tensor, cn: &Option<Tensor>, v: &Tensor, u: &Tensor, w: &Tensor| {
                    let mut l = out
                        .mul(v)
                        .unwrap()
                        .sum(&[], false)
                        .unwrap()
                        .add(&hn.mul(u).unwrap().sum(&[], false).unwrap())
                        .unwrap();
                    if let Some(cn) = cn {
                        l = l.add(&cn.mul(w).unwrap().sum(&[], false).unwrap()).unwrap();
                    }
                    l
                };

                // The masked batch.
                let (x, h0, c0) = (leaf(&xv, &[b, t, i]), leaf(&h0v, &[ld, b, h]), leaf(&c0v, &[ld, b, h]));
                let lens = lengths_tensor(&lengths, false, place);
                let (out, hn, cn) = net.run(&x, Some((&h0, &c0)), Some(&lens)).unwrap();
                let (v, u, w) = (konst(&vv, out.shape()), konst(&uv, hn.shape()), konst(&wv, hn.shape()));
                loss(&out, &hn, &cn, &v, &u, &w).backward().unwrap();
                let grad = |t: &Tensor, n: usize| t.grad().map(|g| values(&g)).unwrap_or_else(|| vec![0.0; n]);
                let (gx, gh0, gc0) = (grad(&x, xv.len()), grad(&h0, h0v.len()), grad(&c0, c0v.len()));
                let params = net.layer().named_parameters();
                let masked: Vec<Vec<f64>> = params.iter().map(|(_, p)| grad(p, p.numel())).collect();
                net.layer().clear_gradients();

                // Each sequence alone, truncated; the parameter gradients accumulate.
                let mut want_x = vec![0.0; xv.len()];
                let (mut want_h0, mut want_c0) = (vec![0.0; h0v.len()], vec![0.0; c0v.len()]);
                for (n, &len) in lengths.iter().enumerate() {
                    let xs: Vec<f64> = xv[n * t * i..(n * t + len) * i].to_vec();
                    let state = |all: &[f64]| -> Vec<f64> {
                        (0..ld).flat_map(|k| all[(k * b + n) * h..(k * b + n + 1) * h].to_vec()).collect()
                    };
                    let (xn, h0n, c0n) =
                        (leaf(&xs, &[1, len, i]), leaf(&state(&h0v), &[ld, 1, h]), leaf(&state(&c0v), &[ld, 1, h]));
                    let (out_n, hn_n, cn_n) = net.run(&xn, Some((&h0n, &c0n)), None).unwrap();
                    let wd = dirs * h;
                    let vn = konst(&vv[n * t * wd..(n * t + len) * wd], &[1, len, wd]);
                    let (un, wn) = (konst(&state(&uv), &[ld, 1, h]), konst(&state(&wv), &[ld, 1, h]));
                    loss(&out_n, &hn_n, &cn_n, &vn, &un, &wn).backward().unwrap();
                    want_x[n * t * i..(n * t + len) * i].copy_from_slice(&grad(&xn, xs.len()));
                    for (all, g) in [(&mut want_h0, grad(&h0n, ld * h)), (&mut want_c0, grad(&c0n, ld * h))] {
                        for k in 0..ld {
                            all[(k * b + n) * h..(k * b + n + 1) * h].copy_from_slice(&g[k * h..(k + 1) * h]);
                        }
                    }
                }
                assert_close(&format!("d/dx, {what}"), &gx, &want_x, 1e-4);
                assert_close(&format!("d/dh0, {what}"), &gh0, &want_h0, 1e-4);
                if kind == "lstm" {
                    assert_close(&format!("d/dc0, {what}"), &gc0, &want_c0, 1e-4);
                }
                for ((name, p), g) in params.iter().zip(&masked) {
                    assert!(g.iter().any(|&v| v != 0.0), "{what}: {name} got no gradient");
                    assert_close(&format!("d/d{name}, {what}"), g, &grad(p, p.numel()), 1e-4);
                }
            }
        });
    }
}

/// The layer with float64 copies of its parameters (leaves that take gradients).
fn to_float64(net: &mut Net) {
    net.layer_mut().visit_parameters_mut(&mut |_, p| {
        let q = p.detach().cast(DType::Float64).unwrap().detach();
        q.set_stop_gradient(false);
        *p = q;
    });
}

/// Autograd through the masks against float64 central differences, with respect to the
/// input and the initial states (CPU, where the float64 gradcheck runs).
#[test]
fn masked_gradients_match_float64_finite_differences() {
    let _generator = common::generator_lock();
    let (b, t, i, h) = (3, 4, 2, 3);
    let lengths = [4usize, 2, 1];
    let mut rng = Rng::new(0xFD);
    for (kind, layers, dirs) in [("lstm", 1, 2), ("gru", 2, 2), ("rnn", 1, 2)] {
        let ld = layers * dirs;
        let mut net = paddle::guard(Place::Cpu, || Net::new(kind, i, h, options(layers, dirs, false)));
        to_float64(&mut net);
        let lens = lengths_tensor(&lengths, false, Place::Cpu);
        let f = |xs: &[Tensor]| -> paddle::Result<Tensor> {
            let (out, hn, cn) = net.run(&xs[0], Some((&xs[1], &xs[2])), Some(&lens))?;
            let mut parts = vec![out.flatten(0, -1)?, hn.flatten(0, -1)?];
            if let Some(cn) = cn {
                parts.push(cn.flatten(0, -1)?);
            }
            paddle::concat(&parts, 0)
        };
        let inputs = [
            (rng.vec(b * t * i, -1.0, 1.0), vec![b, t, i]),
            (rng.vec(ld * b * h, -1.0, 1.0), vec![ld, b, h]),
            (rng.vec(ld * b * h, -1.0, 1.0), vec![ld, b, h]),
        ];
        if let Err(e) = common::gradcheck(&format!("{kind} with lengths {lengths:?}"), &f, &inputs) {
            panic!("{e}");
        }
    }
}

#[test]
fn bad_sequence_lengths_are_typed_errors() {
    let _generator = common::generator_lock();
    let (b, t, i, h) = (3, 5, 3, 4);
    for place in places() {
        paddle::guard(place, || {
            let mut rng = Rng::new(0xE44);
            let x = input(&mut rng, &[b, t, i], place);
            for (kind, name) in [("lstm", "LSTM"), ("gru", "GRU"), ("rnn", "SimpleRNN")] {
                let net = Net::new(kind, i, h, options(1, 2, false));
                let ints = |v: Vec<i64>, shape: &[usize]| Tensor::from_vec_on(v, shape, place).unwrap();
                let cases = [
                    ("float lengths", Tensor::from_vec_on(vec![5.0f32, 3.0, 1.0], [3], place).unwrap(), "Float32"),
                    ("too few lengths", ints(vec![5, 3], &[2]), "[2]"),
                    ("2-D lengths", ints(vec![5, 3, 1], &[3, 1]), "[3, 1]"),
                    ("a length past the steps", ints(vec![5, 6, 1], &[3]), "[5, 6, 1]"),
                    ("a negative length", ints(vec![-1, 3, 1], &[3]), "[-1, 3, 1]"),
                ];
                for (what, lens, shown) in cases {
                    match net.run(&x, None, Some(&lens)) {
                        Err(Error::InvalidArgument { op, msg }) => {
                            assert_eq!(op, name, "{what}: {msg}");
                            assert!(msg.contains(shown), "{name}, {what}: the message {msg:?} does not show {shown}");
                        }
                        Err(e) => panic!("{name}, {what} on {place}: wrong error {e:?}"),
                        Ok(_) => panic!("{name}, {what} on {place}: accepted"),
                    }
                }
            }
        });
    }
}
