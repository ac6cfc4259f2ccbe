//! Optimizers against their update formulas computed by hand, on both places; learning-rate
//! schedules; gradient clipping; optimizer state round trips.

use crate::common;

use common::places;

use dygraph::optimizer::lr::{
    AfterWarmup, CosineAnnealingDecay, ExponentialDecay, LinearWarmup, MultiStepDecay, PlateauMode, ReduceOnPlateau,
    StepDecay,
};
use dygraph::optimizer::{self, GradClip, Optimizer};
use dygraph::{Place, Tensor};

fn param(v: &[f32], place: Place) -> Tensor {
    let t = Tensor::from_vec_on(v.to_vec(), [v.len()], place).unwrap();
    t.set_stop_gradient(false);
    t
}

/// Sets p.grad = g by backpropagating Σ p·g.
fn set_grad(p: &Tensor, g: &[f32]) {
    let gt = Tensor::from_vec_on(g.to_vec(), [g.len()], p.place()).unwrap();
    p.mul(&gt).unwrap().sum(&[], false).unwrap().backward().unwrap();
}

fn vals(t: &Tensor) -> Vec<f64> {
    common::values(t)
}

#[test]
fn sgd_with_weight_decay_and_lr_multiplier() {
    let _generator = common::generator_lock();
    for place in places() {
        let p = param(&[1.0, -2.0], place);
        p.set_learning_rate_multiplier(0.5);
        let mut opt = optimizer::SGD::new(0.1, vec![p.clone()]).weight_decay(0.01);
        set_grad(&p, &[0.5, 1.0]);
        opt.step().unwrap();
        opt.clear_grad();
        assert!(p.grad().is_none());
        // p -= 0.1·0.5·(g + 0.01·p)
        let e = [1.0 - 0.05 * (0.5 + 0.01), -2.0 - 0.05 * (1.0 - 0.02)];
        common::assert_close(&format!("sgd on {place}"), &vals(&p), &e, 1e-6);
    }
}

#[test]
fn momentum_and_nesterov_two_steps() {
    let _generator = common::generator_lock();
    for place in places() {
        for nesterov in [false, true] {
            let p = param(&[1.0], place);
            let mut opt = optimizer::Momentum::new(0.1, vec![p.clone()]).momentum(0.9).use_nesterov(nesterov);
            let (mut pv, mut v) = (1.0f64, 0.0f64);
            for g in [0.5f64, -0.25] {
                set_grad(&p, &[g as f32]);
                opt.step().unwrap();
                opt.clear_grad();
                v = 0.9 * v + g;
                pv -= if nesterov { 0.1 * (g + 0.9 * v) } else { 0.1 * v };
            }
            common::assert_close(&format!("momentum nesterov={nesterov} on {place}"), &vals(&p), &[pv], 1e-6);
        }
    }
}

#[test]
fn adam_bias_correction_three_steps() {
    let _generator = common::generator_lock();
    for place in places() {
        let p = param(&[0.5, -1.5], place);
        let mut opt = optimizer::Adam::new(0.01, vec![p.clone()]);
        let mut pv = [0.5f64, -1.5];
        let (mut m, mut v) = ([0.0f64; 2], [0.0f64; 2]);
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
        for (t, g) in [[0.1f64, -0.2], [0.3, 0.1], [-0.2, 0.05]].iter().enumerate() {
            set_grad(&p, &[g[0] as f32, g[1] as f32]);
            opt.step().unwrap();
            opt.clear_grad();
            let t = (t + 1) as i32;
            for i in 0..2 {
                m[i] = b1 * m[i] + (1.0 - b1) * g[i];
                v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
                let mh = m[i] / (1.0 - b1.powi(t));
                let vh = v[i] / (1.0 - b2.powi(t));
                pv[i] -= 0.01 * mh / (vh.sqrt() + eps);
            }
        }
        common::assert_close(&format!("adam on {place}"), &vals(&p), &pv, 1e-5);
        assert_eq!(opt.steps(), 3);
    }
}

