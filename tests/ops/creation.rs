//! Creating tensors (to_tensor, from_vec, constants, ranges), casting between every dtype
//! pair, moving between places, assign_, and every readback form.

use crate::common;

use common::{gpu_or_skip, places, values};
use dygraph::{DType, Error, NdArray, Place, Tensor};
use half::{bf16, f16};

/// Every dtype a place can hold.
fn dtypes_on(place: Place) -> Vec<DType> {
    DType::ALL.iter().copied().filter(|&d| !(place.is_gpu() && d == DType::Float64)).collect()
}

fn parts(t: &Tensor) -> (Vec<usize>, DType, Place, Vec<f64>) {
    (t.shape().to_vec(), t.dtype(), t.place(), values(t))
}

#[test]
#[allow(clippy::needless_borrows_for_generic_args)] // the borrowed forms are under test
fn to_tensor_of_host_data() {
    let _generator = common::generator_lock();
    for place in places() {
        let t = dygraph::to_tensor_on(3.5f32, place).unwrap();
        assert_eq!(parts(&t), (vec![], DType::Float32, place, vec![3.5]), "scalar on {place}");
        assert!(t.stop_gradient(), "to_tensor gives stop_gradient=True");
        let t = dygraph::to_tensor_on(&[1i64, 2, 3][..], place).unwrap();
        assert_eq!(parts(&t), (vec![3], DType::Int64, place, vec![1.0, 2.0, 3.0]), "slice on {place}");
        let t = dygraph::to_tensor_on([1.5f32, 2.5], place).unwrap();
        assert_eq!(parts(&t), (vec![2], DType::Float32, place, vec![1.5, 2.5]), "array on {place}");
        let t = dygraph::to_tensor_on(&[[1i32, 2, 3], [4, 5, 6]], place).unwrap();
        assert_eq!(parts(&t), (vec![2, 3], DType::Int32, place, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), "2-D on {place}");
        let t = dygraph::to_tensor_on([[1.0f32], [2.0]], place).unwrap();
        assert_eq!(t.shape(), [2, 1]);
        let t = dygraph::to_tensor_on(
            &[[[1.0f32, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]], [[9.0, 10.0], [11.0, 12.0]]],
            place,
        )
        .unwrap();
        assert_eq!(t.shape(), [3, 2, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap(), (1..=12).map(|i| i as f32).collect::<Vec<_>>());
        let t = dygraph::to_tensor_on(vec![vec![1i32, 2, 3], vec![4, 5, 6]], place).unwrap();
        assert_eq!(
            (t.shape(), t.to_vec::<i32>().unwrap()),
            (&[2usize, 3][..], vec![1, 2, 3, 4, 5, 6]),
            "Vec<Vec> on {place}"
        );
        let rows = [vec![true, false], vec![false, true]];
        let t = dygraph::to_tensor_on(&rows[..], place).unwrap();
        assert_eq!((t.dtype(), t.to_vec::<bool>().unwrap()), (DType::Bool, vec![true, false, false, true]));
        let t = dygraph::to_tensor_on(vec![1.0f64, 2.0], place);
        if place.is_gpu() {
            let e = t.unwrap_err();
            assert!(matches!(e, Error::UnsupportedDType { dtype: DType::Float64, .. }), "{e}");
        } else {
            assert_eq!(t.unwrap().dtype(), DType::Float64);
        }
        let v = vec![f16::from_f32(0.5), f16::from_f32(-2.0)];
        let t = dygraph::to_tensor_on(&v, place).unwrap();
        assert_eq!((t.dtype(), t.to_vec::<f16>().unwrap()), (DType::Float16, v.clone()), "float16 on {place}");
        let v = vec![bf16::from_f32(0.5), bf16::from_f32(-3.0e38), bf16::from_f32(1.0e-38)];
        let t = dygraph::to_tensor_on(&v, place).unwrap();
        assert_eq!((t.dtype(), t.to_vec::<bf16>().unwrap()), (DType::BFloat16, v.clone()), "bfloat16 on {place}");
        let t = dygraph::to_tensor_on(Vec::<f32>::new(), place).unwrap();
        assert_eq!((t.shape(), t.numel(), t.is_empty()), (&[0usize][..], 0, true));
        let t = dygraph::to_tensor_on(Vec::<Vec<i64>>::new(), place).unwrap();
        assert_eq!(t.shape(), [0, 0]);
        let t = dygraph::to_tensor_on(NdArray { data: vec![1i64, 2, 3, 4, 5, 6], shape: vec![3, 2] }, place).unwrap();
        assert_eq!((t.shape(), t.dtype()), (&[3usize, 2][..], DType::Int64));

        // Ragged nested data and a mis-sized NdArray are errors naming to_tensor.
        let e = dygraph::to_tensor_on(vec![vec![1i32, 2, 3], vec![4, 5]], place).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "to_tensor", .. }), "{e}");
        assert!(e.to_string().contains("ragged") && e.to_string().contains("row 1"), "{e}");
        let e = dygraph::to_tensor_on(NdArray { data: vec![1i64, 2, 3], shape: vec![2, 2] }, place).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "to_tensor", .. }), "{e}");
    }
    // Without a place: the current place (guard overrides it on this thread).
    let t = dygraph::to_tensor([1.0f32, 2.0]).unwrap();
    assert_eq!(t.place(), dygraph::current_place().unwrap());
    if let Some(g) = gpu_or_skip() {
        let t = dygraph::guard(g, || dygraph::to_tensor([1.0f32, 2.0]).unwrap());
        assert_eq!(t.place(), g);
        let t = dygraph::guard(Place::Cpu, || Tensor::from_vec(vec![1i32, 2], [2]).unwrap());
        assert_eq!(t.place(), Place::Cpu);
    }
}

