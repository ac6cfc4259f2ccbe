//! The seed programs ported under examples/, checked on their outcomes on both places.

mod common;

#[path = "../examples/custom_op.rs"]
#[allow(dead_code)]
mod custom_op;

use dygraph::Place;

fn places() -> Vec<Place> {
    let mut p = vec![Place::Cpu];
    p.extend(common::gpu());
    p
}

#[test]
fn custom_op_pylayer_matches_builtin_tanh() {
    for place in places() {
        let input = [[1.0f32, -0.5], [0.25, 2.0]];
        let r = custom_op::run(place, &input).unwrap();
        let expected: Vec<f64> = input.iter().flatten().map(|&x| 1.0 - (x as f64).tanh().powi(2)).collect();
        let got: Vec<f64> = r.custom_grad.iter().map(|&g| g as f64).collect();
        common::assert_close(&format!("PyLayer gradient on {place}"), &got, &expected, 1e-6);
        assert_eq!(r.custom_grad, r.builtin_grad, "PyLayer and built-in tanh gradients differ on {place}");
        assert_eq!(r.custom_sum, r.builtin_sum);
        let sum: f64 = input.iter().flatten().map(|&x| (x as f64).tanh()).sum();
        assert!((r.custom_sum as f64 - sum).abs() < 1e-5);
    }
}