#[test]
fn adam_on_a_large_parameter_matches_its_formula() {
    let _generator = common::generator_lock();
    // 100,003 elements: the CPU update splits parameters this large across threads.
    let n = 100_003;
    let p0: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
    let grads: Vec<Vec<f32>> =
        (0..3).map(|t| (0..n).map(|i| ((i * 13 + t * 7) % 29) as f32 / 14.0 - 1.0).collect()).collect();
    for place in places() {
        let p = param(&p0, place);
        let mut opt = optimizer::Adam::new(0.01, vec![p.clone()]);
        let mut pv: Vec<f64> = p0.iter().map(|&v| v as f64).collect();
        let (mut m, mut v) = (vec![0.0f64; n], vec![0.0f64; n]);
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
        for (t, g) in grads.iter().enumerate() {
            set_grad(&p, g);
            opt.step().unwrap();
            opt.clear_grad();
            let t = (t + 1) as i32;
            for i in 0..n {
                let g = g[i] as f64;
                m[i] = b1 * m[i] + (1.0 - b1) * g;
                v[i] = b2 * v[i] + (1.0 - b2) * g * g;
                let mh = m[i] / (1.0 - b1.powi(t));
                let vh = v[i] / (1.0 - b2.powi(t));
                pv[i] -= 0.01 * mh / (vh.sqrt() + eps);
            }
        }
        common::assert_close(&format!("adam, {n} elements, on {place}"), &vals(&p), &pv, 1e-5);
    }
}

#[test]
fn adamw_decays_decoupled_from_the_gradient() {
    let _generator = common::generator_lock();
    for place in places() {
        let p = param(&[2.0], place);
        let mut opt = optimizer::AdamW::new(0.1, vec![p.clone()]).weight_decay(0.5);
        set_grad(&p, &[0.0]);
        opt.step().unwrap();
        // Zero gradient: Adam's step is 0, only p -= lr·wd·p remains.
        common::assert_close(&format!("adamw on {place}"), &vals(&p), &[2.0 - 0.1 * 0.5 * 2.0], 1e-6);
    }
}

/// `AdamW::new` is Paddle's AdamW: decoupled decay 0.01 by default (Adam's `new` decays
/// nothing), `apply_decay_param_fun` picks the parameters that decay by name, and `lr_ratio`
/// scales each parameter's learning rate, its decay included. Each parameter after two
/// steps against Adam with decoupled decay in float64, written out here.
#[test]
fn adamw_defaults_decay_filter_and_lr_ratio() {
    let _generator = common::generator_lock();
    // p ← p − lr·λ·p, then Adam with bias correction (Paddle's kernel, ε scaled by √(1−β2ᵗ)).
    fn adamw(p0: f64, grads: &[f64], lr: f64, decay: f64) -> f64 {
        let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8f64);
        let (mut p, mut m, mut v) = (p0, 0.0, 0.0);
        for (t, &g) in grads.iter().enumerate() {
            let t = t as i32 + 1;
            p -= lr * decay * p;
            m = b1 * m + (1.0 - b1) * g;
            v = b2 * v + (1.0 - b2) * g * g;
            let c2 = (1.0 - b2.powi(t)).sqrt();
            p -= lr * c2 / (1.0 - b1.powi(t)) * (m / (v.sqrt() + eps * c2));
        }
        p
    }
    let grads = [0.5, -0.25];
    for place in places() {
        let named = |name: &str, v: f32| {
            let t = param(&[v], place);
            t.set_name(name);
            t
        };
        let (w, bias, other) = (named("fc.weight", 3.0), named("fc.bias", -2.0), named("head.weight", 1.5));
        let params = vec![w.clone(), bias.clone(), other.clone()];
        let copies = vec![named("fc.weight", 3.0), named("fc.bias", -2.0), named("head.weight", 1.5)];
        let mut defaults = optimizer::AdamW::new(0.1, copies.clone());
        let mut filtered = optimizer::AdamW::new(0.1, params.clone())
            .apply_decay_param_fun(|name| !name.ends_with(".bias"))
            .lr_ratio(|p| if p.name().is_some_and(|n| n.starts_with("head")) { 0.5 } else { 1.0 });
        for &g in &grads {
            for t in params.iter().chain(&copies) {
                set_grad(t, &[g as f32]);
            }
            defaults.step().unwrap();
            filtered.step().unwrap();
            defaults.clear_grad();
            filtered.clear_grad();
        }
        let what = |w: &str| format!("AdamW {w} on {place}");
        let got = |t: &Tensor| vals(t)[0];
        // Defaults: every parameter decays by 0.01.
        for (c, p0) in copies.iter().zip([3.0, -2.0, 1.5]) {
            common::assert_close(&what("default decay"), &[got(c)], &[adamw(p0, &grads, 0.1, 0.01)], 1e-6);
        }
        common::assert_close(&what("decayed weight"), &[got(&w)], &[adamw(3.0, &grads, 0.1, 0.01)], 1e-6);
        common::assert_close(&what("bias without decay"), &[got(&bias)], &[adamw(-2.0, &grads, 0.1, 0.0)], 1e-6);
        common::assert_close(&what("lr ratio 0.5"), &[got(&other)], &[adamw(1.5, &grads, 0.05, 0.01)], 1e-6);
        // And Adam itself does not decay.
        let a = param(&[3.0], place);
        let mut adam = optimizer::Adam::new(0.1, vec![a.clone()]);
        for &g in &grads {
            set_grad(&a, &[g as f32]);
            adam.step().unwrap();
            adam.clear_grad();
        }
        common::assert_close(&what("Adam"), &[got(&a)], &[adamw(3.0, &grads, 0.1, 0.0)], 1e-6);
    }
}

