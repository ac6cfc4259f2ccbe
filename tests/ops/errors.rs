//! Bad input gives a typed `Error` (never a panic) whose message names the op and the
//! offending shapes, dtypes or places; and empty tensors work wherever numpy allows them.

use crate::common;

use common::{gpu_or_skip, places, tensor, values};
use dygraph::{DType, Error, Place, Tensor, apply_elementwise, elementwise_ops};

fn f32s(v: &[f64], shape: &[usize], place: Place) -> Tensor {
    tensor(v, shape, DType::Float32, place)
}

/// Asserts the message names every one of `parts`.
fn names(e: &Error, parts: &[&str]) {
    let m = e.to_string();
    for p in parts {
        assert!(m.contains(p), "message {m:?} does not name {p:?}");
    }
}

#[test]
fn broadcast_mismatch() {
    let _generator = common::generator_lock();
    for place in places() {
        let a = f32s(&[0.0; 6], &[2, 3], place);
        let b = f32s(&[0.0; 4], &[4], place);
        for op in elementwise_ops().iter().filter(|o| o.arity == 2) {
            let e = apply_elementwise(op.name, &[&a, &b], [0.0; 2]).unwrap_err();
            assert!(
                matches!(&e, Error::Broadcast { op: o, lhs, rhs } if *o == op.name && lhs == &[2, 3] && rhs == &[4]),
                "{e}"
            );
            names(&e, &[op.name, "[2, 3]", "[4]", "cannot be broadcast"]);
        }
        let e = a.add(&f32s(&[0.0; 6], &[3, 2], place)).unwrap_err();
        names(&e, &["add", "[2, 3]", "[3, 2]"]);
        let cond = dygraph::to_tensor_on([true, false], place).unwrap();
        let e = dygraph::where_(&cond, &a, &a).unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "where", .. }), "{e}");
        names(&e, &["where", "[2]", "[2, 3]"]);
        let e = a.broadcast_to(&[4, 3]).unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "broadcast_to", .. }), "{e}");
        names(&e, &["[2, 3]", "[4, 3]"]);
        // The operator form panics with the same message.
        let msg = common::catch("a + b", || drop(&a + &b)).expect("a + b must panic");
        assert!(msg.contains("add: shapes [2, 3] and [4] cannot be broadcast together"), "{msg}");
    }
}

#[test]
fn matmul_inner_dimension_mismatch() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = f32s(&[0.0; 6], &[2, 3], place);
        let y = f32s(&[0.0; 8], &[4, 2], place);
        let e = dygraph::matmul(&x, &y, false, false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");
        names(&e, &["matmul", "[2, 3]", "[4, 2]", "K=3", "K=4"]);
        let e = dygraph::matmul(&x, &y, true, false).unwrap_err();
        names(&e, &["matmul", "[2, 3]", "[4, 2]", "transpose_x=true", "transpose_y=false", "K=2", "K=4"]);
        let e = dygraph::linear(&x, &y, None).unwrap_err();
        names(&e, &["matmul", "[2, 3]", "[4, 2]"]);
        let v = f32s(&[0.0; 5], &[5], place);
        let e = dygraph::matmul(&x, &v, false, false).unwrap_err();
        names(&e, &["matmul", "[2, 3]", "[5]"]);
    }
}

