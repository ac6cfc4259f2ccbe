//! The op registry: every op is listed once and runs by name from a flat attribute map,
//! meta tensors flow through every built-in layer without data, and `summary` reports the
//! seed's MNIST network as Paddle does.

use crate::common;

use dygraph::nn::{self, Forward, Layer};
use dygraph::ops::{AttrMap, AttrValue, registry, run_op};
use dygraph::vision::models::MnistNet;
use dygraph::{DType, Error, Place, Tensor};

#[test]
fn every_op_is_registered_once() {
    let _generator = common::generator_lock();
    let names: Vec<&str> = registry().iter().map(|o| o.name()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "duplicate names in {names:?}");
    // That no op went missing is checked against the sweep's specs, one per op
    // (`every_registered_op_has_a_spec_or_an_exemption`).
    for expected in ["add", "matmul", "conv2d", "softmax", "sum", "reshape", "gather", "dropout", "adam", "uniform"] {
        assert!(names.contains(&expected), "{expected} is not registered");
    }
}

#[test]
fn ops_run_by_name_from_attribute_maps() {
    let _generator = common::generator_lock();
    let x = Tensor::from_vec_on(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], [2, 3], Place::Cpu).unwrap();
    let attrs = AttrMap::new().with("axis", vec![1i64]).with("keepdim", false);
    let y = run_op("sum", &[&x], &attrs).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), [2.0, -5.0]);
    let y = run_op("leaky_relu", &[&x], &AttrMap::new().with("negative_slope", 0.5)).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), [1.0, -1.0, 3.0, -2.0, 5.0, -3.0]);
    let y = run_op("reshape", &[&x], &AttrMap::new().with("shape", vec![3i64, -1])).unwrap();
    assert_eq!(y[0].shape(), [3, 2]);
    // A misspelt, missing or mistyped attribute is a typed error naming the op.
    let e = run_op("sum", &[&x], &AttrMap::new().with("axes", vec![1i64]).with("keepdim", false)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { op: "sum", .. }), "{e}");
    assert!(e.to_string().contains("axes"), "{e}");
    let e = run_op("sum", &[&x], &AttrMap::new().with("keepdim", false)).unwrap_err();
    assert!(e.to_string().contains("missing attribute \"axis\""), "{e}");
    let mut bad = AttrMap::new().with("axis", vec![1i64]);
    bad.set("keepdim", AttrValue::Str("yes".into()));
    assert!(matches!(run_op("sum", &[&x], &bad), Err(Error::InvalidArgument { op: "sum", .. })));
    let e = run_op("no_such_op", &[&x], &AttrMap::new()).unwrap_err();
    assert!(e.to_string().contains("no_such_op"), "{e}");
}

#[test]
fn attribute_maps_round_trip_and_print() {
    let _generator = common::generator_lock();
    let conv = dygraph::ops::find_op("conv2d").unwrap();
    let attrs = AttrMap::new()
        .with("stride", vec![2usize, 1])
        .with("padding", "SAME".to_string())
        .with("dilation", vec![1usize, 1])
        .with("groups", 1usize)
        .with("data_format", "NCHW".to_string());
    let normalized = conv.normalize_attrs(&attrs).unwrap();
    assert_eq!(normalized, attrs);
    assert_eq!(
        normalized.to_string(),
        "{stride = [2, 1], padding = \"SAME\", dilation = [1, 1], groups = 1, data_format = \"NCHW\"}"
    );
}

#[test]
fn meta_tensors_flow_through_ops_without_data() {
    let _generator = common::generator_lock();
    let x = Tensor::meta(vec![8, 3, 32, 32], DType::Float32, Place::Cpu);
    assert!(x.is_meta());
    let w = Tensor::from_vec_on(vec![0.5f32; 16 * 3 * 9], [16, 3, 3, 3], Place::Cpu).unwrap();
    let y = dygraph::conv2d(&x, &w, None, &nn::Conv2dOptions::new().padding(1)).unwrap();
    assert!(y.is_meta());
    assert_eq!(y.shape(), [8, 16, 32, 32]);
    let z = y
        .relu()
        .unwrap()
        .mean(&[2, 3], false)
        .unwrap()
        .matmul(&dygraph::ones_on([16, 4], DType::Float32, Place::Cpu).unwrap())
        .unwrap();
    assert_eq!((z.shape(), z.dtype(), z.place()), (&[8usize, 4][..], DType::Float32, Place::Cpu));
    // Validation still runs: a bad shape is the same typed error as on real data.
    let e = dygraph::matmul(&x, &w, false, false).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");
    // Meta tensors hold nothing to read, and record no autograd node.
    let e = z.to_vec::<f32>().unwrap_err();
    assert!(e.to_string().contains("meta tensor"), "{e}");
    assert!(z.is_leaf());
    // A meta tensor on a GPU place needs no adapter: nothing runs.
    let g = Tensor::meta(vec![2, 5], DType::Float32, Place::Gpu(7));
    let s = g.softmax(-1).unwrap().sum(&[], false).unwrap();
    assert_eq!((s.shape(), s.place()), (&[][..], Place::Gpu(7)));
}

