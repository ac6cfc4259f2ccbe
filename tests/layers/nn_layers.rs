//! nn: the Layer derive (dotted parameter names, train/eval, state dicts, moving places),
//! parameter creation and initializers, and every layer against its functional form.

use crate::common;

use dygraph::nn::{self, BiasAttr, Forward, Initializer, Layer, ParamAttr};
use dygraph::{self as paddle, DType, Place, Tensor};

#[derive(nn::Layer)]
struct Mlp {
    linear1: nn::Linear,
    linear2: nn::Linear,
    head: Option<nn::Linear>,
    blocks: Vec<nn::Linear>,
    #[layer(param)]
    scale: Tensor,
    #[layer(skip)]
    hidden: usize,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> paddle::Result<Tensor> {
        let mut h = self.linear1.forward(x)?.relu()?;
        h = self.linear2.forward(&h)?;
        for b in &self.blocks {
            h = b.forward(&h)?;
        }
        h.mul(&self.scale)
    }
}

fn mlp(place: Place) -> Mlp {
    paddle::guard(place, || {
        let scale =
            nn::create_parameter(&[1], DType::Float32, &ParamAttr::default(), &Initializer::Constant(2.0)).unwrap();
        Mlp {
            linear1: nn::Linear::new(4, 8).unwrap(),
            linear2: nn::Linear::new(8, 3).unwrap(),
            head: None,
            blocks: vec![
                nn::Linear::new(3, 3).unwrap(),
                nn::Linear::with_attrs(3, 3, ParamAttr::default(), false).unwrap(),
            ],
            scale,
            hidden: 8,
        }
    })
}

#[test]
fn derive_names_parameters_by_path() {
    let _generator = common::generator_lock();
    let m = mlp(Place::Cpu);
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "scale",
            "linear1.weight",
            "linear1.bias",
            "linear2.weight",
            "linear2.bias",
            "blocks.0.weight",
            "blocks.0.bias",
            "blocks.1.weight"
        ]
    );
    assert_eq!(m.parameters().len(), 8);
    assert_eq!(m.named_sublayers(), ["linear1", "linear2", "head", "blocks", "blocks.0", "blocks.1"]);
    assert!(m.parameters().iter().all(|p| !p.stop_gradient()), "parameters are trainable");
    assert_eq!(m.hidden, 8);
}

#[test]
fn linear_defaults_follow_paddle() {
    let _generator = common::generator_lock();
    let l = paddle::guard(Place::Cpu, || nn::Linear::new(64, 8)).unwrap();
    assert_eq!(l.weight.shape(), &[64, 8], "Linear weight is [in, out]");
    let limit = (6.0f64 / 72.0).sqrt();
    let w = common::values(&l.weight);
    assert!(w.iter().all(|v| v.abs() <= limit), "XavierUniform bound");
    assert!(w.iter().any(|v| v.abs() > limit * 0.5), "not degenerate");
    assert_eq!(common::values(l.bias.as_ref().unwrap()), vec![0.0; 8], "bias zeros");
    let x = common::tensor(&common::Rng::new(3).vec(2 * 64, -1.0, 1.0), &[2, 64], DType::Float32, Place::Cpu);
    let y = l.forward(&x).unwrap();
    let f = paddle::linear(&x, &l.weight, l.bias.as_ref()).unwrap();
    assert_eq!(common::values(&y), common::values(&f), "layer equals its functional form");
}

