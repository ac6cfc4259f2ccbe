//! conv2d: hand-computed values, GPU against CPU over a grid of strides, paddings
//! (explicit, asymmetric, SAME, VALID), dilations and groups; float64 gradchecks of input,
//! weight and bias, double backward, and errors.

mod common;

use dygraph::{self as paddle, Conv2dOptions, DType, Error, Padding, Place, Result, Tensor};

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    common::tensor(v, shape, DType::Float64, Place::Cpu)
}

/// Naive direct convolution in f64 (the second reference).
#[allow(clippy::too_many_arguments)]
fn naive(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    b: Option<&[f64]>,
    s: [usize; 2],
    p: [usize; 4],
    d: [usize; 2],
    groups: usize,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [co, cig, kh, kw] = ws;
    let oh = (h + p[0] + p[1] - d[0] * (kh - 1) - 1) / s[0] + 1;
    let ow = (wd + p[2] + p[3] - d[1] * (kw - 1) - 1) / s[1] + 1;
    let cog = co / groups;
    let mut out = vec![0.0; n * co * oh * ow];
    for ni in 0..n {
        for o in 0..co {
            let g = o / cog;
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b[o]);
                    for ci in 0..cig {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * s[0] + ky * d[0]) as isize - p[0] as isize;
                                let ix = (xx * s[1] + kx * d[1]) as isize - p[2] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let cin = g * cig + ci;
                                acc += x[((ni * c + cin) * h + iy as usize) * wd + ix as usize]
                                    * w[((o * cig + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((ni * co + o) * oh + y) * ow + xx] = acc;
                }
            }
        }
    }
    (out, [n, co, oh, ow])
}

#[test]
fn hand_computed_values() {
    // 3×3 image, 2×2 kernel, stride 1, no padding.
    let x = t64(&[1., 2., 3., 4., 5., 6., 7., 8., 9.], &[1, 1, 3, 3]);
    let w = t64(&[1., 0., 0., -1.], &[1, 1, 2, 2]);
    let b = t64(&[10.], &[1]);
    let y = paddle::conv2d(&x, &w, Some(&b), &Conv2dOptions::default()).unwrap();
    assert_eq!(y.shape(), &[1, 1, 2, 2]);
    assert_eq!(common::values(&y), vec![6.0, 6.0, 6.0, 6.0], "x[i,j] − x[i+1,j+1] + 10 = −4 + 10");
    // Padding 1, stride 2: corners of the zero-padded 5×5 image.
    let y = paddle::conv2d(
        &x,
        &t64(&[1., 1., 1., 1.], &[1, 1, 2, 2]),
        None,
        &Conv2dOptions::default().padding(1).stride(2),
    )
    .unwrap();
    assert_eq!(common::values(&y), vec![1., 5., 11., 28.]);
    // SAME keeps ceil(in/stride); VALID drops the border.
    let same =
        paddle::conv2d(&x, &t64(&[1.; 9], &[1, 1, 3, 3]), None, &Conv2dOptions::default().padding(Padding::Same))
            .unwrap();
    assert_eq!(same.shape(), &[1, 1, 3, 3]);
    assert_eq!(common::values(&same), vec![12., 21., 16., 27., 45., 33., 24., 39., 28.]);
    let valid = paddle::conv2d(
        &x,
        &t64(&[1.; 9], &[1, 1, 3, 3]),
        None,
        &Conv2dOptions::default().padding(Padding::parse("valid").unwrap()),
    )
    .unwrap();
    assert_eq!(common::values(&valid), vec![45.]);
}

struct Case {
    xs: [usize; 4],
    ws: [usize; 4],
    opts: Conv2dOptions,
    pads: [usize; 4],
}

fn cases() -> Vec<Case> {
    let o = Conv2dOptions::default;
    vec![
        Case { xs: [2, 3, 7, 6], ws: [4, 3, 3, 3], opts: o(), pads: [0; 4] },
        Case { xs: [2, 2, 6, 6], ws: [3, 2, 3, 2], opts: o().stride(2).padding(1), pads: [1; 4] },
        Case { xs: [1, 2, 7, 7], ws: [2, 2, 3, 3], opts: o().dilation(2).padding([2, 1]), pads: [2, 2, 1, 1] },
        Case { xs: [2, 4, 5, 6], ws: [6, 2, 3, 3], opts: o().groups(2).padding([0, 1, 2, 1]), pads: [0, 1, 2, 1] },
        Case { xs: [2, 3, 6, 5], ws: [3, 1, 3, 3], opts: o().groups(3).stride([1, 2]).padding(1), pads: [1; 4] },
        Case { xs: [1, 2, 6, 6], ws: [2, 2, 3, 3], opts: o().stride(2).padding(Padding::Same), pads: [0, 1, 0, 1] },
        Case { xs: [2, 1, 28, 28], ws: [4, 1, 5, 5], opts: o(), pads: [0; 4] },
    ]
}

#[test]
fn cpu_matches_a_naive_reference_across_the_grid() {
    let mut rng = common::Rng::new(21);
    for case in cases() {
        let n: usize = case.xs.iter().product();
        let m: usize = case.ws.iter().product();
        let (xv, wv, bv) = (rng.vec(n, -1.0, 1.0), rng.vec(m, -1.0, 1.0), rng.vec(case.ws[0], -1.0, 1.0));
        let y = paddle::conv2d(&t64(&xv, &case.xs), &t64(&wv, &case.ws), Some(&t64(&bv, &[case.ws[0]])), &case.opts)
            .unwrap();
        let (e, shape) = naive(
            &xv,
            case.xs,
            &wv,
            case.ws,
            Some(&bv),
            case.opts.stride.0,
            case.pads,
            case.opts.dilation.0,
            case.opts.groups,
        );
        assert_eq!(y.shape(), &shape, "{:?}", case.opts);
        common::assert_close(&format!("conv2d {:?}", case.opts), &common::values(&y), &e, 1e-12);
    }
}

