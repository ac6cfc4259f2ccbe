//! Mixed-precision training: `amp::GradScaler` against hand values (unscaled gradients,
//! skipped steps on an inf or a NaN, the scale halved after the bad steps and doubled after
//! the good ones, Adam's bias correction not counting a skipped step, `state_dict` resuming
//! the scale), and `amp::decorate` at O2 (float16 or bfloat16 parameters but the norms',
//! float32 master weights updated by hand-checked steps).

use crate::common;

use common::{assert_close, places, values};
use dygraph::amp::{self, GradScaler};
use dygraph::nn::{self, Forward, Layer};
use dygraph::optimizer::{self, Optimizer};
use dygraph::{DType, Place, Tensor};

/// A parameter `w` and the loss `sum(w · x)`, whose gradient is `x`.
fn loss(w: &Tensor, x: &[f64], place: Place) -> Tensor {
    let x = Tensor::from_vec(x.iter().map(|&v| v as f32).collect::<Vec<_>>(), [x.len()]).unwrap().to(place).unwrap();
    w.mul(&x).unwrap().sum(&[], false).unwrap()
}

fn param(v: &[f64], place: Place) -> Tensor {
    let w = Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), [v.len()]).unwrap().to(place).unwrap();
    w.set_stop_gradient(false);
    w
}

#[test]
fn skips_bad_steps_and_moves_the_scale_by_hand_values() {
    for place in places() {
        let w = param(&[1.0, 2.0, 3.0], place);
        let mut opt = optimizer::SGD::new(0.1, vec![w.clone()]);
        let mut scaler = GradScaler::new().init_loss_scaling(8.0).incr_every_n_steps(2).decr_every_n_nan_or_inf(2);
        let x = [0.5, -1.0, 2.0];
        let (inf, nan) = ([0.5, f64::INFINITY, 2.0], [f64::NAN, -1.0, 2.0]);
        // (gradient, found, scale after update, parameter after the step)
        let steps: [(&[f64], bool, f64, [f64; 3]); 5] = [
            (&x, false, 8.0, [0.95, 2.1, 2.8]),
            (&x, false, 16.0, [0.9, 2.2, 2.6]),  // the second good step doubles
            (&inf, true, 16.0, [0.9, 2.2, 2.6]), // skipped; the first bad step only counts
            (&nan, true, 8.0, [0.9, 2.2, 2.6]),  // skipped; the second halves
            (&x, false, 8.0, [0.85, 2.3, 2.4]),
        ];
        for (k, (g, found, scale, want)) in steps.iter().enumerate() {
            let what = format!("step {k} on {place}");
            let scaled = scaler.scale(&loss(&w, g, place)).unwrap();
            scaled.backward().unwrap();
            let scaled_grad = values(&w.grad().unwrap());
            scaler.unscale_(&mut opt).unwrap();
            let grad = values(&w.grad().unwrap());
            let s_before = scaler.get_loss_scaling().unwrap();
            for ((sg, g1), g0) in scaled_grad.iter().zip(&grad).zip(*g) {
                if g0.is_finite() {
                    assert_close(&format!("{what}: scaled gradient"), &[*sg], &[g0 * s_before], 1e-6);
                    assert_close(&format!("{what}: unscaled gradient"), &[*g1], &[*g0], 1e-6);
                }
            }
            let flag = scaler.found_inf().unwrap().to_vec::<bool>().unwrap()[0];
            assert_eq!(flag, *found, "{what}: found_inf");
            scaler.step(&mut opt).unwrap();
            scaler.update().unwrap();
            opt.clear_grad();
            assert_eq!(scaler.get_loss_scaling().unwrap(), *scale, "{what}: the scale");
            assert_close(&format!("{what}: the parameter"), &values(&w), want, 1e-6);
        }
        assert_eq!(opt.steps(), 3, "two skipped steps of five");
        // Out-of-order calls are typed errors.
        scaler.scale(&loss(&w, &x, place)).unwrap().backward().unwrap();
        scaler.step(&mut opt).unwrap();
        assert!(scaler.step(&mut opt).unwrap_err().to_string().contains("already been called"));
        assert!(scaler.unscale_(&mut opt).unwrap_err().to_string().contains("after step()"));
        scaler.update().unwrap();
    }
}

