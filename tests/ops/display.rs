//! `Display` of tensors in Paddle 2.x's exact layout (python/paddle/tensor/to_string.py),
//! and numpy's `str()` layout of `NdArray`. Expected strings follow that algorithm: items
//! padded to the widest edge item, a sign column when an edge item is negative, integral
//! floats as `1.`, `...` summaries past 1000 elements, 1-D rows wrapped at 80 columns.

#![allow(clippy::excessive_precision)] // the seeds' printed values, verbatim

use crate::common;

use std::sync::Mutex;

use common::gpu_or_skip;
use dygraph::{DType, NdArray, Place, PrintOptions, Tensor};

/// Print options are process-wide: tests that print hold this lock.
static PRINT: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    PRINT.lock().unwrap_or_else(|e| e.into_inner())
}

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec_on(v.to_vec(), shape, Place::Cpu).unwrap()
}

fn header(shape: &str, dtype: &str) -> String {
    format!("Tensor(shape={shape}, dtype={dtype}, place=CPUPlace, stop_gradient=True,\n       ")
}

#[test]
fn the_seed_tensors() {
    let _g = lock();
    // Paddle 2.2 (seed 001): a = randn([4, 2]), b = arange(1, 3), c = a + b.
    let a = f32s(
        &[-0.24989827, 0.66201270, -1.58135796, 0.07232992, -0.96044230, 0.31790161, 1.12384641, 0.66361523],
        &[4, 2],
    );
    assert_eq!(
        a.to_string(),
        header("[4, 2]", "float32")
            + "[[-0.24989827,  0.66201270],\n        [-1.58135796,  0.07232992],\n        [-0.96044230,  0.31790161],\n        [ 1.12384641,  0.66361523]])"
    );
    let b = dygraph::guard(Place::Cpu, || dygraph::arange(1, 3, 1, DType::Float32)).unwrap();
    assert_eq!(b.to_string(), header("[2]", "float32") + "[1., 2.])");
    let c = &a + &b;
    assert_eq!(
        c.to_string(),
        header("[4, 2]", "float32")
            + "[[ 0.75010175,  2.66201258],\n        [-0.58135796,  2.07233000],\n        [ 0.03955770,  2.31790161],\n        [ 2.12384653,  2.66361523]])"
    );
    // Seed 000's values in the same (2.x) layout, and its all-positive matmul result, whose
    // layout is the same in every 2.x release.
    let a0 = f32s(
        &[1.60883498, 0.43853286, 1.02701402, 1.91869283, -1.14591110, 1.26320088, -0.04009963, 0.42621592],
        &[4, 2],
    );
    assert_eq!(
        a0.to_string(),
        header("[4, 2]", "float32")
            + "[[ 1.60883498,  0.43853286],\n        [ 1.02701402,  1.91869283],\n        [-1.14591110,  1.26320088],\n        [-0.04009963,  0.42621592]])"
    );
    let d0 = f32s(&[2.48590064, 4.86439991, 1.38049066, 0.81233221], &[4]);
    assert_eq!(d0.to_string(), header("[4]", "float32") + "[2.48590064, 4.86439991, 1.38049066, 0.81233221])");
    let d = dygraph::matmul(&a, &b, false, false).unwrap();
    assert_eq!(d.to_string(), header("[4]", "float32") + "[ 1.07412708, -1.43669808, -0.32463908,  2.45107698])");
    if let Some(g) = gpu_or_skip() {
        let dg = dygraph::matmul(&a.to(g).unwrap(), &b.to(g).unwrap(), false, false).unwrap();
        assert_eq!(dg.to_string(), d.to_string().replace("CPUPlace", "GPUPlace(0)"), "the seed's matmul on the GPU");
        let cg = &a.to(g).unwrap() + &b.to(g).unwrap();
        assert_eq!(cg.to_string(), c.to_string().replace("CPUPlace", "GPUPlace(0)"), "the seed's a + b on the GPU");
    }
}