#[test]
fn gpu_matches_cpu_forward_and_gradients() {
    let mut rng = common::Rng::new(22);
    for case in cases() {
        let n: usize = case.xs.iter().product();
        let m: usize = case.ws.iter().product();
        let inputs = vec![
            (rng.vec(n, -1.0, 1.0), case.xs.to_vec()),
            (rng.vec(m, -1.0, 1.0), case.ws.to_vec()),
            (rng.vec(case.ws[0], -1.0, 1.0), vec![case.ws[0]]),
        ];
        let opts = case.opts;
        let f = move |v: &[Tensor]| -> Result<Tensor> { paddle::conv2d(&v[0], &v[1], Some(&v[2]), &opts) };
        common::gpu_matches_cpu(&format!("conv2d {opts:?}"), &f, &inputs, true, 1e-4);
    }
}

#[test]
fn gradcheck_input_weight_and_bias() {
    let mut rng = common::Rng::new(23);
    for case in cases().into_iter().filter(|c| c.xs[2] < 10) {
        let n: usize = case.xs.iter().product();
        let m: usize = case.ws.iter().product();
        let inputs = vec![
            (rng.vec(n, -1.0, 1.0), case.xs.to_vec()),
            (rng.vec(m, -1.0, 1.0), case.ws.to_vec()),
            (rng.vec(case.ws[0], -1.0, 1.0), vec![case.ws[0]]),
        ];
        let opts = case.opts;
        let f = move |v: &[Tensor]| -> Result<Tensor> { paddle::conv2d(&v[0], &v[1], Some(&v[2]), &opts) };
        common::gradcheck(&format!("conv2d {opts:?}"), &f, &inputs).unwrap();
    }
}

#[test]
fn double_backward_through_both_gradients() {
    // Second-order terms: the gradient products are themselves differentiated.
    let mut rng = common::Rng::new(24);
    let opts = Conv2dOptions::default().stride(2).padding([1, 0, 0, 1]).groups(2);
    let (xs, ws) = ([1usize, 4, 5, 5], [4usize, 2, 2, 3]);
    let (xv, wv) = (rng.vec(100, -1.0, 1.0), rng.vec(48, -1.0, 1.0));
    let f = move |v: &[Tensor]| -> Result<Tensor> {
        let y = paddle::conv2d(&v[0], &v[1], None, &opts)?;
        let s = y.square()?.sum(&[], false)?;
        let g = paddle::grad(&[s], &[v[0].clone(), v[1].clone()], None, true, true, false)?;
        let (gx, gw) = (g[0].clone().unwrap(), g[1].clone().unwrap());
        gx.square()?.sum(&[], false)?.add(&gw.square()?.sum(&[], false)?)
    };
    common::gradcheck("conv2d double backward", &f, &[(xv.clone(), xs.to_vec()), (wv.clone(), ws.to_vec())]).unwrap();
    common::gpu_matches_cpu("conv2d double backward", &f, &[(xv, xs.to_vec()), (wv, ws.to_vec())], true, 1e-4);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let x = t64(&[0.0; 2 * 4 * 5 * 5], &[2, 4, 5, 5]);
    let e = paddle::conv2d(&x, &t64(&[0.0; 3 * 3 * 9], &[3, 3, 3, 3]), None, &Conv2dOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Shape { op: "conv2d", .. }) && e.to_string().contains("[2, 4, 5, 5]"), "{e}");
    let e = paddle::conv2d(&x, &t64(&[0.0; 3 * 2 * 9], &[3, 2, 3, 3]), None, &Conv2dOptions::default().groups(2))
        .unwrap_err();
    assert!(e.to_string().contains("groups=2"), "{e}");
    let w = t64(&[0.0; 4 * 4 * 9], &[4, 4, 3, 3]);
    let e = paddle::conv2d(&x, &w, Some(&t64(&[0.0; 3], &[3])), &Conv2dOptions::default()).unwrap_err();
    assert!(e.to_string().contains("bias [3]"), "{e}");
    let e = paddle::conv2d(&t64(&[0.0; 20], &[4, 5]), &w, None, &Conv2dOptions::default()).unwrap_err();
    assert!(e.to_string().contains("4-D"), "{e}");
    let e = paddle::conv2d(&x, &t64(&[0.0; 4 * 4 * 49], &[4, 4, 7, 7]), None, &Conv2dOptions::default()).unwrap_err();
    assert!(e.to_string().contains("larger than the padded input"), "{e}");
    assert!(paddle::conv2d(&x, &w, None, &Conv2dOptions::default().stride(0)).is_err());
    assert!(Padding::parse("full").is_err());
    let f32w = common::tensor(&[0.0; 144], &[4, 4, 3, 3], DType::Float32, Place::Cpu);
    assert!(matches!(
        paddle::conv2d(&x, &f32w, None, &Conv2dOptions::default()).unwrap_err(),
        Error::DTypeMismatch { .. }
    ));
    if let Some(gpu) = common::gpu() {
        let wg = f32w.to(gpu).unwrap();
        let xf = x.cast(DType::Float32).unwrap();
        assert!(matches!(
            paddle::conv2d(&xf, &wg, None, &Conv2dOptions::default()).unwrap_err(),
            Error::PlaceMismatch { .. }
        ));
    }
}