#[test]
fn from_vec_and_shapes() {
    let _generator = common::generator_lock();
    for place in places() {
        let t = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], place).unwrap();
        assert_eq!((t.shape(), t.ndim(), t.numel()), (&[2usize, 3][..], 2, 6));
        let t = Tensor::from_vec_on(vec![7i64], [0usize; 0], place).unwrap();
        assert_eq!((t.shape(), t.item::<i64>().unwrap()), (&[][..], 7));
        let t = Tensor::from_vec_on(vec![1i32; 4], vec![2i64, 2], place).unwrap();
        assert_eq!(t.shape(), [2, 2]);
        let t = Tensor::from_vec_on(Vec::<f32>::new(), [3, 0], place).unwrap();
        assert_eq!((t.shape(), t.numel()), (&[3usize, 0][..], 0));

        let e = Tensor::from_vec_on(vec![1.0f32; 5], [2, 3], place).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "from_vec", .. }), "{e}");
        assert!(e.to_string().contains("5 elements") && e.to_string().contains("[2, 3]"), "{e}");
        let e = Tensor::from_vec_on(vec![1.0f32; 6], [-2i64, -3], place).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "from_vec", .. }), "{e}");
        assert!(e.to_string().contains("negative dimension -2"), "{e}");
        for (name, e) in [
            ("zeros", dygraph::zeros_on([2i32, -1], DType::Float32, place).unwrap_err()),
            ("ones", dygraph::ones_on(vec![-4isize], DType::Int64, place).unwrap_err()),
            ("full", dygraph::full_on([-1i64], 1.0, DType::Float32, place).unwrap_err()),
        ] {
            assert!(matches!(&e, Error::InvalidArgument { op, .. } if *op == name), "{name}: {e}");
            assert!(e.to_string().starts_with(name) && e.to_string().contains("negative dimension"), "{e}");
        }
    }
}