#[test]
fn signs_widths_and_integral_floats() {
    let _g = lock();
    let body = |t: &Tensor| t.to_string().split_once("\n       ").unwrap().1.to_string();
    assert_eq!(body(&f32s(&[-1.5, 2.25, 3.0], &[3])), "[-1.50000000,  2.25000000,  3.        ])");
    assert_eq!(body(&f32s(&[1.0, 2.0, 3.0], &[3])), "[1., 2., 3.])");
    // The widest item takes no sign column even when others do (Paddle pads only shorter items).
    assert_eq!(body(&f32s(&[1.0, 10.0, 100.0, -1.0], &[2, 2])), "[[ 1. ,  10.],\n        [100., -1. ]])");
    assert_eq!(body(&f32s(&[0.5, -0.25], &[2])), "[ 0.50000000, -0.25000000])");
    assert_eq!(body(&f32s(&[-0.0, 1e-9], &[2])), "[-0.       , 0.00000000])", "-0 is not negative");
    assert_eq!(
        body(&f32s(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.5], &[4])),
        "[ nan      ,  inf.     , -inf.     , 1.50000000])"
    );
    // Only the edge items (3 per axis end) set the width, even below the summary threshold.
    assert_eq!(body(&f32s(&[1.0, 2.0, 3.0, -4.5, 5.0, 6.0, 7.0], &[7])), "[1., 2., 3., -4.50000000, 5., 6., 7.])");
    let h = Tensor::from_vec_on(vec![half::f16::from_f32(0.5), half::f16::from_f32(2.0)], [2], Place::Cpu).unwrap();
    assert_eq!(h.to_string(), header("[2]", "float16") + "[0.50000000, 2.        ])");
    let x = Tensor::from_vec_on(vec![0.1f64, -2.0], [2], Place::Cpu).unwrap();
    assert_eq!(x.to_string(), header("[2]", "float64") + "[0.10000000, -2.       ])");
}

#[test]
fn integers_and_bools() {
    let _g = lock();
    let i = dygraph::to_tensor_on([1i64, 10, 100], Place::Cpu).unwrap();
    assert_eq!(i.to_string(), header("[3]", "int64") + "[1  , 10 , 100])");
    let i = dygraph::to_tensor_on([-3i64, 3, 21], Place::Cpu).unwrap();
    assert_eq!(i.to_string(), header("[3]", "int64") + "[-3,  3, 21])");
    let i = dygraph::to_tensor_on([[5i32, -60], [700, 8]], Place::Cpu).unwrap();
    assert_eq!(i.to_string(), header("[2, 2]", "int32") + "[[ 5 , -60],\n        [700,  8 ]])");
    let b = dygraph::to_tensor_on([true, false, true], Place::Cpu).unwrap();
    assert_eq!(b.to_string(), header("[3]", "bool") + "[True , False, True ])");
}

#[test]
fn scalars_and_empty_tensors() {
    let _g = lock();
    let s = dygraph::to_tensor_on(3.5f32, Place::Cpu).unwrap();
    assert_eq!(s.to_string(), header("[]", "float32") + "3.50000000)");
    let s = dygraph::to_tensor_on(-7i64, Place::Cpu).unwrap();
    assert_eq!(s.to_string(), header("[]", "int64") + "-7)");
    let s = dygraph::to_tensor_on(2.0f32, Place::Cpu).unwrap();
    assert_eq!(s.to_string(), header("[]", "float32") + "2.)");
    let e = Tensor::from_vec_on(Vec::<f32>::new(), [0], Place::Cpu).unwrap();
    assert_eq!(e.to_string(), header("[0]", "float32") + "[])");
    let e = Tensor::from_vec_on(Vec::<f32>::new(), [0, 3], Place::Cpu).unwrap();
    assert_eq!(e.to_string(), header("[0, 3]", "float32") + "[])");
    let e = Tensor::from_vec_on(Vec::<i64>::new(), [2, 0], Place::Cpu).unwrap();
    assert_eq!(e.to_string(), header("[2, 0]", "int64") + "[[],\n        []])");
}

