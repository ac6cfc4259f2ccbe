//! Weights saved by the real Paddle (3.3) and PyTorch (2.15): the fixtures in
//! `tests/fixtures/peer_weights/` were written by `make_fixtures.py` there. Values are checked
//! against the literals the script wrote, and models built here give the logits the peers
//! recorded beside each file.

use crate::common;

use std::path::PathBuf;

use dygraph::io::{from_torch, load_paddle, load_paddle_from_bytes, load_torch, load_torch_from_bytes};
use dygraph::nn::{
    AdaptiveAvgPool2D, BatchNorm2D, Conv2D, Conv2dOptions, Flatten, Forward, Layer, Linear, MaxPool2D, ParamAttr, ReLU,
    Sequential, StateDict,
};
use dygraph::vision::models::LeNet;
use dygraph::{DType, Error, Place, Tensor};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/peer_weights").join(name)
}

fn values(state: &StateDict, name: &str) -> (DType, Vec<usize>, Vec<f64>) {
    let t = state.get(name).unwrap_or_else(|| panic!("{name} missing from {:?}", state.keys()));
    (t.dtype(), t.shape().to_vec(), t.to_f64_vec().unwrap())
}

fn f32s(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| x as f32 as f64).collect()
}

/// `x[i] = ((7 i) mod 23) / 23 − 0.5`, the input the fixtures' logits were computed for.
fn ramp(shape: &[usize], place: Place) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (((7 * i) % 23) as f64 / 23.0 - 0.5) as f32).collect();
    Tensor::from_vec_on(v, shape, place).unwrap()
}

fn recorded_logits(file: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(fixture(&format!("{file}.logits.txt"))).unwrap();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

/// The tiny net of `make_fixtures.py`, with the same sublayer indices.
fn tiny_net() -> Sequential {
    let conv = |cin, cout, pad| {
        Conv2D::with_options(cin, cout, 3, Conv2dOptions::new().padding(pad), ParamAttr::default(), true).unwrap()
    };
    let mut net = Sequential::new()
        .add(conv(1, 4, 1))
        .add(BatchNorm2D::new(4).unwrap())
        .add(ReLU)
        .add(MaxPool2D::new(2))
        .add(conv(4, 8, 0))
        .add(BatchNorm2D::new(8).unwrap())
        .add(ReLU)
        .add(AdaptiveAvgPool2D::new(1))
        .add(Flatten::default())
        .add(Linear::new(8, 10).unwrap())
        .add(ReLU)
        .add(Linear::new(10, 10).unwrap());
    net.eval();
    net
}

#[test]
fn paddle_values_keep_dtype_shape_and_every_bit() {
    let _generator = common::generator_lock();
    let s = load_paddle(fixture("values.pdparams")).unwrap();
    assert_eq!(s.keys(), ["f32", "f64", "i64", "i32", "bool", "f16", "scalar"], "the name table is left out");
    assert_eq!(values(&s, "f32"), (DType::Float32, vec![2, 3], f32s(&[1.5, -2.25, 3.0, 0.1, 1e-8, -0.0])));
    assert_eq!(values(&s, "f64"), (DType::Float64, vec![2], vec![1.0 / 3.0, -2.5e300]));
    assert_eq!(values(&s, "i64"), (DType::Int64, vec![2], vec![-(2f64.powi(40)), 7.0]));
    assert_eq!(values(&s, "i32"), (DType::Int32, vec![2, 1], vec![-3.0, 2147483647.0]));
    assert_eq!(values(&s, "bool"), (DType::Bool, vec![3], vec![1.0, 0.0, 1.0]));
    assert_eq!(values(&s, "f16"), (DType::Float16, vec![2], vec![0.5, -65504.0]));
    assert_eq!(values(&s, "scalar"), (DType::Float32, vec![], vec![2.5]));
    assert!(s.get("f32").unwrap().to_vec::<f32>().unwrap()[5].is_sign_negative(), "-0.0 keeps its sign");
}

#[test]
fn numpy_layouts_at_protocols_2_and_4() {
    let _generator = common::generator_lock();
    for file in ["numpy_layouts_p2.pdparams", "numpy_layouts_p4.pdparams"] {
        let s = load_paddle(fixture(file)).unwrap();
        assert_eq!(values(&s, "fortran"), (DType::Float32, vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), "{file}");
        assert_eq!(values(&s, "big_endian"), (DType::Float64, vec![2], vec![1.5, -2.0]), "{file}");
        assert_eq!(values(&s, "u8"), (DType::Int32, vec![2], vec![0.0, 255.0]), "{file}");
        assert_eq!(values(&s, "i16"), (DType::Int32, vec![2], vec![-300.0, 5.0]), "{file}");
    }
}

#[test]
fn torch_values_views_and_parameters() {
    let _generator = common::generator_lock();
    let s = load_torch(fixture("values.pt")).unwrap();
    assert_eq!(values(&s, "f32"), (DType::Float32, vec![2, 3], f32s(&[1.5, -2.25, 3.0, 0.1, 1e-8, -0.0])));
    assert_eq!(values(&s, "f64"), (DType::Float64, vec![2], vec![1.0 / 3.0, -2.5e300]));
    assert_eq!(values(&s, "i64"), (DType::Int64, vec![2], vec![-(2f64.powi(40)), 7.0]));
    assert_eq!(values(&s, "i32"), (DType::Int32, vec![2, 1], vec![-3.0, 2147483647.0]));
    assert_eq!(values(&s, "bool"), (DType::Bool, vec![3], vec![1.0, 0.0, 1.0]));
    assert_eq!(values(&s, "f16"), (DType::Float16, vec![2], vec![0.5, -65504.0]));
    assert_eq!(values(&s, "bf16"), (DType::BFloat16, vec![2], vec![1.5, -0.0078125]), "bfloat16 stays bfloat16");
    assert_eq!(values(&s, "i8"), (DType::Int32, vec![2], vec![-128.0, 127.0]));
    assert_eq!(values(&s, "u8"), (DType::Int32, vec![2], vec![0.0, 255.0]));
    // `arange(6).reshape(2, 3).t()`: strides (1, 3) over the shared storage.
    assert_eq!(values(&s, "transposed"), (DType::Float32, vec![3, 2], vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]));
    // `[1]` of the same storage: offset 3.
    assert_eq!(values(&s, "row"), (DType::Float32, vec![3], vec![3.0, 4.0, 5.0]));
    assert_eq!(values(&s, "param"), (DType::Float32, vec![2], vec![1.0, 2.0]));
    assert_eq!(values(&s, "scalar"), (DType::Float32, vec![], vec![2.5]));
}

