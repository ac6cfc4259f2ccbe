//! bfloat16 as a dtype of every place: casts by hand-worked bit patterns (round to nearest
//! even, overflow to infinity, NaN kept), arithmetic against a float64 reference rounded as
//! bfloat16 rounds, printing, safetensors, and autocast with `dtype("bfloat16")`.

use crate::common;

use common::{places, values};
use dygraph::amp;
use dygraph::{self as paddle, DType, Place, Tensor};
use half::bf16;

fn f32s(v: &[f32], place: Place) -> Tensor {
    Tensor::from_vec(v.to_vec(), [v.len()]).unwrap().to(place).unwrap()
}

fn bits(t: &Tensor) -> Vec<u16> {
    t.to_vec::<bf16>().unwrap().iter().map(|b| b.to_bits()).collect()
}

#[test]
fn casts_round_to_nearest_even_by_hand_bits() {
    // float32 bits → the bfloat16 bits worked by hand: the upper half, plus one when the lower
    // half is above 0x8000 or exactly 0x8000 with an odd upper half.
    let cases: [(f32, u16); 9] = [
        (1.0, 0x3f80),                  // 0x3f800000: exact
        (std::f32::consts::PI, 0x4049), // 0x40490fdb: lower half 0x0fdb rounds down
        (100.25, 0x42c8),               // 0x42c88000: a tie, upper half even: stays
        (100.75, 0x42ca),               // 0x42c98000: a tie, upper half odd: up
        (-2.5, 0xc020),                 // 0xc0200000: exact, the sign kept
        (f32::MAX, 0x7f80),             // 0x7f7fffff rounds up past the largest: +inf
        (f32::INFINITY, 0x7f80),
        (1.0e-40, 0x0001), // a float32 subnormal (0x000116c2) to a bfloat16 one
        (-0.0, 0x8000),
    ];
    for place in places() {
        let x = f32s(&cases.map(|c| c.0), place);
        let got = bits(&x.cast(DType::BFloat16).unwrap());
        assert_eq!(got, cases.map(|c| c.1), "float32 → bfloat16 on {place}");
        // And back: bfloat16 widens exactly (it is float32's upper half).
        let back = x.cast(DType::BFloat16).unwrap().cast(DType::Float32).unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f32> = cases.iter().map(|c| f32::from_bits((c.1 as u32) << 16)).collect();
        assert_eq!(
            back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "bfloat16 → float32 on {place}"
        );
        let nan = f32s(&[f32::NAN, -f32::NAN], place).cast(DType::BFloat16).unwrap();
        assert!(nan.to_vec::<bf16>().unwrap().iter().all(|v| v.is_nan()), "NaN stays NaN on {place}");
        // An odd count: the last packed word's upper half is not an element.
        let odd = f32s(&[1.0, 2.0, 3.0], place).cast(DType::BFloat16).unwrap();
        assert_eq!(bits(&odd), [0x3f80, 0x4000, 0x4040], "three elements on {place}");
    }
}