#[test]
fn rmsprop_centered_and_plain() {
    let _generator = common::generator_lock();
    for place in places() {
        for centered in [false, true] {
            let p = param(&[1.0], place);
            let mut opt = optimizer::RMSProp::new(0.01, vec![p.clone()]).momentum(0.5).centered(centered);
            let (mut pv, mut ms, mut mg, mut mom) = (1.0f64, 0.0f64, 0.0f64, 0.0f64);
            for g in [0.4f64, -0.3] {
                set_grad(&p, &[g as f32]);
                opt.step().unwrap();
                opt.clear_grad();
                ms = 0.95 * ms + 0.05 * g * g;
                let mut denom = ms;
                if centered {
                    mg = 0.95 * mg + 0.05 * g;
                    denom = ms - mg * mg;
                }
                mom = 0.5 * mom + 0.01 * g / (denom + 1e-6).sqrt();
                pv -= mom;
            }
            common::assert_close(&format!("rmsprop centered={centered} on {place}"), &vals(&p), &[pv], 1e-5);
        }
    }
}

#[test]
fn gradient_clipping_by_value_norm_and_global_norm() {
    let _generator = common::generator_lock();
    for place in places() {
        let grads = vec![
            Tensor::from_vec_on(vec![3.0f32, 4.0], [2], place).unwrap(),
            Tensor::from_vec_on(vec![12.0f32], [1], place).unwrap(),
        ];
        let v = GradClip::by_value(3.5, None).apply(&grads).unwrap();
        assert_eq!(vals(&v[0]), vec![3.0, 3.5]);
        assert_eq!(vals(&v[1]), vec![3.5]);
        let n = GradClip::ByNorm { clip_norm: 1.0 }.apply(&grads).unwrap();
        common::assert_close("by norm", &vals(&n[0]), &[0.6, 0.8], 1e-6);
        let g = GradClip::ByGlobalNorm { clip_norm: 6.5 }.apply(&grads).unwrap();
        // Global norm = √(9 + 16 + 144) = 13 → factor 0.5.
        common::assert_close("global norm", &vals(&g[0]), &[1.5, 2.0], 1e-6);
        common::assert_close("global norm", &vals(&g[1]), &[6.0], 1e-6);
        let untouched = GradClip::ByGlobalNorm { clip_norm: 100.0 }.apply(&grads).unwrap();
        common::assert_close("below the norm", &vals(&untouched[1]), &[12.0], 1e-6);
    }
}