#[test]
fn initializers_produce_their_distributions() {
    let _generator = common::generator_lock();
    let n = 200_000;
    let check = |init: Initializer, shape: &[usize], mean: f64, std: f64| {
        let t = init.init(shape, DType::Float32, Place::Cpu).unwrap();
        let v = common::values(&t);
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let s = (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt();
        assert!((m - mean).abs() < 0.02 * std.max(0.1) + 1e-3, "{init:?}: mean {m} vs {mean}");
        assert!((s - std).abs() < 0.02 * std + 1e-6, "{init:?}: std {s} vs {std}");
        v
    };
    check(Initializer::Normal { mean: 1.0, std: 2.0 }, &[n], 1.0, 2.0);
    check(Initializer::Uniform { low: -3.0, high: 1.0 }, &[n], -1.0, 4.0 / 12f64.sqrt());
    check(Initializer::xavier_normal(), &[400, 600], 0.0, (2.0f64 / 1000.0).sqrt());
    // Conv-shaped fans: fan_in = 16·5·5, with enough samples (160 000) for ≥ 5σ bounds.
    check(Initializer::kaiming_normal(), &[400, 16, 5, 5], 0.0, (2.0f64 / 400.0).sqrt());
    check(Initializer::kaiming_uniform(), &[400, 16, 5, 5], 0.0, (6.0f64 / 400.0).sqrt() / 3f64.sqrt());
    let t = check(Initializer::TruncatedNormal { mean: 0.0, std: 1.0 }, &[n], 0.0, 0.8796);
    assert!(t.iter().all(|v| v.abs() <= 2.0), "truncated at two standard deviations");
    let c = Initializer::Constant(0.5).init(&[3], DType::Float32, Place::Cpu).unwrap();
    assert_eq!(common::values(&c), vec![0.5; 3]);
    let a = Initializer::Assign(vec![1.0, 2.0]).init(&[2], DType::Float32, Place::Cpu).unwrap();
    assert_eq!(common::values(&a), vec![1.0, 2.0]);
    assert!(Initializer::Assign(vec![1.0]).init(&[2], DType::Float32, Place::Cpu).is_err());
}

#[test]
fn param_attr_sets_name_trainable_and_lr_multiplier() {
    let _generator = common::generator_lock();
    let attr = ParamAttr {
        name: Some("fc_w".into()),
        initializer: Some(Initializer::Constant(1.0)),
        learning_rate: 0.1,
        trainable: false,
    };
    let l = paddle::guard(Place::Cpu, || nn::Linear::with_attrs(2, 2, attr, BiasAttr::None)).unwrap();
    assert!(l.bias.is_none());
    assert_eq!(l.weight.name().as_deref(), Some("fc_w"));
    assert!(l.weight.stop_gradient());
    assert_eq!(l.weight.learning_rate_multiplier(), 0.1);
    assert_eq!(common::values(&l.weight), vec![1.0; 4]);
}

#[test]
fn state_dict_round_trip_and_strict_loading() {
    let _generator = common::generator_lock();
    let a = mlp(Place::Cpu);
    let mut b = mlp(Place::Cpu);
    let sd = a.state_dict();
    assert_eq!(sd.len(), 8);
    b.set_state_dict(&sd).unwrap();
    for ((n, p), (_, q)) in a.named_parameters().iter().zip(b.named_parameters()) {
        assert_eq!(common::values(p), common::values(&q), "{n}");
    }
    // Missing, unexpected and mis-shaped keys are one error listing them.
    let mut bad = nn::StateDict::new();
    for (n, t) in sd.iter() {
        if n != "linear1.bias" {
            bad.insert(n, t.clone());
        }
    }
    bad.insert("extra.weight", sd.get("scale").unwrap().clone());
    bad.insert("linear2.bias", Tensor::from_vec_on(vec![0.0f32; 5], [5], Place::Cpu).unwrap());
    let e = b.set_state_dict(&bad).unwrap_err().to_string();
    assert!(e.contains("linear1.bias") && e.contains("extra.weight") && e.contains("linear2.bias"), "{e}");
}

#[test]
fn train_eval_and_moving_places() {
    let _generator = common::generator_lock();
    let mut m = mlp(Place::Cpu);
    assert!(m.is_training());
    m.eval();
    assert!(!m.is_training());
    m.train();
    assert!(m.is_training());
    let Some(gpu) = common::gpu_or_skip() else { return };
    let x = common::tensor(&common::Rng::new(5).vec(8, -1.0, 1.0), &[2, 4], DType::Float32, Place::Cpu);
    let y_cpu = m.forward(&x).unwrap();
    m.to(gpu).unwrap();
    assert!(m.parameters().iter().all(|p| p.place() == gpu && !p.stop_gradient()));
    let y_gpu = m.forward(&x.to(gpu).unwrap()).unwrap();
    common::assert_close("model moved to the GPU", &common::values(&y_gpu), &common::values(&y_cpu), 1e-5);
}

#[test]
fn sequential_and_activation_layers() {
    let _generator = common::generator_lock();
    let seq = paddle::guard(Place::Cpu, || -> paddle::Result<nn::Sequential> {
        Ok(nn::Sequential::new()
            .add(nn::Linear::new(3, 4)?)
            .add(nn::ReLU)
            .add(nn::Linear::new(4, 2)?)
            .add(nn::Tanh)
            .add(nn::Flatten::default()))
    })
    .unwrap();
    let names: Vec<String> = seq.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
    let x = common::tensor(&[0.5, -1.0, 2.0], &[1, 3], DType::Float32, Place::Cpu);
    let y = seq.forward(&x).unwrap();
    let p = seq.parameters();
    let manual = paddle::linear(&paddle::linear(&x, &p[0], Some(&p[1])).unwrap().relu().unwrap(), &p[2], Some(&p[3]))
        .unwrap()
        .tanh()
        .unwrap();
    assert_eq!(common::values(&y), common::values(&manual));
    for (layer, f) in [
        (Box::new(nn::LeakyReLU::new(0.2)) as Box<dyn nn::Module>, paddle::leaky_relu(&x, 0.2).unwrap()),
        (Box::new(nn::GELU::new(true)), paddle::gelu(&x, true).unwrap()),
        (Box::new(nn::Sigmoid), x.sigmoid().unwrap()),
        (Box::new(nn::ELU::default()), x.elu(1.0).unwrap()),
    ] {
        assert_eq!(common::values(&layer.forward(&x).unwrap()), common::values(&f));
    }
}

#[test]
fn fc_builds_its_weight_on_the_first_call() {
    let _generator = common::generator_lock();
    let fc = nn::FC::new(10).param_attr(Initializer::Normal { mean: 0.0, std: 0.01 });
    assert!(fc.parameters().is_empty(), "no parameters before the first call");
    let x = paddle::guard(Place::Cpu, || paddle::randn([2, 5, 4, 4])).unwrap();
    let y = paddle::guard(Place::Cpu, || fc.forward(&x)).unwrap();
    assert_eq!(y.shape(), &[2, 10]);
    let p = fc.named_parameters();
    assert_eq!(p[0].0, "weight");
    assert_eq!(p[0].1.shape(), &[80, 10], "built from the flattened input size");
}

#[test]
fn batch_norm_switches_statistics_with_train_and_eval() {
    let _generator = common::generator_lock();
    let mut places = vec![Place::Cpu];
    places.extend(common::gpu_or_skip());
    for place in places {
        let mut bn = paddle::guard(place, || nn::BatchNorm2D::new(2)).unwrap();
        let names: Vec<String> = bn.state_dict().keys();
        assert_eq!(names, ["weight", "bias", "_mean", "_variance"]);
        assert_eq!(bn.parameters().len(), 2, "running statistics are buffers, not parameters");
        let xs = common::Rng::new(8).vec(2 * 2 * 3, -1.0, 3.0);
        let x = common::tensor(&xs, &[2, 2, 3, 1], DType::Float32, place);
        let y = bn.forward(&x).unwrap();
        // Training: per-channel batch statistics.
        for c in 0..2 {
            let vals: Vec<f64> =
                (0..2).flat_map(|n| (0..3).map(move |k| (n, k))).map(|(n, k)| xs[n * 6 + c * 3 + k]).collect();
            let m = vals.iter().sum::<f64>() / 6.0;
            let v = vals.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 6.0;
            let got = common::values(&bn.mean)[c];
            assert!((got - 0.1 * m).abs() < 1e-5, "running mean {got} on {place}");
            let rv = common::values(&bn.variance)[c];
            assert!((rv - (0.9 + 0.1 * v)).abs() < 1e-5, "running variance {rv} on {place}");
            let yv = common::values(&y);
            let y0 = yv[c * 3];
            assert!((y0 - (xs[c * 3] - m) / (v + 1e-5).sqrt()).abs() < 1e-4);
        }
        // Eval: running statistics, no update.
        bn.eval();
        let before = common::values(&bn.mean);
        let ye = bn.forward(&x).unwrap();
        assert_eq!(common::values(&bn.mean), before, "eval leaves running stats alone");
        let rm = common::values(&bn.mean);
        let rv = common::values(&bn.variance);
        let e0 = (xs[0] - rm[0]) / (rv[0] + 1e-5).sqrt();
        assert!((common::values(&ye)[0] - e0).abs() < 1e-5);
    }
}

#[test]
fn dropout_layer_is_identity_in_eval() {
    let _generator = common::generator_lock();
    let mut d = nn::Dropout::new(0.5);
    let x = paddle::guard(Place::Cpu, || paddle::ones([1000], DType::Float32)).unwrap();
    let y = d.forward(&x).unwrap();
    let v = common::values(&y);
    assert!(v.iter().all(|&a| a == 0.0 || a == 2.0), "upscale_in_train keeps 1/(1-p)");
    let kept = v.iter().filter(|&&a| a > 0.0).count();
    assert!((350..650).contains(&kept), "{kept} kept of 1000");
    d.eval();
    assert_eq!(common::values(&d.forward(&x).unwrap()), vec![1.0; 1000]);
}

#[test]
fn embedding_and_layer_norm_layers_match_their_functional_forms() {
    let _generator = common::generator_lock();
    let emb = paddle::guard(Place::Cpu, || nn::Embedding::new(5, 3, Some(1))).unwrap();
    assert_eq!(common::values(&emb.weight)[3..6], [0.0, 0.0, 0.0], "padding row starts at zero");
    let ids = Tensor::from_vec_on(vec![0i64, 1, 4, 1], [2, 2], Place::Cpu).unwrap();
    let y = emb.forward(&ids).unwrap();
    assert_eq!(y.shape(), &[2, 2, 3]);
    assert_eq!(common::values(&y), common::values(&paddle::embedding(&ids, &emb.weight, Some(1)).unwrap()));
    assert!(nn::Embedding::new(5, 3, Some(5)).is_err());
    let ln = paddle::guard(Place::Cpu, || nn::LayerNorm::new(&[4])).unwrap();
    let x = common::tensor(&common::Rng::new(9).vec(8, -2.0, 2.0), &[2, 4], DType::Float32, Place::Cpu);
    let a = ln.forward(&x).unwrap();
    let b = paddle::layer_norm(&x, &[4], ln.weight.as_ref(), ln.bias.as_ref(), 1e-5).unwrap();
    assert_eq!(common::values(&a), common::values(&b));
    let s = nn::Softmax::default().forward(&x).unwrap();
    assert_eq!(common::values(&s), common::values(&paddle::softmax(&x, -1).unwrap()));
}

#[test]
fn conv_and_pool_layers_match_their_functional_forms() {
    let _generator = common::generator_lock();
    let conv = paddle::guard(Place::Cpu, || nn::Conv2D::new(3, 4, 3)).unwrap();
    assert_eq!(conv.weight.shape(), &[4, 3, 3, 3], "Conv2D weight is [out, in/groups, kh, kw]");
    assert_eq!(common::values(conv.bias.as_ref().unwrap()), vec![0.0; 4]);
    // KaimingNormal: std √(2 / fan_in), fan_in = 27.
    let w = common::values(&conv.weight);
    let std = (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt();
    assert!((0.1..0.5).contains(&std), "{std}");
    let x =
        common::tensor(&common::Rng::new(12).vec(2 * 3 * 8 * 8, -1.0, 1.0), &[2, 3, 8, 8], DType::Float32, Place::Cpu);
    let y = conv.forward(&x).unwrap();
    let f = paddle::conv2d(&x, &conv.weight, conv.bias.as_ref(), &nn::Conv2dOptions::default()).unwrap();
    assert_eq!(common::values(&y), common::values(&f));
    let opts = nn::Pool2dOptions::new(2);
    assert_eq!(
        common::values(&nn::MaxPool2D::new(2).forward(&y).unwrap()),
        common::values(&paddle::max_pool2d(&y, &opts).unwrap())
    );
    assert_eq!(
        common::values(&nn::AvgPool2D::new(2).forward(&y).unwrap()),
        common::values(&paddle::avg_pool2d(&y, &opts).unwrap())
    );
    let g = nn::AdaptiveAvgPool2D::new(1).forward(&y).unwrap();
    assert_eq!(g.shape(), &[2, 4, 1, 1]);
    assert_eq!(nn::AdaptiveMaxPool2D::new([3, 2]).forward(&y).unwrap().shape(), &[2, 4, 3, 2]);
}

#[test]
fn prelu_and_the_newer_activation_layers_match_hand_values() {
    let _generator = common::generator_lock();
    use dygraph::nn::{Hardsigmoid, Hardswish, Identity, LogSoftmax, Mish, PReLU, SELU, Softplus};
    for place in common::places() {
        paddle::guard(place, || {
            let x = Tensor::from_vec(vec![-2.0f32, 1.0, -4.0, 3.0], [1, 2, 2, 1]).unwrap();
            let prelu = PReLU::new(2, 0.25).unwrap();
            prelu.weight.assign_(&Tensor::from_vec(vec![0.5f32, 0.1], [2]).unwrap()).unwrap();
            let y = prelu.forward(&x).unwrap();
            common::assert_close("prelu per channel", &common::values(&y), &[-1.0, 1.0, -0.4, 3.0], 1e-6);
            y.sum(&[], false).unwrap().backward().unwrap();
            // d/d slope_c = Σ min(0, x) over channel c.
            common::assert_close(
                "prelu slope gradient",
                &common::values(&prelu.weight.grad().unwrap()),
                &[-2.0, -4.0],
                1e-6,
            );
            assert_eq!(prelu.named_parameters()[0].0, "_weight");

            let v = Tensor::from_vec(vec![-4.0f32, -1.0, 0.0, 2.0, 6.0], [5]).unwrap();
            let check = |what: &str, got: Tensor, f: fn(f64) -> f64| {
                let want: Vec<f64> = [-4.0, -1.0, 0.0, 2.0, 6.0].iter().map(|&x| f(x)).collect();
                common::assert_close(what, &common::values(&got), &want, 1e-5);
            };
            check("hardswish", Hardswish.forward(&v).unwrap(), |x| x * (x + 3.0).clamp(0.0, 6.0) / 6.0);
            check("hardsigmoid", Hardsigmoid::default().forward(&v).unwrap(), |x| (x / 6.0 + 0.5).clamp(0.0, 1.0));
            check("mish", Mish.forward(&v).unwrap(), |x| x * x.exp().ln_1p().tanh());
            check("selu", SELU.forward(&v).unwrap(), |x| {
                1.0507009873554805 * if x > 0.0 { x } else { 1.6732632423543772 * x.exp_m1() }
            });
            check("softplus", Softplus::default().forward(&v).unwrap(), |x| x.exp().ln_1p());
            check("identity", Identity.forward(&v).unwrap(), |x| x);
            let ls = LogSoftmax::default().forward(&v).unwrap();
            let lse = [-4.0f64, -1.0, 0.0, 2.0, 6.0].iter().map(|x| x.exp()).sum::<f64>().ln();
            let want: Vec<f64> = [-4.0, -1.0, 0.0, 2.0, 6.0].iter().map(|x| x - lse).collect();
            common::assert_close("log_softmax", &common::values(&ls), &want, 1e-5);
        });
    }
}

/// Conv1D, the 1-D pools, GroupNorm, InstanceNorm, Dropout2D and PixelShuffle against loops
/// written here in float64, on every place; float64 gradchecks of their functional forms;
/// LayerDict and ParameterList names.
#[test]
fn one_dimensional_layers_group_and_instance_norm_and_pixel_shuffle_match_loops() {
    let _generator = common::generator_lock();
    use dygraph::nn::Conv1dOptions;
    use dygraph::nn::{
        AvgPool1D, Conv1D, Dropout2D, GroupNorm, InstanceNorm, LayerDict, MaxPool1D, ParameterList, PixelShuffle,
    };
    let mut rng = common::Rng::new(common::run_seed() ^ 41);
    let xv = rng.vec(2 * 4 * 6, -1.0, 1.0);
    for place in common::places() {
        paddle::guard(place, || {
            let x = common::tensor(&xv, &[2, 4, 6], DType::Float32, place);
            let opts = Conv1dOptions { stride: 2, padding: 1, dilation: 1, groups: 2 };
            let conv = Conv1D::with_options(4, 6, 3, opts, true).unwrap();
            let (w, b) = (common::values(&conv.weight), common::values(conv.bias.as_ref().unwrap()));
            let out = conv.forward(&x).unwrap();
            assert_eq!(out.shape(), &[2, 6, 3]);
            let mut want = vec![0.0; 2 * 6 * 3];
            for n in 0..2 {
                for o in 0..6 {
                    let g = o / 3;
                    for t in 0..3 {
                        let mut acc = b[o];
                        for ci in 0..2 {
                            for k in 0..3 {
                                let pos = (t * 2 + k) as i64 - 1;
                                if (0..6).contains(&pos) {
                                    acc += w[(o * 2 + ci) * 3 + k] * xv[(n * 4 + g * 2 + ci) * 6 + pos as usize];
                                }
                            }
                        }
                        want[(n * 6 + o) * 3 + t] = acc;
                    }
                }
            }
            common::assert_close(&format!("conv1d on {place}"), &common::values(&out), &want, 1e-5);

            let mp = MaxPool1D::new(2, None, 0).forward(&x).unwrap();
            let ap = AvgPool1D::new(3, Some(3), 0).forward(&x).unwrap();
            let rows: Vec<&[f64]> = xv.chunks(6).collect();
            let want_max: Vec<f64> = rows.iter().flat_map(|r| r.chunks(2).map(|c| c[0].max(c[1]))).collect();
            let want_avg: Vec<f64> =
                rows.iter().flat_map(|r| r.chunks(3).map(|c| c.iter().sum::<f64>() / 3.0)).collect();
            common::assert_close("max_pool1d", &common::values(&mp), &want_max, 1e-6);
            common::assert_close("avg_pool1d", &common::values(&ap), &want_avg, 1e-6);

            // GroupNorm over 2 groups of 2 channels; InstanceNorm per channel.
            let stats = |v: &[f64]| {
                let m = v.iter().sum::<f64>() / v.len() as f64;
                (m, v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / v.len() as f64)
            };
            let gn = GroupNorm::new(2, 4).unwrap().forward(&x).unwrap();
            let inn = InstanceNorm::new_1d(4).unwrap().forward(&x).unwrap();
            let (mut want_gn, mut want_in) = (vec![0.0; xv.len()], vec![0.0; xv.len()]);
            for (chunk, out) in [(12, &mut want_gn), (6, &mut want_in)] {
                for (i, block) in xv.chunks(chunk).enumerate() {
                    let (m, v) = stats(block);
                    for (j, a) in block.iter().enumerate() {
                        out[i * chunk + j] = (a - m) / (v + 1e-5).sqrt();
                    }
                }
            }
            common::assert_close(&format!("group_norm on {place}"), &common::values(&gn), &want_gn, 1e-4);
            common::assert_close(&format!("instance_norm on {place}"), &common::values(&inn), &want_in, 1e-4);
            assert!(InstanceNorm::new_2d(4).unwrap().forward(&x).is_err(), "InstanceNorm2D takes 4-D inputs");

            // PixelShuffle: out[n, c, h·r + i, w·r + j] = x[n, c·r² + i·r + j, h, w].
            let ps_in: Vec<f64> = (0..2 * 8 * 2 * 3).map(|v| v as f64).collect();
            let xs = common::tensor(&ps_in, &[2, 8, 2, 3], DType::Float32, place);
            let ps = PixelShuffle::new(2).forward(&xs).unwrap();
            assert_eq!(ps.shape(), &[2, 2, 4, 6]);
            let got = common::values(&ps);
            for (k, &g) in got.iter().enumerate() {
                let (n, c, hh, ww) = (k / 48, (k / 24) % 2, (k / 6) % 4, k % 6);
                let src = ((n * 8 + c * 4 + (hh % 2) * 2 + ww % 2) * 2 + hh / 2) * 3 + ww / 2;
                assert_eq!(g, ps_in[src], "pixel_shuffle element {k}");
            }

            // Dropout2D: each (sample, channel) plane is all zero or all x·2.
            let _g = common::generator_lock();
            let img = common::tensor(&vec![1.0; 4 * 8 * 9], &[4, 8, 3, 3], DType::Float32, place);
            let d = common::values(&Dropout2D::new(0.5).forward(&img).unwrap());
            for plane in d.chunks(9) {
                assert!(plane.iter().all(|&v| v == plane[0]) && (plane[0] == 0.0 || plane[0] == 2.0), "{plane:?}");
            }
            let mut eval = Dropout2D::new(0.5);
            eval.eval();
            assert_eq!(common::values(&eval.forward(&img).unwrap()), vec![1.0; 4 * 8 * 9]);
        });
    }
    // Gradients of the functional forms, float64 finite differences.
    let mut failures = Vec::new();
    type Case = Box<dyn Fn(&[Tensor]) -> paddle::Result<Tensor>>;
    let cases: Vec<(&str, Case, Vec<Vec<usize>>)> = vec![
        (
            "conv1d",
            Box::new(|t| paddle::conv1d(&t[0], &t[1], Some(&t[2]), &Default::default())),
            vec![vec![2, 3, 5], vec![4, 3, 2], vec![4]],
        ),
        (
            "group_norm",
            Box::new(|t| paddle::group_norm(&t[0], 2, 1e-5, Some(&t[1]), Some(&t[2]))),
            vec![vec![2, 4, 3], vec![4], vec![4]],
        ),
        ("instance_norm", Box::new(|t| paddle::instance_norm(&t[0], 1e-5, None, None)), vec![vec![2, 3, 4]]),
        ("pixel_shuffle", Box::new(|t| paddle::pixel_shuffle(&t[0], 2)?.square()), vec![vec![1, 4, 2, 2]]),
        ("max_pool1d", Box::new(|t| paddle::max_pool1d(&t[0], 2, None, 0)), vec![vec![1, 2, 6]]),
    ];
    for (name, f, shapes) in cases {
        let inputs: Vec<(Vec<f64>, Vec<usize>)> =
            shapes.iter().map(|s| (rng.vec(s.iter().product(), -1.0, 1.0), s.clone())).collect();
        failures.extend(common::gradcheck(name, f.as_ref(), &inputs).err());
    }
    common::report("layer gradchecks", &failures);

    let mut dict = LayerDict::new();
    dict.insert("proj", nn::Linear::new(2, 3).unwrap());
    dict.insert("act", nn::ReLU);
    assert_eq!(dict.keys(), ["proj", "act"]);
    let names: Vec<String> = dict.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["proj.weight", "proj.bias"]);
    let list = ParameterList::new(vec![
        paddle::ones([2usize], DType::Float32).unwrap(),
        paddle::zeros([3usize], DType::Float32).unwrap(),
    ]);
    let names: Vec<String> = list.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0", "1"]);
}

/// Conv2DTranspose against a scatter loop written here (strides, padding, output padding,
/// dilation, groups), interpolate against Paddle's coordinate formulas, both on every
/// place; gradchecks of both.
#[test]
fn conv_transpose_and_interpolate_match_their_formulas() {
    let _generator = common::generator_lock();
    use dygraph::nn::{ConvTranspose2dOptions, InterpolateMode, Upsample};
    let mut rng = common::Rng::new(common::run_seed() ^ 71);
    let configs = [
        ConvTranspose2dOptions::default(),
        ConvTranspose2dOptions { stride: [2, 2], padding: [1, 0], output_padding: [1, 1], ..Default::default() },
        ConvTranspose2dOptions { stride: [1, 2], dilation: [2, 1], groups: 2, ..Default::default() },
    ];
    for place in common::places() {
        for o in &configs {
            let (n, cin, h, w, cout, k) = (2, 4, 3, 3, 6, 3);
            let g = o.groups;
            let xv = rng.vec(n * cin * h * w, -1.0, 1.0);
            let wv = rng.vec(cin * (cout / g) * k * k, -1.0, 1.0);
            let x = common::tensor(&xv, &[n, cin, h, w], DType::Float32, place);
            let wt = common::tensor(&wv, &[cin, cout / g, k, k], DType::Float32, place);
            let y = paddle::conv2d_transpose(&x, &wt, None, o).unwrap();
            let oh = (h - 1) * o.stride[0] + o.dilation[0] * (k - 1) + o.output_padding[0] + 1 - 2 * o.padding[0];
            let ow = (w - 1) * o.stride[1] + o.dilation[1] * (k - 1) + o.output_padding[1] + 1 - 2 * o.padding[1];
            assert_eq!(y.shape(), &[n, cout, oh, ow], "{o:?}");
            let mut want = vec![0.0; n * cout * oh * ow];
            let (cin_g, cout_g) = (cin / g, cout / g);
            for b in 0..n {
                for ci in 0..cin {
                    let grp = ci / cin_g;
                    for co in 0..cout_g {
                        for i in 0..h {
                            for j in 0..w {
                                for ki in 0..k {
                                    for kj in 0..k {
                                        let y_i = (i * o.stride[0] + ki * o.dilation[0]) as i64 - o.padding[0] as i64;
                                        let y_j = (j * o.stride[1] + kj * o.dilation[1]) as i64 - o.padding[1] as i64;
                                        if y_i < 0 || y_j < 0 || y_i >= oh as i64 || y_j >= ow as i64 {
                                            continue;
                                        }
                                        let oc = grp * cout_g + co;
                                        want[((b * cout + oc) * oh + y_i as usize) * ow + y_j as usize] += xv
                                            [((b * cin + ci) * h + i) * w + j]
                                            * wv[((ci * cout_g + co) * k + ki) * k + kj];
                                    }
                                }
                            }
                        }
                    }
                }
            }
            common::assert_close(&format!("conv2d_transpose {o:?} on {place}"), &common::values(&y), &want, 1e-4);
        }

        // Interpolation of a 1×1×2×3 image.
        let img = common::tensor(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[1, 1, 2, 3], DType::Float32, place);
        let near = Upsample::scale(2.0, InterpolateMode::Nearest).forward(&img).unwrap();
        assert_eq!(near.shape(), &[1, 1, 4, 6]);
        assert_eq!(common::values(&near)[..6], [0., 0., 1., 1., 2., 2.]);
        let bl = paddle::interpolate(&img, Some([3, 5]), None, InterpolateMode::Bilinear, true).unwrap();
        // align_corners: row r samples 0.5·r, column c samples 0.5·c.
        let want: Vec<f64> =
            (0..3).flat_map(|r| (0..5).map(move |c| 3.0 * (0.5 * r as f64) + 0.5 * c as f64)).collect();
        common::assert_close(&format!("bilinear aligned on {place}"), &common::values(&bl), &want, 1e-5);
        let half = paddle::interpolate(&img, Some([2, 6]), None, InterpolateMode::Bilinear, false).unwrap();
        // Half-pixel centres over columns: src = (c + 0.5)/2 − 0.5 clamped at 0 → 0, 0.25, 0.75, 1.25, 1.75, 2.25→2.
        let cols = [0.0, 0.25, 0.75, 1.25, 1.75, 2.0];
        let want: Vec<f64> = (0..2).flat_map(|r| cols.iter().map(move |c| 3.0 * r as f64 + c)).collect();
        common::assert_close(&format!("bilinear half-pixel on {place}"), &common::values(&half), &want, 1e-5);
        assert!(paddle::interpolate(&img, Some([4, 4]), None, InterpolateMode::Nearest, true).is_err());
        assert!(paddle::interpolate(&img, None, None, InterpolateMode::Nearest, false).is_err());
    }
    let mut failures = Vec::new();
    let o = ConvTranspose2dOptions { stride: [2, 1], padding: [1, 1], output_padding: [1, 0], ..Default::default() };
    let f = move |t: &[Tensor]| paddle::conv2d_transpose(&t[0], &t[1], Some(&t[2]), &o);
    let inputs = vec![
        (rng.vec(2 * 2 * 3 * 3, -1.0, 1.0), vec![2, 2, 3, 3]),
        (rng.vec(2 * 3 * 9, -1.0, 1.0), vec![2, 3, 3, 3]),
        (rng.vec(3, -1.0, 1.0), vec![3]),
    ];
    failures.extend(common::gradcheck("conv2d_transpose", &f, &inputs).err());
    let f = |t: &[Tensor]| paddle::interpolate(&t[0], Some([3, 5]), None, InterpolateMode::Bilinear, false);
    failures.extend(common::gradcheck("interpolate", &f, &[(rng.vec(12, -1.0, 1.0), vec![1, 2, 2, 3])]).err());
    common::report("gradchecks", &failures);
}