#[test]
fn axis_out_of_range() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = f32s(&[0.0; 6], &[2, 3], place);
        let cases: Vec<(&str, isize, dygraph::Result<Tensor>)> = vec![
            ("sum", 2, x.sum(&[2], false)),
            ("mean", -3, x.mean(&[-3], false)),
            ("max", 5, x.max(&[0, 5], false)),
            ("argmax", 2, x.argmax(Some(2), false)),
            ("argmin", -3, x.argmin(Some(-3), false)),
            ("logsumexp", 2, x.logsumexp(&[2], false)),
            ("var", -3, x.var(&[-3], true, false)),
            ("std", 2, x.std(&[2], true, false)),
            ("concat", 2, dygraph::concat(&[x.clone(), x.clone()], 2)),
            ("stack", 4, dygraph::stack(&[x.clone(), x.clone()], 4)),
            ("flatten", 3, x.flatten(0, 3)),
            ("squeeze", -4, x.squeeze(&[-4])),
            ("unsqueeze", 3, x.unsqueeze(&[3])),
            ("slice", 2, x.slice(&[2], &[0], &[1])),
            ("flip", 2, x.flip(&[2])),
        ];
        for (op, axis, r) in cases {
            let e = r.unwrap_err();
            assert!(matches!(&e, Error::Axis { op: o, axis: a, .. } if *o == op && *a == axis), "{op}: {e}");
            names(&e, &[op, &format!("axis {axis}"), "out of range"]);
        }
        let e = x.split(2, 2).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "split", .. }), "{e}");
        let e = x.sum(&[1, -1], false).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "sum", .. }), "duplicate axis: {e}");
        names(&e, &["sum", "twice"]);
        let s = f32s(&[1.0], &[], place);
        let e = s.sum(&[0], false).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "sum", rank: 0, .. }), "a 0-d tensor has no axis 0: {e}");
    }
}

#[test]
fn dtype_mismatch_and_unsupported_dtypes() {
    let _generator = common::generator_lock();
    for place in places() {
        let f = f32s(&[1.0, 2.0], &[2], place);
        let i = f.cast(DType::Int64).unwrap();
        let i32t = f.cast(DType::Int32).unwrap();
        let h = f.cast(DType::Float16).unwrap();
        let e = f.add(&i).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "add", lhs: DType::Float32, rhs: DType::Int64 }), "{e}");
        names(&e, &["add", "float32", "int64"]);
        let e = i.multiply(&i32t).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "multiply", .. }), "{e}");
        names(&e, &["multiply", "int64", "int32"]);
        let e = dygraph::matmul(&f, &h, false, false).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "matmul", .. }), "{e}");
        names(&e, &["matmul", "float32", "float16"]);
        let e = dygraph::concat(&[f.clone(), i.clone()], 0).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "concat", .. }), "{e}");
        let cond = dygraph::to_tensor_on([true, false], place).unwrap();
        let e = dygraph::where_(&cond, &f, &i).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "where", .. }), "{e}");
        let e = dygraph::where_(&i, &f, &f).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "where", dtype: DType::Int64, .. }), "{e}");
        names(&e, &["where", "int64", "bool"]);
        let e = i.sqrt().unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "sqrt", dtype: DType::Int64, .. }), "{e}");
        names(&e, &["sqrt", "int64"]);
        let e = cond.add(&cond).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "add", dtype: DType::Bool, .. }), "{e}");
        let e = i.mean(&[], false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "mean", dtype: DType::Int64, .. }), "{e}");
        let e = f.to_vec::<i32>().unwrap_err();
        names(&e, &["to_vec", "float32", "int32"]);
        let e = "float8".parse::<DType>().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "dtype", .. }), "{e}");
        names(&e, &["float8"]);
        assert_eq!("int64".parse::<DType>().unwrap(), DType::Int64);
    }
}

#[test]
fn place_mismatch() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let c = f32s(&[1.0, 2.0], &[2], Place::Cpu);
    let d = f32s(&[1.0, 2.0], &[2], g);
    let e = c.add(&d).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "add", lhs: Place::Cpu, rhs: Place::Gpu(0) }), "{e}");
    names(&e, &["add", "CPUPlace", "GPUPlace(0)"]);
    let e = d.less_than(&c).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "less_than", lhs: Place::Gpu(0), rhs: Place::Cpu }), "{e}");
    let e = dygraph::matmul(&c, &d, false, false).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "matmul", .. }), "{e}");
    let e = dygraph::concat(&[c.clone(), d.clone()], 0).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "concat", .. }), "{e}");
    let cond = dygraph::to_tensor_on([true, false], Place::Cpu).unwrap();
    let e = dygraph::where_(&cond, &d, &d).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "where", .. }), "{e}");
    let e = c.assign_(&d).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "assign_", .. }), "{e}");
    let e = dygraph::add_n(&[c.clone(), d.clone()]).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "add_n", .. }), "{e}");
    let i = c.cast(DType::Int64).unwrap();
    let e = i.logical_and(&d.cast(DType::Int64).unwrap()).unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { op: "logical_and", .. }), "{e}");
    let msg = common::catch("c * d", || drop(&c * &d)).expect("mixing places must panic in an operator");
    assert!(msg.contains("multiply: tensors are on different places: CPUPlace and GPUPlace(0)"), "{msg}");
}