#[test]
fn a_skipped_adam_step_does_not_count_for_bias_correction() {
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    for place in places() {
        let w0 = rng.vec(6, -1.0, 1.0);
        let (g1, g2) = (rng.vec(6, -1.0, 1.0), rng.vec(6, -1.0, 1.0));
        let mut bad = g1.clone();
        bad[2] = f64::INFINITY;
        // With a scaler: good, bad (skipped), good.
        let w = param(&w0, place);
        let mut opt = optimizer::Adam::new(0.01, vec![w.clone()]);
        let mut scaler = GradScaler::new().init_loss_scaling(1024.0);
        for g in [&g1, &bad, &g2] {
            let scaled = scaler.scale(&loss(&w, g, place)).unwrap();
            scaled.backward().unwrap();
            scaler.minimize(&mut opt, &scaled).unwrap();
            opt.clear_grad();
        }
        // Without: the two good steps alone.
        let v = param(&w0, place);
        let mut plain = optimizer::Adam::new(0.01, vec![v.clone()]);
        for g in [&g1, &g2] {
            loss(&v, g, place).backward().unwrap();
            plain.step().unwrap();
            plain.clear_grad();
        }
        assert_close(&format!("Adam through a skipped step on {place} (seed {seed})"), &values(&w), &values(&v), 1e-6);
        assert_eq!(opt.steps(), 2);
        assert_eq!(opt.state_dict().get("@step").unwrap().cast(DType::Int64).unwrap().item::<i64>().unwrap(), 2);
        assert_eq!(scaler.get_loss_scaling().unwrap(), 512.0, "one bad step halves (decr_every_n_nan_or_inf = 1)");
    }
}

#[test]
fn state_dict_resumes_the_scale_and_its_counters() {
    let w = param(&[1.0, -1.0], Place::Cpu);
    let mut opt = optimizer::SGD::new(0.1, vec![w.clone()]);
    let mut scaler = GradScaler::new().init_loss_scaling(4.0).incr_every_n_steps(3);
    for _ in 0..2 {
        let scaled = scaler.scale(&loss(&w, &[1.0, 1.0], Place::Cpu)).unwrap();
        scaled.backward().unwrap();
        scaler.minimize(&mut opt, &scaled).unwrap();
        opt.clear_grad();
    }
    let sd = scaler.state_dict().unwrap();
    assert_eq!(sd.get("incr_count").unwrap().to_vec::<i64>().unwrap(), vec![2]);
    let mut resumed = GradScaler::new();
    resumed.load_state_dict(&sd).unwrap();
    assert_eq!(resumed.get_incr_every_n_steps(), 3);
    // One more good step: the third doubles, in both.
    for s in [&mut scaler, &mut resumed] {
        let scaled = s.scale(&loss(&w, &[1.0, 1.0], Place::Cpu)).unwrap();
        scaled.backward().unwrap();
        s.minimize(&mut opt, &scaled).unwrap();
        opt.clear_grad();
        assert_eq!(s.get_loss_scaling().unwrap(), 8.0);
    }
    assert!(GradScaler::new().load_state_dict(&GradScaler::new().enable(false).state_dict().unwrap()).is_err());
    // A disabled scaler passes the loss and the step through.
    let mut off = GradScaler::new().enable(false);
    let l = loss(&w, &[1.0, 1.0], Place::Cpu);
    assert_eq!(values(&off.scale(&l).unwrap()), values(&l));
}