#[test]
fn three_dimensions_and_line_wrapping() {
    let _g = lock();
    let t = f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], &[2, 2, 2]);
    assert_eq!(
        t.to_string(),
        header("[2, 2, 2]", "float32") + "[[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])"
    );
    let t = Tensor::from_vec_on((0..12).map(|v| v as i64 - 6).collect::<Vec<_>>(), [2, 1, 2, 3], Place::Cpu).unwrap();
    assert_eq!(
        t.to_string(),
        header("[2, 1, 2, 3]", "int64")
            + "[[[[-6, -5, -4],\n          [-3, -2, -1]]],\n\n\n        [[[ 0,  1,  2],\n          [ 3,  4,  5]]]])"
    );
    // 1-D rows wrap at 80 columns: (80 - indent) // (width + 2) items per line.
    let r = dygraph::guard(Place::Cpu, || dygraph::arange(0, 20, 1, DType::Int64)).unwrap();
    assert_eq!(
        r.to_string(),
        header("[20]", "int64")
            + "[0 , 1 , 2 , 3 , 4 , 5 , 6 , 7 , 8 , 9 , 10, 11, 12, 13, 14, 15, 16, 17,\n        18, 19])"
    );
    let r = f32s(&(0..8).map(|v| v as f32 * 0.5 - 1.25).collect::<Vec<_>>(), &[8]);
    assert_eq!(
        r.to_string(),
        header("[8]", "float32")
            + "[-1.25000000, -0.75000000, -0.25000000,  0.25000000,  0.75000000,\n         1.25000000,  1.75000000,  2.25000000])"
    );
}

#[test]
fn summaries_past_a_thousand_elements() {
    let _g = lock();
    let r = dygraph::guard(Place::Cpu, || dygraph::arange(0, 2000, 1, DType::Int64)).unwrap();
    assert_eq!(r.to_string(), header("[2000]", "int64") + "[0   , 1   , 2   , ..., 1997, 1998, 1999])");
    let m = dygraph::guard(Place::Cpu, || dygraph::arange(0.0, 1600.0, 1.0, DType::Float32))
        .unwrap()
        .reshape([40, 40])
        .unwrap();
    assert_eq!(
        m.to_string(),
        header("[40, 40]", "float32")
            + "[[0.   , 1.   , 2.   , ..., 37.  , 38.  , 39.  ],\n"
            + "        [40.  , 41.  , 42.  , ..., 77.  , 78.  , 79.  ],\n"
            + "        [80.  , 81.  , 82.  , ..., 117. , 118. , 119. ],\n"
            + "        ...,\n"
            + "        [1480., 1481., 1482., ..., 1517., 1518., 1519.],\n"
            + "        [1520., 1521., 1522., ..., 1557., 1558., 1559.],\n"
            + "        [1560., 1561., 1562., ..., 1597., 1598., 1599.]])"
    );
    // Exactly 1000 elements are printed in full; a negative interior item of a summarised
    // axis does not count towards the width or the sign column.
    let k = dygraph::guard(Place::Cpu, || dygraph::arange(0, 1000, 1, DType::Int32)).unwrap();
    let s = k.to_string();
    assert!(!s.contains("...") && s.contains("999]") && s.contains(", 500, "), "{s}");
    let mut v: Vec<f32> = (0..1001).map(|i| i as f32).collect();
    v[500] = -1.0;
    let t = f32s(&v, &[1001]);
    assert_eq!(t.to_string(), header("[1001]", "float32") + "[0.   , 1.   , 2.   , ..., 998. , 999. , 1000.])");
    // 3-D summary: `...` rows in every summarised axis.
    let c = dygraph::guard(Place::Cpu, || dygraph::arange(0, 7 * 7 * 21, 1, DType::Int64))
        .unwrap()
        .reshape([7, 7, 21])
        .unwrap();
    let s = c.to_string();
    let expected_start = header("[7, 7, 21]", "int64")
        + "[[[0   , 1   , 2   , ..., 18  , 19  , 20  ],\n         [21  , 22  , 23  , ..., 39  , 40  , 41  ],\n         [42  , 43  , 44  , ..., 60  , 61  , 62  ],\n         ...,\n";
    assert!(s.starts_with(&expected_start), "{s}");
    assert!(s.contains("]],\n\n        ...,\n\n        [["), "{s}");
    assert!(s.ends_with("[1008, 1009, 1010, ..., 1026, 1027, 1028]]])"), "{s}");
}