#[test]
fn negative_and_overflowing_dimensions() {
    let _generator = common::generator_lock();
    for place in places() {
        let cases: Vec<(&str, dygraph::Result<Tensor>)> = vec![
            ("zeros", dygraph::zeros_on([2i64, -3], DType::Float32, place)),
            ("ones", dygraph::ones_on(vec![-1i32], DType::Int64, place)),
            ("full", dygraph::full_on([-5isize], 1.0, DType::Float32, place)),
            ("from_vec", Tensor::from_vec_on(vec![1.0f32], [-1i64], place)),
            ("reshape", f32s(&[1.0; 4], &[4], place).reshape([-2i64, -2])),
        ];
        for (op, r) in cases {
            let e = r.unwrap_err();
            assert!(matches!(&e, Error::InvalidArgument { op: o, .. } if *o == op), "{op}: {e}");
            names(&e, &[op, "negative dimension"]);
        }
        let x = f32s(&[1.0; 4], &[2, 2], place);
        let e = dygraph::reshape(&x, &[2, -3]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "reshape", .. }), "{e}");
        names(&e, &["reshape", "-3"]);
        let e = x.expand(&[2, -2]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "expand", .. }), "{e}");
        names(&e, &["expand", "-2"]);
        // Element counts past the address space are errors, not overflow panics.
        let huge = 1usize << (usize::BITS / 2 + 2);
        let e = dygraph::zeros_on([huge, huge], DType::Float32, place).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "zeros", .. }), "{e}");
        let e = dygraph::reshape(&x, &[huge as i64, huge as i64, 0]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
        let e = f32s(&[1.0], &[1, 1], place).expand(&[huge as i64, huge as i64]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "broadcast_to", .. }), "{e}");
    }
}

#[test]
fn float64_on_the_gpu() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let cases: Vec<(&str, dygraph::Result<Tensor>)> = vec![
        ("to_tensor", dygraph::to_tensor_on(vec![1.0f64, 2.0], g)),
        ("to_tensor", Tensor::from_vec_on(vec![1.0f64], [1], g)),
        ("zeros", dygraph::zeros_on([2], DType::Float64, g)),
        ("full", dygraph::full_on([2], 1.5, DType::Float64, g)),
        ("cast", f32s(&[1.0], &[1], g).cast(DType::Float64)),
        ("to", tensor(&[1.0], &[1], DType::Float64, Place::Cpu).to(g)),
        ("arange", dygraph::guard(g, || dygraph::arange(0.0, 3.0, 1.0, DType::Float64))),
    ];
    for (op, r) in cases {
        let e = r.unwrap_err();
        assert!(matches!(&e, Error::UnsupportedDType { dtype: DType::Float64, .. }), "{op}: {e}");
        names(&e, &["float64", "GPUPlace(0)"]);
        if op != "arange" {
            assert!(e.to_string().starts_with(op), "{e} should name {op}");
        }
    }
}