#[test]
fn constants_on_every_place_and_dtype() {
    let _generator = common::generator_lock();
    for place in places() {
        for dtype in dtypes_on(place) {
            let at = format!("{dtype} on {place}");
            let z = dygraph::zeros_on([2, 3], dtype, place).unwrap();
            assert_eq!(parts(&z), (vec![2, 3], dtype, place, vec![0.0; 6]), "zeros {at}");
            let o = dygraph::ones_on([3], dtype, place).unwrap();
            assert_eq!(parts(&o), (vec![3], dtype, place, vec![1.0; 3]), "ones {at}");
            let (value, expected) = match dtype {
                DType::Bool => (dygraph::Scalar::Bool(true), 1.0),
                DType::Int32 => (dygraph::Scalar::Int(-123_456), -123_456.0),
                DType::Int64 => (dygraph::Scalar::Int(-5_000_000_000), -5_000_000_000.0),
                DType::Float16 => (dygraph::Scalar::Float(0.1), f16::from_f64(0.1).to_f64()),
                // 0.1 is 0x3dcccccd as a float32; rounded to 8 bits of mantissa, 0x3dcd.
                DType::BFloat16 => (dygraph::Scalar::Float(0.1), f32::from_bits(0x3dcd_0000) as f64),
                _ => (dygraph::Scalar::Float(0.1), 0.1f32 as f64),
            };
            let expected = if dtype == DType::Float64 { 0.1 } else { expected };
            let f = dygraph::full_on([5], value, dtype, place).unwrap();
            assert_eq!(parts(&f), (vec![5], dtype, place, vec![expected; 5]), "full {at}");
            // An odd count exercises the packed float16 tail word.
            let f = dygraph::full_on([3, 3], value, dtype, place).unwrap();
            assert_eq!(values(&f), vec![expected; 9], "full [3, 3] {at}");
            let zl = dygraph::zeros_like(&f).unwrap();
            assert_eq!(parts(&zl), (vec![3, 3], dtype, place, vec![0.0; 9]), "zeros_like {at}");
            let ol = dygraph::ones_like(&f).unwrap();
            assert_eq!(parts(&ol), (vec![3, 3], dtype, place, vec![1.0; 9]), "ones_like {at}");
            let fl = dygraph::full_like(&f, 1i64).unwrap();
            assert_eq!(parts(&fl), (vec![3, 3], dtype, place, vec![1.0; 9]), "full_like {at}");
            let s = dygraph::full_on([0usize; 0], 1i64, dtype, place).unwrap();
            assert_eq!(parts(&s), (vec![], dtype, place, vec![1.0]), "0-d full {at}");
            let e = dygraph::zeros_on([0, 4], dtype, place).unwrap();
            assert_eq!((e.shape(), e.numel()), (&[0usize, 4][..], 0));
        }
        assert_eq!(dygraph::full_on([2], 7, DType::Int64, place).unwrap().to_vec::<i64>().unwrap(), [7, 7]);
        assert_eq!(
            dygraph::full_on([2], -1.9, DType::Int32, place).unwrap().to_vec::<i32>().unwrap(),
            [-1, -1],
            "float fill truncates"
        );
    }
    let d = dygraph::zeros([2], DType::Float32).unwrap();
    assert_eq!(d.place(), dygraph::current_place().unwrap());
    let d = dygraph::ones([2], DType::Int64).unwrap();
    assert_eq!(d.to_vec::<i64>().unwrap(), [1, 1]);
    let d = dygraph::full([1], 2.5, DType::Float32).unwrap();
    assert_eq!(d.item::<f32>().unwrap(), 2.5);
}