#[test]
fn paddles_lenet_file_loads_into_our_lenet_and_gives_paddles_logits() {
    let _g = common::generator_lock();
    let mut net = dygraph::guard(Place::Cpu, || LeNet::new(10)).unwrap();
    net.set_state_dict(&load_paddle(fixture("lenet.pdparams")).unwrap()).unwrap();
    net.eval();
    let logits = net.forward(&ramp(&[2, 1, 28, 28], Place::Cpu)).unwrap().to_f64_vec().unwrap();
    common::assert_close("LeNet logits vs Paddle", &logits, &recorded_logits("lenet.pdparams"), 1e-5);
}

#[test]
fn tiny_net_from_paddle_and_from_torch_gives_their_logits_on_each_place() {
    let _g = common::generator_lock();
    let paddle_state = load_paddle(fixture("tiny.pdparams")).unwrap();
    let torch_raw = load_torch(fixture("tiny.pt")).unwrap();
    assert!(torch_raw.keys().contains(&"1.num_batches_tracked".to_string()), "{:?}", torch_raw.keys());
    assert_eq!(torch_raw.get("9.weight").unwrap().shape(), [10, 8], "PyTorch's [out, in]");

    // Without the map, the names and the Linear layout do not fit.
    let err = tiny_net().set_state_dict(&torch_raw).unwrap_err().to_string();
    assert!(err.contains("running_mean") && err.contains("1._mean"), "{err}");

    for place in common::places() {
        let mut from_paddle = tiny_net();
        from_paddle.set_state_dict(&paddle_state).unwrap();
        from_paddle.to(place).unwrap();
        let got = from_paddle.forward(&ramp(&[2, 1, 8, 8], place)).unwrap().to_f64_vec().unwrap();
        common::assert_close(
            &format!("tiny net vs Paddle on {place:?}"),
            &got,
            &recorded_logits("tiny.pdparams"),
            1e-5,
        );

        let mut from_torch_net = tiny_net();
        let mapped = from_torch(&torch_raw, &from_torch_net).unwrap();
        assert_eq!(mapped.get("9.weight").unwrap().shape(), [8, 10], "transposed to [in, out]");
        assert_eq!(mapped.get("11.weight").unwrap().shape(), [10, 10]);
        from_torch_net.set_state_dict(&mapped).unwrap();
        from_torch_net.to(place).unwrap();
        let got = from_torch_net.forward(&ramp(&[2, 1, 8, 8], place)).unwrap().to_f64_vec().unwrap();
        common::assert_close(&format!("tiny net vs PyTorch on {place:?}"), &got, &recorded_logits("tiny.pt"), 1e-5);
    }
}