#[test]
fn tensors_over_the_device_limit() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let limit = dygraph::gpu_info(0).unwrap().max_binding_bytes;
    assert!(limit > 0);
    // Allocated on the device only: nothing of this size ever exists on the host.
    let n = (limit / 4 + 1) as usize;
    let e = dygraph::zeros_on([n], DType::Float32, g).unwrap_err();
    match &e {
        Error::DeviceLimit { op, requested, limit: l, limit_name, .. } => {
            assert_eq!((*op, *l, *limit_name), ("zeros", limit, "max_storage_buffer_binding_size"));
            assert!(*requested > limit);
        }
        other => panic!("expected DeviceLimit, got {other}"),
    }
    names(&e, &["zeros", "max_storage_buffer_binding_size", &limit.to_string()]);
    let e = dygraph::full_on([n / 2 + 1, 2], 1i64, DType::Int64, g).unwrap_err();
    assert!(matches!(e, Error::DeviceLimit { op: "full", .. }), "{e}");
    // Small operands whose broadcast result or product is over the limit.
    let side = ((limit / 4) as f64).sqrt() as usize + 2;
    let col = dygraph::ones_on([side, 1], DType::Float32, g).unwrap();
    let row = dygraph::ones_on([1, side], DType::Float32, g).unwrap();
    let e = col.add(&row).unwrap_err();
    assert!(matches!(e, Error::DeviceLimit { op: "add", .. }), "{e}");
    names(&e, &["add", "max_storage_buffer_binding_size"]);
    let e = dygraph::matmul(&col, &row, false, false).unwrap_err();
    assert!(matches!(e, Error::DeviceLimit { op: "matmul", .. }), "{e}");
    let e = col.expand(&[side as i64, side as i64]).unwrap_err();
    assert!(matches!(e, Error::DeviceLimit { .. }), "{e}");
    // The device is still usable afterwards.
    dygraph::sync().unwrap();
    assert_eq!(values(&col.slice(&[0], &[0], &[2]).unwrap().scale(3.0, 0.0).unwrap()), [3.0, 3.0]);
}

#[test]
fn other_bad_input() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2], place);
        let e = x.item::<f32>().unwrap_err();
        assert!(matches!(e, Error::Shape { op: "item", .. }), "{e}");
        names(&e, &["item", "[2, 2]"]);
        let e = dygraph::arange(0, 4, 0, DType::Int64).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "arange", .. }), "{e}");
        let e = apply_elementwise("no_such_op", &[&x], [0.0; 2]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "apply_elementwise", .. }), "{e}");
        let e = apply_elementwise("add", &[&x], [0.0; 2]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        // Autograd misuse.
        let e = x.sum(&[], false).unwrap().backward().unwrap_err();
        assert!(matches!(e, Error::Autograd(_)), "stop_gradient=True: {e}");
        let y = x.clone_data().unwrap();
        y.set_stop_gradient(false);
        let e = y.square().unwrap().backward().unwrap_err();
        assert!(matches!(e, Error::Autograd(_)), "{e}");
        names(&e, &["[2, 2]"]);
    }
    let e = "tpu".parse::<Place>().unwrap_err();
    assert!(matches!(e, Error::Device(_)), "{e}");
    names(&e, &["tpu"]);
    let n = dygraph::gpu_count();
    let e = dygraph::gpu_info(n + 3).unwrap_err();
    assert!(matches!(e, Error::Device(_)), "{e}");
    names(&e, &[&format!("gpu:{}", n + 3)]);
    let e = dygraph::zeros_on([2], DType::Float32, Place::Gpu(n + 3)).unwrap_err();
    assert!(matches!(e, Error::Device(_)), "{e}");
}