#[test]
fn summary_of_the_seed_mnist_network() {
    let _g = common::generator_lock();
    let net = MnistNet::new().unwrap();
    let s = nn::summary(&net, &[1, 1, 28, 28]).unwrap();
    assert_eq!(s.total_params, 33_580);
    assert_eq!(s.trainable_params, 33_580);
    let names: Vec<&str> = s.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names[..2], ["Conv2D-1", "MaxPool2D-1"]);
    let last = s.rows.last().unwrap();
    assert_eq!(last.output_shape, [1, 10]);
    let conv1 = &s.rows[0];
    assert_eq!(
        (conv1.input_shape.as_slice(), conv1.output_shape.as_slice(), conv1.params),
        (&[1usize, 1, 28, 28][..], &[1usize, 20, 24, 24][..], 520)
    );
    let text = s.to_string();
    for needle in [
        "Layer (type)",
        "Conv2D-2",
        "25,050",
        "Total params: 33,580",
        "Trainable params: 33,580",
        "Non-trainable params: 0",
    ] {
        assert!(text.contains(needle), "summary lacks {needle:?}:\n{text}");
    }
    // The parameters are untouched by the meta forward pass.
    assert!(net.parameters().iter().all(|p| !p.is_meta()));
}

/// A one-layer summary: (rows, output shape of the last row, total parameters).
type LayerRow = (usize, Vec<usize>, usize);

/// `summary` of one layer on `input`.
fn one_layer(layer: &(impl Layer + Forward), input: &[usize]) -> LayerRow {
    let s = nn::summarize(layer, input).unwrap_or_else(|e| panic!("summary failed: {e}"));
    let last = s.rows.last().unwrap_or_else(|| panic!("no row for the layer"));
    (s.rows.len(), last.output_shape.clone(), s.total_params)
}

/// `one_layer` for an int64 input (ids).
fn ids_layer(layer: &(impl Layer + Forward), input: &[usize]) -> LayerRow {
    let s = nn::summarize_with(layer, input, DType::Int64).unwrap_or_else(|e| panic!("summary failed: {e}"));
    let last = s.rows.last().unwrap_or_else(|| panic!("no row for the layer"));
    (s.rows.len(), last.output_shape.clone(), s.total_params)
}

#[test]
fn summary_works_for_every_built_in_layer() {
    let _g = common::generator_lock();
    let img = [2usize, 3, 8, 8];
    let cases: Vec<(&str, LayerRow, Vec<usize>, usize)> = vec![
        ("Conv2D", one_layer(&nn::Conv2D::new(3, 4, 3).unwrap(), &img), vec![2, 4, 6, 6], 4 * 3 * 9 + 4),
        ("Linear", one_layer(&nn::Linear::new(8, 5).unwrap(), &[2, 8]), vec![2, 5], 45),
        ("FC", one_layer(&nn::FC::new(5), &[2, 3, 4]), vec![2, 5], 65),
        ("MaxPool2D", one_layer(&nn::MaxPool2D::new(2), &img), vec![2, 3, 4, 4], 0),
        ("AvgPool2D", one_layer(&nn::AvgPool2D::new(2), &img), vec![2, 3, 4, 4], 0),
        ("AdaptiveAvgPool2D", one_layer(&nn::AdaptiveAvgPool2D::new(1), &img), vec![2, 3, 1, 1], 0),
        ("AdaptiveMaxPool2D", one_layer(&nn::AdaptiveMaxPool2D::new(3), &img), vec![2, 3, 3, 3], 0),
        ("BatchNorm", one_layer(&nn::BatchNorm::new(3).unwrap(), &img), img.to_vec(), 6),
        ("LayerNorm", one_layer(&nn::LayerNorm::new(&[8]).unwrap(), &img), img.to_vec(), 16),
        ("Dropout", one_layer(&nn::Dropout::new(0.5), &img), img.to_vec(), 0),
        ("Embedding", ids_layer(&nn::Embedding::new(10, 4, None).unwrap(), &[2, 3]), vec![2, 3, 4], 40),
        ("Softmax", one_layer(&nn::Softmax::default(), &[2, 3]), vec![2, 3], 0),
        ("Flatten", one_layer(&nn::Flatten::new(1, -1), &img), vec![2, 192], 0),
        ("ReLU", one_layer(&nn::ReLU, &[4]), vec![4], 0),
        ("ReLU6", one_layer(&nn::ReLU6, &[4]), vec![4], 0),
        ("Sigmoid", one_layer(&nn::Sigmoid, &[4]), vec![4], 0),
        ("Tanh", one_layer(&nn::Tanh, &[4]), vec![4], 0),
        ("Silu", one_layer(&nn::Silu, &[4]), vec![4], 0),
        ("LeakyReLU", one_layer(&nn::LeakyReLU::new(0.1), &[4]), vec![4], 0),
        ("GELU", one_layer(&nn::GELU::new(false), &[4]), vec![4], 0),
        ("ELU", one_layer(&nn::ELU::default(), &[4]), vec![4], 0),
    ];
    for (name, (rows, out, params), expected_out, expected_params) in cases {
        assert_eq!(rows, 1, "{name}: one row");
        assert_eq!(out, expected_out, "{name}: output shape");
        assert_eq!(params, expected_params, "{name}: parameters");
    }
    // A container is not a row; its layers are.
    let seq =
        nn::Sequential::new().add(nn::Linear::new(4, 3).unwrap()).add(nn::ReLU).add(nn::Linear::new(3, 2).unwrap());
    let s = nn::summarize(&seq, &[5, 4]).unwrap();
    let names: Vec<&str> = s.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Linear-1", "ReLU-1", "Linear-2"]);
    assert_eq!(s.total_params, 15 + 8);
}