#[test]
fn square_linear_weights_are_transposed_by_layer_kind_not_by_shape() {
    let _generator = common::generator_lock();
    let torch_raw = load_torch(fixture("tiny.pt")).unwrap();
    let mapped = from_torch(&torch_raw, &tiny_net()).unwrap();
    let raw = torch_raw.get("11.weight").unwrap().to_f64_vec().unwrap();
    let got = mapped.get("11.weight").unwrap().to_f64_vec().unwrap();
    for i in 0..10 {
        for j in 0..10 {
            assert_eq!(got[i * 10 + j], raw[j * 10 + i], "11.weight[{i}][{j}]");
        }
    }
    // Conv weights and batch-norm scales keep their layout.
    assert_eq!(
        mapped.get("0.weight").unwrap().to_f64_vec().unwrap(),
        torch_raw.get("0.weight").unwrap().to_f64_vec().unwrap()
    );
}

fn expect_invalid(what: &str, r: dygraph::Result<StateDict>, needle: &str) {
    match r {
        Err(Error::InvalidArgument { op, msg }) => {
            assert!(msg.contains(needle), "{what}: {op}: {msg} (expected {needle:?})");
        }
        Err(other) => panic!("{what}: {other} is not InvalidArgument"),
        Ok(s) => panic!("{what}: loaded {:?}", s.keys()),
    }
}

#[test]
fn every_truncation_of_every_fixture_is_a_typed_error() {
    let _generator = common::generator_lock();
    let mut checked = 0;
    for file in ["values.pdparams", "numpy_layouts_p2.pdparams", "tiny.pdparams", "values.pt", "tiny.pt"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        let torch = file.ends_with(".pt");
        let step = (bytes.len() / 97).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            let r = if torch {
                load_torch_from_bytes(&bytes[..cut], Place::Cpu)
            } else {
                load_paddle_from_bytes(&bytes[..cut], Place::Cpu)
            };
            assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{file} cut at {cut}: {:?}", r.map(|s| s.keys()));
            checked += 1;
        }
    }
    println!("{checked} truncated files rejected");
}

#[test]
fn foreign_content_is_refused_without_running_it() {
    let _generator = common::generator_lock();
    // `os.system("echo hacked")` as a value: recorded, never called, refused by name.
    let evil = b"\x80\x02}q\x00X\x01\x00\x00\x00wcos\nsystem\nX\x0b\x00\x00\x00echo hacked\x85R\x73.";
    expect_invalid("os.system", load_paddle_from_bytes(evil, Place::Cpu), "os.system");
    let torch_bytes = std::fs::read(fixture("tiny.pt")).unwrap();
    expect_invalid("a zip given to load_paddle", load_paddle_from_bytes(&torch_bytes, Place::Cpu), "not supported");
    let paddle_bytes = std::fs::read(fixture("tiny.pdparams")).unwrap();
    expect_invalid("a pickle given to load_torch", load_torch_from_bytes(&paddle_bytes, Place::Cpu), "not a zip");
    // A list at the top instead of a dict.
    expect_invalid("a list", load_paddle_from_bytes(b"\x80\x02]q\x00.", Place::Cpu), "not a dict");
    // A numpy array whose shape claims 2^40 × 3 elements over 24 bytes of data.
    let bytes = std::fs::read(fixture("numpy_layouts_p4.pdparams")).unwrap();
    let at = bytes.windows(5).position(|w| w == b"K\x02K\x03\x86").expect("the (2, 3) shape tuple");
    let mut huge = bytes[..at].to_vec();
    huge.extend(b"\x8a\x06\x00\x00\x00\x00\x00\x01");
    huge.extend(&bytes[at + 2..]);
    expect_invalid("a 2^40-row header", load_paddle_from_bytes(&huge, Place::Cpu), "needs");
    match load_paddle(fixture("no_such_file.pdparams")) {
        Err(Error::Io(e)) => assert!(e.to_string().contains("no_such_file.pdparams"), "{e}"),
        other => panic!("a missing file: {:?}", other.map(|s| s.keys())),
    }
}