#[test]
fn empty_tensors_work_where_numpy_allows() {
    let _generator = common::generator_lock();
    for place in places() {
        let at = format!("on {place}");
        let e = f32s(&[], &[0, 3], place);
        let s = e.sum(&[], false).unwrap();
        assert_eq!((s.shape(), values(&s)), (&[][..], vec![0.0]), "sum of empty {at}");
        let a = e.add(&e).unwrap();
        assert_eq!(a.shape(), [0, 3], "add of [0, 3] tensors {at}");
        assert_eq!(e.add(&f32s(&[1.0, 2.0, 3.0], &[3], place)).unwrap().shape(), [0, 3], "[0, 3] + [3] {at}");
        assert_eq!(e.multiply(&f32s(&[1.0], &[], place)).unwrap().shape(), [0, 3]);
        assert_eq!(e.exp().unwrap().shape(), [0, 3]);
        assert_eq!(e.cast(DType::Int64).unwrap().shape(), [0, 3]);
        assert_eq!(e.transpose(&[1, 0]).unwrap().shape(), [3, 0]);
        assert_eq!(dygraph::reshape(&e, &[0, 1, 5, 3]).unwrap().shape(), [0, 1, 5, 3]);
        assert_eq!(dygraph::reshape(&e, &[-1, 3]).unwrap().shape(), [0, 3]);
        assert_eq!(e.flip(&[0, 1]).unwrap().shape(), [0, 3]);
        assert_eq!(dygraph::pad(&e, &[1, 1, 0, 0], 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0; 6]);
        assert_eq!(dygraph::concat(&[e.clone(), f32s(&[1.0, 2.0, 3.0], &[1, 3], place)], 0).unwrap().shape(), [1, 3]);
        assert_eq!(e.max(&[1], false).unwrap().shape(), [0]);
        assert!(values(&e.mean(&[], false).unwrap())[0].is_nan(), "mean of empty is NaN {at}");
        let z = dygraph::matmul(&f32s(&[], &[2, 0], place), &f32s(&[], &[0, 3], place), false, false).unwrap();
        assert_eq!((z.shape(), values(&z)), (&[2usize, 3][..], vec![0.0; 6]), "matmul with K = 0 gives zeros {at}");
        // Also into a reused pooled GPU buffer that held other values.
        drop(f32s(&[7.0; 12], &[3, 4], place));
        let z = dygraph::matmul(&f32s(&[], &[3, 0], place), &f32s(&[], &[0, 4], place), false, false).unwrap();
        assert_eq!((z.shape(), values(&z)), (&[3usize, 4][..], vec![0.0; 12]), "K = 0 after junk {at}");
        let z = dygraph::matmul(&e, &f32s(&[0.0; 6], &[3, 2], place), false, false).unwrap();
        assert_eq!(z.shape(), [0, 2], "matmul with M = 0 {at}");
        let z = dygraph::matmul(&f32s(&[], &[0], place), &f32s(&[], &[0], place), false, false).unwrap();
        assert_eq!((z.shape(), values(&z)), (&[][..], vec![0.0]), "dot of empty vectors {at}");
        // Gradients through empty tensors.
        let w = f32s(&[], &[0, 3], place);
        w.set_stop_gradient(false);
        w.exp().unwrap().sum(&[], false).unwrap().backward().unwrap();
        assert_eq!(w.grad().unwrap().shape(), [0, 3]);
        let err = e.max(&[], false).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "max", .. }), "max of empty has no identity: {err}");
        names(&err, &["max", "[0, 3]"]);
    }
}

#[test]
fn reduction_errors() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = f32s(&[1.0; 6], &[2, 3], place);
        let e = x.sum(&[2], false).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "sum", axis: 2, rank: 2, .. }), "{e}");
        names(&e, &["sum", "[2, 3]"]);
        let e = x.max(&[0, -2], false).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "max", .. }), "duplicate axis: {e}");
        names(&e, &["max", "twice"]);
        let i = Tensor::from_vec_on(vec![1i64, 2], [2], place).unwrap();
        let e = i.logsumexp(&[], false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "logsumexp", dtype: DType::Int64, .. }), "{e}");
        let e = i.var(&[], true, false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "var", dtype: DType::Int64, .. }), "{e}");
        let e = i.std(&[], true, false).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "std", dtype: DType::Int64, .. }), "{e}");
        let e = dygraph::add_n(&[]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "add_n", .. }), "{e}");
        let e = dygraph::add_n(&[x.clone(), f32s(&[1.0; 3], &[3], place)]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "add_n", .. }), "{e}");
        names(&e, &["add_n", "[3]", "[2, 3]"]);
        // No identity: max over a zero-length axis, argmax over an empty axis.
        let empty = f32s(&[], &[0, 3], place);
        let e = empty.max(&[0], false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "max", .. }), "{e}");
        names(&e, &["max", "[0, 3]"]);
        let e = empty.min(&[0], false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "min", .. }), "{e}");
        let e = empty.argmax(Some(0), false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "argmax", .. }), "{e}");
        let e = empty.argmin(Some(0), false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "argmin", .. }), "{e}");
    }
}