#[test]
fn learning_rate_schedules() {
    let _generator = common::generator_lock();
    let seq = |s: &optimizer::LrScheduler, n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let lr = s.get_lr();
                s.step();
                lr
            })
            .collect()
    };
    let close = |a: &[f64], b: &[f64]| common::assert_close("schedule", a, b, 1e-12);
    close(&seq(&StepDecay::new(1.0, 2, 0.5), 5), &[1.0, 1.0, 0.5, 0.5, 0.25]);
    close(&seq(&MultiStepDecay::new(1.0, &[1, 3], 0.1), 5), &[1.0, 0.1, 0.1, 0.01, 0.01]);
    close(&seq(&ExponentialDecay::new(2.0, 0.5), 3), &[2.0, 1.0, 0.5]);
    let cos: Vec<f64> =
        (0..5).map(|e| 0.1 + 0.9 * (1.0 + (std::f64::consts::PI * e as f64 / 4.0).cos()) / 2.0).collect();
    close(&seq(&CosineAnnealingDecay::new(1.0, 4, 0.1), 5), &cos);
    close(&seq(&LinearWarmup::new(AfterWarmup::Constant(0.5), 2, 0.0, 0.5), 4), &[0.0, 0.25, 0.5, 0.5]);
    let plateau = ReduceOnPlateau::new(1.0, PlateauMode::Min, 0.5, 1, 1e-4, 0, 0.1);
    let mut lrs = Vec::new();
    for loss in [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95] {
        plateau.step_with(loss);
        lrs.push(plateau.get_lr());
    }
    close(&lrs, &[1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125]);
    // The optimizer reads the scheduler it was given.
    let sched = StepDecay::new(0.1, 1, 0.5);
    let opt = optimizer::SGD::new(&sched, vec![]);
    sched.step();
    assert_eq!(opt.get_lr(), 0.05);
}

#[test]
fn optimizer_state_round_trip() {
    let _generator = common::generator_lock();
    for place in places() {
        let p = param(&[1.0, 2.0], place);
        p.set_name("w");
        let mut a = optimizer::Adam::new(0.1, vec![p.clone()]);
        set_grad(&p, &[0.5, 0.5]);
        a.step().unwrap();
        a.clear_grad();
        let sd = a.state_dict();
        assert!(sd.get("w.moment1").is_some() && sd.get("w.moment2").is_some(), "{:?}", sd.keys());
        // A fresh optimizer loaded from the state takes the same second step.
        let q = param(&common::values(&p).iter().map(|&v| v as f32).collect::<Vec<_>>(), place);
        q.set_name("w");
        let mut b = optimizer::Adam::new(0.1, vec![q.clone()]);
        b.set_state_dict(&sd).unwrap();
        set_grad(&p, &[-0.3, 0.2]);
        set_grad(&q, &[-0.3, 0.2]);
        a.step().unwrap();
        b.step().unwrap();
        assert_eq!(vals(&p), vals(&q), "{place}");
        let mut bad = sd.clone();
        bad.insert("nonsense", p.clone());
        assert!(b.set_state_dict(&bad).unwrap_err().to_string().contains("nonsense"));
    }
}