#[derive(nn::Layer)]
struct Net {
    fc: nn::Linear,
    ln: nn::LayerNorm,
    bn: nn::BatchNorm1D,
    head: nn::Linear,
}

impl Forward for Net {
    fn forward(&self, x: &Tensor) -> dygraph::Result<Tensor> {
        let h = self.ln.forward(&self.fc.forward(x)?)?;
        self.head.forward(&self.bn.forward(&h)?.relu()?)
    }
}

fn net() -> Net {
    Net {
        fc: nn::Linear::new(4, 3).unwrap(),
        ln: nn::LayerNorm::new(&[3]).unwrap(),
        bn: nn::BatchNorm1D::new(3).unwrap(),
        head: nn::Linear::new(3, 2).unwrap(),
    }
}

/// `v` rounded to `dtype` (float16 or bfloat16) by the `half` crate.
fn rounded(v: f64, dtype: DType) -> f64 {
    if dtype == DType::BFloat16 { half::bf16::from_f64(v).to_f64() } else { half::f16::from_f64(v).to_f64() }
}

#[test]
fn decorate_o2_casts_all_but_the_norms_and_steps_float32_master_weights() {
    let _g = common::generator_lock();
    use DType::{BFloat16 as B, Float16 as H, Float32 as F};
    // Paddle keeps batch norm float32 always and layer norm float32 for float16 only.
    let cases = [("float16", H, [H, H, F, F, F, F, H, H], 1e-3), ("bfloat16", B, [B, B, B, B, F, F, B, B], 1e-2)];
    for place in places() {
        for (name, low, expected, rtol) in cases {
            dygraph::guard(place, || {
                let seed = common::run_seed();
                dygraph::seed(seed);
                let mut model = net();
                let before: Vec<Vec<f64>> = model.parameters().iter().map(values).collect();
                let mut opt = optimizer::SGD::new(0.5, model.parameters());
                amp::decorate("O2").dtype(name).apply(&mut model, Some(&mut opt)).unwrap();
                let dtypes: Vec<DType> = model.parameters().iter().map(|p| p.dtype()).collect();
                assert_eq!(dtypes, expected, "{name}: fc, ln, bn, head (weight, bias each)");
                assert_eq!(model.bn.mean.dtype(), F, "batch norm's running statistics stay float32");

                let x = dygraph::randn([5, 4]).unwrap();
                let loss = amp::auto_cast(true)
                    .level("O2")
                    .dtype(name)
                    .scope(|| model.forward(&x)?.square()?.mean(&[], false))
                    .unwrap()
                    .unwrap();
                assert_eq!(loss.dtype(), low, "at O2 the gray mean runs in {name}");
                loss.backward().unwrap();
                let grads: Vec<Vec<f64>> = model.parameters().iter().map(|p| values(&p.grad().unwrap())).collect();
                opt.step().unwrap();
                let sd = opt.state_dict();
                let masters = sd.keys().into_iter().filter(|k| k.ends_with(".master_weight")).count();
                let low_params = expected.iter().filter(|&&d| d == low).count();
                assert_eq!(masters, low_params, "one master weight per {name} parameter: {:?}", sd.keys());
                // master = exact float32 original − lr · gradient; the parameter is its value
                // rounded to the low dtype (a rounding that flips to the neighbour is one unit).
                for (k, p) in model.parameters().iter().enumerate() {
                    let master: Vec<f64> = before[k].iter().zip(&grads[k]).map(|(w, g)| w - 0.5 * g).collect();
                    let want: Vec<f64> =
                        if p.dtype() == low { master.iter().map(|&m| rounded(m, low)).collect() } else { master };
                    common::check_allclose(
                        &format!("{name} parameter {k} on {place} (seed {seed})"),
                        &values(p),
                        &want,
                        1e-6,
                        rtol,
                    )
                    .unwrap();
                }
            });
        }
    }
}