#[test]
fn shape_op_errors() {
    let _generator = common::generator_lock();
    let iota = |n: usize| (0..n).map(|i| i as f64).collect::<Vec<f64>>();
    for place in places() {
        let x = f32s(&iota(6), &[2, 3], place);
        let msg = |e: &Error| e.to_string();

        let e = dygraph::reshape(&x, &[4, 2]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
        names(&e, &["reshape", "[2, 3]", "[4, 2]"]);
        let e = dygraph::reshape(&x, &[-1, -1]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }), "{e}");
        let e = dygraph::reshape(&x, &[-1, 4]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "reshape", .. }) && msg(&e).contains("[2, 3]"), "{e}");
        let e = dygraph::reshape(&x, &[-2, 3]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "reshape", .. }), "{e}");
        let e = x.reshape([-1i64, 3]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "reshape", .. }), "{e}");

        let y = f32s(&iota(4), &[2, 2], place);
        let e = dygraph::concat(&[x.clone(), y.clone()], 0).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "concat", .. }), "{e}");
        names(&e, &["concat", "[2, 2]", "[2, 3]"]);
        let e = dygraph::concat(&[], 0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "concat", .. }), "{e}");
        let e = dygraph::stack(&[x.clone(), y.clone()], 0).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "stack", .. }), "{e}");

        let a = f32s(&iota(12), &[3, 4], place);
        let b = f32s(&iota(15), &[3, 5], place);
        let e = dygraph::matmul(&a, &b, false, false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");
        names(&e, &["matmul", "[3, 4]", "[3, 5]"]);
        let e = dygraph::matmul(&f32s(&iota(3), &[3], place), &f32s(&iota(4), &[4], place), false, false).unwrap_err();
        names(&e, &["[3]", "[4]"]);
        let e = dygraph::matmul(&f32s(&iota(24), &[2, 3, 4], place), &f32s(&iota(60), &[3, 4, 5], place), false, false)
            .unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "matmul", .. }), "batch dims 2 vs 3: {e}");
        let ai = a.cast(DType::Int64).unwrap();
        let e = dygraph::matmul(&ai, &ai, false, true).unwrap_err();
        assert!(matches!(e, Error::UnsupportedDType { op: "matmul", dtype: DType::Int64, .. }), "{e}");
        let e = dygraph::matmul(&f32s(&[1.0], &[], place), &a, false, false).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "matmul", .. }), "{e}");

        let t3 = f32s(&iota(24), &[2, 3, 4], place);
        for perm in [&[0usize, 1][..], &[0, 1, 1], &[0, 1, 3], &[2, 1, 0, 3]] {
            let e = t3.transpose(perm).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { op: "transpose", .. }), "{perm:?}: {e}");
            names(&e, &[&format!("{perm:?}"), "[2, 3, 4]"]);
        }

        let e = x.squeeze(&[2]).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "squeeze", .. }), "{e}");
        let e = x.unsqueeze(&[4]).unwrap_err();
        assert!(matches!(e, Error::Axis { op: "unsqueeze", .. }), "{e}");
        let e = x.unsqueeze(&[0, 0]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "unsqueeze", .. }), "{e}");
        let e = x.flatten(1, 0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "flatten", .. }), "{e}");
        let e = x.split(2, 1).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "split", .. }), "{e}");
        let e = x.split([1, 1], 1).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "split", .. }), "{e}");
        let e = x.split([-1, -1], 1).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "split", .. }), "{e}");
        let e = x.split(0, 1).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "split", .. }), "{e}");
        let e = x.broadcast_to(&[1, 3]).unwrap_err();
        assert!(matches!(e, Error::Broadcast { op: "broadcast_to", .. }), "broadcasting down is an error: {e}");
        let e = x.expand(&[3]).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "expand", .. }), "{e}");
        let e = dygraph::strided_slice(&x, &[0], &[0], &[1], &[0]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "slice", .. }), "step 0: {e}");
        let e = x.slice(&[0, 1], &[0], &[1]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "slice", .. }), "{e}");
        let e = dygraph::pad(&x, &[1, 1, 1], 0.0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "pad", .. }), "{e}");
    }
}