#[test]
fn ranges() {
    let _generator = common::generator_lock();
    for place in places() {
        dygraph::guard(place, || {
            let a = dygraph::arange(1.0, 3.0, 1.0, DType::Float32).unwrap();
            assert_eq!(parts(&a), (vec![2], DType::Float32, place, vec![1.0, 2.0]), "the seed's arange(1, 3)");
            let a = dygraph::arange(0, 5, 1, DType::Int64).unwrap();
            assert_eq!(a.to_vec::<i64>().unwrap(), [0, 1, 2, 3, 4]);
            let a = dygraph::arange(5, 0, -2, DType::Int32).unwrap();
            assert_eq!(a.to_vec::<i32>().unwrap(), [5, 3, 1], "negative int step on {place}");
            let a = dygraph::arange(0.0, 1.0, 0.3, DType::Float32).unwrap();
            assert_eq!(a.to_vec::<f32>().unwrap(), [0.0, 0.3, 0.6, 0.9], "float step on {place}");
            let a = dygraph::arange(1.0, 0.0, -0.25, DType::Float64);
            if place.is_gpu() {
                assert!(matches!(a.unwrap_err(), Error::UnsupportedDType { dtype: DType::Float64, .. }));
            } else {
                assert_eq!(a.unwrap().to_vec::<f64>().unwrap(), [1.0, 0.75, 0.5, 0.25], "negative float step");
            }
            let a = dygraph::arange(-3_000_000_000i64, -2_999_999_998i64, 1, DType::Int64).unwrap();
            assert_eq!(a.to_vec::<i64>().unwrap(), [-3_000_000_000, -2_999_999_999]);
            assert_eq!(dygraph::arange(0, 0, 1, DType::Int64).unwrap().shape(), [0]);
            assert_eq!(dygraph::arange(0, 5, -1, DType::Int64).unwrap().shape(), [0], "wrong-way step is empty");
            let e = dygraph::arange(0, 5, 0, DType::Int64).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { op: "arange", .. }), "{e}");
            let e = dygraph::arange(0.0, 5.0, 0.5, DType::Int64).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument { op: "arange", .. }), "{e}");

            let l = dygraph::linspace(0.0, 1.0, 5, DType::Float32).unwrap();
            assert_eq!(parts(&l), (vec![5], DType::Float32, place, vec![0.0, 0.25, 0.5, 0.75, 1.0]), "linspace");
            let l = dygraph::linspace(-1.0, 1.0, 3, DType::Float32).unwrap();
            assert_eq!(values(&l), [-1.0, 0.0, 1.0]);
            let l = dygraph::linspace(0.1, 0.7, 7, DType::Float32).unwrap();
            assert_eq!(values(&l)[6], 0.7f32 as f64, "linspace ends exactly at stop");
            assert_eq!(values(&dygraph::linspace(2.0, 5.0, 1, DType::Float32).unwrap()), [2.0]);
            assert_eq!(dygraph::linspace(2.0, 5.0, 0, DType::Float32).unwrap().shape(), [0]);

            let e = dygraph::eye(3, None, DType::Float32).unwrap();
            assert_eq!(
                parts(&e),
                (vec![3, 3], DType::Float32, place, vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
            );
            let e = dygraph::eye(2, Some(3), DType::Int64).unwrap();
            assert_eq!(e.to_vec::<i64>().unwrap(), [1, 0, 0, 0, 1, 0]);
            let e = dygraph::eye(3, Some(2), DType::Bool).unwrap();
            assert_eq!(e.to_vec::<bool>().unwrap(), [true, false, false, true, false, false]);
        });
    }
}

/// Host data of each dtype for the cast matrix: values that round, truncate, saturate and
/// wrap, plus NaN and ±∞ for the floats.
fn cast_source(dtype: DType, place: Place) -> Tensor {
    let floats = [
        -2.7,
        -1.0,
        0.0,
        0.5,
        1.9,
        3.0,
        100.25,
        -0.0,
        1e10,
        -1e10,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        65519.0,
    ];
    let ints =
        [-2i64, -1, 0, 1, 2, 255, 70_000, -(1 << 40) - 3, (1 << 40) + 1, 3_000_000_000, i64::MAX, i64::MIN, 16_777_217];
    match dtype {
        DType::Bool => dygraph::to_tensor_on(vec![true, false, true], place),
        DType::Int32 => {
            dygraph::to_tensor_on(vec![-2i32, -1, 0, 1, 2, 255, 70_000, i32::MAX, i32::MIN, 16_777_217], place)
        }
        DType::Int64 => dygraph::to_tensor_on(ints.to_vec(), place),
        DType::Float16 => dygraph::to_tensor_on(floats.iter().map(|&v| f16::from_f64(v)).collect::<Vec<_>>(), place),
        DType::BFloat16 => dygraph::to_tensor_on(floats.iter().map(|&v| bf16::from_f64(v)).collect::<Vec<_>>(), place),
        DType::Float32 => dygraph::to_tensor_on(floats.iter().map(|&v| v as f32).collect::<Vec<_>>(), place),
        DType::Float64 => dygraph::to_tensor_on(floats.to_vec(), place),
    }
    .unwrap()
}