#[test]
fn arithmetic_matches_a_float64_reference_rounded_to_bfloat16() {
    let seed = common::run_seed();
    let mut rng = common::Rng::new(seed);
    let n = 37;
    let a: Vec<f64> = (0..n).map(|_| bf16::from_f64(rng.uniform(-4.0, 4.0)).to_f64()).collect();
    let b: Vec<f64> = (0..n).map(|_| bf16::from_f64(rng.uniform(0.5, 3.0)).to_f64()).collect();
    let r = |v: f64| bf16::from_f64(v).to_f64();
    for place in places() {
        let t = |v: &[f64]| common::tensor(v, &[v.len()], DType::BFloat16, place);
        let (x, y) = (t(&a), t(&b));
        let what = format!("on {place} (seed {seed})");
        // One f32 operation then one rounding: the float64 result rounded to bfloat16 (the f32
        // intermediate is exact or rounds below bfloat16's half unit for these operations).
        let add = x.add(&y).unwrap();
        assert_eq!(add.dtype(), DType::BFloat16);
        assert_eq!(values(&add), a.iter().zip(&b).map(|(p, q)| r(p + q)).collect::<Vec<_>>(), "add {what}");
        let mul = x.mul(&y).unwrap();
        assert_eq!(values(&mul), a.iter().zip(&b).map(|(p, q)| r(p * q)).collect::<Vec<_>>(), "mul {what}");
        // exp and a matmul: within one bfloat16 unit of the float64 value.
        let exp = x.exp().unwrap();
        common::check_allclose(
            &format!("exp {what}"),
            &values(&exp),
            &a.iter().map(|v| v.exp()).collect::<Vec<_>>(),
            0.0,
            2f64.powi(-8),
        )
        .unwrap();
        let m = paddle::matmul(&x.reshape([1, n]).unwrap(), &y.reshape([n, 1]).unwrap(), false, false).unwrap();
        let dot: f64 = a.iter().zip(&b).map(|(p, q)| p * q).sum();
        let scale: f64 = a.iter().zip(&b).map(|(p, q)| (p * q).abs()).sum();
        let got = values(&m)[0];
        assert!((got - dot).abs() <= 2f64.powi(-8) * scale, "matmul {what}: {got} vs {dot}");
        // Gradients flow in bfloat16.
        let w = x.detach();
        w.set_stop_gradient(false);
        w.mul(&y).unwrap().sum(&[], false).unwrap().backward().unwrap();
        let g = w.grad().unwrap();
        assert_eq!((g.dtype(), values(&g)), (DType::BFloat16, b.clone()), "d(sum(w·y))/dw = y {what}");
    }
}

#[test]
fn prints_and_saves_as_bfloat16() {
    let t = Tensor::from_vec(vec![bf16::from_f32(0.5), bf16::from_f32(-3.0)], [2]).unwrap();
    assert!(t.to_string().contains("dtype=bfloat16"), "{t}");
    assert!(format!("{t}").contains("0.50000000"), "{t}");
    let mut state = dygraph::nn::StateDict::new();
    state.insert("w", t.clone());
    let bytes = dygraph::io::save_to_bytes(&state).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    assert!(header.contains("\"BF16\""), "the safetensors header names BF16: {header}");
    for place in places() {
        let back = dygraph::io::load_from_bytes(&bytes, place).unwrap();
        let w = back.get("w").unwrap();
        assert_eq!((w.dtype(), w.place(), bits(w)), (DType::BFloat16, place, bits(&t)), "loaded on {place}");
    }
}

#[test]
fn autocast_to_bfloat16_uses_paddles_bfloat16_lists() {
    for place in places() {
        let f = paddle::ones_on([2, 2], DType::Float32, place).unwrap();
        let b = f.cast(DType::BFloat16).unwrap();
        let w = paddle::ones_on([2], DType::Float32, place).unwrap();
        let scope = amp::auto_cast(true).dtype("bfloat16");
        let (mm, exp, sum, add, ln) = scope
            .scope(|| {
                Ok::<_, dygraph::Error>((
                    paddle::matmul(&f, &f, false, false)?.dtype(),
                    b.exp()?.dtype(),
                    b.sum(&[], false)?.dtype(),
                    b.add(&f)?.dtype(),
                    paddle::layer_norm(&b, &[2], Some(&w), Some(&w), 1e-5)?.dtype(),
                ))
            })
            .unwrap()
            .unwrap();
        // matmul is white; exp and sum are on float16's black list only (gray for bfloat16,
        // so a bfloat16 input stays); an add of bfloat16 and float32 promotes; layer norm
        // follows its input.
        use DType::{BFloat16 as B, Float32 as F};
        assert_eq!((mm, exp, sum, add, ln), (B, B, B, F, B), "O1 bfloat16 on {place}");
        let under_f16 = amp::auto_cast(true).scope(|| b.exp().map(|t| t.dtype())).unwrap().unwrap();
        assert_eq!(under_f16, F, "float16's O1 black list runs exp in float32 on {place}");
    }
}