#[test]
fn polynomial_noam_piecewise_lambda_one_cycle_and_cyclic_schedules_follow_paddle() {
    let _generator = common::generator_lock();
    use dygraph::optimizer::lr::{
        CyclicLR, CyclicMode, LambdaDecay, NoamDecay, OneCycleLR, OneCycleOptions, PiecewiseDecay, PolynomialDecay,
    };
    let at = |s: &dygraph::optimizer::LrScheduler, epoch: i64| {
        s.set_epoch(epoch);
        s.get_lr()
    };
    let close = |what: &str, got: f64, want: f64| {
        assert!((got - want).abs() <= 1e-12 + 1e-9 * want.abs(), "{what}: {got} vs {want}")
    };

    let p = PolynomialDecay::new(0.1, 10, 0.0, 2.0, false);
    close("polynomial at 5", at(&p, 5), 0.1 * 0.25);
    close("polynomial past the end", at(&p, 20), 0.0);
    let p = PolynomialDecay::new(0.1, 10, 0.0, 2.0, true);
    close("polynomial cycling at 15", at(&p, 15), 0.1 * (1.0 - 15.0 / 20.0f64).powi(2));

    let n = NoamDecay::new(512, 4000, 1.0);
    close("noam at 0", at(&n, 0), 0.0);
    close("noam at 100", at(&n, 100), 512f64.powf(-0.5) * (4000f64.powf(-1.5) * 100.0));
    close("noam at 10000", at(&n, 10000), 512f64.powf(-0.5) * 10000f64.powf(-0.5));

    let pw = PiecewiseDecay::new(&[3, 6], &[1.0, 0.5, 0.1]).unwrap();
    for (e, v) in [(0, 1.0), (2, 1.0), (3, 0.5), (5, 0.5), (6, 0.1), (60, 0.1)] {
        close(&format!("piecewise at {e}"), at(&pw, e), v);
    }
    assert!(PiecewiseDecay::new(&[3], &[1.0]).is_err());

    let l = LambdaDecay::new(0.5, |e| 0.9f64.powi(e as i32));
    close("lambda at 2", at(&l, 2), 0.5 * 0.81);

    let oc = OneCycleLR::new(0.1, 10, OneCycleOptions::default()).unwrap();
    close("one-cycle start", at(&oc, 0), 0.1 / 25.0);
    close("one-cycle peak", at(&oc, 2), 0.1);
    let pct = 3.0 / 7.0;
    close("one-cycle falling", at(&oc, 5), 1e-4 + (0.1 - 1e-4) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0));
    close("one-cycle end", at(&oc, 9), 1e-4);
    let three = OneCycleLR::new(0.1, 10, OneCycleOptions { three_phase: true, ..Default::default() }).unwrap();
    close("three-phase back at the initial rate", at(&three, 4), 0.1 / 25.0);

    let c = CyclicLR::new(0.1, 1.0, 2, Some(4), CyclicMode::Triangular).unwrap();
    for (e, v) in [(0, 0.1), (1, 0.55), (2, 1.0), (4, 0.55), (6, 0.1)] {
        close(&format!("cyclic at {e}"), at(&c, e), v);
    }
    let c2 = CyclicLR::new(0.1, 1.0, 2, Some(4), CyclicMode::Triangular2).unwrap();
    close("triangular2, second cycle's peak", at(&c2, 8), 0.1 + 0.9 * 0.5);
    let ce = CyclicLR::new(0.1, 1.0, 2, None, CyclicMode::ExpRange { gamma: 0.9 }).unwrap();
    close("exp_range at 2", at(&ce, 2), 0.1 + 0.9 * 0.81);
}