/// numpy/Rust `as` semantics of one element: floats truncate toward zero and saturate (NaN
/// gives 0), ints wrap, anything to bool is `!= 0`.
fn expected_cast(from: &Tensor, to: DType) -> Vec<String> {
    let n = from.numel();
    let as_f64: Vec<f64> = values(from);
    let as_i64: Vec<i64> = match from.dtype() {
        DType::Int64 => from.to_vec::<i64>().unwrap(),
        DType::Int32 => from.to_vec::<i32>().unwrap().into_iter().map(i64::from).collect(),
        DType::Bool => from.to_vec::<bool>().unwrap().into_iter().map(i64::from).collect(),
        _ => as_f64.iter().map(|&v| v as i64).collect(),
    };
    let int_src = !from.dtype().is_float();
    (0..n)
        .map(|i| match to {
            DType::Bool => (if int_src { as_i64[i] != 0 } else { as_f64[i] != 0.0 }).to_string(),
            DType::Int32 => (if int_src { as_i64[i] as i32 } else { as_f64[i] as i32 }).to_string(),
            DType::Int64 => as_i64[i].to_string(),
            DType::Float16 => {
                format!("{:?}", if int_src { f16::from_f32(as_i64[i] as f32) } else { f16::from_f64(as_f64[i]) })
            }
            DType::BFloat16 => {
                format!("{:?}", if int_src { bf16::from_f32(as_i64[i] as f32) } else { bf16::from_f64(as_f64[i]) })
            }
            DType::Float32 => format!("{:?}", if int_src { as_i64[i] as f32 } else { as_f64[i] as f32 }),
            DType::Float64 => format!("{:?}", if int_src { as_i64[i] as f64 } else { as_f64[i] }),
        })
        .collect()
}

/// Elements as strings (exact, NaN-equal, sign of zero kept).
fn strings(t: &Tensor) -> Vec<String> {
    match t.dtype() {
        DType::Bool => t.to_vec::<bool>().unwrap().iter().map(|v| v.to_string()).collect(),
        DType::Int32 => t.to_vec::<i32>().unwrap().iter().map(|v| v.to_string()).collect(),
        DType::Int64 => t.to_vec::<i64>().unwrap().iter().map(|v| v.to_string()).collect(),
        DType::Float16 => t.to_vec::<f16>().unwrap().iter().map(|v| format!("{v:?}")).collect(),
        DType::BFloat16 => t.to_vec::<bf16>().unwrap().iter().map(|v| format!("{v:?}")).collect(),
        DType::Float32 => t.to_vec::<f32>().unwrap().iter().map(|v| format!("{v:?}")).collect(),
        DType::Float64 => t.to_vec::<f64>().unwrap().iter().map(|v| format!("{v:?}")).collect(),
    }
}