#[test]
fn decorate_refuses_what_it_cannot_do() {
    let mut model = net();
    let mut opt = optimizer::SGD::new(0.1, model.parameters());
    let err = amp::decorate("O2").master_weight(false).apply(&mut model, Some(&mut opt)).unwrap_err();
    assert!(err.to_string().contains("master weights"), "{err}");
    let err = amp::decorate("O2").excluded_layers(["nope"]).apply(&mut model, None).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    // O1 changes nothing.
    amp::decorate("O1").apply(&mut model, Some(&mut opt)).unwrap();
    assert_eq!(model.fc.weight.dtype(), DType::Float32);
    // Excluded layers stay float32.
    amp::decorate("O2").excluded_layers(["head"]).apply(&mut model, None).unwrap();
    assert_eq!((model.fc.weight.dtype(), model.head.weight.dtype()), (DType::Float16, DType::Float32));
    // An optimizer without master weights refuses float16 parameters by name.
    let mut plain = optimizer::SGD::new(0.1, vec![model.fc.weight.clone()]);
    let x = Tensor::from_vec(vec![1.0f32; 4], [1, 4]).unwrap();
    let y = amp::auto_cast(true).level("O2").scope(|| model.fc.forward(&x)?.sum(&[], false)).unwrap().unwrap();
    y.backward().unwrap();
    let err = plain.step().unwrap_err().to_string();
    assert!(err.contains("multi_precision"), "{err}");
}

#[test]
fn decorate_save_dtype_saves_an_o2_model_as_float32_and_loads_it_back() {
    let _g = common::generator_lock();
    for place in places() {
        dygraph::guard(place, || {
            let seed = common::run_seed();
            dygraph::seed(seed);
            let mut model = net();
            amp::decorate("O2").save_dtype("float32").apply(&mut model, None).unwrap();
            assert_eq!(model.fc.weight.dtype(), DType::Float16);
            let sd = model.state_dict();
            for (name, t) in sd.iter() {
                assert_eq!(t.dtype(), DType::Float32, "{name} on {place}: state_dict in the save dtype");
            }
            // The saved values are the float16 parameters, exactly (float32 holds every float16).
            assert_eq!(values(sd.get("fc.weight").unwrap()), values(&model.fc.weight));
            // A float32 model loads the file; its output is the O2 model's computed in float32.
            let dir = std::env::temp_dir().join(format!("dygraph-save-dtype-{}-{seed}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("o2.safetensors");
            dygraph::save(&sd, &path).unwrap();
            let loaded: nn::StateDict = dygraph::load(&path).unwrap();
            let mut plain = net();
            plain.set_state_dict(&loaded).unwrap();
            assert_eq!(values(&plain.fc.weight), values(&model.fc.weight));
            // The decorated model takes the float32 file back (cast to its own dtypes) and
            // keeps its float16 parameters.
            let w = values(&model.head.weight);
            model.set_state_dict(&loaded).unwrap();
            assert_eq!((model.fc.weight.dtype(), values(&model.head.weight)), (DType::Float16, w));
            std::fs::remove_dir_all(&dir).unwrap();
            // float64: on the CPU, the only place that has it.
            let mut wide = net();
            amp::decorate("O2").save_dtype("float64").apply(&mut wide, None).unwrap();
            let t = wide.state_dict().get("fc.bias").unwrap().clone();
            assert_eq!((t.dtype(), t.place()), (DType::Float64, Place::Cpu));
        });
    }
    // At O1 nothing changes (Paddle's order); a dtype Paddle does not name is refused.
    let mut model = net();
    amp::decorate("O1").save_dtype("float16").apply(&mut model, None).unwrap();
    assert_eq!(model.state_dict().get("fc.weight").unwrap().dtype(), DType::Float32);
    let err = amp::decorate("O2").save_dtype("int8").apply(&mut model, None).unwrap_err().to_string();
    assert!(err.contains("save_dtype") && err.contains("int8"), "{err}");
}