/// Two steps of each newer optimizer against its update written out here, on every place.
#[test]
fn adagrad_adadelta_adamax_and_lamb_follow_their_formulas() {
    let _generator = common::generator_lock();
    use dygraph::optimizer::{Adadelta, Adagrad, Adamax, Lamb};
    let p0 = [0.5f32, -1.0, 2.0];
    let grads = [[0.1f32, -0.2, 0.3], [-0.4, 0.5, 0.05]];
    for place in places() {
        type Run = Box<dyn Fn(Vec<Tensor>) -> Box<dyn Optimizer>>;
        type Formula = Box<dyn Fn(&[f64], &[[f64; 3]]) -> Vec<f64>>;
        let cases: Vec<(&str, Run, Formula)> = vec![
            (
                "adagrad",
                Box::new(|p| Box::new(Adagrad::new(0.1, p))),
                Box::new(|p, gs| {
                    let mut acc = [0.0; 3];
                    let mut p = p.to_vec();
                    for g in gs {
                        for i in 0..3 {
                            acc[i] += g[i] * g[i];
                            p[i] -= 0.1 * g[i] / (acc[i].sqrt() + 1e-6);
                        }
                    }
                    p
                }),
            ),
            (
                "adadelta",
                Box::new(|p| Box::new(Adadelta::new(1.0, p).rho(0.9))),
                Box::new(|p, gs| {
                    let (mut eg, mut eu) = ([0.0; 3], [0.0; 3]);
                    let mut p = p.to_vec();
                    for g in gs {
                        for i in 0..3 {
                            eg[i] = 0.9 * eg[i] + 0.1 * g[i] * g[i];
                            let u = -((eu[i] + 1e-6) / (eg[i] + 1e-6)).sqrt() * g[i];
                            eu[i] = 0.9 * eu[i] + 0.1 * u * u;
                            p[i] += u;
                        }
                    }
                    p
                }),
            ),
            (
                "adamax",
                Box::new(|p| Box::new(Adamax::new(0.01, p))),
                Box::new(|p, gs| {
                    let (mut m, mut u) = ([0.0; 3], [0.0f64; 3]);
                    let mut p = p.to_vec();
                    for (t, g) in gs.iter().enumerate() {
                        for i in 0..3 {
                            m[i] = 0.9 * m[i] + 0.1 * g[i];
                            u[i] = (0.999 * u[i] + 1e-8).max(g[i].abs());
                            p[i] -= 0.01 / (1.0 - 0.9f64.powi(t as i32 + 1)) * m[i] / u[i];
                        }
                    }
                    p
                }),
            ),
            (
                "lamb",
                Box::new(|p| Box::new(Lamb::new(0.01, p))),
                Box::new(|p, gs| {
                    let (mut m, mut v) = ([0.0; 3], [0.0; 3]);
                    let mut p = p.to_vec();
                    for (t, g) in gs.iter().enumerate() {
                        let mut r = [0.0; 3];
                        for i in 0..3 {
                            m[i] = 0.9 * m[i] + 0.1 * g[i];
                            v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
                            let mh = m[i] / (1.0 - 0.9f64.powi(t as i32 + 1));
                            let vh = v[i] / (1.0 - 0.999f64.powi(t as i32 + 1));
                            r[i] = mh / (vh.sqrt() + 1e-6) + 0.01 * p[i];
                        }
                        let norm = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>().sqrt();
                        let trust = norm(&p) / norm(&r);
                        for i in 0..3 {
                            p[i] -= 0.01 * trust * r[i];
                        }
                    }
                    p
                }),
            ),
        ];
        for (name, make, formula) in cases {
            let p = param(&p0, place);
            let mut opt = make(vec![p.clone()]);
            for g in &grads {
                set_grad(&p, g);
                opt.step().unwrap();
                opt.clear_grad();
            }
            let gs: Vec<[f64; 3]> = grads.iter().map(|g| g.map(|v| v as f64)).collect();
            let want = formula(&p0.map(|v| v as f64), &gs);
            common::assert_close(&format!("{name} after two steps on {place}"), &vals(&p), &want, 1e-5);
        }
    }
}

#[test]
fn a_parameter_listed_twice_updates_twice_on_every_place() {
    let _generator = common::generator_lock();
    // On a GPU the eager step merges adjacent updates; a repeated parameter must not join
    // the dispatch already updating it (WebGPU cannot bind it twice, and the second update
    // must read the first's result).
    for place in places() {
        let (p, q) = (param(&[1.0, 2.0, 3.0], place), param(&[0.5], place));
        let mut opt = optimizer::SGD::new(0.1, vec![p.clone(), q.clone(), p.clone()]);
        set_grad(&p, &[1.0, -1.0, 0.5]);
        set_grad(&q, &[2.0]);
        opt.step().unwrap();
        common::assert_close(&format!("p on {place}"), &vals(&p), &[0.8, 2.2, 2.9], 1e-6);
        common::assert_close(&format!("q on {place}"), &vals(&q), &[0.3], 1e-6);
    }
}