#[test]
fn print_options() {
    let _g = lock();
    let m = dygraph::guard(Place::Cpu, || dygraph::arange(0.0, 200.0, 1.0, DType::Float32)).unwrap();
    let m = m.scale(1.0 / 3.0, 0.0).unwrap().reshape([10, 20]).unwrap();
    dygraph::set_printoptions(PrintOptions { precision: 4, threshold: 100, edgeitems: 2, ..PrintOptions::default() });
    let s = m.to_string();
    let sci = {
        dygraph::set_printoptions(PrintOptions { sci_mode: true, precision: 2, ..PrintOptions::default() });
        f32s(&[1234.5, -0.00012], &[2]).to_string()
    };
    dygraph::set_printoptions(PrintOptions::default());
    assert_eq!(
        s,
        header("[10, 20]", "float32")
            + "[[0.     , 0.3333 , ..., 6.     , 6.3333 ],\n"
            + "        [6.6667 , 7.     , ..., 12.6667, 13.    ],\n"
            + "        ...,\n"
            + "        [53.3333, 53.6667, ..., 59.3333, 59.6667],\n"
            + "        [60.    , 60.3333, ..., 66.    , 66.3333]])"
    );
    assert_eq!(sci, header("[2]", "float32") + "[ 1.23e+03, -1.20e-04])");
    assert_eq!(f32s(&[0.5], &[1]).to_string(), header("[1]", "float32") + "[0.50000000])", "defaults restored");
}

#[test]
fn places_and_stop_gradient_in_the_header() {
    let _g = lock();
    let x = f32s(&[1.0, 2.0], &[2]);
    x.set_stop_gradient(false);
    assert_eq!(
        x.to_string(),
        "Tensor(shape=[2], dtype=float32, place=CPUPlace, stop_gradient=False,\n       [1., 2.])"
    );
    let y = x.scale(2.0, 0.0).unwrap();
    assert!(y.to_string().contains("stop_gradient=False"), "an op on a tensor that needs a gradient");
    assert_eq!(format!("{y:?}"), y.to_string(), "Debug prints like Display");
    if let Some(g) = gpu_or_skip() {
        let z = x.to(g).unwrap().detach();
        assert_eq!(
            z.to_string(),
            "Tensor(shape=[2], dtype=float32, place=GPUPlace(0), stop_gradient=True,\n       [1., 2.])"
        );
        let i = dygraph::to_tensor_on([[1i64, -2], [3, 4]], g).unwrap();
        assert_eq!(
            i.to_string(),
            "Tensor(shape=[2, 2], dtype=int64, place=GPUPlace(0), stop_gradient=True,\n       [[ 1, -2],\n        [ 3,  4]])"
        );
    }
}

#[test]
fn ndarray_prints_like_numpy() {
    let _generator = common::generator_lock();
    // The seed's `c.numpy()` lines.
    for (v, s) in [
        ([5i64, 6, 7], "[5 6 7]"),
        ([5, 9, 15], "[ 5  9 15]"),
        ([-3, 3, 21], "[-3  3 21]"),
        ([5, 37, 249], "[  5  37 249]"),
        ([5, 133, 2193], "[   5  133 2193]"),
        ([-3, 251, 6555], "[  -3  251 6555]"),
        ([-3, 507, 19677], "[   -3   507 19677]"),
    ] {
        let t = dygraph::to_tensor_on(v, Place::Cpu).unwrap();
        assert_eq!(t.numpy::<i64>().unwrap().to_string(), s);
    }
    // The seed's loss.numpy() lines.
    for (v, s) in [
        (1.1263953f32, "[1.1263953]"),
        (0.58878094, "[0.58878094]"),
        (0.0006593, "[0.0006593]"),
        (0.3177247, "[0.3177247]"),
    ] {
        assert_eq!(NdArray { data: vec![v], shape: vec![1] }.to_string(), s);
    }
    assert_eq!(NdArray { data: vec![1.5f32, 2.0], shape: vec![2] }.to_string(), "[1.5 2. ]");
    assert_eq!(NdArray { data: vec![-1.5f32, 2.0], shape: vec![2] }.to_string(), "[-1.5  2. ]");
    assert_eq!(NdArray { data: vec![1i32, 2, 3, 4], shape: vec![2, 2] }.to_string(), "[[1 2]\n [3 4]]");
    assert_eq!(
        NdArray { data: (0..8i64).collect(), shape: vec![2, 2, 2] }.to_string(),
        "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]"
    );
    assert_eq!(NdArray { data: vec![true, false], shape: vec![2] }.to_string(), "[ True False]");
    assert_eq!(NdArray { data: vec![7i64], shape: vec![] }.to_string(), "7");
    assert_eq!(NdArray { data: Vec::<f32>::new(), shape: vec![0] }.to_string(), "[]");
}