#[test]
fn cast_between_every_dtype_pair_on_every_place() {
    let _generator = common::generator_lock();
    let mut failures = Vec::new();
    let mut pairs = 0;
    for place in places() {
        for from in dtypes_on(place) {
            let src = cast_source(from, place);
            for to in DType::ALL {
                let what = format!("cast {from} -> {to} on {place}");
                let r = src.cast(to);
                if place.is_gpu() && to == DType::Float64 {
                    match r {
                        Err(Error::UnsupportedDType { op: "cast", dtype: DType::Float64, .. }) => {}
                        other => failures.push(format!("{what}: expected UnsupportedDType, got {other:?}")),
                    }
                    continue;
                }
                pairs += 1;
                match r {
                    Ok(t) if t.dtype() != to || t.shape() != src.shape() || t.place() != place => {
                        failures.push(format!("{what}: got {} {:?} on {}", t.dtype(), t.shape(), t.place()))
                    }
                    Ok(t) => {
                        let (got, want) = (strings(&t), expected_cast(&src, to));
                        if got != want {
                            failures.push(format!("{what}:\n  got  {got:?}\n  want {want:?}"));
                        }
                    }
                    Err(e) => failures.push(format!("{what}: {e}")),
                }
            }
        }
    }
    eprintln!("checked {pairs} (from, to, place) casts");
    assert!(failures.is_empty(), "{} cast failure(s):\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn cast_is_differentiable_between_floats() {
    let _generator = common::generator_lock();
    let x = Tensor::from_vec_on(vec![1.0f64, 2.0], [2], Place::Cpu).unwrap();
    x.set_stop_gradient(false);
    let y = x.cast(DType::Float32).unwrap().scale(3.0, 0.0).unwrap();
    y.sum(&[], false).unwrap().backward().unwrap();
    let g = x.grad().unwrap();
    assert_eq!((g.dtype(), g.to_vec::<f64>().unwrap()), (DType::Float64, vec![3.0, 3.0]));
    let i = x.cast(DType::Int64).unwrap();
    assert!(i.stop_gradient(), "an int cast is cut from the graph");
}

#[test]
fn to_place_round_trips() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    for dtype in dtypes_on(g) {
        let src = cast_source(dtype, Place::Cpu);
        let there = src.to(g).unwrap();
        assert_eq!((there.place(), there.dtype(), there.shape()), (g, dtype, src.shape()));
        let back = there.cpu().unwrap();
        assert_eq!(back.place(), Place::Cpu);
        assert_eq!(strings(&back), strings(&src), "{dtype} CPU -> GPU -> CPU");
        assert_eq!(strings(&there), strings(&src), "{dtype} read back from the GPU");
        assert!(src.to(Place::Cpu).unwrap().same_tensor(&src), "to(own place) is the same tensor");
    }
    let e = cast_source(DType::Float64, Place::Cpu).to(g).unwrap_err();
    assert!(matches!(e, Error::UnsupportedDType { dtype: DType::Float64, .. }), "{e}");
    assert!(e.to_string().contains("GPUPlace(0)") && e.to_string().contains("float64"), "{e}");
    // Odd float16 counts and empty tensors travel too.
    let h = dygraph::to_tensor_on(vec![f16::from_f32(1.5); 7], Place::Cpu).unwrap();
    assert_eq!(h.to(g).unwrap().to_vec::<f16>().unwrap(), vec![f16::from_f32(1.5); 7]);
    let e = Tensor::from_vec_on(Vec::<i64>::new(), [0, 2], Place::Cpu).unwrap().to(g).unwrap();
    assert_eq!((e.shape(), e.to_vec::<i64>().unwrap()), (&[0usize, 2][..], vec![]));
    // Gradients flow back to the original place.
    let x = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0], [3], Place::Cpu).unwrap();
    x.set_stop_gradient(false);
    x.to(g).unwrap().square().unwrap().sum(&[], false).unwrap().backward().unwrap();
    let gx = x.grad().unwrap();
    assert_eq!((gx.place(), values(&gx)), (Place::Cpu, vec![2.0, 4.0, 6.0]));
}

/// Small host writes run as dispatches that read the recorder's upload arena; many of them
/// unsynced fill the arena several times over (each flush must keep every write whole), and
/// the sizes around the small-write bound take both paths.
#[test]
fn uploads_survive_arena_flushes() {
    let _generator = common::generator_lock();
    let Some(g) = gpu_or_skip() else { return };
    let lens: Vec<usize> = (0..600).map(|k| (k * 37) % 3000 + 1).collect();
    let sent: Vec<Vec<i32>> =
        lens.iter().enumerate().map(|(k, &n)| (0..n).map(|i| (k * 100_000 + i) as i32).collect()).collect();
    let on_gpu: Vec<Tensor> = sent.iter().map(|v| Tensor::from_vec_on(v.clone(), [v.len()], g).unwrap()).collect();
    for (k, (t, v)) in on_gpu.iter().zip(&sent).enumerate() {
        assert_eq!(&t.to_vec::<i32>().unwrap(), v, "upload {k} of {} words", v.len());
    }
    // Copies between buffers take the same kernel up to the bound, a copy command above it.
    let copies: Vec<Tensor> = on_gpu.iter().map(|t| t.clone_data().unwrap()).collect();
    let assigned: Vec<Tensor> = copies
        .iter()
        .map(|c| {
            let d = dygraph::zeros_on([c.numel()], DType::Int32, g).unwrap();
            d.assign_(c).unwrap();
            d
        })
        .collect();
    for (k, ((c, d), v)) in copies.iter().zip(&assigned).zip(&sent).enumerate() {
        assert_eq!(&c.to_vec::<i32>().unwrap(), v, "clone {k} of {} words", v.len());
        assert_eq!(&d.to_vec::<i32>().unwrap(), v, "assign {k} of {} words", v.len());
    }
    for n in [65_535usize, 65_536, 65_537] {
        let v: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let t = Tensor::from_vec_on(v.clone(), [n], g).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), v, "upload of {n} floats");
        let c = t.clone_data().unwrap();
        let d = dygraph::zeros_on([n], DType::Float32, g).unwrap();
        d.assign_(&c).unwrap();
        assert_eq!((c.to_vec::<f32>().unwrap(), d.to_vec::<f32>().unwrap()), (v.clone(), v), "copies of {n} floats");
    }
}