#[test]
fn softmax_axis_errors() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = f32s(&[1.0; 6], &[2, 3], place);
        let e = dygraph::softmax(&x, 2).unwrap_err();
        assert!(matches!(e, Error::Axis { axis: 2, rank: 2, .. }), "{e}");
        names(&e, &["softmax", "[2, 3]"]);
        let e = x.log_softmax(-3).unwrap_err();
        assert!(matches!(e, Error::Axis { .. }), "{e}");
        names(&e, &["log_softmax"]);
        let e = f32s(&[1.0], &[], place).softmax(1).unwrap_err();
        assert!(matches!(e, Error::Axis { .. }), "{e}");
        names(&e, &["softmax"]);
    }
}

fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    tensor(v, shape, DType::Float64, Place::Cpu)
}

#[test]
fn layer_norm_errors() {
    let _generator = common::generator_lock();
    let x = f64s(&[0.0; 24], &[2, 3, 4]);
    let named = |e: &Error, parts: &[&str]| names(e, &[&["layer_norm"][..], parts].concat());
    for ns in [&[3usize][..], &[4, 3], &[], &[1, 2, 3, 4]] {
        let e = dygraph::layer_norm(&x, ns, None, None, 1e-5).unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{e}");
        named(&e, &[&format!("{ns:?}"), "[2, 3, 4]"]);
    }
    let w = f64s(&[1.0; 3], &[3]);
    let e = dygraph::layer_norm(&x, &[4], Some(&w), None, 1e-5).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    named(&e, &["weight", "[3]", "[4]"]);
    let e = dygraph::layer_norm(&x, &[3, 4], None, Some(&f64s(&[0.0; 4], &[4])), 1e-5).unwrap_err();
    named(&e, &["bias", "[4]", "[3, 4]"]);
    let w32 = tensor(&[1.0; 4], &[4], DType::Float32, Place::Cpu);
    let e = dygraph::layer_norm(&x, &[4], Some(&w32), None, 1e-5).unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    named(&e, &[]);
    let e = dygraph::layer_norm(&x, &[4], None, None, -1.0).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    named(&e, &["epsilon"]);
    if let Some(g) = gpu_or_skip() {
        let xg = tensor(&[0.0; 8], &[2, 4], DType::Float32, g);
        let e = dygraph::layer_norm(&xg, &[4], Some(&w32), None, 1e-5).unwrap_err();
        assert!(matches!(e, Error::PlaceMismatch { .. }), "{e}");
        named(&e, &[]);
    }
}

