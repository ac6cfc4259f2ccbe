//! nn: the Layer derive (dotted parameter names, train/eval, state dicts, moving places),
//! parameter creation and initializers, and every layer against its functional form.

mod common;

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
        let scale = nn::create_parameter(&[1], DType::Float32, &ParamAttr::default(), &Initializer::Constant(2.0)).unwrap();
        Mlp {
            linear1: nn::Linear::new(4, 8).unwrap(),
            linear2: nn::Linear::new(8, 3).unwrap(),
            head: None,
            blocks: vec![nn::Linear::new(3, 3).unwrap(), nn::Linear::with_attrs(3, 3, ParamAttr::default(), false).unwrap()],
            scale,
            hidden: 8,
        }
    })
}

#[test]
fn derive_names_parameters_by_path() {
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
    // Conv-shaped fans: fan_in = 3·5·5.
    check(Initializer::kaiming_normal(), &[64, 3, 5, 5], 0.0, (2.0f64 / 75.0).sqrt());
    check(Initializer::kaiming_uniform(), &[64, 3, 5, 5], 0.0, (6.0f64 / 75.0).sqrt() / 3f64.sqrt());
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
    let attr = ParamAttr { name: Some("fc_w".into()), initializer: Some(Initializer::Constant(1.0)), learning_rate: 0.1, trainable: false };
    let l = paddle::guard(Place::Cpu, || nn::Linear::with_attrs(2, 2, attr, BiasAttr::None)).unwrap();
    assert!(l.bias.is_none());
    assert_eq!(l.weight.name().as_deref(), Some("fc_w"));
    assert!(l.weight.stop_gradient());
    assert_eq!(l.weight.learning_rate_multiplier(), 0.1);
    assert_eq!(common::values(&l.weight), vec![1.0; 4]);
}

#[test]
fn state_dict_round_trip_and_strict_loading() {
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
    bad.insert("linear2.bias", Tensor::from_vec_on(vec![0.0f32; 5], &[5], Place::Cpu).unwrap());
    let e = b.set_state_dict(&bad).unwrap_err().to_string();
    assert!(e.contains("linear1.bias") && e.contains("extra.weight") && e.contains("linear2.bias"), "{e}");
}

#[test]
fn train_eval_and_moving_places() {
    let mut m = mlp(Place::Cpu);
    assert!(m.is_training());
    m.eval();
    assert!(!m.is_training());
    m.train();
    assert!(m.is_training());
    let Some(gpu) = common::gpu() else { return };
    let x = common::tensor(&common::Rng::new(5).vec(8, -1.0, 1.0), &[2, 4], DType::Float32, Place::Cpu);
    let y_cpu = m.forward(&x).unwrap();
    m.to(gpu).unwrap();
    assert!(m.parameters().iter().all(|p| p.place() == gpu && !p.stop_gradient()));
    let y_gpu = m.forward(&x.to(gpu).unwrap()).unwrap();
    common::assert_close("model moved to the GPU", &common::values(&y_gpu), &common::values(&y_cpu), 1e-5);
}

#[test]
fn sequential_and_activation_layers() {
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
    let fc = nn::FC::new(10).param_attr(Initializer::Normal { mean: 0.0, std: 0.01 });
    assert!(fc.parameters().is_empty(), "no parameters before the first call");
    let x = paddle::guard(Place::Cpu, || paddle::randn(&[2, 5, 4, 4])).unwrap();
    let y = paddle::guard(Place::Cpu, || fc.forward(&x)).unwrap();
    assert_eq!(y.shape(), &[2, 10]);
    let p = fc.named_parameters();
    assert_eq!(p[0].0, "weight");
    assert_eq!(p[0].1.shape(), &[80, 10], "built from the flattened input size");
}