#[test]
fn assign_and_clone_data() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], place).unwrap();
        let view = x.reshape([4]).unwrap();
        let keep = x.clone_data().unwrap();
        let src = Tensor::from_vec_on(vec![9.0f32, 8.0, 7.0, 6.0], [2, 2], place).unwrap();
        x.assign_(&src).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), [9.0, 8.0, 7.0, 6.0], "assign_ on {place}");
        assert_eq!(view.to_vec::<f32>().unwrap(), [9.0, 8.0, 7.0, 6.0], "a reshape shares the memory on {place}");
        assert_eq!(keep.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0], "clone_data does not on {place}");
        x.assign_(&x).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), [9.0, 8.0, 7.0, 6.0]);
        let i = Tensor::from_vec_on(vec![1i64 << 40, 2], [2], place).unwrap();
        i.assign_(&Tensor::from_vec_on(vec![-5i64, 1 << 50], [2], place).unwrap()).unwrap();
        assert_eq!(i.to_vec::<i64>().unwrap(), [-5, 1 << 50]);

        let e = x.assign_(&Tensor::from_vec_on(vec![1.0f32; 4], [4], place).unwrap()).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "assign_", .. }) && e.to_string().contains("[4]"), "{e}");
        let e = x.assign_(&x.cast(DType::Int32).unwrap()).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { op: "assign_", .. }), "{e}");
        if let Some(g) = gpu_or_skip() {
            let other = if place.is_gpu() { Place::Cpu } else { g };
            let e = x.assign_(&x.to(other).unwrap()).unwrap_err();
            assert!(matches!(e, Error::PlaceMismatch { op: "assign_", .. }), "{e}");
        }
    }
}

#[test]
fn readback_forms() {
    let _generator = common::generator_lock();
    for place in places() {
        let x = Tensor::from_vec_on(vec![1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0], [2, 3], place).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), [1.5, -2.0, 3.25, 4.0, 5.0, 6.0]);
        let n = x.numpy::<f32>().unwrap();
        assert_eq!(n, NdArray { data: vec![1.5, -2.0, 3.25, 4.0, 5.0, 6.0], shape: vec![2, 3] });
        assert_eq!(pollster::block_on(x.to_vec_async::<f32>()).unwrap(), [1.5, -2.0, 3.25, 4.0, 5.0, 6.0]);
        assert_eq!(pollster::block_on(x.numpy_async::<f32>()).unwrap(), n);
        assert_eq!(pollster::block_on(x.to_f64_vec_async()).unwrap(), [1.5, -2.0, 3.25, 4.0, 5.0, 6.0]);
        let one = x.slice(&[0, 1], &[1, 2], &[2, 3]).unwrap();
        assert_eq!(one.item::<f32>().unwrap(), 6.0, "item on {place}");
        assert_eq!(pollster::block_on(one.item_async::<f32>()).unwrap(), 6.0);
        let s = dygraph::to_tensor_on(42i64, place).unwrap();
        assert_eq!(s.item::<i64>().unwrap(), 42);
        assert!(dygraph::to_tensor_on(true, place).unwrap().item::<bool>().unwrap());
        assert!(x.is_floating_point() && !s.is_floating_point());

        let e = x.item::<f32>().unwrap_err();
        assert!(matches!(e, Error::Shape { op: "item", .. }) && e.to_string().contains("[2, 3]"), "{e}");
        let e = pollster::block_on(x.item_async::<f32>()).unwrap_err();
        assert!(matches!(e, Error::Shape { op: "item", .. }), "{e}");
        let e = x.to_vec::<i64>().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { op: "to_vec", .. }), "{e}");
        assert!(e.to_string().contains("float32") && e.to_string().contains("int64"), "{e}");
        let e = pollster::block_on(x.to_vec_async::<f64>()).unwrap_err();
        assert!(e.to_string().contains("to_vec") && e.to_string().contains("float64"), "{e}");
        assert!(x.numpy::<i32>().is_err() && s.item::<f32>().is_err());
        assert_eq!(x.cast(DType::Int64).unwrap().to_vec::<i64>().unwrap(), [1, -2, 3, 4, 5, 6]);
    }
}