#[test]
fn batch_norm_errors() {
    let _generator = common::generator_lock();
    let named = |e: &Error, parts: &[&str]| names(e, &[&["batch_norm"][..], parts].concat());
    let x = f64s(&[0.0; 24], &[2, 3, 4]);
    let (rm, rv) = (f64s(&[0.0; 3], &[3]), f64s(&[1.0; 3], &[3]));
    let opts = dygraph::BatchNormOptions::default();
    let e = dygraph::batch_norm(&f64s(&[0.0; 3], &[3]), &rm, &rv, None, None, &opts).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "rank below 2: {e}");
    named(&e, &["[3]", "rank"]);
    let four = f64s(&[1.0; 4], &[4]);
    for (name, args) in [
        ("running_mean", (&four, &rv, None, None)),
        ("running_var", (&rm, &four, None, None)),
        ("weight", (&rm, &rv, Some(&four), None)),
        ("bias", (&rm, &rv, None, Some(&four))),
    ] {
        let e = dygraph::batch_norm(&x, args.0, args.1, args.2, args.3, &opts).unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{name}: {e}");
        named(&e, &[name, "[4]", "[3]", "[2, 3, 4]"]);
    }
    let e = dygraph::batch_norm(&x, &rm, &rv, Some(&f64s(&[1.0; 3], &[1, 3])), None, &opts).unwrap_err();
    named(&e, &["weight", "[1, 3]"]);
    let w32 = tensor(&[1.0; 3], &[3], DType::Float32, Place::Cpu);
    let e = dygraph::batch_norm(&x, &rm, &rv, Some(&w32), None, &opts).unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    named(&e, &[]);
    let bad = dygraph::BatchNormOptions { epsilon: f64::NAN, ..opts };
    let e = dygraph::batch_norm(&x, &rm, &rv, None, None, &bad).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    named(&e, &["epsilon"]);
    let bad = dygraph::BatchNormOptions { momentum: 1.5, ..opts };
    named(&dygraph::batch_norm(&x, &rm, &rv, None, None, &bad).unwrap_err(), &["momentum"]);
    let train = dygraph::BatchNormOptions { training: true, ..opts };
    let e = dygraph::batch_norm(&f64s(&[], &[0, 3, 4]), &rm, &rv, None, None, &train).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "batch statistics of an empty batch: {e}");
    named(&e, &["[0, 3, 4]"]);
    if let Some(g) = gpu_or_skip() {
        let xg = tensor(&[0.0; 24], &[2, 3, 4], DType::Float32, g);
        let e = dygraph::batch_norm(&xg, &rm, &rv, None, None, &opts).unwrap_err();
        assert!(matches!(e, Error::PlaceMismatch { .. }), "running statistics on another place: {e}");
        named(&e, &[]);
    }
}

#[test]
fn pool_errors() {
    let _generator = common::generator_lock();
    use dygraph::{Padding, Pool2dOptions};
    let x = f64s(&[0.0; 2 * 3 * 5 * 5], &[2, 3, 5, 5]);
    let rank3 = f64s(&[0.0; 75], &[3, 5, 5]);
    let p = Pool2dOptions::new;
    let check = |r: dygraph::Result<Tensor>, op: &str, shape: bool| {
        let e = match r {
            Ok(t) => panic!("{op}: expected an error, got a tensor of shape {:?}", t.shape()),
            Err(e) => e,
        };
        if shape {
            assert!(matches!(e, Error::Shape { .. }), "{e}");
        } else {
            assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        }
        names(&e, &[op]);
    };
    check(dygraph::max_pool2d(&rank3, &p(2)), "max_pool2d", true);
    check(dygraph::avg_pool2d(&rank3, &p(2)), "avg_pool2d", true);
    check(dygraph::max_pool2d(&x, &p(6)), "max_pool2d", true);
    check(dygraph::adaptive_avg_pool2d(&f64s(&[0.0; 5], &[5]), 2), "adaptive_avg_pool2d", true);
    check(dygraph::max_pool2d(&x, &p(0)), "max_pool2d", false);
    check(dygraph::max_pool2d(&x, &p(2).stride(0)), "max_pool2d", false);
    check(dygraph::avg_pool2d(&x, &p(2).padding(2)), "avg_pool2d", false);
    check(dygraph::max_pool2d(&x, &p(2).padding(Padding::Valid).ceil_mode(true)), "max_pool2d", false);
    check(dygraph::adaptive_max_pool2d(&x, [0, 2]), "adaptive_max_pool2d", false);
    let nhwc = Pool2dOptions { data_format: "NHWC".into(), ..p(2) };
    check(dygraph::max_pool2d(&x, &nhwc), "max_pool2d", false);
    check(dygraph::max_pool2d_with_index(&rank3, &p(2)).map(|r| r.0), "max_pool2d_with_index", true);
}
